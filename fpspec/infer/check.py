"""A sampled check of a spec at an n too large to reveal in full.

Two independent pieces of evidence, both sampled, neither a proof:

1. targeted queries: l(i, j) asked of the target at pairs chosen to tell the
   spec apart from its nearest alternatives -- the spec with one constant
   moved (a split point, lane count, block size, threshold off by one or by a
   factor of two) or one simple order swapped.  Pairs start at the spec's
   own boundaries (split points, tails, block and lane edges) and random
   pairs; for every alternative the pairs do not yet separate, more pairs
   are searched (predictions come from fpspec.infer.lca, no tree is built).
   The report says how many alternatives the asked pairs separate;
2. a compiled replica (fpspec.compile) run side by side with the target on
   random inputs (fpspec.inputs), compared bit for bit.

No n x n table exists anywhere: the spec side answers each pair by walking
the spec, the target side is one library call per query.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from fpspec.errors import FpspecError, SpecError
from fpspec.infer.lca import spec_l_many
from fpspec.spec import ast as A
from fpspec.spec.expand import chunk_bounds, eval_cond, eval_expr, lets_of

SIMPLE_SWAPS = (A.Seq(), A.Rev(), A.Pairwise(), A.GpuTree())


@dataclass(frozen=True)
class SampledCheck:
    """What a sampled check at one n asked, and what it found."""

    n: int
    pairs: int                 # l(i, j) queries asked of the target
    mismatches: int            # pairs where the target's l differs from the spec's
    first_mismatch: tuple | None  # (i, j, target l, spec l)
    alternatives: int          # nearest alternative specs considered
    separated: int             # ... that the asked pairs tell apart from the spec
    inputs: int                # random inputs run through target and replica
    bit_mismatches: int
    seconds: float
    replica: str = ""          # backend that ran the replica; "" if none ran
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and self.bit_mismatches == 0

    def text(self) -> str:
        s = (f"n = {self.n}: SAMPLED check, {self.pairs} l(i,j) queries, {self.mismatches} disagree "
             f"(chosen to separate {self.separated} of {self.alternatives} nearest alternative specs; "
             f"the other {self.alternatives - self.separated} agree with the spec on every pair tried at this n)")
        if self.replica:
            s += f", {self.inputs} random inputs through the {self.replica} replica ({self.bit_mismatches} differ in bits)"
        if self.first_mismatch:
            i, j, got, want = self.first_mismatch
            s += f"; first disagreement l({i},{j}) = {got}, spec says {want}"
        if self.note:
            s += f"; {self.note}"
        return s

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["ok"] = self.ok
        d["seconds"] = round(self.seconds, 4)
        return d


# ---------------------------------------------------------------- alternatives


def alternatives(spec: A.Spec, limit: int = 48) -> list[A.Spec]:
    """The spec with one thing changed: a constant moved (+-1, x2, /2) or a
    simple order swapped for another."""
    out: list[A.Spec] = []
    seen = {spec}

    def add(s):
        if s not in seen and len(out) < limit:
            seen.add(s)
            out.append(s)

    for path, node in walk(spec):
        if isinstance(node, A.Num):
            c = node.value
            for v in (c - 1, c + 1, 2 * c, c // 2):
                if v >= 1 and v != c:
                    add(replace_at(spec, path, A.Num(v)))
        elif type(node) in {type(s) for s in SIMPLE_SWAPS} and not (isinstance(node, A.Pairwise) and node.split):
            for s in SIMPLE_SWAPS:
                if type(s) is not type(node):
                    add(replace_at(spec, path, s))
    return out


def walk(node, path=()):
    if isinstance(node, (A.Header, A.Range, A.Literal)):
        return
    yield path, node
    if dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            if f.name == "loc":
                continue
            v = getattr(node, f.name)
            if isinstance(v, tuple):
                for i, x in enumerate(v):
                    if dataclasses.is_dataclass(x):
                        yield from walk(x, path + ((f.name, i),))
            elif dataclasses.is_dataclass(v):
                yield from walk(v, path + ((f.name, None),))


def replace_at(node, path, new):
    if not path:
        return new
    (name, i), rest = path[0], path[1:]
    v = getattr(node, name)
    if i is None:
        return dataclasses.replace(node, **{name: replace_at(v, rest, new)})
    items = list(v)
    items[i] = replace_at(items[i], rest, new)
    return dataclasses.replace(node, **{name: tuple(items)})


# ---------------------------------------------------------------- pairs


def boundaries(spec: A.Spec, n: int, limit: int = 160) -> list[int]:
    """Positions where the spec's structure changes: split points, tail
    starts, block and lane edges, along a few paths down the recursion."""
    lets = lets_of(spec)
    out: set[int] = set()
    todo = [(spec.order, 0, n, 0)]
    while todo and len(out) < limit:
        o, lo, m, depth = todo.pop()
        if m <= 2 or depth > 60:
            continue
        while type(o) in (A.Ref, A.Guard, A.Using):
            o = lets[o.name].order if type(o) is A.Ref else o.order if type(o) is A.Using else next(
                (c.order for c in o.cases if eval_cond(c.cond, m)), o.otherwise)
        try:
            if type(o) is A.Split or (type(o) is A.Pairwise):
                h = (m // 2 if o.split is None else eval_expr(o.split, m)) if type(o) is A.Pairwise \
                    else eval_expr(o.at, m)
                out.add(lo + h)
                first = o if type(o) is A.Pairwise else o.first
                rest = o if type(o) is A.Pairwise else o.rest
                # both halves near the top, then the first and last paths only
                if depth < 3 or lo == 0:
                    todo.append((first, lo, h, depth + 1))
                if depth < 3 or lo + m == n:
                    todo.append((rest, lo + h, m - h, depth + 1))
            elif type(o) is A.Tail:
                k = eval_expr(o.k, m)
                p = m - m % k
                out.update((lo + p, lo + p - k))
                if p:
                    todo.append((o.body, lo, p, depth + 1))
            elif type(o) is A.Blocks:
                b = eval_expr(o.b, m)
                out.update(x for x in (lo + b, lo + 2 * b, lo + m - m % b, lo + m - b) if lo < x < lo + m)
                todo.append((o.inner, lo, min(b, m), depth + 1))
            elif type(o) is A.Chunks:
                bounds = chunk_bounds(o.size, m)
                out.update(lo + a for a, _ in bounds[1:])
                for a, b in (bounds[0], bounds[-1]):   # the first and the last chunk's own structure
                    todo.append((o.inner, lo + a, b - a, depth + 1))
            elif type(o) is A.Lanes:
                k = eval_expr(o.k, m)
                if o.left is not None:
                    u = k if o.unroll is None else eval_expr(o.unroll, m)
                    out.update(x for x in (lo + m - m % u - 1, lo + m - m % u) if lo < x < lo + m)
                out.update(x for x in (lo + k - 1, lo + k, lo + 2 * k, lo + m - m % k) if lo < x < lo + m)
            elif type(o) is A.Chain:
                w = eval_expr(o.w, m)
                out.update(x for x in (lo + w, lo + 2 * w, lo + m - m % w) if lo < x < lo + m)
                if o.at is not None and m % w:
                    s = lo + min(eval_expr(o.at, m), m // w) * w   # the short group's ends
                    out.update(x for x in (s, s + m % w) if lo < x < lo + m)
        except SpecError:
            continue
    return sorted(x for x in out if 0 < x < n)


def _pairs_near(xs, n: int, rng) -> list[tuple[int, int]]:
    out = []
    for x in xs:
        for a, b in ((x - 1, x), (x, x + 1), (x - 1, x + 1), (x - 2, x + 2), (x - 8, x), (x, x + 8),
                     (0, x), (x, n - 1), (x - 1, int(rng.integers(0, n)))):
            if 0 <= a < n and 0 <= b < n and a != b:
                out.append((min(a, b), max(a, b)))
    return out


def _random_pairs(n: int, rng, count: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(count):
        i = int(rng.integers(0, n))
        d = int(rng.choice([1, 2, 3, 7, 8, 9, 16, 17, 64, 128, 129, int(rng.integers(1, n))]))
        j = i + d if i + d < n else i - d
        if 0 <= j < n and j != i:
            out.append((min(i, j), max(i, j)))
    return out


def choose_pairs(spec: A.Spec, n: int, rng, *, base: int = 48, near: int = 32, search: int = 128,
                 alts: list | None = None) -> tuple[np.ndarray, int, int]:
    """Pairs separating the spec from its alternatives at n, and a few more.

    A pool of candidate pairs (around the spec's boundaries, and random) is
    predicted for the spec and every alternative; an alternative the pool
    does not separate gets a search of its own.  The pairs asked are then a
    small cover: for every separable alternative one pair that tells it
    apart, plus `near` boundary pairs and `base` random pairs as general
    evidence.  Returns (pairs, alternatives considered, alternatives separated).
    """
    near_pairs = _pairs_near(boundaries(spec, n), n, rng)
    rand_pairs = _random_pairs(n, rng, base)
    pool = np.array(sorted(set(near_pairs + rand_pairs)), dtype=np.int64).reshape(-1, 2)
    want = spec_l_many(spec, n, pool)
    alts = alternatives(spec) if alts is None else alts
    cover: list[np.ndarray] = []  # per separated alternative: the pairs that separate it
    for alt in alts:
        try:
            hit = pool[spec_l_many(alt, n, pool) != want]
            if not len(hit):
                extra = np.array(sorted(set(_pairs_near(boundaries(alt, n), n, rng)
                                            + _random_pairs(n, rng, search))), dtype=np.int64).reshape(-1, 2)
                hit = extra[spec_l_many(alt, n, extra) != spec_l_many(spec, n, extra)]
        except (SpecError, ZeroDivisionError, IndexError, StopIteration, KeyError):
            continue  # the alternative does not apply at this n: nothing to separate
        if len(hit):
            cover.append(hit)
    chosen: set[tuple[int, int]] = set(map(tuple, near_pairs[:near])) | set(map(tuple, rand_pairs))
    for hit in cover:  # greedy: an alternative already separated by a chosen pair needs none
        rows = set(map(tuple, hit.tolist()))
        if not rows & chosen:
            chosen.add(next(iter(sorted(rows))))
    pairs = np.array(sorted(chosen), dtype=np.int64).reshape(-1, 2)
    return pairs, len(alts), len(cover)


# ---------------------------------------------------------------- the check


def sampled_check(spec: A.Spec, target, *, seed: int = 0, inputs: int = 8, replica=None,
                  chunk: int = 256) -> SampledCheck:
    """Check `spec` against `target` (a fpspec.reveal Target) at target.n."""
    from fpspec.reveal.masks import plan_masks
    from fpspec.reveal.oracle import LcaOracle

    from fpspec.spec.expand import check_n

    start = time.perf_counter()
    n = target.n
    check_n(spec, n)  # a spec says nothing outside its range
    rng = np.random.default_rng([seed, n])
    pairs, alts, separated = choose_pairs(spec, n, rng)
    want = spec_l_many(spec, n, pairs)
    note = ""
    plan = plan_masks(target)
    if n - 2 > plan.window:
        got = None
        note = f"n - 2 > {plan.window} units count exactly in {plan.out}; targeted queries skipped"
    elif target.op in ("sum", "dot"):
        got = InPlaceQueries(target, plan).l_many(pairs)
    else:
        oracle = LcaOracle(target, plan)
        got = np.concatenate([oracle.l_many(pairs[i:i + chunk]) for i in range(0, len(pairs), chunk)])
    bad = np.flatnonzero(got != want) if got is not None else np.zeros(0, np.int64)
    first = None
    if bad.size:
        k = int(bad[0])
        first = (int(pairs[k, 0]), int(pairs[k, 1]), int(got[k]), int(want[k]))
    ran, bits, backend = 0, 0, ""
    if replica is not None and inputs:
        backend = replica.backend
        try:
            ran, bits = replica.compare(target, inputs, seed)
        except Exception as e:  # a replica that cannot run here is reported, not fatal
            note = (note + "; " if note else "") + f"replica not run: {type(e).__name__}: {e}"
            backend = ""
    return SampledCheck(n, 0 if got is None else len(pairs), int(bad.size), first, alts, separated,
                        ran, bits, time.perf_counter() - start, backend, note)


class InPlaceQueries:
    """FPRev's l(i, j) on a sum or dot target at large n, one library call per
    pair on one buffer of units changed in place (two entries set, then
    restored): no array of n is made per query, which is what keeps n = 2^24
    at a few milliseconds a query.  Same masks as fpspec.reveal (plan_masks).
    """

    def __init__(self, target, plan):
        self.t, self.plan = target, plan
        n = target.n
        self.x = target.native(np.full(n, plan.a_unit))
        self.y = target.native(np.full(n, plan.b_unit)) if target.op == "dot" else None
        self.calls = 0

    def l_many(self, pairs) -> np.ndarray:
        from fpspec.errors import RevealRefused

        t, p, x, y = self.t, self.plan, self.x, self.y
        n = t.n
        out = np.empty(len(pairs), np.int64)
        for k, (i, j) in enumerate(np.asarray(pairs, np.int64).reshape(-1, 2).tolist()):
            x[i], x[j] = p.a_mask, -p.a_mask
            if y is not None:
                y[i] = y[j] = p.b_mask
            with np.errstate(all="ignore"):
                s = float(t.to_float64(t.fn(x) if y is None else t.fn(x, y)))
            x[i] = x[j] = p.a_unit
            if y is not None:
                y[i] = y[j] = p.b_unit
            self.calls += 1
            c = s / p.u
            if not (np.isfinite(c) and c == round(c) and 0 <= c <= n - 2):
                raise RevealRefused(f"output {s!r} for masks at {i}, {j} is not a whole number of units "
                                    f"in [0, {n - 2}]: the target is not a summation tree over its inputs")
            out[k] = n - int(c)
        return out


class Replica:
    """A spec compiled once (fpspec.compile) and called at any n."""

    def __init__(self, spec: A.Spec, backend: str = "numba"):
        from fpspec.compile import compile_spec, load_replica

        self.backend = backend
        self.source = compile_spec(spec, backend)
        self.module = vars(load_replica(self.source, f"{backend} replica"))   # from a file: numba caches

    def compare(self, target, count: int, seed: int) -> tuple[int, int]:
        """(inputs run, inputs whose outputs differ in bits) on random inputs.

        Inputs are normal values scaled over +-2^12 (so that partial sums
        round differently in different orders), rounded to the input format;
        for products the right operand is random too.  At n = 2^24 a
        NumPy float64 array is 128 MB: the count shrinks with n so that the
        check stays within memory and a minute.
        """
        fn = self.module[target.op]
        n = target.n
        count = max(2, min(count, (1 << 25) // max(n, 1)))
        rng = np.random.default_rng([seed, n, 7])
        differ = 0
        for _ in range(count):
            args = [_random_values(target.fmt, shape, rng) for shape in target.operand_shapes]
            want = np.asarray(target.to_float64(target.fn(*[target.native(a) for a in args])),
                              dtype=np.float64).reshape(target.output_shape)
            got = np.asarray(fn(*[_replica_input(a, target.fmt) for a in args]),
                             dtype=np.float64).reshape(want.shape)
            same = (want.view(np.uint64) == got.view(np.uint64)) | (np.isnan(want) & np.isnan(got))
            differ += int(not np.all(same))
        return count, differ


_NUMPY_DTYPES = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16}


def _random_values(fmt: str, shape, rng) -> np.ndarray:
    """float64 values exact in `fmt`."""
    from fpspec.formats import get_format, round_to

    x = rng.standard_normal(shape)
    x *= np.exp2(rng.integers(-12, 13, shape[-1] if len(shape) else 1).astype(np.float64))
    name = get_format(fmt).name
    if name in _NUMPY_DTYPES:
        return x.astype(_NUMPY_DTYPES[name]).astype(np.float64)
    return round_to(get_format(fmt), x)


def _replica_input(x: np.ndarray, fmt: str) -> np.ndarray:
    from fpspec.formats import get_format

    dt = _NUMPY_DTYPES.get(get_format(fmt).name)
    return x.astype(dt) if dt is not None else x
