"""One spec for every n: reveal at designed n, fit, refine, hold out, check.

    result = infer_spec(lambda n: resolve_target("numpy.sum", n=n), (1, 65536))
    print(result.spec)            # one parametric .fps spec for 1..65536
    result.to_json()              # per-n timings, fit, held-out n, sampled checks

The loop:
1. reveal in full at a designed set of n: every small n, powers of two and
   their neighbours, a few random n (only n <= `full_limit`: revelation
   costs about n log n queries);
2. fit the most compact order explaining every revealed tree
   (fpspec.infer.fit), guards on n where one order is not enough;
3. design again from the spec just found: multiples of its constants and
   their neighbours, both sides of every guard threshold (bisecting until the
   threshold is pinned to adjacent n); reveal, compare, refit on any
   disagreement, until a round adds nothing;
4. hold out fresh random n never used for fitting: reveal them in full where
   affordable and compare; above `full_limit`, run a SAMPLED check
   (fpspec.infer.check) -- the output says so, with its numbers.  A
   disagreement is a counterexample: it joins the observations, the spec is
   refitted and new held-out n are drawn;
5. the final spec is expanded at every fully revealed n and compared
   exactly: a spec that contradicts an observation is never returned.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import os
import re
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Callable

import numpy as np

from fpspec.errors import FpspecError, RevealRefused
from fpspec.infer import AUTO, default_time_limit
from fpspec.infer.check import Replica, SampledCheck, sampled_check
from fpspec.infer.fit import FIT_SHARE, MAX_RUNS, Budget, Fitter, Stopped, order_cost
from fpspec.infer.shapes import Obs
from fpspec.spec import ast as A
from fpspec.spec.expand import expand
from fpspec.spec.header import make_header
from fpspec.progress import phase, reporting, time_limit
from fpspec.tree import Tree, diff, observable

SMALL = 48          # every n up to this is revealed
RANDOM_DESIGN = 8   # random n per design round
MAX_ROUNDS = 6


@dataclass(frozen=True)
class NTiming:
    n: int
    stage: str          # design | refine | held-out | checked (sampled) | held-out (sampled)
    seconds: float
    queries: int


@dataclass(frozen=True)
class Counterexample:
    n: int
    stage: str
    detail: str
    resolved: bool      # the spec was refitted and now agrees at n


@dataclass(frozen=True)
class FitResult:
    order: str
    cost: int
    candidates: int     # orders compared with observations
    rounds: int         # fit rounds (one per refit)
    seconds: float
    runs: tuple         # ((lo, hi, order text), ...): the guard's arms by observed n


@dataclass(frozen=True)
class Inference:
    spec: A.Spec
    revealed: tuple         # n revealed in full and used for fitting
    held_out: tuple         # n revealed in full after fitting, never used for it
    sampled: tuple          # SampledCheck per n checked by sampling
    counterexamples: tuple  # Counterexample
    timings: tuple          # NTiming
    fit: FitResult
    seconds: float
    exact: bool
    n_range: tuple
    fallback: str = ""      # why no spec for the whole range: then spec holds at n_range[0]..spec's hi only
    time_limit: float | None = None    # seconds the run was bounded by (None: unbounded)
    limit_note: str = ""               # where that bound came from (note [default time limit])
    calls: int = 0                     # target calls the run made
    phases: tuple = ()                 # (phase, seconds after the start) as each began
    stopped: str = ""                  # why the work stopped early ('' when it did not)
    work_deadline: float | None = None  # seconds after the start past which no target call starts

    def limit_text(self) -> str:
        """'time limit 60 s (default for a target of 3 us a call at n = 4096); 51,203 target calls'."""
        bound = "no time limit" if self.time_limit is None else f"time limit {self.time_limit:g} s"
        return f"{bound}{f' ({self.limit_note})' if self.limit_note else ''}; {self.calls:,} target calls"

    @property
    def ok(self) -> bool:
        return all(c.resolved for c in self.counterexamples) and all(s.ok for s in self.sampled)

    def report(self) -> str:
        if self.fallback:
            got = self.spec.header.n
            return "\n".join([
                f"NO spec for n in {self.n_range[0]}..{self.n_range[1]}: {self.fallback}",
                f"  written instead: a spec for n in {got.lo}..{got.hi} only, where every n was revealed and each "
                f"arm is exact: {self.fit.order}",
                f"  revealed: {len(self.revealed)} n ({compress(self.revealed)}); {self.seconds:.2f} s",
                f"  {self.limit_text()}",
                "  (fpspec reveal TARGET -n N reveals any one n; a narrower -n range, or a larger --time-limit, "
                "may let the fit finish)"])
        lines = [f"one spec for n in {self.n_range[0]}..{self.n_range[1]}: {self.fit.order}",
                 f"  revealed in full and fitted: {len(self.revealed)} n ({compress(self.revealed)})",
                 f"  held out, revealed in full, compared with the spec's expansion: {len(self.held_out)} n"
                 f" ({compress(self.held_out) or 'none'}): "
                 + ("all agree" if not any(c.stage == "held-out" and not c.resolved for c in self.counterexamples)
                    else "DISAGREEMENT")]
        for s in self.sampled:
            lines.append("  " + s.text())
        for c in self.counterexamples:
            lines.append(f"  counterexample at n = {c.n} ({c.stage}, {'refitted' if c.resolved else 'UNRESOLVED'}):"
                         f" {c.detail}")
        lines.append(f"  fit: cost {self.fit.cost}, {self.fit.candidates} candidate orders compared, "
                     f"{self.fit.rounds} fit rounds, {self.fit.seconds:.2f} s; total {self.seconds:.2f} s")
        if self.stopped:
            lines.append(f"  the arithmetic was checked at the probed n only: {self.stopped}")
        lines.append(f"  {self.limit_text()}")
        if self.sampled:
            lines.append("  sampled checks are evidence, not proof: they ask some l(i,j) and run some inputs; "
                         "--exact reveals every checked n in full")
        return "\n".join(lines)

    def __str__(self) -> str:
        return str(self.spec)

    def to_json(self) -> dict:
        return {
            "spec": str(self.spec),
            "n_range": list(self.n_range),
            "ok": self.ok,
            "exact": self.exact,
            "fallback": self.fallback or None,
            "seconds": round(self.seconds, 3),
            "time_limit": self.time_limit,
            "limit_note": self.limit_note,
            "calls": self.calls,
            "phases": [list(p) for p in self.phases],
            "stopped": self.stopped or None,
            "work_deadline": self.work_deadline,
            "revealed": list(self.revealed),
            "held_out": list(self.held_out),
            "sampled": [s.to_json() for s in self.sampled],
            "counterexamples": [dataclasses.asdict(c) for c in self.counterexamples],
            "per_n": [{"n": t.n, "stage": t.stage, "seconds": round(t.seconds, 5), "queries": t.queries}
                      for t in self.timings],
            "fit": {**dataclasses.asdict(self.fit), "seconds": round(self.fit.seconds, 3),
                    "runs": [list(r) for r in self.fit.runs]},
        }


# ---------------------------------------------------------------- n sets


def compress(ns) -> str:
    """'1..48 63 64 65' for sorted runs of consecutive n."""
    ns = sorted(set(ns))
    out, i = [], 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        out.append(str(ns[i]) if j == i else f"{ns[i]}..{ns[j]}" if j > i + 1 else f"{ns[i]} {ns[j]}")
        i = j + 1
    return " ".join(out)


def first_design(lo: int, hi: int, rng) -> set[int]:
    """Every small n, powers of two and neighbours, a few random n."""
    ns = set(range(lo, min(hi, SMALL) + 1))
    p = 2
    while p - 1 <= hi:
        ns.update((p - 1, p, p + 1))
        p *= 2
    ns.update(int(x) for x in rng.integers(lo, hi + 1, RANDOM_DESIGN))
    ns.add(hi)
    return {n for n in ns if lo <= n <= hi}


def constants_of(order) -> set[int]:
    """Every integer constant in an order (lane counts, block sizes, thresholds)."""
    out = set()
    stack = [order]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Num):
            out.add(x.value)
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                if f.name != "loc":
                    v = getattr(x, f.name)
                    stack.extend(v if isinstance(v, tuple) else [v])
    return out


def design_from(order, runs, lo: int, hi: int, rng, random: int = RANDOM_DESIGN) -> set[int]:
    """Multiples of the spec's constants and their neighbours, both sides of
    every guard threshold, the middle of every gap between two runs."""
    ns = set()
    for c in constants_of(order):
        if c < 2:
            continue
        for k in (1, 2, 3, 5, 8, 17):
            ns.update((k * c - 1, k * c, k * c + 1))
    for a, b in zip(runs, runs[1:]):
        ns.update((a.hi, a.hi + 1, b.lo - 1, b.lo, (a.hi + b.lo) // 2))
    ns.update(int(x) for x in rng.integers(lo, hi + 1, random))
    return {n for n in ns if lo <= n <= hi}


# ---------------------------------------------------------------- the time limit


# Note [time limit]: a run bounded by L seconds ends by L, plus at most the one
# target call in flight when its work deadline passes, plus writing the
# fallback.  Every target call of the run goes through RunClock.bounded, which
# checks the deadline before the call starts (revelation, probes, the
# arithmetic per part, sampled checks: each is thousands of calls, and a
# check before each n or each phase let a slow box run on for whole
# revelations); the fit checks it per leaf (fpspec.infer.fit.Budget.charge).
# The work deadline is L less the fallback's reserve (FALLBACK_RESERVE of L, at
# most FALLBACK_RESERVE_MAX s); the fallback's own steps (a small fit, one
# lowering per revealed n) stop at L itself, the fallback then covering the n
# it lowered (note [fallback]).
FALLBACK_RESERVE = 0.1           # of the time limit, kept for building the fallback after the work deadline
FALLBACK_RESERVE_MAX = 10.0      # seconds: at most this much of it
REPLICA_SECONDS = 20.0           # seconds a replica's compile may take here: not started with less time left


def reserve(limit: float) -> float:
    """Seconds of a time limit kept for the fallback (note [time limit])."""
    return min(FALLBACK_RESERVE * limit, FALLBACK_RESERVE_MAX)


class RunClock:
    """The run's time limit as every step sees it (note [time limit]): it bounds the
    target's calls, names the step under way (the Stopped message says it), counts
    the calls and records when each progress phase began."""

    def __init__(self, budget: Budget, start: float, end: float | None):
        self.budget = budget       # its deadline (time.monotonic()) is the work deadline
        self.start = start         # time.monotonic() at the start of the run
        self.end = end             # time.monotonic() at which the limit ends (None: unbounded)
        self.doing = "starting"
        self.calls = 0
        self.phases: list = []

    def since(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float | None:
        """Seconds to the work deadline (None: unbounded)."""
        return None if self.budget.deadline is None else self.budget.deadline - time.monotonic()

    @contextmanager
    def phase(self, name: str, total: int | None = None, doing: str | None = None):
        """A progress phase (fpspec.progress) that the run's record and its Stopped message name."""
        previous, self.doing = self.doing, doing or name
        self.phases.append((name, round(self.since(), 3)))
        try:
            with time_limit(self.end, self.budget.limit), phase(name, total=total) as advance:   # the bar shows the time left
                yield advance
        finally:
            self.doing = previous

    def bounded(self, target):
        """The target, each call of it (fn, call_rows) first checking the work deadline."""
        def wrap(fn):
            if fn is None:
                return None

            @functools.wraps(fn)
            def call(*args):
                self.budget.check_time(self.doing)
                self.calls += 1
                return fn(*args)
            return call
        return dataclasses.replace(target, fn=wrap(target.fn), call_rows=wrap(target.call_rows))

    def maker(self, make: Callable) -> Callable:
        """make, its targets bounded; building one is a step that starts work too."""
        def bounded_make(n: int):
            self.budget.check_time(self.doing)
            return self.bounded(make(n))
        return bounded_make


STARTUP_MAX = 10.0   # seconds: a process older than this did other work first (a test runner, a notebook)


def process_start() -> float:
    """time.monotonic() at which this process started (Linux: from /proc), when that was at
    most STARTUP_MAX s ago, else now: a range run's time limit counts from the start of the
    command, imports included."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])    # field 22, starttime: ticks after boot
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - started / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic()
    return time.monotonic() - age if 0.0 <= age <= STARTUP_MAX else time.monotonic()


def measure_call(make: Callable, n: int) -> float:
    """Seconds one call of the target at n takes: the least of 2 to 5 calls on
    operands of ones (note [default time limit] in fpspec.infer)."""
    target = make(n)
    operands = [target.native(np.ones(shape)) for shape in target.operand_shapes]
    times: list[float] = []
    while len(times) < 2 or (len(times) < 5 and sum(times) < 0.1):
        t0 = time.perf_counter()
        target.fn(*operands)
        times.append(time.perf_counter() - t0)
    return min(times)


def resolve_time_limit(time_limit, make: Callable, n: int) -> tuple[float | None, str]:
    """(seconds or None, where they came from) for infer_spec's time_limit: None
    (unbounded), a number of seconds, or AUTO (note [default time limit]; measured at n)."""
    if time_limit is None:
        return None, ""
    if time_limit == AUTO:
        n = max(n, 2)
        call = measure_call(make, n)
        return default_time_limit(call, n), f"default for a target of {_call_text(call)} a call at n = {n}"
    if isinstance(time_limit, str) or not time_limit > 0:
        raise FpspecError(f"the time limit must be a positive number of seconds or {AUTO!r}, got {time_limit!r}")
    return float(time_limit), "given"


def _call_text(seconds: float) -> str:
    """'3 us', '0.42 ms', '1.5 s'."""
    if seconds >= 0.1:
        return f"{seconds:.2g} s"
    if seconds >= 1e-4:
        return f"{seconds * 1e3:.2g} ms"
    return f"{seconds * 1e6:.2g} us"


# ---------------------------------------------------------------- sources of trees


class _Reveal:
    """Reveals trees through make_target; remembers every tree and timing."""

    def __init__(self, make_target: Callable, seed: int, clock: RunClock, trace: str | None = None):
        self.trace = trace
        self.make_target = make_target   # its targets bounded by the clock (note [time limit])
        self.seed = seed
        self.trees: dict[int, Tree] = {}
        self.timings: list[NTiming] = []
        self.clock = clock
        self.budget = clock.budget       # its deadline bounds the run (note [bounded search])
        self.first_target = None
        self.shared: dict = {}     # gemv/gemm: n -> outputs computing like element (0, 0)

    def many(self, ns, stage: str, name: str = "reveal at sample n") -> dict:
        """{n: tree} for every n, reported as one progress phase."""
        ns = sorted(ns)
        out = {}
        with self.clock.phase(name, total=len(ns)) as advance:
            for n in ns:
                out[n] = self.tree(n, stage)
                advance()
        return out

    def tree(self, n: int, stage: str) -> Tree:
        if n in self.trees:
            return self.trees[n]
        from fpspec.reveal.engine import reveal

        self.clock.doing = f"revealing n = {n} ({stage})"
        self.budget.check_time(self.clock.doing)
        start = time.perf_counter()
        if n == 1:
            t, queries = 0, 0  # one term: nothing to reveal
        else:
            target = self.make_target(n)
            if self.first_target is None:
                self.first_target = target
            r = reveal(target, seed=self.seed)
            t, queries = r.tree, r.queries
            if r.shared is not None and not r.shared.all():
                self.shared[n] = r.shared
        self.trees[n] = t
        self.timings.append(NTiming(n, stage, time.perf_counter() - start, queries))
        if self.trace:  # one JSON line per n as it comes: a run cut short still leaves its trees
            import json

            from fpspec.tree import format_tree

            with open(self.trace, "a") as f:
                f.write(json.dumps({"n": n, "stage": stage, "seconds": round(self.timings[-1].seconds, 5),
                                    "queries": queries, "tree": format_tree(t)}) + "\n")
        return t

    def view(self, n: int):
        """The target at n, read only at the outputs that compute like element (0, 0)
        (probes and sample checks batch their inputs over rows of A)."""
        target = self.make_target(n)
        if n not in self.shared:
            return target
        from fpspec.reveal.positions import restricted

        return restricted(target, self.shared[n], (0, 0))


# ---------------------------------------------------------------- the loop


def _target_maker(make_target, target_kwargs: dict) -> Callable:
    from fpspec.reveal.targets import Target, resolve_target

    if isinstance(make_target, Target) or isinstance(make_target, str):
        resolved = isinstance(make_target, Target)    # resolved at one n already (the command line does)
        name = make_target.name if resolved else make_target
        kw = {k: v for k, v in target_kwargs.items() if v is not None}
        first: list = [make_target] if resolved else []

        def make(n: int):
            # a user callable is checked once, at the first n built (resolve_target calls it
            # twice to check its answers): later n reuse it, so that every later call is one
            # the run's clock bounds (note [time limit])
            if first and _checked_callable(first[0]):
                return dataclasses.replace(first[0], n=n)
            target = resolve_target(name, n=n, **kw)
            first[:] = [target]
            return target
        return make
    if callable(make_target):
        return make_target
    raise FpspecError(f"make_target must be a function n -> Target or a target name, got {make_target!r}")


def _checked_callable(target) -> bool:
    """A user callable that resolve_target checked (fpspec.reveal.targets.checked_target's
    guard): nothing in its Target depends on n, unlike a library's (numpy.mean's out_shift)."""
    code = getattr(target.fn, "__code__", None)
    return getattr(code, "co_qualname", "") == "checked_target.<locals>.guarded"


def _with_output(make_target: Callable, out_fmt: str) -> Callable:
    return lambda n: dataclasses.replace(make_target(n), out_fmt=out_fmt)


def _ident(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name.split(":")[-1]).strip("_") or "order"
    return s if not s[0].isdigit() else f"o_{s}"


def infer_spec(make_target, n_range, *, seed: int = 0, exact: bool = False, progress: bool = True,
               holdout=16, full_limit: int = 8192, checks: tuple = (), replica: str | None = "numba",
               inputs: int = 6, probe: bool = True, command: str | None = None, trace: str | None = None,
               arithmetic: A.Block | None = None, time_limit: float | str | None = None,
               fit_work: int | None = None, started: float | None = None, **target_kwargs) -> Inference:
    """One spec explaining the target's order at every n in n_range = (lo, hi).

    make_target: n -> fpspec.reveal Target (or a target name, with dtype=,
    op=, m=, ncols=, device= passed on to resolve_target; or a Target it
    resolved at one n, whose user callable is then not checked again).  exact: reveal in
    full at every n checked (no sampled checks).  holdout: fresh random n
    compared after fitting (or the list of them).  full_limit: the largest n revealed in full
    (unless exact).  checks: extra n to check (sampled above full_limit),
    e.g. 2**20, 2**24.  replica: the fpspec.compile backend used for the
    bitwise part of sampled checks (None: queries only).  probe: find the
    arithmetic (fpspec.arith.probe) and write it into the header.  trace:
    a file that gets one JSON line per revealed n as it is revealed.
    arithmetic: a known `arithmetic { ... }` section (fpspec.spec.ast.Block),
    used instead of probing (a GPU whose probes the model cannot fit at
    every n, with parameters measured elsewhere).  progress: report the
    phases (reveal at sample n, fit, held-out check) to the sink installed
    with fpspec.progress.reporting.

    Bounded (note [bounded search], note [time limit]): time_limit seconds
    for the whole run (None: no limit; fpspec.infer.AUTO, the command line's
    default: derived from the measured cost of a call, note [default time
    limit] in fpspec.infer), of which the fit search may use FIT_SHARE, and fit_work leaves for the
    fit search (None: no limit; a deterministic bound for tests).  started:
    the time.monotonic() the limit counts from (the command's start; default now).
    When either runs out, or no order of the language fits, the result is a
    fallback (Inference.fallback says why): a spec for the range lo..H of n
    that were all revealed, arms exact at each of them, the structure that
    could not be fitted named in its provenance.
    """
    with (nullcontext() if progress else reporting(None)):
        return _infer(make_target, n_range, seed=seed, exact=exact, holdout=holdout, full_limit=full_limit,
                      checks=checks, replica=replica, inputs=inputs, probe=probe, command=command, trace=trace,
                      arithmetic=arithmetic, time_limit=time_limit, fit_work=fit_work, started=started,
                      **target_kwargs)


def _infer(make_target, n_range, *, seed, exact, holdout, full_limit, checks, replica, inputs, probe, command,
           trace, arithmetic, time_limit, fit_work, started, **target_kwargs) -> Inference:
    start = time.perf_counter()
    lo, hi = int(n_range[0]), int(n_range[1])
    if lo < 1 or hi < lo:
        raise FpspecError(f"n range must be LO..HI with 1 <= LO <= HI, got {lo}..{hi}")
    outside = [n for n in checks if not lo <= n <= hi]
    if outside:   # a check the spec's range does not cover would be dropped, not done
        raise FpspecError(f"--check {outside[0]} is outside the range {lo}..{hi}: widen -n to include it")
    make = _target_maker(make_target, target_kwargs)
    limit = hi if exact else min(hi, full_limit)
    rng = np.random.default_rng(seed)
    began = time.monotonic() if started is None else started
    seconds, limit_note = resolve_time_limit(time_limit, make, limit)
    # the last part of the limit is the fallback's (note [time limit]): the run ends within it
    budget = Budget(work=fit_work, deadline=None if seconds is None else began + seconds - reserve(seconds),
                    limit=seconds, fit_seconds=None if seconds is None else seconds * FIT_SHARE)
    clock = RunClock(budget, began, None if seconds is None else began + seconds)
    src = _Reveal(clock.maker(make), seed, clock, trace)
    make = src.make_target
    counter: list[Counterexample] = []
    stats = {"rounds": 0, "seconds": 0.0, "candidates": 0}
    arith = report = None
    try:
        # 1-3: design, fit, redesign from the spec
        try:
            src.many(first_design(lo, limit, rng), "design")
        except RevealRefused as e:
            if not str(e).startswith("order-independent"):
                raise
            return _timed(_order_free(src, lo, hi, str(e), seed, command, start, exact), clock, limit_note)
        name = _ident(getattr(src.first_target, "name", "order") or "order")
        # the arithmetic first: the replica of every sampled check needs it
        report = None
        if probe and arithmetic is None:
            with clock.phase("arithmetic probes", doing="probing the arithmetic"):
                report = _probe_report(src, src.view)
        if report is not None and report.arithmetic.output != src.first_target.out_fmt:
            # results wider than the inputs (fpspec.arith.probe note [observed output format]):
            # every later probe, check and the header read them in that format
            make = _with_output(make, report.arithmetic.output)
            src.make_target = make
            src.first_target = dataclasses.replace(src.first_target, out_fmt=report.arithmetic.output)
        arith = (arithmetic if arithmetic is not None
                 else A.Block("arithmetic", report.arithmetic.to_entries()) if report is not None
                 else _plain_arithmetic(src.first_target))
        regional = None     # (order spec, spec with per-part arithmetic): note [arithmetic per part]

        def fit_now(base=None, exceptions=()):
            t0 = time.perf_counter()
            try:
                with clock.phase("fit", doing="fitting") as advance, budget.fitting():
                    budget.progress = advance
                    got = _fit(src.trees, name, lo, hi, base, exceptions, budget)
            finally:
                budget.progress = None
                stats["seconds"] += time.perf_counter() - t0
                stats["rounds"] += 1
            stats["candidates"] += got[1].candidates
            return got

        def refine(spec, fitter, first: bool):
            """Design from the spec, reveal, refit on disagreement; bisect the
            gaps between guard arms until a round adds no n."""
            for rnd in range(4 * MAX_ROUNDS):
                more = design_from(spec.order if not spec.lets else spec.lets[0].order, fitter.runs, lo, limit,
                                   rng, random=RANDOM_DESIGN if first and rnd == 0 else 0)
                more -= set(src.trees)
                if not more:
                    break
                got = src.many(more, "refine")
                wrong = [n for n in sorted(more) if _difference(spec, n, got[n])]
                if wrong:
                    spec, fitter = fit_now(spec, wrong)
            return spec, fitter

        spec, fitter = refine(*fit_now(), first=True)
        # 4: held-out n, never used for fitting
        held: list[int] = []
        sampled: list[SampledCheck] = []
        rep, rep_note = None, ""
        pending_big = {n for n in checks if limit < n <= hi} | set(_powers_above(limit, hi))
        chosen = None if isinstance(holdout, int) else sorted(int(x) for x in holdout)
        explicit = chosen is not None
        asked_big = [] if chosen is None else [x for x in chosen if limit < x <= hi]
        if chosen is not None:
            holdout = len(chosen)
        for _ in range(MAX_ROUNDS):
            if chosen is not None:  # the caller's held-out n, then fresh ones after a refit
                fresh = [x for x in chosen if lo <= x <= limit and x not in src.trees]
                chosen = None
            else:
                fresh = _fresh(rng, lo, limit, holdout if limit == hi else max(1, holdout // 2), set(src.trees))
            wrong = []
            got = src.many(fresh, "held-out", "held-out check")
            for n in fresh:
                held.append(n)
                d = _difference(spec, n, got[n])
                if d:
                    wrong.append(n)
                    counter.append(Counterexample(n, "held-out", d, False))
            if not wrong:
                break
            # the counterexamples are observations now: refit, redesign
            spec, fitter = refine(*fit_now(spec, wrong), first=False)
            counter = [dataclasses.replace(c, resolved=not _difference(spec, c.n, src.trees[c.n])) for c in counter]
        small_checks = sorted(x for x in checks if lo <= x <= limit)   # small enough to reveal in full
        for n, t in src.many(small_checks, "checked", "held-out check").items():
            d = _difference(spec, n, t)
            if d:
                counter.append(Counterexample(n, "checked", d, False))
        big_fresh = asked_big if explicit else (
            _fresh(rng, limit + 1, hi, holdout - holdout // 2, set(src.trees)))
        big = sorted(set(pending_big) | set(big_fresh))
        with clock.phase("held-out check", total=len(big), doing="checking sampled n") as advance:
            for n in big:
                clock.doing = f"checking n = {n} (sampled)"
                budget.check_time(clock.doing)
                stage = "held-out (sampled)" if n not in pending_big else "checked (sampled)"
                t0 = time.perf_counter()
                if replica and rep is None and not rep_note:
                    clock.doing = "checking the arithmetic per part"
                    regional = _per_part(spec, src, src.view, report, seed, regional)
                    if clock.left() is not None and clock.left() < REPLICA_SECONDS:
                        # a compile cannot be stopped midway (note [time limit]): queries only
                        rep_note = (f"no {replica} replica: {max(clock.left(), 0):.0f} s of the time limit left, "
                                    f"less than a compile may take ({REPLICA_SECONDS:g} s)")
                    else:
                        rep, rep_note = _replica(
                            regional[1] if regional else _with_header(spec, src.first_target, arith), replica)
                    clock.doing = f"checking n = {n} (sampled)"
                target = make(n)
                chk = sampled_check(spec, target, seed=seed, inputs=inputs if rep else 0, replica=rep)
                if rep_note:
                    chk = dataclasses.replace(chk, note="; ".join(x for x in (chk.note, rep_note) if x))
                sampled.append(chk)
                src.timings.append(NTiming(n, stage, time.perf_counter() - t0, chk.pairs))
                advance()
                if not chk.ok:
                    counter.append(Counterexample(n, stage, chk.text(), False))
        # 5: never contradict an observation
        spec = _never_contradict(spec, src.trees)
        unchecked = ""      # why the arithmetic was not checked beyond the probed n
        with clock.phase("arithmetic check", doing="checking the arithmetic per part"):
            try:
                budget.check_time(clock.doing)
                regional = _per_part(spec, src, src.view, report, seed, regional)
            except Stopped as e:
                # the order is established (every tree, every held-out n agree): keep it, with the
                # arithmetic the probes found, and say where it was checked
                if report is None or not report.consistent:
                    raise
                regional = regional if regional is not None and regional[0] == spec else None
                unchecked = f"{e} ({clock.since():.1f} s after the start)"
    except Stopped as e:
        stopped = f"{e} ({clock.since():.1f} s after the start)"
        with clock.phase("fallback"):
            got = _fallback(src, lo, hi, str(e), arith, report, seed, command, stats, start, exact,
                            "given (--arithmetic)" if arithmetic is not None else probe)
        return _timed(got, clock, limit_note, stopped)
    revealed = tuple(sorted(set(src.trees) - set(held)))
    fit = FitResult(str(spec.order if not spec.lets else spec.lets[0].order), order_cost(spec.order)
                    + sum(order_cost(d.order) for d in spec.lets), stats["candidates"], stats["rounds"],
                    stats["seconds"],
                    tuple((r.lo, r.hi, str(r.order)) for r in (fitter.runs if fitter else ())))
    if regional is not None:      # the arithmetic per part: its main section, named sections, using()
        arith, spec = regional[1].header.arithmetic, dataclasses.replace(spec, order=regional[1].order)
    header = _header(spec, src.first_target, lo, hi, revealed, tuple(sorted(held)), sampled, exact, command,
                     arith, "given (--arithmetic)" if arithmetic is not None else probe,
                     {"arithmetic_checked": f"at the probed n only: {unchecked}"} if unchecked else None)
    if regional is not None:
        header = dataclasses.replace(header, arithmetics=regional[1].header.arithmetics)
    spec = dataclasses.replace(spec, header=header)
    return _timed(Inference(spec, revealed, tuple(sorted(held)), tuple(sampled), tuple(counter),
                            tuple(src.timings), fit, time.perf_counter() - start, exact, (lo, hi)), clock, limit_note,
                  unchecked)


def _timed(inference: Inference, clock: RunClock, limit_note: str, stopped: str = "") -> Inference:
    """The inference with the clock's record: its limit, calls, phases (note [time limit])."""
    b = clock.budget
    return dataclasses.replace(inference, time_limit=b.limit, limit_note=limit_note, calls=clock.calls,
                               phases=tuple(clock.phases), stopped=stopped,
                               work_deadline=None if b.deadline is None else round(b.deadline - clock.start, 3))


# Note [fallback]: when the fit cannot finish (budget, time limit) or no order
# of the language explains the revealed trees, what is still true is the
# trees themselves.  A spec states one range of n, so the fallback covers
# lo..H, the longest run of n from lo that were ALL revealed: there every
# arm is checked against its own tree, nothing is guessed.  Its arms are
# the orders a small fit finds over that run, else each n's own lowered
# order, consecutive n with the same order sharing one arm.  The header's
# provenance says it is a fallback, why, and which revealed n lie beyond H
# (their trees are in the JSON and the --trace file).  Under a time limit
# (note [time limit]) the small fit stops halfway from the work deadline to
# the limit's end, and the lowering at the end: H is then the last n lowered.
FALLBACK_SHARE = 1 / 6           # of the fit's budget, for the small fit over lo..H
FALLBACK_MAX = 512                # at most this many n in the fallback's range (one lowering each)


def fallback_spec(trees: dict, lo: int, name: str, budget: Budget | None = None,
                  end: float | None = None) -> A.Spec:
    """A spec exact at every n of lo..H, H the end of the run of revealed n from lo
    (note [fallback]), built by time.monotonic() = end when one is given (at
    least n = lo); RevealRefused when lo itself was not revealed."""
    from fpspec.errors import RevealRefused
    from fpspec.spec.lower import lower

    h = lo - 1
    while h + 1 in trees and h + 1 - lo < FALLBACK_MAX:
        h += 1
    if h < lo:
        raise RevealRefused(f"n = {lo} was not revealed: nothing is known to hold")
    run = {n: observable(trees[n]) for n in range(lo, h + 1)}
    budget = budget or Budget()
    deadline, now = budget.deadline, time.monotonic()
    if end is not None and (deadline is None or deadline <= now):   # past the work deadline: half the rest
        deadline = now + (end - now) / 2
    small = Budget(work=None if budget.work is None else int(budget.work * FALLBACK_SHARE), deadline=deadline,
                   limit=budget.limit if budget.limit is not None or end is None else max(end - now, 0.0),
                   fit_seconds=None if budget.fit_seconds is None else budget.fit_seconds * FALLBACK_SHARE)
    if h > lo:
        try:
            with small.fitting():
                return _fit(run, name, lo, h, budget=small)[0]
        except Stopped:
            pass
    arms: list[tuple[int, object]] = []     # (largest n, order) per run of n with one order
    for n in range(lo, h + 1):
        if n > lo and end is not None and time.monotonic() > end:
            run = {m: t for m, t in run.items() if m < n}    # the limit ended: what was lowered so far
            h = n - 1
            break
        lowered = lower(run[n], observed=True) if n > 1 else None
        order = A.Seq() if lowered is None else lowered.order if not lowered.lets else A.Literal(run[n])
        if arms and arms[-1][1] == order:
            arms[-1] = (n, order)
        else:
            arms.append((n, order))
    cases = tuple(A.Case(A.Compare("<=", A.Var(), A.Num(c)), o) for c, o in arms[:-1])
    spec = A.Spec(A.Header(n=A.Range(lo, h)), (), A.Guard(cases, arms[-1][1]) if cases else arms[-1][1])
    if not _agrees(spec, run):   # lowering is exact; this guards the guard arithmetic
        raise FpspecError("internal error: the fallback spec does not give back the revealed trees")
    return spec


def _fallback(src: _Reveal, lo: int, hi: int, reason: str, arith, report, seed: int, command, stats: dict,
              start: float, exact: bool, probed) -> Inference:
    """The Inference of note [fallback]: why, and the spec that holds where everything was revealed."""
    from fpspec.spec.lower import lower

    name = _ident(getattr(src.first_target, "name", "order") or "order")
    end = src.clock.end
    try:
        spec = fallback_spec(src.trees, lo, name, src.budget, end)
    except RevealRefused as e:     # nothing revealed to fall back on: say why the run stopped
        raise RevealRefused(f"{reason}; {e}") from None
    h = spec.header.n.hi
    beyond = sorted(n for n in src.trees if n > h)
    unresolved = reason
    if beyond:
        n = beyond[0]
        unresolved += f"; not covered: the orders revealed at {len(beyond)} n above {h}, the first at n = {n}"
        if n <= FALLBACK_MAX and (end is None or time.monotonic() < end):   # lowering grows faster than n
            alone = lower(observable(src.trees[n]), observed=True)
            unresolved += f": {alone.lets[0].order if alone.lets else alone.order}"
    regional = None
    if arith is not None:
        try:
            src.budget.check_time("checking the arithmetic")
            regional = _per_part(spec, src, src.view, report, seed)
        except Stopped as e:
            if report is None or not report.consistent:
                arith = None
                unresolved += f"; no arithmetic written: {e}"
            else:     # the probes' arithmetic, checked at the probed n only
                unresolved += (f"; the arithmetic was probed and checked at one n only ({e} before the "
                               "other n were checked)")
        except FpspecError as e:
            arith, regional = None, None      # not established at the fallback's n: written without one
            unresolved += f"; no arithmetic written: {e}"
    if regional is not None:
        arith, spec = regional[1].header.arithmetic, dataclasses.replace(spec, order=regional[1].order)
    header = _header(spec, src.first_target, lo, h, tuple(sorted(src.trees)), (), (), exact, command, arith,
                     probed, {"fallback": f"holds only for n in {lo}..{h}, where every n was revealed; "
                                          f"no spec was found for {lo}..{hi}",
                              "unresolved": unresolved, "revealed_beyond": compress(beyond) or "none"})
    if regional is not None:
        header = dataclasses.replace(header, arithmetics=regional[1].header.arithmetics)
    spec = dataclasses.replace(spec, header=header)
    order = spec.order if not spec.lets else spec.lets[0].order
    fit = FitResult(str(order), spec_cost(spec), stats["candidates"], stats["rounds"], stats["seconds"], ())
    return Inference(spec, tuple(sorted(src.trees)), (), (), (), tuple(src.timings), fit,
                     time.perf_counter() - start, exact, (lo, hi), fallback=unresolved)


def _order_free(src: _Reveal, lo: int, hi: int, why: str, seed: int, command, start: float,
                exact: bool) -> Inference:
    """The Inference of a box whose every addition is exact (fpspec.infer.exact note [exact sums]):
    `order seq` in an fp64 accumulator, checked bit for bit; RevealRefused when that does not hold."""
    from fpspec.infer.exact import exact_arithmetic

    with src.clock.phase("held-out check", doing="checking the exact sums"):
        arith, ns = exact_arithmetic(src.make_target, lo, hi, seed, why)
    target = src.make_target(max(lo, 2))
    spec = A.Spec(A.Header(), (), A.Seq())
    header = _header(spec, target, lo, hi, (), (), (), exact, command, A.Block("arithmetic", arith.to_entries()),
                     True, {"order": "not observable: every addition is exact, any order gives these bits "
                                     f"(the box compared with the exact sum rounded once at n = {compress(ns)})"})
    fit = FitResult("seq", 1, 0, 0, 0.0, ())
    return Inference(dataclasses.replace(spec, header=header), (), (), (), (), tuple(src.timings), fit,
                     time.perf_counter() - start, exact, (lo, hi))


def _powers_above(limit: int, hi: int) -> list[int]:
    out = []
    p = 1
    while p <= hi:
        if p > limit:
            out.append(p)
        p *= 4
    if hi > limit:
        out.append(hi)
    return out


def _fresh(rng, lo: int, hi: int, count: int, used: set) -> list[int]:
    if hi < lo or count <= 0:
        return []
    pool = hi - lo + 1 - len([n for n in used if lo <= n <= hi])
    count = min(count, max(pool, 0))
    out: set[int] = set()
    while len(out) < count:
        n = int(rng.integers(lo, hi + 1))
        if n not in used:
            out.add(n)
    return sorted(out)


def _replica(spec, backend: str):
    """(replica, "") or (None, why not): a backend that cannot take this spec
    leaves the sampled checks to their queries, and says so."""
    try:
        return Replica(spec, backend), ""
    except Exception as e:
        return None, f"no {backend} replica ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


def _fit(trees: dict, name: str, lo: int, hi: int, base: A.Spec | None = None, exceptions=(),
         budget: Budget | None = None):
    """Fit, then confirm by expansion; without recursion if that fails.

    With `base` (the spec before some n turned out wrong) a second candidate
    is the base with a guard arm `n == c` per exception: when that is
    cheaper than the refit, the exceptions are exceptions, not a new
    structure.  The cheapest candidate that agrees with every tree wins.
    Stopped when neither exists (the budget ran out, or no order fits).
    """
    budget = Budget() if budget is None else budget
    trees = {n: observable(t) for n, t in trees.items()}   # as revelation sees them (fpspec.tree.observable)
    obs = [Obs(n, t) for n, t in sorted(trees.items())]
    found = []
    stopped = None
    for allow_ref in (True, False):
        fitter = Fitter(name=name, pool=dict(trees), allow_ref=allow_ref, budget=budget)
        try:
            order = fitter.fit_root(obs)
        except Stopped as e:
            stopped = e
            break
        if order is None:
            continue
        spec = _as_spec(order, name, lo, hi)
        if _agrees(spec, trees):
            found.append((spec_cost(spec), spec, fitter))
            break
    if base is not None and exceptions:
        arms = []
        for n in exceptions:
            try:
                order = Fitter(name=name, budget=budget).fit_root([Obs(n, trees[n])])
            except Stopped:
                order = None
            arms.append(A.Case(A.Compare("==", A.Var(), A.Num(n)), order or A.Literal(trees[n])))
        spec = _with_arms(base, tuple(arms))
        if _agrees(spec, trees):
            found.append((spec_cost(spec), spec, fitter if found else Fitter(name=name)))
    if found:
        found.sort(key=lambda x: x[0])
        return found[0][1], found[0][2]
    if stopped is not None:
        raise stopped
    ns = sorted(trees)
    raise Stopped(f"no order of the .fps language explains the orders revealed at {len(ns)} n in "
                  f"{ns[0]}..{ns[-1]} with at most {MAX_RUNS} guarded cases")


def spec_cost(spec: A.Spec) -> int:
    return order_cost(spec.order) + sum(order_cost(d.order) for d in spec.lets)


def _with_arms(spec: A.Spec, arms: tuple) -> A.Spec:
    """spec with guard arms tried before its order (inside the named root order
    when there is one, so that recursion meets them too)."""
    if spec.lets:
        d = spec.lets[0]
        return dataclasses.replace(spec, lets=(A.Let(d.name, A.Guard(arms, d.order)),) + spec.lets[1:])
    return dataclasses.replace(spec, order=A.Guard(arms, spec.order))


def _as_spec(order, name: str, lo: int, hi: int) -> A.Spec:
    header = A.Header(n=A.Range(lo, hi))
    if _uses_ref(order, name):
        return A.Spec(header, (A.Let(name, order),), A.Ref(name))
    return A.Spec(header, (), order)


def _uses_ref(order, name: str) -> bool:
    stack = [order]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Ref) and x.name == name:
            return True
        if dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                if f.name != "loc":
                    v = getattr(x, f.name)
                    stack.extend(v if isinstance(v, tuple) else [v])
    return False


def _difference(spec: A.Spec, n: int, tree: Tree) -> str:
    """'' when the spec gives `tree` at n, else what differs, in one line."""
    try:
        d = diff(observable(expand(spec, n)), observable(tree))   # fused pairs reveal as binary
    except FpspecError as e:
        return f"the spec does not apply at n = {n}: {e}"
    return "" if d is None else str(d).splitlines()[0]


def _agrees(spec: A.Spec, trees: dict) -> bool:
    return not any(_difference(spec, n, t) for n, t in trees.items())


def _never_contradict(spec: A.Spec, trees: dict) -> A.Spec:
    """Guard every observed n the spec gets wrong with its literal tree."""
    wrong = []
    for n, t in sorted(trees.items()):
        try:
            ok = observable(expand(spec, n)) == observable(t)
        except Exception:
            ok = False
        if not ok:
            wrong.append((n, t))
    if not wrong:
        return spec
    return _with_arms(spec, tuple(A.Case(A.Compare("==", A.Var(), A.Num(n)), A.Literal(t)) for n, t in wrong))


def _plain_arithmetic(target) -> A.Block | None:
    """Without probes: everything in the target's formats (a guess, said so)."""
    if target is None:
        return None
    from fpspec.arith import Arithmetic

    product = "none" if target.op == "sum" else "rounded"
    a = Arithmetic(input=target.fmt, product=product, accumulator=target.fmt, output=target.out_fmt)
    return A.Block("arithmetic", a.to_entries())


def _with_header(spec: A.Spec, target, arith) -> A.Spec:
    """The spec with op and arithmetic: what the compiler needs."""
    sections = (arith,) if arith is not None else ()
    op = target.op if target is not None else None
    return dataclasses.replace(spec, header=dataclasses.replace(spec.header, op=op, sections=sections))


def _probe_report(src: _Reveal, make):
    """The arithmetic (fpspec.arith.probe's report), probed at the largest revealed n up to 1024."""
    from fpspec.arith.probe import probe_arithmetic

    n = max((n for n in src.trees if 2 <= n <= 1024), default=None)
    if n is None:
        return None
    try:
        target = make(n)
        wider = _widest_output(make, [m for m in src.trees if 2 <= m <= 1024 and m != n], target)
        if wider is not None:
            target = dataclasses.replace(target, out_fmt=wider)
        return probe_arithmetic(target, src.trees[n])
    except FpspecError:
        return None


# the results at one n may all fit a narrower format than at another (an fp32
# sum whose last additions round to fp16 at most n): the output format is the
# widest observed at a few revealed n (fpspec.arith.probe note [observed output format])
OUTPUT_NS = 6


def _widest_output(make, ns: list, target) -> str | None:
    """The widest output format observed at OUTPUT_NS of `ns` when wider than the
    target's declared one, else None."""
    from fpspec.arith.probe import observed_output_format
    from fpspec.formats import get_format

    best = target.out_fmt
    for m in _spread_pick(sorted(ns), OUTPUT_NS):
        got = observed_output_format(make(m))
        if get_format(got).precision > get_format(best).precision:
            best = got
    return None if best == target.out_fmt else best


# Note [arithmetic per part]: one arithmetic probed at one n need not hold at
# every n or in every part of the tree (OpenBLAS sdot: fp64 with fp32
# products for n < 32; from 32 on an fp32 kernel whose FMA lanes meet in
# plain fp32 adds, its result joined in fp64).  So the fitted order's
# arithmetic is checked bit for bit on sample inputs at PER_PART_CHECK
# revealed n (every guard arm's least, largest and some between); where it
# fails, fpspec.spec.regions.probe_spec_arithmetic probes each part of the
# order at PER_PART_PROBE of those n and keeps what fits at all of them.
PER_PART_PROBE = 4     # probed n per guard arm
PER_PART_CHECK = 8     # checked n per guard arm
PER_PART_MAX_N = 2048  # the largest n checked there (the least n of an arm, if it has none below)


def _per_part(spec: A.Spec, src: _Reveal, make, report, seed: int, previous=None):
    """(order spec, spec with its arithmetic per part), or None when one arithmetic
    holds everywhere checked (note [arithmetic per part]); RevealRefused when none does."""
    if report is None or not src.first_target or src.first_target.op not in ("sum", "dot", "gemv", "gemm"):
        return None
    if previous is not None and previous[0] == spec:
        return previous
    from fpspec.spec.regions import probe_spec_arithmetic

    target = src.first_target
    base = dataclasses.replace(spec, header=dataclasses.replace(spec.header, target=target.name, op=target.op))
    # n past PER_PART_MAX_N only where an arm has no other: the exact
    # arithmetic model costs ~n per input and the sampled checks' replicas
    # already compare bits at large n
    ns = sorted(n for n in src.trees if n >= 2)
    arms = [[n for n in arm if n <= PER_PART_MAX_N] or arm[:1] for arm in _arm_ns(spec, ns)]
    check_ns = {n for ns in arms for n in _spread_pick(ns, PER_PART_CHECK)}
    check_ns = sorted(check_ns | set(_part_cover(spec, [n for n in ns if n <= PER_PART_MAX_N], check_ns)))
    probe_ns = sorted({n for ns in arms for n in _spread_pick(ns, PER_PART_PROBE)})
    targets = {n: make(n) for n in check_ns}    # bounded by the run's clock (note [time limit])
    trees = {n: _spec_tree(spec, n, src.trees[n]) for n in check_ns}
    try:
        try:
            out, _ = probe_spec_arithmetic(base, targets, trees, report, seed=seed, probe_ns=probe_ns)
        except FpspecError as first_error:
            if report.arithmetic.fused is None:
                raise   # the binary candidates try both initial values themselves
            try:
                out, _ = probe_spec_arithmetic(base, targets, trees, _other_init(report), seed=seed,
                                               probe_ns=probe_ns)
            except FpspecError:
                raise first_error from None
            return spec, out
    except FpspecError as e:
        if isinstance(e, RevealRefused) or "fused" not in str(e):
            raise
        # the probes per part try binary arithmetics; fused nodes need the probed fused block
        got = report.arithmetic.fused
        raise RevealRefused(f"{target.name}: the order has fused nodes, and "
                            + ("the probes found no fused parameters" if got is None else
                               f"the fused parameters probed (w = {got.w}, result = {got.result}) do not "
                               f"reproduce them at every n checked")
                            + f"; no arithmetic written ({e})") from None
    # (an order whose parts became fused pairs, fpspec.spec.regions note [fused pairs], may need no named section)
    return (spec, out) if out.header.arithmetics or out.order != spec.order else None


# Note [initial value]: an initial value +0.0 differs from none only where every
# term of an accumulation is -0.0, and a fused node's own sum of zeros is +0.0,
# so the probes at one n may leave it open (fused candidates are written
# init = none) while at another n a part of one term shows it (chain(16) over
# one term at n = 2 keeps -0.0 only without the +0.0), and the parts' probes
# take the whole tree's initial value.  Where the probed arithmetic fails the
# sample checks, whole and per part, the other initial value is tried.
def _other_init(report):
    """The probe report with the other initial value (note [initial value])."""
    a = report.arithmetic
    return dataclasses.replace(report, arithmetic=dataclasses.replace(a, init="none" if a.init == "+0.0" else "+0.0"),
                               consistent=True)


# Note [parts' arms]: a guard inside a part (split(h, if n % 5 == 3: pairwise
# else: pad(5, gpu_tree), ...)) takes its arm by the part's size, not by n, so
# the root guard's arms do not say which n exercise it; n where the parts hold
# nodes under a set of arms no checked n has are added to the checks, else an
# arm never checked takes the main arithmetic whatever it computes.
PART_COVER_MAX = 24   # n added for the parts' arms, at most


def _part_cover(spec: A.Spec, ns: list, checked=()) -> list:
    """The least n of ns for each set of parts holding nodes that no n of `checked`
    has (note [parts' arms])."""
    from fpspec.spec.regions import part_names, partition

    parted = partition(spec)
    if parted is None:
        return []

    def key(n):
        try:
            return frozenset(part_names(spec, parted[0], n).values())
        except FpspecError:
            return None
    have = {key(n) for n in checked if n >= 2}
    seen: dict = {}
    for n in ns:
        k = key(n) if n >= 2 else None
        if k is None or k in have or k in seen:
            continue
        seen[k] = n
        if len(seen) >= PART_COVER_MAX:
            break
    return sorted(seen.values())


def _spec_tree(spec: A.Spec, n: int, revealed: Tree) -> Tree:
    """The spec's tree at n where revelation sees it as `revealed`: it keeps the fused pairs
    that reveal as binary nodes (fpspec.tree.observable), which the arithmetic needs."""
    try:
        t = expand(spec, n)
    except FpspecError:
        return revealed
    return t if observable(t) == observable(revealed) else revealed


def _arm_ns(spec: A.Spec, ns: list) -> list:
    """The revealed n grouped by the root guard's arm they take (one group without a guard)."""
    o = spec.order
    if not isinstance(o, A.Guard):
        return [ns]
    from fpspec.spec.expand import eval_cond

    groups: dict = {}
    for n in ns:
        arm = next((i for i, c in enumerate(o.cases) if eval_cond(c.cond, n)), len(o.cases))
        groups.setdefault(arm, []).append(n)
    return list(groups.values())


def _spread_pick(ns: list, count: int) -> list:
    """The two least, the largest, and evenly spaced ones between: count in all."""
    if len(ns) <= count:
        return list(ns)
    picks = set(ns[:2]) | {ns[-1]}
    picks.update(ns[int(round(i))] for i in np.linspace(2, len(ns) - 2, max(count - 3, 1)))
    return sorted(picks)


def _header(spec, target, lo, hi, revealed, held, sampled, exact, command, arith=None,
            probed=True, extra: dict | None = None) -> A.Header:
    import fpspec

    prov = {
        "inferred_by": f"fpspec {fpspec.__version__} infer_spec",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "revealed": compress(revealed),
        "held_out": compress(held) or "none",
        "sampled": " ".join(str(s.n) for s in sampled) or "none",
        "sampled_ok": all(s.ok for s in sampled),
        "exact": exact,
        "arithmetic_from": probed if isinstance(probed, str) else "probes" if probed
        else "assumed: the target's formats (--no-probe)",
        "command": command,
        **(extra or {}),
    }
    tname = op = None
    formats = None
    if target is not None:
        tname, op = target.name, target.op
        prov["device"] = target.device
        for k, v in target.versions:
            prov[f"version_{k}"] = str(v)
        formats = {"input": target.fmt, "output": target.out_fmt}
        if target.op in ("gemv", "gemm"):
            prov["m"] = target.m
            prov["ncols"] = target.ncols
    return make_header(tname, op, (lo, hi), prov, arith, formats)
