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
