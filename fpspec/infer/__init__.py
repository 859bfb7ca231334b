"""Trees revealed at many n -> one parametric spec.

    infer_spec(make_target, (lo, hi), *, seed=0, exact=False, progress=True,
               holdout=16, full_limit=8192, checks=(), replica="numba") -> Inference
        make_target: n -> fpspec.reveal Target (or a target name plus dtype=,
        op=, m=, ncols=, device=).  Inference: spec, revealed n, held-out n,
        sampled checks, counterexamples, per-n timings, fit result, .to_json(),
        .report().
    sampled_check(spec, target, ...) -> SampledCheck
        l(i, j) at pairs chosen to separate the spec from its nearest
        alternatives, plus a compiled replica against the target on random
        inputs: evidence at n too large to reveal in full.
    spec_l_many(spec, n, pairs)
        l(i, j) straight from a spec, no tree built (n = 2^24 is fine).

Modules: shapes (taking observed trees apart), exprs (parameters as
expressions in n), fit (the search), lca (l from a spec), check (sampled
checks), engine (the reveal-fit-refine-hold-out loop).
"""
from __future__ import annotations

# Note [default time limit]: a range run's bound when the caller names none
# (the command line's default): TIME_LIMIT seconds for a black box of at most
# FAST_CALL seconds a call whose largest n revealed in full is at most
# BASE_N, and proportionally more for a slower box (60 s per 10 us a call: a
# box of 100 us a call gets 600 s) and for a larger n revealed in full (the
# revelations grow with it: -n 1..65536 reveals up to 8192 in full, 120 s),
# at most TIME_LIMIT_CAP.  The cost is measured once before the run, at that
# largest n (fpspec.infer.engine.measure_call).  The work of a run is mostly
# the fit and the revelations' own bookkeeping, which do not grow with the
# box's cost, plus some 10^5 calls over -n 1..4096: 60 s answers a fast box
# (a spec or a fallback), and a slow box is not starved of calls.
TIME_LIMIT = 60.0          # seconds: the default for a box of at most FAST_CALL s a call, n up to BASE_N
FAST_CALL = 10e-6          # seconds a call
BASE_N = 4096              # the largest n revealed in full that TIME_LIMIT is for
TIME_LIMIT_CAP = 3600.0    # seconds: the default never exceeds this
AUTO = "auto"              # time_limit=AUTO: the default of note [default time limit]
TIME_LIMIT_HELP = ("bound the whole run (-n LO..HI) to SECONDS; when they or the fit's share of them run out, "
                   "write a spec for the n revealed so far, marked as such.  Default: 60 s for a target of at "
                   "most 10 us a call (timed before the run, at the largest n revealed in full) over n up to "
                   "4096; proportionally more for a slower target (60 s per 10 us a call) or a larger n "
                   "revealed in full; at most an hour.  The report names the limit used")


def default_time_limit(call_seconds: float, largest_n: int = BASE_N) -> float:
    """The time limit of note [default time limit] for a box of `call_seconds` a call
    whose largest n revealed in full is `largest_n`."""
    return min(TIME_LIMIT_CAP, TIME_LIMIT * max(1.0, call_seconds / FAST_CALL) * max(1.0, largest_n / BASE_N))


def __getattr__(name):
    if name in ("infer_spec", "Inference", "Counterexample", "FitResult", "NTiming", "compress"):
        from fpspec.infer import engine

        return getattr(engine, name)
    if name in ("sampled_check", "SampledCheck", "Replica", "choose_pairs", "alternatives"):
        from fpspec.infer import check

        return getattr(check, name)
    if name in ("spec_l", "spec_l_many"):
        from fpspec.infer import lca

        return getattr(lca, name)
    if name in ("Fitter",):
        from fpspec.infer.fit import Fitter

        return Fitter
    raise AttributeError(name)


__all__ = ["infer_spec", "Inference", "Counterexample", "FitResult", "NTiming", "sampled_check",
           "SampledCheck", "Replica", "spec_l", "spec_l_many", "Fitter", "compress"]
