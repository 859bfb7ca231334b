"""Probes: find the arithmetic of a black-box target whose tree is known.

FTTN (seed 004) asks a Tensor Core a handful of hand-made questions (1 - 1/2
ulp, 1 + 3 * 1/2 ulp, a subnormal times a normal, ...) and reads the answers
off a table.  Here every question is answered by the exact model instead of a
table (note [expected outcomes]): for a space of candidate arithmetics, the
model predicts the bits of every probe input through the *whole revealed tree*;
the target is run once on the same inputs; the candidates that predict every
output bit for bit survive.  A fact (accumulator format, extra bits, ...) is
determined when all survivors agree on it.

Probe inputs are sparse: a few nonzero terms placed at chosen leaves of the
tree (inside one fused node, or across the node that feeds another its c),
built from a palette of powers of two around a scale 2^B that keeps products,
partial sums and the output representable (note [probe scale]).  Stages:

1. binary nodes: accumulator format x product mode x initial value;
   fused nodes: extra bits x aligned-term rounding x result rounding x
   c in the alignment (x node output format when the target writes fp16);
2. fused nodes: exponent floor x subnormal inputs x subnormal outputs;
3. a check on random inputs of the chosen arithmetic against the target.

Note [expected outcomes]: FTTN's Table III has an error (seed README); the
outcomes here are never tabulated, always computed by fpspec.arith.evaluate.

Note [probe scale]: terms are +-s * 2^(B - d) with s in {1, 3, 5, 7} and
d in 0..40; B is chosen per input format so that the big term and the
smallest term are products of two normal inputs (fp16: B = 14).  Rows whose
values the input format cannot hold exactly are dropped, so a format simply
gets fewer questions; a fact no remaining question can tell apart is
reported as not observable.

Note [indistinguishable candidates]: when several candidates predict every
probe, they agree on every input the probes could build; the first in
preference order is recorded (published parameters and IEEE behaviour first)
and the line says what else fits.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import numpy as np

from fpspec.arith.evaluate import evaluate
from fpspec.arith.fused import FusedParams
from fpspec.arith.model import Arithmetic
from fpspec.arith.params import describe
from fpspec.errors import FpspecError
from fpspec.formats import get_format, round_to
from fpspec.tree import Node, leaves, postorder


@dataclass(frozen=True)
class ProbeReport:
    arithmetic: Arithmetic
    lines: list = field(default_factory=list)   # human-readable findings, one per fact
    consistent: bool = True                      # the arithmetic reproduces every probe and check
    probes: int = 0                              # probe inputs run
    checked: int = 0                             # random inputs compared at the end
    mismatches: int = 0                          # of those, how many differ
    undetermined: tuple = ()                     # dotted fields the probes could not tell apart
                                                 # ("fused.exponent_floor"): compare the others only

    def __str__(self) -> str:
        return "\n".join(self.lines)


# ================================================================ running a target on many accumulations

class _Runner:
    """Runs P accumulations (rows of X, Y with n terms) through a Target."""

    def __init__(self, target):
        self.t = target
        self.calls = 0

    def __call__(self, X, Y=None) -> np.ndarray:
        t = self.t
        X = np.asarray(X, np.float64)
        P, n = X.shape
        Y = np.ones_like(X) if Y is None else np.asarray(Y, np.float64)
        out = np.empty(P)
        if t.op == "sum":
            for i in range(P):
                out[i] = float(t.run(X[i]))
        elif t.op == "dot":
            for i in range(P):
                out[i] = float(t.run(X[i], Y[i]))
        else:
            # gemv / gemm: rows of A share one y (column of B); group probes by y
            groups: dict[bytes, list[int]] = {}
            for i in range(P):
                groups.setdefault(Y[i].tobytes(), []).append(i)
            for idx in groups.values():
                y = Y[idx[0]]
                for start in range(0, len(idx), t.m):
                    chunk = idx[start:start + t.m]
                    A = np.zeros((t.m, n))
                    A[:len(chunk)] = X[chunk]
                    if t.op == "gemv":
                        res = t.run(A, y)
                        out[chunk] = res[:len(chunk)]
                    else:
                        B = np.repeat(y[:, None], t.ncols, axis=1)
                        res = t.run(A, B)
                        out[chunk] = res[:len(chunk), 0]
                    self.calls += 1
            return out
        self.calls += P
        return out


def same_bits(a, b) -> np.ndarray:
    """Elementwise: equal values with equal signs (zeros), NaN equal to NaN."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


# ================================================================ probe inputs

@dataclass
class _Rows:
    """Probe inputs under construction: each row a {leaf: (x, y)} of nonzero terms."""

    n: int
    fmt: object
    product: bool
    rows: list = field(default_factory=list)
    names: list = field(default_factory=list)
    scale: int = 0          # B: "1" of the FTTN tests is 2^B
    fmt_b: object = None    # y's format where it is not x's (torch._scaled_mm e4m3 x e5m2)

    def add(self, terms: dict, name: str = "") -> bool:
        """Add a row of terms {leaf: value} (or {leaf: (x, y)}); False if the format cannot hold it."""
        row = {}
        for leaf, v in terms.items():
            xy = v if isinstance(v, tuple) else _split(v, self.fmt, self.product)
            if xy is None or not (_fits(xy[0], self.fmt) and _fits(xy[1], self.fmt_b or self.fmt)):
                return False
            row[leaf] = xy
        self.rows.append(row)
        self.names.append(name)
        return True

    def arrays(self):
        P = len(self.rows)
        X = np.zeros((P, self.n))
        Y = np.ones((P, self.n))
        for i, row in enumerate(self.rows):
            for leaf, (x, y) in row.items():
                X[i, leaf] = x
                Y[i, leaf] = y
        return X, Y


def _rows(target, fmt, product: bool) -> _Rows:
    fmt_b = getattr(target, "fmt_b", "")
    return _Rows(target.n, fmt, product, fmt_b=get_format(fmt_b) if fmt_b else None)


def _fits(v: float, fmt) -> bool:
    return bool(np.isfinite(v)) and float(round_to(fmt, v)) == v and (v == 0 or abs(v) >= fmt.smallest_subnormal)


def _split(v: float, fmt, product: bool):
    """(x, y) with x * y == v exactly, both held by `fmt` (y = 1 for sums); None if impossible."""
    if not product:
        return (v, 1.0) if _fits(v, fmt) else None
    if v == 0 or not np.isfinite(v):
        return (v, 1.0) if (v == 0 or fmt.has_inf) else None
    if _fits(v, fmt):
        return (v, 1.0)
    m, e = np.frexp(abs(v))            # v = m * 2^e, m in [0.5, 1)
    for ey in range(fmt.emin, fmt.emax + 1):
        x = np.copysign(np.ldexp(m, int(e - ey)), v)
        y = float(np.ldexp(1.0, ey))
        if _fits(x, fmt) and _fits(y, fmt) and x * y == v and abs(x) >= 2.0 ** fmt.emin:
            return (float(x), y)
    return None


def _scale(fmt, product: bool, out_fmt) -> int:
    """B of note [probe scale]: the big term 2^B, small terms down to 2^(B - 40)."""
    lo, hi = (2 * fmt.emin, 2 * fmt.emax) if product else (fmt.emin, fmt.emax)
    hi = min(hi, out_fmt.emax - 2)
    return int(min(hi, max(lo + 40, 0)))


# ================================================================ the tree's places

@dataclass(frozen=True)
class _Places:
    """Where probes go: the fused nodes (leaf children, and the node their result feeds)."""

    n: int
    fused_nodes: tuple        # ((leaf indices...), ...) of every fused node, in postorder
    feeds: tuple              # ((source leaves, target leaves), ...): a subtree that is c of a fused node
    w: int
    ws: tuple = ()            # every w the node sizes allow, w first


def _places(tree) -> _Places:
    fused, feeds = [], []
    for s in postorder(tree):
        if isinstance(s, Node) and s.fused:
            own = tuple(c for c in s.children if isinstance(c, int))
            fused.append(own)
            for c in s.children:
                if not isinstance(c, int):
                    feeds.append((tuple(leaves(c)), own))
    # a chain's first group of one shows as a node of w + 1 leaves without c
    # (fpspec.arith.evaluate note [fused nodes]); a chain's last group may be short,
    # so a node with c says only w >= its size: w is the largest node, or one less
    # where that node has no c (its first product a group of its own)
    with_c = {own for _, own in feeds}
    most_c = max((len(f) for f in with_c), default=0)
    most_bare = max((len(f) for f in fused if f not in with_c), default=0)
    ws = [max(most_c, most_bare)]
    if most_bare - 1 >= max(most_c, 1):
        ws.insert(0 if most_bare - 1 == most_c else 1, most_bare - 1)
    return _Places(len(leaves(tree)), tuple(fused), tuple(feeds), ws[0], tuple(ws))


# ================================================================ candidate spaces

def _accumulators(fmt) -> list[str]:
    out = [f for f in ("fp32", "fp64", "fp16", "bf16")
           if get_format(f).precision >= fmt.precision and get_format(f).emax >= fmt.emax]
    return out or [fmt.name]


def products_fit(fmt, acc) -> bool:
    """Whether every product of two `fmt` values is an `acc` value: its bits and its exponent
    (bf16 and tf32 products fit fp32's significand, not its range: 2^127 * 2^127 overflows)."""
    return (2 * fmt.precision <= acc.precision and 2 * fmt.emax + 1 <= acc.emax
            and 2 * (fmt.emin - fmt.precision + 1) >= acc.emin - acc.precision + 1)


def _binary_candidates(target, accs=None) -> list[Arithmetic]:
    fmt = target.format
    accs = _accumulators(fmt) if accs is None else accs
    if target.op == "sum":
        products = ["none"]
    else:   # exact products are not defined past 26-bit inputs (fpspec.arith.evaluate note [exact products])
        products = ["exact", "rounded", "fma", "fma_first"] if fmt.precision <= 26 else ["rounded", "fma", "fma_first"]
    out = []
    for acc, product, init in itertools.product(accs, products, ("none", "+0.0")):
        out.append(Arithmetic(input=fmt.name, product=product, accumulator=acc, init=init,
                              output=target.out_fmt))
        if product == "rounded" and acc != fmt.name:   # products rounded to the input format
            out.append(Arithmetic(input=fmt.name, product=product, accumulator=acc, init=init,
                                  output=target.out_fmt, product_format=fmt.name))
    # preference (note [indistinguishable candidates]): the output format as accumulator, then
    # exact products where they fit the accumulator, else rounded before fma before exact
    def rank(a: Arithmetic):
        acc = get_format(a.accumulator)
        fits = products_fit(fmt, acc)
        order = (["exact", "rounded", "fma"] if fits else ["rounded", "fma", "exact"]) + ["fma_first", "none"]
        return (a.accumulator != target.out_fmt and a.accumulator != "fp32", acc.precision,
                order.index(a.product), a.product_format is not None, a.init != "none")
    return sorted(out, key=rank)


def _fused_candidates(target, w: int, stage1: FusedParams | None = None,
                      stage2_flags: list | None = None) -> list[Arithmetic]:
    """Stage 1 (stage1 None): the alignment space; stage 2: subnormal flags (floor none),
    then the exponent floors for the flags that survived (stage2_flags)."""
    fmt = target.format
    fused_in = fmt.name if fmt.name in ("fp16", "bf16", "tf32", "fp8e4m3", "fp8e5m2") else "fp32"
    outs = ["fp32"] + (["fp16"] if target.out_fmt == "fp16" else [])
    product = "none" if target.op == "sum" else "exact"
    cands = []
    if stage1 is None:
        # extra bits searched in -4..6; fp8 units keep fewer bits than fp32 (H100: -10), so -12..6
        extras = range(-12, 7) if fused_in.startswith("fp8") else range(-4, 7)
        for out, extra, aligned, result, c_al in itertools.product(
                outs, extras, ("truncate", "floor", "rne"), ("rz", "rne"), (True, False)):
            p = FusedParams(w, extra, aligned, result, c_al, None, True, True, fused_in, out,
                            input_b=getattr(target, "fmt_b", "") or None)   # B in its own format
            cands.append(Arithmetic(fmt.name, product, out, "none", target.out_fmt, p))
        # published behaviour first: truncate, rz, c aligned, then by extra bits nearest 2
        cands.sort(key=lambda a: (a.fused.output != "fp32", a.fused.aligned != "truncate",
                                  a.fused.result != "rz", not a.fused.c_aligned, abs(a.fused.extra_bits - 2)))
        return cands
    flags = stage2_flags or [(True, True), (True, False), (False, True), (False, False)]
    floors = [None]
    if stage2_flags is not None:
        lo, hi = (-40, -2) if stage1.output == "fp16" else (-160, -100)
        floors += list(range(lo, hi + 1))
    for (sub_in, sub_out), floor in itertools.product(flags, floors):
        p = replace(stage1, exponent_floor=floor, subnormal_inputs=sub_in, subnormal_outputs=sub_out)
        cands.append(Arithmetic(fmt.name, product, stage1.output, "none", target.out_fmt, p))
    return cands


# ================================================================ probe families

_MULTS = (1.0, 3.0, 5.0, 7.0)


def _binary_rows(target, tree, rng, count: int, pool=None) -> _Rows:
    """Probes of binary nodes; with `pool` (leaf indices) only those leaves get terms."""
    fmt = target.format
    product = target.op != "sum"
    rows = _rows(target, fmt, product)
    n = target.n
    pool = np.arange(n) if pool is None else np.asarray(sorted(pool))
    inside = set(pool.tolist())
    B = _scale(fmt, product, target.output_format)
    # init and signed zeros: every term -0.0
    rows.add({k: (-0.0, 1.0) for k in pool.tolist()}, "all terms -0.0")
    rows.add({k: (0.0, 1.0) for k in pool.tolist()}, "all terms +0.0")
    p = fmt.precision
    if product:     # fma vs exact: a product that does not fit, against its rounding, at both leaves of a node
        pairs = [s.children for s in postorder(tree)
                 if isinstance(s, Node) and not s.fused and len(s.children) == 2
                 and all(isinstance(c, int) and c in inside for c in s.children)][:8]
        h = B // 2
        for i, j in pairs:
            for a, b in ((i, j), (j, i)):
                x, y = 1.0 + 2.0 ** -(p - 1), 1.0 + 2.0 ** -(p - 2)
                rows.add({a: (x * 2.0 ** h, y * 2.0 ** (B - h)), b: (-(1.0 + 2.0 ** -(p - 2)) * 2.0 ** h,
                                                                   2.0 ** (B - h))}, "")
        # products past fp32's range that cancel (bf16, tf32 inputs): exact gives 0, products
        # rounded to fp32 inf - inf = nan, an FMA inf (the probes above fit the range)
        big = fmt.emax // 2 + 64
        if pairs and not products_fit(fmt, get_format("fp32")) and big <= fmt.emax:
            i, j = pairs[0]
            rows.add({i: (2.0 ** big, 2.0 ** big), j: (2.0 ** big, -(2.0 ** big))}, "products past fp32's range")
    for _ in range(count):
        k = int(rng.integers(2, 5))
        where = [int(v) for v in rng.choice(pool, size=min(k, len(pool)), replace=False)]
        kind = rng.integers(0, 3)
        terms = {}
        if kind == 0:       # cancellation: +-2^B at two leaves, small terms elsewhere
            terms[where[0]] = 2.0 ** B
            if len(where) > 1:
                terms[where[1]] = -(2.0 ** B)
            for leaf in where[2:]:
                terms[leaf] = float(rng.choice([-1, 1]) * rng.choice(_MULTS) * 2.0 ** (B - int(rng.integers(1, 56))))
        elif kind == 1:     # rounding: 2^B + small terms
            for leaf in where:
                terms[leaf] = float(rng.choice([-1, 1]) * rng.choice(_MULTS) * 2.0 ** (B - int(rng.integers(0, 56))))
        else:               # products that do not fit: (1 + 2^-a)(1 + 2^-b) against its rounding
            a, b = (int(v) for v in rng.integers(max(1, p // 2 - 2), p, size=2))
            x, y = 1.0 + 2.0 ** -a, 1.0 + 2.0 ** -b
            if product and len(where) > 1:
                terms[where[0]] = (x * 2.0 ** (B // 2), y * 2.0 ** (B - B // 2))
                terms[where[1]] = (-(1.0 + 2.0 ** -min(a, b)) * 2.0 ** (B // 2), 2.0 ** (B - B // 2))
            else:
                terms[where[0]] = x * y * 2.0 ** B
        rows.add(terms)
    return rows


def _fused_rows(target, places: _Places, rng, count: int) -> _Rows:
    fmt = target.format
    product = target.op != "sum"
    rows = _rows(target, fmt, product)
    B = _scale(fmt, product, target.output_format)
    nodes = [f for f in places.fused_nodes if len(f) >= 2] or list(places.fused_nodes)

    def small(d_lo=1, d_hi=40):
        return float(rng.choice([-1, 1]) * rng.choice(_MULTS) * 2.0 ** (B - int(rng.integers(d_lo, d_hi))))

    rows.scale = B
    _fttn_rows(rows, places, B)
    # c in the alignment: c odd in the output's last place, an output tie on top, a tiny term below the
    # grid: truncated with c (an exact tie, rounds to even: up) or kept (just below the tie: down)
    p_out = target.output_format.precision
    for src, dst in places.feeds[:2]:
        if len(dst) >= 2:
            for d in (26, 30, 34):
                c = (1.0 + 2.0 ** (1 - p_out)) * 2.0 ** B
                rows.add({src[0]: c, dst[0]: 2.0 ** (B - p_out), dst[1]: -(2.0 ** (B - d))})
                rows.add({src[0]: -c, dst[0]: -(2.0 ** (B - p_out)), dst[1]: 2.0 ** (B - d)})
    for _ in range(count):
        kind = int(rng.integers(0, 5))
        node = nodes[int(rng.integers(len(nodes)))]
        slots = [int(v) for v in rng.permutation(node)]
        terms = {}
        if kind == 0 and len(slots) >= 3:       # cancel inside one node; what survives is the truncation
            terms[slots[0]], terms[slots[1]] = 2.0 ** B, -(2.0 ** B)
            for leaf in slots[2:2 + int(rng.integers(1, 4))]:
                terms[leaf] = small()
        elif kind == 1:                         # rounding of the result
            terms[slots[0]] = float(rng.choice([-1, 1]) * 2.0 ** B)
            for leaf in slots[1:1 + int(rng.integers(1, 4))]:
                terms[leaf] = small()
        elif kind == 2 and places.feeds:       # c from an earlier node, small products in the next
            src, dst = places.feeds[int(rng.integers(len(places.feeds)))]
            if not dst:
                continue
            # c odd in the output's last place half the time, so an output tie on top of it rounds up
            odd = 2.0 ** (1 - target.output_format.precision) if rng.random() < 0.5 else 0.0
            big = float(rng.choice([-1, 1]) * (1.0 + odd) * 2.0 ** B)
            terms[int(rng.choice(src))] = big
            picked = [int(v) for v in rng.permutation(dst)][:int(rng.integers(1, 4))]
            for leaf in picked:
                terms[leaf] = small()
            if rng.random() < 0.5:       # a tie of the output format on top of c: tiny terms decide it
                terms[picked[0]] = float(np.sign(big) * 2.0 ** (B - target.output_format.precision))
            # cancel the big c in a later node when there is one, so the output keeps the low bits
            later = [own for (s, own) in places.feeds if set(dst) <= set(s) and own]
            if later and rng.random() < 0.7:
                terms[int(later[0][0])] = -big
        elif kind == 3 and len(slots) >= 3:     # carries: the result has more bits than the grid
            for leaf in slots[:2]:
                terms[leaf] = float(rng.choice((1.0, 1.5, 1.75)) * 2.0 ** B)
            for leaf in slots[2:2 + int(rng.integers(1, 3))]:
                terms[leaf] = small()
        else:                                   # near an output tie: 2^B + 2^(B - p_out) + tiny
            terms[slots[0]] = 2.0 ** B
            if len(slots) > 1:
                terms[slots[1]] = 2.0 ** (B - target.output_format.precision)
            for leaf in slots[2:2 + int(rng.integers(1, 3))]:
                terms[leaf] = small(20, 32)
        rows.add(terms)
    return rows


def _fttn_rows(rows: _Rows, places: _Places, B: int) -> None:
    """FTTN's feature tests, placed in the first fused node (ulp: of 1.0 in fp32)."""
    node = max(places.fused_nodes, key=len)
    one, ulp = 2.0 ** B, 2.0 ** (B - 23)
    if len(node) >= 2:
        rows.add({node[0]: one, node[1]: -ulp / 2}, "T_1_bit: 1 - ulp/2")
        rows.add({node[0]: one, node[1]: ulp / 2}, "T_rnd_dir: 1 + ulp/2")
        rows.add({node[0]: -one, node[1]: -ulp / 2}, "T_rnd_dir: -1 - ulp/2")
        rows.add({node[0]: one, node[1]: ulp / 2 + ulp / 4}, "T_rnd_dir: 1 + 3/4 ulp")
    if len(node) >= 4:
        rows.add({node[0]: one, node[1]: ulp / 2, node[2]: ulp / 2, node[3]: ulp / 2},
                 "T_pres_extra_acc: 1 + 3 * ulp/2")
        rows.add({node[0]: one, node[1]: -one, node[2]: ulp / 4, node[3]: ulp / 8},
                 "T_3_bits: 1 - 1 + ulp/4 + ulp/8")


def _subnormal_rows(target, places: _Places, stage1: FusedParams, rng, count: int) -> _Rows:
    """Subnormal handling: FTTN's T_si_no, T_ni_so and T_sa, placed in the tree's fused nodes."""
    fmt = target.format
    product = target.op != "sum"
    rows = _rows(target, fmt, product)
    node = max(places.fused_nodes, key=len)
    out = get_format(stage1.output)
    F = stage1.fraction_bits
    sub_in = fmt.smallest_subnormal * 4
    # T_si_no: a subnormal input times a normal, product normal
    for e in range(0, 40):
        if rows.add({node[0]: (sub_in, 2.0 ** (fmt.emax - e))}, "T_si_no: subnormal input, normal product"):
            break
    # T_ni_so: normal inputs, subnormal result; T_sa: subnormal c through the chain
    tiny = max(out.smallest_subnormal, target.output_format.smallest_subnormal)   # survives the final cast
    for k in range(1, 6):
        v = tiny * (2 ** k + 1)
        rows.add({node[0]: v}, "T_ni_so: subnormal product" if k == 1 else "")
        if places.feeds:
            src, dst = places.feeds[0]
            rows.add({src[0]: v}, "T_sa: subnormal c" if k == 1 else "")
    return rows


def _floor_rows(target, places: _Places, stage1: FusedParams, rng, count: int) -> _Rows:
    """A block whose largest exponent E sweeps past the candidate floors: below the floor the
    grid is 2^(floor - F), so a term 2^(E - d) with d <= F survives or not (note [exponent floor])."""
    fmt = target.format
    rows = _rows(target, fmt, target.op != "sum")
    node = max(places.fused_nodes, key=len)
    F = stage1.fraction_bits
    lo = -45 if stage1.output == "fp16" else -165
    if len(node) >= 2:
        for E in range(lo, lo + 70):
            for d in (F // 2, F - 2, F):
                for sign in (1.0, -1.0):
                    rows.add({node[0]: 2.0 ** E, node[1]: sign * 2.0 ** (E - d)})
    for _ in range(count):
        E = int(rng.integers(lo, lo + 70))
        slots = [int(v) for v in rng.permutation(node)][:3]
        rows.add({s: float(rng.choice([-1, 1]) * 2.0 ** (E - int(rng.integers(0, F + 6)))) for s in slots})
    return rows


# ================================================================ matching

def _select(cands, tree, X, Y, outputs, product: bool, first: int = 48):
    """Candidates whose model predicts every output bit for bit, and each one's mismatch count.

    Most candidates fail on the first rows: those are tried first on all candidates
    and the rest only on the survivors (same answer, a fraction of the work).
    """
    P = len(outputs)
    head = np.unique(np.linspace(0, P - 1, min(first, P)).astype(int))   # spread over every family
    rest = np.setdiff1d(np.arange(P), head)
    misses = [_misses(a, tree, X[head], Y[head], outputs[head], product) for a in cands]
    if rest.size:
        for k, a in enumerate(cands):
            if misses[k] == 0:
                misses[k] = _misses(a, tree, X[rest], Y[rest], outputs[rest], product)
    keep = [a for a, bad in zip(cands, misses) if bad == 0]
    return keep, misses


def _misses(a, tree, X, Y, outputs, product) -> int:
    with np.errstate(all="ignore"):
        pred = evaluate(tree, X.T, Y.T if product else None, a)
    return int((~same_bits(pred, outputs)).sum())


def _differing(cands, names) -> list[str]:
    """Dotted field names on which the surviving candidates disagree."""
    out = []
    for name in names:
        obj_attr = name.split(".")
        values = set()
        for a in cands:
            v = a
            for part in obj_attr:
                v = getattr(v, part)
            values.add(v)
        if len(values) > 1:
            out.append(name)
    return out


def _fact(name, values, chosen, fmt=str) -> str:
    vals = []
    for v in values:
        if v not in vals:
            vals.append(v)
    if len(vals) == 1:
        return f"{name}: {fmt(chosen)}"
    others = ", ".join(fmt(v) for v in vals if v != chosen)
    return f"{name}: {fmt(chosen)} (the probes cannot tell; {others} also fits)"


# ================================================================ the entry point

# Note [observed output format]: a black box may return results in a format
# wider than its inputs (fp16 or bf16 terms accumulated and returned in fp32)
# while its values travel as float64 (replicas, bf16 without a numpy dtype),
# so the output format the target declares is only a floor.  Every candidate
# arithmetic casts its result to the output format, so a declared format that
# is too narrow leaves no candidate at all, and a later search over parts of
# the tree settles on a wrong one (init none for +0.0).  The results of random
# full-significand inputs tell the format: the narrowest of the declared one,
# fp32 and fp64 that holds them all.
OUTPUT_ROWS = 32


def observed_output_format(target, run=None) -> str:
    """The narrowest of target.out_fmt, fp32, fp64 holding the target's results
    on random inputs (note [observed output format])."""
    declared = target.output_format
    wider = [declared.name] + [f for f in ("fp32", "fp64") if get_format(f).precision > declared.precision
                               and get_format(f).emax >= declared.emax]
    if len(wider) == 1:
        return declared.name
    X, Y = _random_inputs(target, np.random.default_rng([target.n, 11]), OUTPUT_ROWS)
    got = (run or _Runner(target))(X, Y)
    got = got[np.isfinite(got)]
    for name in wider:
        with np.errstate(all="ignore"):
            if np.array_equal(np.asarray(round_to(get_format(name), got), np.float64), got):
                return name
    return wider[-1]


def probe_arithmetic(target, tree, *, seed: int = 0, rows: int = 300, checks: int = 64) -> ProbeReport:
    """Find the arithmetic of `target` (a fpspec.reveal.targets.Target) whose order is `tree`.

    Probe inputs go inside the nodes the tree identifies; expected outcomes
    come from the exact model (fpspec.arith.evaluate), never from a table.
    A revealed tree with fused nodes is also probed with its chain pairs fused
    (note [chain pairs]); the first whose random check passes is kept.
    """
    report = _probe_tree(target, tree, seed=seed, rows=rows, checks=checks)
    paired = chain_pairs_fused(tree)
    if report.consistent or paired is tree:
        return report
    other = _probe_tree(target, paired, seed=seed, rows=rows, checks=checks)
    if not other.consistent:
        return report
    return replace(other, lines=other.lines[:1] + [
        "binary nodes of the chain (its first group of two products, its last node over one) probed as "
        "fused pairs: a fused node of two children reveals as a binary node"] + other.lines[1:])


# Note [probe ties]: the fused probes place a few terms so that each field
# shows on its own; some fields (the result rounding under truncated
# alignment, say) then fit every probe both ways and differ only where many
# terms meet.  Those ties are broken on random inputs over the whole tree:
# the candidates with the fewest differing outputs stay.

# Note [chain pairs]: a fused node of two children has the l(i, j) of a
# binary node (fpspec.tree.observable), so a revealed chain shows its first
# group of two products, and its last node over one product, as binary nodes.
# Probed as binary additions they give wrong fused parameters (or none), so a
# tree with fused nodes is probed again with those nodes fused.
def chain_pairs_fused(tree):
    """`tree` with its chain's binary nodes fused: a node of two leaves that is the first
    child of a fused node, and a node (fused node, leaf); `tree` itself when there are none."""
    if not any(isinstance(s, Node) and s.fused for s in postorder(tree)):
        return tree
    results: list = []
    changed = False
    for s in postorder(tree):
        if isinstance(s, int):
            results.append(s)
            continue
        k = len(s.children)
        kids = list(results[-k:])
        del results[-k:]
        first = kids[0]
        if (s.fused and isinstance(first, Node) and not first.fused and len(first.children) == 2
                and all(isinstance(c, int) for c in first.children)):
            kids[0], changed = Node(first.children, True), True
        fused = s.fused
        if (not fused and k == 2 and isinstance(first, Node) and first.fused
                and isinstance(kids[1], int)):
            fused, changed = True, True
        results.append(Node(tuple(kids), fused))
    return results[0] if changed else tree


def _probe_tree(target, tree, *, seed: int, rows: int, checks: int) -> ProbeReport:
    if len(leaves(tree)) != target.n:
        raise FpspecError(f"the tree has {len(leaves(tree))} leaves but the target sums n = {target.n} terms")
    rng = np.random.default_rng(seed)
    run = _Runner(target)
    product = target.op != "sum"
    places = _places(tree)
    lines = [f"probes on {target.describe()}"]
    out_fmt = observed_output_format(target, run)
    if out_fmt != target.out_fmt:
        lines.append(f"output format: {out_fmt} (results the target's declared {target.out_fmt} cannot hold)")
        target = replace(target, out_fmt=out_fmt)
        run.t = target
    total = 0
    if places.fused_nodes:
        r = _fused_rows(target, places, rng, rows)
        X, Y = r.arrays()
        got = run(X, Y)
        total += len(got)
        for w in places.ws:
            keep, misses = _select(_fused_candidates(target, w), tree, X, Y, got, product)
            if keep:
                places = replace(places, w=w)
                break
        else:
            return _refuse(target, lines, "fused nodes", misses, _fused_candidates(target, places.w), total,
                           tree, X, Y, got)
        if len(keep) > 1:
            # note [probe ties]: fields the probes leave open are chosen on random inputs
            Xr, Yr = _random_inputs(target, rng, checks)
            gotr = run(Xr, Yr)
            total += len(gotr)
            scores = [_misses(a, tree, Xr, Yr, gotr, product) for a in keep]
            keep = [a for a, m in zip(keep, scores) if m == min(scores)]
        best = keep[0]
        _fttn_lines(lines, r, got)
        lines.append(f"fused nodes: w = {places.w} products per node (from the tree)")
        lines.append(_fact("node result format", [a.fused.output for a in keep], best.fused.output))
        lines.append(_fact("extra alignment bits", [a.fused.extra_bits for a in keep], best.fused.extra_bits))
        lines.append(_fact("aligned terms", [a.fused.aligned for a in keep], best.fused.aligned,
                           lambda v: {"truncate": "truncated toward zero (sign-magnitude)",
                                      "floor": "rounded toward -inf", "rne": "rounded to nearest even"}[v]))
        lines.append(_fact("result rounding", [a.fused.result for a in keep], best.fused.result,
                           lambda v: {"rz": "toward zero", "rne": "to nearest even"}[v]))
        lines.append(_fact("c in the alignment", [a.fused.c_aligned for a in keep], best.fused.c_aligned,
                           lambda v: "yes" if v else "no (added after the products are aligned)"))
        # 2. subnormal handling (floor none), then the exponent floor for the flags that fit
        r2 = _subnormal_rows(target, places, best.fused, rng, rows // 3)
        X2, Y2 = r2.arrays()
        got2 = run(X2, Y2)
        cands2 = _fused_candidates(target, places.w, best.fused)
        keep2, _ = _select(cands2, tree, X2, Y2, got2, product)
        _fttn_lines(lines, r2, got2)
        flags = [(a.fused.subnormal_inputs, a.fused.subnormal_outputs) for a in keep2] or None
        r3 = _floor_rows(target, places, best.fused, rng, rows // 3)
        X3, Y3 = r3.arrays()
        got3 = run(X3, Y3)
        total += len(got2) + len(got3)
        cands3 = _fused_candidates(target, places.w, best.fused, flags or [(True, True)])
        keep3, misses3 = _select(cands3, tree, X3, Y3, got3, product)
        keep2, _ = _select(keep3, tree, X2, Y2, got2, product)
        if not keep2:
            return _refuse(target, lines, "exponent floor and subnormals", misses3, cands3, total,
                           tree, X3, Y3, got3)
        best = keep2[0]
        floors = [a.fused.exponent_floor for a in keep2]
        if len(set(floors)) > 1:
            lines.append(f"exponent floor: not observable with {target.fmt} inputs and these outputs "
                         f"({len(set(floors))} values fit); recorded as {best.fused.exponent_floor}")
        else:
            lines.append(f"exponent floor: {best.fused.exponent_floor}")
        lines.append(_fact("subnormal inputs", [a.fused.subnormal_inputs for a in keep2],
                           best.fused.subnormal_inputs, lambda v: "kept" if v else "flushed to zero"))
        lines.append(_fact("subnormal outputs and accumulation", [a.fused.subnormal_outputs for a in keep2],
                           best.fused.subnormal_outputs, lambda v: "kept" if v else "flushed to zero"))
        undetermined = _differing(keep, ["fused.output", "fused.extra_bits", "fused.aligned", "fused.result",
                                         "fused.c_aligned"])
        undetermined += _differing(keep2, ["fused.exponent_floor", "fused.subnormal_inputs",
                                          "fused.subnormal_outputs"])
        known = describe(best.fused)
        if known:
            lines.append(f"fused parameters equal the published set {known}")
        arith = best
    else:
        r = _binary_rows(target, tree, rng, rows)
        X, Y = r.arrays()
        got = run(X, Y)
        total += len(got)
        cands = _binary_candidates(target)
        keep, misses = _select(cands, tree, X, Y, got, product)
        if not keep:
            return _refuse(target, lines, "binary nodes", misses, cands, total, tree, X, Y, got)
        arith = keep[0]
        undetermined = _differing(keep, ["accumulator", "product", "product_format", "init"])
        lines.append(_fact("accumulator", [a.accumulator for a in keep], arith.accumulator))
        if product:
            fits = 2 * target.format.precision <= get_format(arith.accumulator).precision
            prods = [a.product for a in keep if a.accumulator == arith.accumulator]
            if fits and len(set(prods)) == 3:
                lines.append(f"products: exact ({target.fmt} products fit {arith.accumulator}: "
                             "exact, rounded and fma agree)")
            else:
                lines.append(_fact("products", prods, arith.product))
            if arith.product_format:
                lines[-1] += f", to {arith.product_format}, then added in {arith.accumulator}"
        lines.append(_fact("initial value", [a.init for a in keep], arith.init,
                           lambda v: "+0.0 (a sum of -0.0 terms gives +0.0)" if v == "+0.0"
                           else "none (a sum of -0.0 terms gives -0.0)"))
    lines.append(f"output: cast to {arith.output}, nearest even")
    # 3. check the whole arithmetic on random inputs
    Xc, Yc = _random_inputs(target, rng, checks)
    gotc = run(Xc, Yc)
    with np.errstate(all="ignore"):
        pred = evaluate(tree, Xc.T, Yc.T if product else None, arith)
    bad = int((~same_bits(pred, gotc)).sum())
    lines.append(f"check: {checks} random inputs, {checks - bad} equal to the model bit for bit"
                 + ("" if not bad else f", {bad} DIFFER"))
    lines.append(f"{total + checks} probe inputs, {run.calls} target calls")
    return ProbeReport(arith, lines, bad == 0, total, checks, bad, tuple(undetermined))


def _fttn_lines(lines, r: _Rows, got):
    """One line per FTTN-named probe: the target's answer in units of "1" = 2^B (the chosen model agrees)."""
    for i, name in enumerate(r.names):
        if name:
            v = float(got[i]) / 2.0 ** r.scale
            lines.append(f"{name} -> {float.hex(v)} ({v!r})" + (f" x 2^{r.scale}" if r.scale else ""))


def _refuse(target, lines, what, misses, cands, total, tree=None, X=None, Y=None, got=None) -> ProbeReport:
    """No candidate fits: name the closest and the first probe it gets wrong (which leaves)."""
    best = int(np.argmin(misses))
    if tree is not None:      # misses of candidates dropped early count only the first rows: recount the closest
        order = [int(k) for k in np.argsort(misses, kind="stable")[:6]]
        full = {k: _misses(cands[k], tree, X, Y, got, target.op != "sum") for k in order}
        best = min(order, key=full.get)
        misses = list(misses)
        misses[best] = full[best]
    closest = cands[best]
    lines.append(f"{what}: no arithmetic in the model's space reproduces {target.name} "
                 f"(closest misses {misses[best]} of {total} probes: {_describe(closest)})")
    if tree is not None:
        with np.errstate(all="ignore"):
            pred = evaluate(tree, X.T, Y.T if target.op != "sum" else None, closest)
        bad = np.flatnonzero(~same_bits(pred, got))
        if bad.size:
            i = int(bad[0])
            where = np.flatnonzero(X[i]).tolist()
            lines.append(f"first differing probe: nonzero terms at leaves {where[:12]}, "
                         f"target {float(got[i])!r}, model {float(pred[i])!r} "
                         "(parts of the tree may use different arithmetic)")
    return ProbeReport(closest, lines, False, total, 0, misses[best])


def _describe(a: Arithmetic) -> str:
    text = f"accumulator {a.accumulator}, products {a.product}"
    if a.product_format:
        text += f" to {a.product_format}"
    if a.fused:
        f = a.fused
        text += f", fused w={f.w} extra_bits={f.extra_bits} {f.aligned} {f.result}"
    return text


def _random_inputs(target, rng, count: int):
    """Random terms of the input format: wide exponents, mixed signs, some zeros."""
    fmt = target.format
    n = target.n
    lo = max(fmt.emin, -20)
    hi = min(fmt.emax - int(np.ceil(np.log2(n))) - 2, 20)
    if target.op != "sum":
        hi = min(hi, (fmt.emax - int(np.ceil(np.log2(n)))) // 2 - 1)
        lo = max(lo, fmt.emin // 2)
    e = rng.integers(lo, hi + 1, size=(count, n))
    X = round_to(fmt, rng.uniform(1, 2, size=(count, n)) * np.exp2(e) * rng.choice([-1, 1], size=(count, n)))
    X[rng.random((count, n)) < 0.05] = 0.0
    if target.op == "sum":
        return X, np.ones_like(X)
    e2 = rng.integers(lo, hi + 1, size=(count, n))
    Y = round_to(fmt, rng.uniform(1, 2, size=(count, n)) * np.exp2(e2) * rng.choice([-1, 1], size=(count, n)))
    return X, _b_values(target, Y)


def _b_values(target, Y):
    """Y rounded to B's own format where the target reads B in another (torch._scaled_mm e4m3 x e5m2)."""
    fmt_b = getattr(target, "fmt_b", "")
    if not fmt_b or fmt_b == target.fmt:
        return Y
    f = get_format(fmt_b)
    return round_to(f, np.clip(Y, -f.largest, f.largest))


# ================================================================ regions: parts of one tree in their own arithmetic

# Note [region probes]: a spec may give parts of the tree their own arithmetic
# (fpspec.arith.evaluate note [regions]); OpenBLAS sdot runs an fp32 FMA
# kernel over the first n & -32 terms and adds its result and the leftover
# products (rounded to fp32) in fp64.  One arithmetic for the whole tree
# then fails the sample check.  A region is probed with terms only at the
# leaves its nodes take (zeros elsewhere: a zero is neutral for sums,
# rounded products and FMA, so the other nodes pass the region's result on
# exactly); the joining nodes are then chosen with the regions fixed, on
# random inputs over the whole tree.  The result is kept only if the sample
# check (random and special inputs) agrees bit for bit.


def _region_map(names: dict, chosen: dict) -> dict:
    """node key -> Arithmetic, from node key -> region name and name -> Arithmetic."""
    return {key: chosen[name] for key, name in names.items() if name in chosen}


def _region_leaves(tree, names: dict, name) -> list:
    """The leaves the nodes of region `name` take as children (name None: the joining nodes)."""
    out = []
    for s in postorder(tree):
        if isinstance(s, Node) and names.get((s.first, s.size)) == name:
            out += [c for c in s.children if isinstance(c, int)]
    return out


def _leaves_below(tree, names: dict, name) -> list:
    """Every leaf under a node of region `name`."""
    out: set = set()
    for s in postorder(tree):
        if isinstance(s, Node) and names.get((s.first, s.size)) == name:
            out.update(leaves(s))
    return sorted(out)


def _misses_regions(main, regions, tree, X, Y, outputs, product) -> int:
    with np.errstate(all="ignore"):
        pred = evaluate(tree, X.T, Y.T if product else None, main, regions)
    return int((~same_bits(pred, outputs)).sum())


def _dense_rows(target, rng, count: int, pool) -> tuple:
    """Random full-significand terms at the leaves of `pool`, zeros elsewhere."""
    X, Y = _random_inputs(target, rng, count)
    outside = np.setdiff1d(np.arange(target.n), np.asarray(pool, dtype=int))
    X[:, outside] = 0.0
    return X, Y


def _double_rounding_rows(rows: _Rows, target, tree, names: dict, rng, count: int = 24) -> None:
    """Terms that tell a join rounding once from one rounding to a wider format
    first: 2^B in one part, 2^(B - p) and +-2^(B - p - 30) in another (p: output
    precision), so the exact sum lies just off an output midpoint."""
    parts = {}
    for name in set(names.values()) | {None}:
        leaves = sorted(set(_region_leaves(tree, names, name)))
        if leaves:
            parts[name] = leaves
    keys = list(parts)
    if len(keys) < 2:
        return
    B = _scale(target.format, target.op != "sum", target.output_format)
    p = target.output_format.precision
    for _ in range(count):
        i, j = rng.choice(len(keys), size=2, replace=False)
        big, small = parts[keys[i]], parts[keys[j]]
        if len(small) < 2:
            continue
        a = int(rng.choice(big))
        b, c = (int(v) for v in rng.choice(small, size=2, replace=False))
        rows.add({a: 2.0 ** B, b: 2.0 ** (B - p), c: float(rng.choice([-1, 1])) * 2.0 ** (B - p - 30)})


def sample_inputs(target, seed: int = 0, count: int = 256) -> tuple:
    """Rows (X, Y) for the sample check: random terms (note [probe scale]) and
    fpspec.inputs' families (uniform bits, wide exponents, cancellation, signed
    zeros, subnormals, inf and nan), one accumulation a row."""
    from fpspec.inputs import samples

    rng = np.random.default_rng(seed)
    X, Y = _random_inputs(target, rng, count)
    op = "sum" if target.op == "sum" else "dot"
    xs, ys = [], []
    for s in samples(op, target.n, target.fmt, max(14, count // 8), seed=seed):
        xs.append(np.asarray(s.args[0], np.float64))
        ys.append(np.asarray(s.args[1], np.float64) if op == "dot" else np.ones(target.n))
    return np.vstack([X] + xs), _b_values(target, np.vstack([Y] + ys))


def sample_check(target, tree, arithmetic: Arithmetic, regions: dict | None = None, *, seed: int = 0,
                 count: int = 256) -> tuple[int, int]:
    """(inputs checked, how many differ): the model of `tree` under `arithmetic`
    (and per-node `regions`) against the target, bit for bit."""
    X, Y = sample_inputs(target, seed, count)
    got = _Runner(target)(X, Y)
    return len(got), _misses_regions(arithmetic, regions, tree, X, Y, got, target.op != "sum")


def sample_difference(target, tree, arithmetic: Arithmetic, regions: dict | None = None, *, seed: int = 0,
                      count: int = 256) -> str:
    """The first sample input of sample_check(... seed, count) on which the model and the target
    differ, in words (its values where n is small, else where its special values lie), with both
    results; '' when none differs."""
    X, Y = sample_inputs(target, seed, count)
    got = _Runner(target)(X, Y)
    product = target.op != "sum"
    with np.errstate(all="ignore"):
        pred = evaluate(tree, X.T, Y.T if product else None, arithmetic, regions)
    bad = np.flatnonzero(~same_bits(pred, got))
    if not bad.size:
        return ""
    k = int(bad[0])
    names = {"sum": ("x",), "dot": ("x", "y"), "gemv": ("A's row", "x"), "gemm": ("A's row", "B's column")}[target.op]
    rows = (X[k],) if not product else (X[k], Y[k])
    shown = "; ".join(f"{name} {_values_in_words(v)}" for name, v in zip(names, rows))
    return (f"e.g. at n = {target.n}, {shown}: {target.name} gives {float(got[k])!r}, the model "
            f"{float(pred[k])!r}")


def _values_in_words(v) -> str:
    """'= [nan, 0.5]' for a short vector, else where its nan, inf, -0.0 and subnormal values lie."""
    v = np.asarray(v, np.float64)
    if v.size <= 8:
        return "= [" + ", ".join(repr(float(x)) for x in v) + "]"
    kinds = (("nan", np.isnan(v)), ("inf", np.isposinf(v)), ("-inf", np.isneginf(v)),
             ("-0.0", (v == 0) & np.signbit(v)),
             ("subnormal", np.isfinite(v) & (v != 0) & (np.abs(v) < np.finfo(np.float32).tiny)))
    parts = []
    for name, where in kinds:
        at = np.flatnonzero(where).tolist()
        if at:
            parts.append(f"{name} at {', '.join(map(str, at[:6]))}{' ...' if len(at) > 6 else ''}")
    head = ", ".join(repr(float(x)) for x in v[:3])
    return (f"({v.size} values: " + "; ".join(parts) + ")" if parts else
            f"({v.size} finite values, first {head} ...)")


def region_candidates(target, init: str) -> list[Arithmetic]:
    """The arithmetics a region may have, in preference order (init is the whole accumulation's):
    those of a whole accumulation, then accumulators narrower than the input (an fp32 part
    of an fp64 sum rounds its terms)."""
    usual = _accumulators(target.format)
    narrow = [f for f in ("fp32", "fp16", "bf16") if f not in usual]
    cands = _binary_candidates(target) + (_binary_candidates(target, narrow) if narrow else [])
    return [a for a in cands if a.init == init]


def _with_fused(cands: list, fused) -> list:
    """The candidates carrying the whole tree's fused block (a region of fused nodes needs it;
    the binary candidates have none), less those it cannot join (an accumulator wider than
    the fused nodes' output)."""
    if fused is None:
        return cands
    out = []
    for a in cands:
        try:
            out.append(replace(a, fused=fused))
        except FpspecError:     # SpecError is one
            continue
    return out


JOIN_RETRIES = 8   # other region fits tried for the joining nodes


def region_keep_sets(target, tree, names: dict, start: Arithmetic, *, seed: int = 0,
                     rows: int = 150) -> dict:
    """For each region of `tree` (names: node key -> region name) and for the
    joining nodes (key None): the candidates that reproduce the target on
    probes placed at that region's leaves (note [region probes]), in preference
    order.  A region without nodes at this n is left out (anything fits it)."""
    rng = np.random.default_rng(seed + 1)
    run = _Runner(target)
    product = target.op != "sum"
    cands = _with_fused(region_candidates(target, start.init), start.fused)
    region_names = sorted(set(names.values()))
    direct = {name: sorted(set(_region_leaves(tree, names, name))) for name in region_names}
    keep: dict = {}
    # regions that take leaves first (their leaves decide them); then regions whose
    # nodes only add partial sums, probed through the leaves below them, with the
    # regions already decided at their first fit
    for name in sorted(region_names, key=lambda k: not direct[k]):
        pool = direct[name] or _leaves_below(tree, names, name)
        if not pool:
            continue
        r = _binary_rows(target, tree, rng, rows, pool=pool)
        X1, Y1 = r.arrays()
        X2, Y2 = _dense_rows(target, rng, rows, pool)
        X, Y = np.vstack([X1, X2]), np.vstack([Y1, Y2])
        got = run(X, Y)
        others = {k: (keep[k][0] if keep.get(k) else start) for k in region_names if k != name}
        keep[name] = [a for a in cands if _misses_regions(start, _region_map(names, {**others, name: a}),
                                                          tree, X, Y, got, product) == 0]
    has_joins = any(isinstance(s, Node) and (s.first, s.size) not in names for s in postorder(tree))
    if has_joins:
        # the joining nodes, the regions fixed at their first fit, on inputs over the whole tree;
        # where no candidate fits them so, a region's other fits one at a time (a region
        # whose own probes leave its accumulator open shows it through the joins)
        chosen = {k: v[0] for k, v in keep.items() if v}
        join_pool = sorted(set(_region_leaves(tree, names, None))) or list(range(target.n))
        r = _binary_rows(target, tree, rng, rows, pool=join_pool)
        _double_rounding_rows(r, target, tree, names, rng)
        X1, Y1 = r.arrays()
        X2, Y2 = _random_inputs(target, rng, rows)
        X, Y = np.vstack([X1, X2]), np.vstack([Y1, Y2])
        got = run(X, Y)

        def joins(chosen):
            regions = _region_map(names, {**{k: start for k in region_names}, **chosen})
            return [a for a in cands if _misses_regions(a, regions, tree, X, Y, got, product) == 0]
        keep[None] = joins(chosen)
        others = [(k, a) for k, v in keep.items() if k is not None for a in v[1:]]
        for k, a in others[:JOIN_RETRIES]:
            if keep[None]:
                break
            keep[None] = joins({**chosen, k: a})
            if keep[None]:
                keep[k] = [a] + [b for b in keep[k] if b != a]
    return keep
