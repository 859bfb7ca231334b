"""Host side of every Triton replica: the spec's order at one n, as a launch plan.

Copied verbatim into each generated module (a replica imports only triton
and torch).  The render module writes the spec's reducers as calls of the
classes below (one class per fpspec.compile.ir reducer, same names and
fields; integer parameters become `lambda m, n: ...`), and `plan(root, n)`
turns them, at call time, into what the kernels run:

- segments: runs of terms t_start, t_start+stride, ... (count of them), each
  reduced by one kernel loop: kind FOLD (a sequential fold of binary adds, an
  FMA per term where the spec says so) or CHAIN (a chain of fused nodes of
  `width` products).  Every segment's value lands in one slot.
- steps: binary additions slot[dst] = slot[a] + slot[b], grouped into levels
  (a step's level is its height above the segments) so each level is one
  launch vectorized over its steps.

For sums the planner also recognises leaf blocks (Note [leaf blocks]): a few
dozen contiguous terms reduced as k lanes folded, a power-of-two tree over
the lanes, the rest folded in (numpy's pairwise sum below 129 terms).  A leaf
block is one segment of kind LANES_*, reduced by one row of a 2-D tile in
sum_lanes, instead of k + rest segments and k - 1 + rest steps.  When the
bottom levels of the steps are perfect pairings of consecutive slots (numpy's
order at n = 10^8: 2^20 leaf blocks, a perfect tree over them), those levels
are reduced inside the kernels too (Plan.height, Note [perfect levels]).

Plans are built per (reducer, m, stride) once and shifted, never re-derived:
numpy's pairwise sum at n = 10^8 has a handful of distinct sub-lengths per
level, so planning stays fast; tensors do the shifting.
"""
import torch

FOLD = 0
CHAIN = 1
# leaf blocks (sums only); the suffix is the tree over the lanes
LANES_PAIRWISE = 2   # halves: (0 1) (2 3) ..., then pairs of those
LANES_TREE = 3       # tree_reduce: (i, i + k/2), then again on the first half
LANES_FOLD = 4       # ((l0 + l1) + l2) + ...
# chains whose node results are stored rounded (nearest even) into a narrower format: a
# `using` region that only narrows the accumulator (fpspec.arith.model note [fused output])
CHAIN_BF16 = 5
CHAIN_FP16 = 6
STORED_KINDS = {"bf16": CHAIN_BF16, "fp16": CHAIN_FP16}
STORED_FORMATS = {kind: fmt for fmt, kind in STORED_KINDS.items()}
# Note [regions in plans]: a `using(NAME, ...)` region of its own accumulator or products
# (Region, mode k >= 1: the replica's Numerics.regions[k - 1]) plans its folds as kind
# FOLD_IN + 2k and writes k beside each of its additions (a step's third column); the driver
# launches each mode's folds with its arithmetic and the combine kernels read a step's
# accumulator from its mode.  A region of one operand has no node: the operand is the outer
# order's (fpspec.spec.expand marks no node of it).  Kind FOLD_IN + 2k + 1 (any k, 0
# included) is a term of its own that met only phantoms (note [phantoms in plans]): its
# rounded product is a value, never fused into the addition that takes it.
FOLD_IN = 16


def value_kind(kind):
    """The kind of a one-term fold of kind `kind` whose rounded product is a value."""
    return FOLD_IN + 1 if kind == FOLD else kind | 1


def lone_kinds(kinds):
    """Which kinds are folds whose single term an addition may fuse (not values)."""
    return (kinds == FOLD) | ((kinds >= FOLD_IN) & (kinds % 2 == 0))
LEAF_MAX_ROWS = 32   # a leaf block's lanes are at most this long (rows of the tile, unrolled)
LEAF_MAX_TAIL = 32   # and at most this many terms follow them (unrolled too)
LEAF_MAX_LANES = 32


class PlanError(ValueError):
    """The order uses a construct the Triton kernels cannot run."""


class Fold:
    def __init__(self, reverse=False):
        self.reverse = reverse


class Pairwise:
    def __init__(self, split=None):
        self.split = split


class TreeReduce:
    pass


class FusedChain:
    def __init__(self, width, at=None):
        self.width, self.at = width, at


class Table:
    def __init__(self, size, children, offsets, fused):
        self.size, self.children, self.offsets, self.fused = size, children, offsets, fused


class Lanes:
    def __init__(self, k, inner, outer, left=None, unroll=None):
        self.k, self.inner, self.outer, self.left, self.unroll = k, inner, outer, left, unroll


class VLanes:
    def __init__(self, v, k, inner, outer):
        self.v, self.k, self.inner, self.outer = v, k, inner, outer


class Chunks:
    def __init__(self, size, inner, outer):
        self.size, self.inner, self.outer = size, inner, outer


class Blocks:
    def __init__(self, b, inner, outer):
        self.b, self.inner, self.outer = b, inner, outer


class Pad:
    def __init__(self, m, inner):
        self.m, self.inner = m, inner


class Stored:
    def __init__(self, fmt, inner):
        self.fmt, self.inner = fmt, inner


class Region:
    def __init__(self, mode, inner):
        self.mode, self.inner = mode, inner


class Part:
    def __init__(self, length, reducer):
        self.length, self.reducer = length, reducer


class Segments:
    def __init__(self, parts, outer):
        self.parts, self.outer = parts, outer


class Case:
    def __init__(self, cond, reducer):
        self.cond, self.reducer = cond, reducer


class Guard:
    def __init__(self, cases, otherwise=None):
        self.cases, self.otherwise = cases, otherwise


class Call:
    def __init__(self, name):
        self.name = name


class SubPlan:
    """Segments (start relative to the run's first term) and steps over local slots.

    segs: int64 [S, 6] (start, count, stride, kind, width, head); steps: int64
    [T, 3] (a, b, mode), step t writing slot S + t; root: the result's slot.  A
    chain's head -1 (LONE_FIRST): Note [first node of one more].
    """

    __slots__ = ("segs", "steps", "root")

    def __init__(self, segs, steps, root):
        self.segs, self.steps, self.root = segs, steps, root


_NO_STEPS = torch.zeros((0, 3), dtype=torch.int64)


def _leaf_run(start, count, stride, kind, width, head=0):
    """head (CHAIN): the chain's nodes run over the first `head` terms (the
    last of them short), then over the rest in whole nodes; 0: no head."""
    seg = torch.tensor([[start, count, stride, kind, width, head]], dtype=torch.int64)
    return SubPlan(seg, _NO_STEPS, 0)


# Note [first node of one more]: a chain whose short group (m % w operands) is
# first and holds one operand has, in the tree, no node of that one operand: it
# is one more leaf of the next node, a node of w + 1 products
# (fpspec.tree.chain_groups, fused_chain).  Where w + 1 <= the spec's fused
# width the model computes that node as one fused node of w + 1 products with
# c = 0 (fpspec.arith.evaluate note [fused nodes]); the plan marks such a
# chain with head LONE_FIRST and the chain kernels make node 0 of terms
# 0 .. w, then whole nodes of w (triton_kernels.fp_chain_node).  Where w is
# the fused width, the one product goes through a node alone and its result
# is the next node's c: that is the head of 1 (a short first node of one).
LONE_FIRST = -1


class Planner:
    """Plans one reducer tree (`root`, named `orders`) for reduction length n."""

    def __init__(self, root, orders, n, leaves=False, fused_width=None):
        self.root, self.orders, self.n = root, orders, n
        self.leaves = leaves   # recognise leaf blocks (the sum kernels have them; matmul's do not)
        self.fused_width = fused_width   # the spec's fused nodes' w (Note [first node of one more])
        self.memo = {}
        self.mode = 0   # the region being planned (Note [regions in plans]); 0: the spec's arithmetic

    def _fold(self):
        """The kind of a fold in the current region."""
        return _fold_of(self.mode)

    def _resolve(self, r, m):
        while True:
            if isinstance(r, Call):
                if r.name not in self.orders:
                    raise PlanError(f"order {r.name!r} is not defined")
                r = self.orders[r.name]
            elif isinstance(r, Guard):
                for case in r.cases:
                    if case.cond(m, self.n):
                        r = case.reducer
                        break
                else:
                    if r.otherwise is None:
                        raise PlanError(f"no case of a guard applies at m = {m}, n = {self.n}")
                    r = r.otherwise
            else:
                return r

    def _parts(self, r, m):
        """(part, start, length) of a Segments applied to m operands, lengths checked."""
        out, start = [], 0
        for i, part in enumerate(r.parts):
            length = part.length(m, self.n)
            if length < 0 or start + length > m or (i == len(r.parts) - 1 and start + length != m):
                raise PlanError(f"segment lengths do not add up to m = {m} (part {i}: {length})")
            out.append((part, start, length))
            start += length
        return out

    def _folds_on(self, r, lane, rest):
        """Lane 0 (`lane` terms) and the leftovers form one forward fold (matmul kernels only)."""
        if self.leaves:   # the sum kernels read no two-stride folds (and a sum has no FMA to keep)
            return False
        left = self._resolve(r.left, rest)
        inner = self._resolve(r.inner, lane)
        return (isinstance(left, Fold) and not left.reverse
                and (lane == 1 or (isinstance(inner, Fold) and not inner.reverse)))

    def _chunks(self, r, m):
        """(start, end) of every chunk of a Chunks over m operands (size from the operands left)."""
        out, start = [], 0
        while start < m:
            s = r.size(m - start, self.n)
            if not 1 <= s <= m - start:
                raise PlanError(f"chunk size {s} with {m - start} operands left; expected 1..{m - start}")
            out.append((start, start + s))
            start += s
        return out

    # ------------------------------------------------------------ runs of terms

    def run(self, r, m, stride):
        """SubPlan reducing m terms 0, stride, 2*stride, ... by reducer r."""
        key = (id(r), m, stride, self.mode)
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._run(r, m, stride)
        return got

    def _run(self, r, m, stride):
        r = self._resolve(r, m)
        if isinstance(r, Region):
            if m == 1:
                return _leaf_run(0, 1, stride, self._fold(), 0)
            outer, self.mode = self.mode, r.mode
            try:
                sub = self.run(r.inner, m, stride)
            finally:
                self.mode = outer
            if bool(((sub.segs[:, 3] != FOLD) & (sub.segs[:, 3] < FOLD_IN)).any()):
                raise PlanError("a using(...) region of its own arithmetic holds fused nodes or leaf blocks; "
                                "the triton kernels take folds and additions there")
            return sub
        if m == 1:
            return _leaf_run(0, 1, stride, self._fold(), 0)
        if self.leaves and stride == 1 and self.mode == 0:
            leaf = self._leaf(r, m)
            if leaf is not None:
                return _leaf_run(0, m, 1, *leaf)
        if isinstance(r, Fold):
            if r.reverse:
                return _leaf_run((m - 1) * stride, m, -stride, self._fold(), 0)
            return _leaf_run(0, m, stride, self._fold(), 0)
        if isinstance(r, FusedChain):
            w = r.width(m, self.n)
            if w < 2:
                raise PlanError(f"fused chain width must be >= 2, got {w}")
            head = 0
            if r.at is not None and m % w:   # the short node at index at: the head ends with it
                p = min(r.at(m, self.n), m // w)
                if p < 0:
                    raise PlanError(f"fused chain short-node index must be >= 0, got {p}")
                head = 0 if p == m // w else p * w + m % w
            if head == 1 and self.fused_width is not None and w < self.fused_width:
                head = LONE_FIRST   # Note [first node of one more]
            return _leaf_run(0, m, stride, CHAIN, w, head)
        if isinstance(r, Stored):
            sub = self.run(r.inner, m, stride)
            kind = int(sub.segs[0, 3])
            # Note [stored regions]: the kernels round into r.fmt only where a chain's node results
            # are stored (CHAIN_BF16 / CHAIN_FP16); every addition elsewhere (a fold's, a combine
            # step's) is an fp32 one, so a region of any other additions is refused, never run
            # in fp32.  One term has no addition: its product enters the parent as in the model
            one_term = kind == FOLD and int(sub.segs[0, 1]) == 1
            if sub.steps.shape[0] or sub.segs.shape[0] != 1 or not (kind == CHAIN or one_term):
                raise PlanError(f"a using(...) region of accumulator {r.fmt} must hold one fused chain (or one "
                                f"term) in the Triton kernels; here it adds {m} terms otherwise")
            if one_term:
                return sub
            seg = sub.segs.clone()
            seg[0, 3] = STORED_KINDS[r.fmt]
            return SubPlan(seg, sub.steps, sub.root)
        if isinstance(r, Lanes) and r.left is not None:
            k = _positive(r.k(m, self.n), "lane count")
            u = k if r.unroll is None else _positive(r.unroll(m, self.n), "lanes unroll")
            if u % k:
                raise PlanError(f"lanes unroll {u} is not a multiple of the lane count {k}")
            if m < u:
                return self.run(r.left, m, stride)
            p = m - m % u
            lanes = [(self.run(r.inner, p // k, stride * k), j * stride) for j in range(k)]
            if p < m and self._folds_on(r, p // k, 1 + m - p):
                # lane 0 and the leftovers are one
                # fold (an FMA per term in matmul): one segment, two strides
                lanes[0] = (_leaf_run(0, p // k + m - p, stride * k, self._fold(), stride, p // k), 0)
            elif p < m:   # the leftovers join lane 0 through `left`
                tail = [(self.run(_SINGLE, 1, stride), (p + i) * stride) for i in range(m - p)]
                lanes[0] = (self._outer([lanes[0]] + tail, r.left), 0)
            return self._outer(lanes, r.outer)
        if isinstance(r, Lanes):
            k = _positive(r.k(m, self.n), "lane count")
            parts = [(self.run(r.inner, (m - j + k - 1) // k, stride * k), j * stride)
                     for j in range(min(k, m))]
            return self._outer(parts, r.outer)
        if isinstance(r, VLanes):
            return self._vector_lanes(r, m, stride)
        if isinstance(r, Blocks):
            b = _positive(r.b(m, self.n), "block size")
            parts = [(self.run(r.inner, min(b, m - s), stride), s * stride) for s in range(0, m, b)]
            return self._outer(parts, r.outer)
        if isinstance(r, Chunks):
            parts = [(self.run(r.inner, b - a, stride), a * stride) for a, b in self._chunks(r, m)]
            return self._outer(parts, r.outer)
        if isinstance(r, Pad):
            rest, c = self._pad(r, m)
            if c == 0:
                return self.run(r.inner, m, stride)
            # note [phantoms in plans]: every term its own operand, the phantoms None
            parts = [(self.run(_SINGLE, 1, stride), j * stride) for j in range(m)]
            return self._outer(parts, r.inner, (rest, c))
        if isinstance(r, Segments):
            parts = []
            for part, start, length in self._parts(r, m):
                if part.reducer is None:
                    parts.extend((self.run(_SINGLE, 1, stride), (start + j) * stride) for j in range(length))
                elif length:
                    parts.append((self.run(part.reducer, length, stride), start * stride))
            return self._outer(parts, r.outer)
        # Pairwise, TreeReduce, Table: operands one term each, then additions
        parts = [(self.run(_SINGLE, 1, stride), j * stride) for j in range(m)]
        return self._outer(parts, r)

    def _vector_lanes(self, r, m, stride):
        """vlanes(V, K, ...) over m terms (note [vector lanes in plans])."""
        v, k = _positive(r.v(m, self.n), "vector width"), _positive(r.k(m, self.n), "lane count")
        nv, rest = m // v, m % v
        lanes = []
        for j in range(min(k, max(nv, rest))):
            count = (nv - j + k - 1) // k if j < nv else 0      # the lane's whole vectors
            left = list(range(nv * v + j, m, k))                # its leftovers (terms)
            lanes.append((self._vector_lane(r.inner, count, left, j, v, k, stride), j * v * stride))
        return self._outer(lanes, r.outer)

    def _vector_lane(self, inner, count, left, j, v, k, stride):
        """Lane j of a vlanes: `count` vectors of v terms k * v apart, then the terms `left`;
        offsets relative to the lane's first term (j * v)."""
        key = ("vlane", id(inner), count, v, k, stride, self.mode)
        if not left and key in self.memo:
            return self.memo[key]
        length = count * v + len(left)
        lanes = self._resolve(inner, length)
        if v == 1 and not left:   # one run of stride k
            got = self.run(inner, count, stride * k)
        elif count and self._accumulators(lanes, length, v, count, left):
            # lanes(V, ...) over the lane: accumulator q is one run of stride k * v; the leftovers
            # join accumulator 0 through LEFT, or one each (q) where there is no LEFT
            parts = [(self.run(lanes.inner, count, stride * k * v), q * stride) for q in range(v)]
            parts += [(self.run(_SINGLE, 1, stride), (t - j * v) * stride) for t in left]

            def reduce(roots, out):
                subs, rest = roots[:v], roots[v:]
                if lanes.left is not None and rest:
                    subs[0] = self.slots(lanes.left, [subs[0]] + rest, out)
                elif rest:   # a forward fold: fold(run + [x]) = fold(run) + x
                    subs = [out.add(a, rest[q]) if q < len(rest) else a for q, a in enumerate(subs)]
                return self.slots(lanes.outer, subs, out)
            got = self._outer(parts, None, reduce=reduce)
        else:   # every term its own operand
            terms = [p * k * v + i for p in range(count) for i in range(v)] + [t - j * v for t in left]
            got = self._outer([(self.run(_SINGLE, 1, stride), t * stride) for t in terms], inner)
        if not left:
            self.memo[key] = got
        return got

    def _accumulators(self, lanes, length, v, count, left):
        """Whether `lanes` (resolved) over a vlanes lane of `count` vectors of v and the
        leftovers `left` is v accumulators, one per position in the vector."""
        if not isinstance(lanes, Lanes) or lanes.k(length, self.n) != v:
            return False
        if lanes.left is not None:
            return lanes.unroll is None or lanes.unroll(length, self.n) == v
        inner = self._resolve(lanes.inner, count + 1) if left else None
        return not left or (isinstance(inner, Fold) and not inner.reverse)

    def _pad(self, r, m):
        """(r, c) of a Pad over m operands: c phantoms after the first r."""
        p = _positive(r.m(m, self.n), "pad multiple")
        return m % p, (p - m % p) % p

    def _outer(self, parts, outer, pad=None, reduce=None):
        """Concatenate sub-plans (shifted), then reduce their roots by `outer`
        (pad (r, c): with c phantoms after the first r roots; reduce(roots, out):
        the root's slot, in place of `outer`)."""
        # (no builtin sum here: a replica of a sum defines its own `sum`)
        S = T = 0
        for p, _ in parts:
            S += p.segs.shape[0]
            T += p.steps.shape[0]
        segs, steps, roots = [], [], []
        seg_base = step_base = 0
        for p, offset in parts:
            s, t = p.segs.shape[0], p.steps.shape[0]
            seg = p.segs.clone()
            seg[:, 0] += offset
            segs.append(seg)
            if t:
                st = p.steps.clone()
                ab = st[:, :2]
                st[:, :2] = torch.where(ab < s, ab + seg_base, ab - s + S + step_base)
                steps.append(st)
            roots.append(p.root + seg_base if p.root < s else p.root - s + S + step_base)
            seg_base += s
            step_base += t
        out = _Steps(S + T, self.mode)
        if pad is not None:
            roots = roots[:pad[0]] + [None] * pad[1] + roots[pad[0]:]
        root = self.slots(outer, roots, out) if reduce is None else reduce(roots, out)
        new = torch.tensor(out.rows, dtype=torch.int64).reshape(-1, 3)
        segs = torch.cat(segs)
        _formed_by_taker(segs, new, out.values)
        return SubPlan(segs, torch.cat(steps + [new]), root)

    # ------------------------------------------------------------ leaf blocks

    def _leaf(self, r, m):
        """(kind, k) when r reduces m contiguous terms as a leaf block, else None.

        Note [leaf blocks]: the block is k lanes, lane j folding terms j, j+k,
        ... below main = m - m % k; a tree over the k lane results; then the
        terms main .. m-1 folded into it one by one.  A forward fold of m terms
        is the case k = 1.  sum_lanes computes exactly this."""
        if isinstance(r, Fold):
            return (LANES_PAIRWISE, 1) if not r.reverse and m <= LEAF_MAX_ROWS else None
        if isinstance(r, Lanes):
            if r.left is not None:   # lanes over the first m - m % U terms only, LEFT for the rest
                u = r.k(m, self.n) if r.unroll is None else r.unroll(m, self.n)
                if m < u or m % max(1, u):
                    return None
            return self._lanes_leaf(r, m) if m % max(1, r.k(m, self.n)) == 0 else None
        if isinstance(r, Segments) and len(r.parts) == 2 and r.parts[1].reducer is None:
            (first, _, main), (_, _, tail) = self._parts(r, m)
            outer = self._resolve(r.outer, tail + (main > 0))
            if not isinstance(outer, Fold) or outer.reverse or tail > LEAF_MAX_TAIL:
                return None
            if main == 0 or first.reducer is None:   # every term folded in turn
                return (LANES_PAIRWISE, 1) if m <= LEAF_MAX_ROWS else None
            lanes = self._resolve(first.reducer, main)
            if not isinstance(lanes, Lanes):
                return None
            leaf = self._lanes_leaf(lanes, main)
            # the kernel derives main from the count: it must be m - m % k
            return leaf if leaf is not None and main == m - m % leaf[1] else None
        return None

    def _lanes_leaf(self, r, m):
        k = r.k(m, self.n)
        if k < 2 or k > LEAF_MAX_LANES or k & (k - 1) or m % k or m // k > LEAF_MAX_ROWS:
            return None
        inner = self._resolve(r.inner, m // k)
        if m > k and (not isinstance(inner, Fold) or inner.reverse):
            return None
        tree = self._resolve(r.outer, k)
        if isinstance(tree, TreeReduce):
            return LANES_TREE, k
        if isinstance(tree, Fold) and not tree.reverse:
            return LANES_FOLD, k
        if isinstance(tree, Pairwise):
            # halves all the way down (k is a power of two)
            width = k
            while width > 1:
                if tree.split is not None and tree.split(width, self.n) != width // 2:
                    return None
                width //= 2
            return LANES_PAIRWISE, k
        return None

    # ------------------------------------------------------------ lists of partial values

    def slots(self, r, ops, out):
        """Reduce a list of slots by additions appended to `out`; the result's slot."""
        m = len(ops)
        if m == 0:
            raise PlanError("a reducer was applied to an empty operand list")
        r = self._resolve(r, m)
        if isinstance(r, Region):
            if m == 1:
                return ops[0]
            outer, self.mode, out.mode = self.mode, r.mode, r.mode
            try:
                return self.slots(r.inner, ops, out)
            finally:
                self.mode = out.mode = outer
        if m == 1:
            return ops[0]
        if isinstance(r, Fold):
            seq = ops[::-1] if r.reverse else ops
            acc = seq[0]
            for o in seq[1:]:
                acc = out.add(acc, o)
            return acc
        if isinstance(r, Pairwise):
            h = m // 2 if r.split is None else r.split(m, self.n)
            if not 1 <= h <= m - 1:
                raise PlanError(f"pairwise split {h} of {m} operands is outside 1..{m - 1}")
            return out.add(self.slots(r, ops[:h], out), self.slots(r, ops[h:], out))
        if isinstance(r, TreeReduce):
            vals = list(ops)
            while len(vals) > 1:
                h = (len(vals) + 1) // 2
                vals = [out.add(vals[i], vals[i + h]) if i + h < len(vals) else vals[i] for i in range(h)]
            return vals[0]
        if isinstance(r, Table):
            if r.size != m:
                raise PlanError(f"a literal tree over {r.size} operands was applied to {m}")
            table = list(ops)
            for s, f in enumerate(r.fused):
                kids = [table[c] for c in r.children[r.offsets[s]:r.offsets[s + 1]]]
                if f or len(kids) != 2:
                    raise PlanError("a fused node over partial sums is not supported by the triton kernels")
                table.append(out.add(kids[0], kids[1]))
            return table[-1]
        if isinstance(r, Lanes) and r.left is not None:
            k = _positive(r.k(m, self.n), "lane count")
            u = k if r.unroll is None else _positive(r.unroll(m, self.n), "lanes unroll")
            if m < u:
                return self.slots(r.left, ops, out)
            p = m - m % u
            lanes = [self.slots(r.inner, ops[j:p:k], out) for j in range(k)]
            if p < m:
                lanes[0] = self.slots(r.left, [lanes[0]] + list(ops[p:]), out)
            return self.slots(r.outer, lanes, out)
        if isinstance(r, Lanes):
            k = _positive(r.k(m, self.n), "lane count")
            return self.slots(r.outer, [self.slots(r.inner, ops[j::k], out) for j in range(min(k, m))], out)
        if isinstance(r, VLanes):
            v, k = _positive(r.v(m, self.n), "vector width"), _positive(r.k(m, self.n), "lane count")
            nv, rest = m // v, m % v
            lanes = [[] for _ in range(min(k, max(nv, rest)))]
            for i in range(nv):
                lanes[i % k].extend(ops[i * v:(i + 1) * v])
            for j in range(rest):
                lanes[j % k].append(ops[nv * v + j])
            return self.slots(r.outer, [self.slots(r.inner, lane, out) for lane in lanes], out)
        if isinstance(r, Blocks):
            b = _positive(r.b(m, self.n), "block size")
            return self.slots(r.outer, [self.slots(r.inner, ops[s:s + b], out) for s in range(0, m, b)], out)
        if isinstance(r, Chunks):
            return self.slots(r.outer, [self.slots(r.inner, ops[a:b], out) for a, b in self._chunks(r, m)], out)
        if isinstance(r, Pad):
            rest, c = self._pad(r, m)
            return self.slots(r.inner, list(ops[:rest]) + [None] * c + list(ops[rest:]), out)
        if isinstance(r, Segments):
            res = []
            for part, start, length in self._parts(r, m):
                chunk = ops[start:start + length]
                if chunk:
                    res.extend(chunk if part.reducer is None else [self.slots(part.reducer, chunk, out)])
            return self.slots(r.outer, res, out)
        raise PlanError(f"{type(r).__name__} over partial sums is not supported by the triton kernels")


def _fold_of(mode):
    """The kind of a fold in region `mode` (0: the spec's arithmetic)."""
    return FOLD if mode == 0 else FOLD_IN + 2 * mode


def _formed_by_taker(segs, rows, values):
    """Note [terms formed by their taker]: each one-term segment that an addition of `rows`
    (a, b, mode) takes, or that met only phantoms there (`values`: (slot, mode)), becomes a fold
    of that addition's region (a value kind for the latter)."""
    S = segs.shape[0]
    values = torch.tensor(values, dtype=torch.int64).reshape(-1, 2)
    for x, mode, value in ((rows[:, 0], rows[:, 2], 0), (rows[:, 1], rows[:, 2], 0),
                           (values[:, 0], values[:, 1], 1)):
        x, mode = x[x < S], mode[x < S]
        one = (segs[x, 1] == 1) & lone_kinds(segs[x, 3])
        x, mode = x[one], mode[one]
        # (value_kind of _fold_of(mode) for values)
        segs[x, 3] = FOLD_IN + 2 * mode + 1 if value else torch.where(mode == 0, FOLD, FOLD_IN + 2 * mode)


# Note [terms formed by their taker]: the model forms a term (its product, rounded as the
# arithmetic says) in the arithmetic of the node that takes it (fpspec.arith.evaluate note
# [regions]), not in the region its one-term run was planned in: blocks(1, seq, using(part0,
# seq)) adds fp16-rounded products where part0's accumulator is fp16, and a term alone beside
# phantoms is rounded in the arithmetic of the node that lost them (fpspec.spec.expand note
# [lone products]).  So a one-term fold takes the region of the addition that takes it.


class _Steps:
    """Additions appended after the first `first` slots."""

    def __init__(self, first, mode=0):
        self.first, self.rows, self.mode = first, [], mode
        # (slot, mode) of operands that met a phantom (note [phantoms in plans])
        self.values = []

    def add(self, a, b):
        if a is None or b is None:    # note [phantoms in plans]
            kept = b if a is None else a
            if kept is not None:
                self.values.append((kept, self.mode))
            return kept
        slot = self.first + len(self.rows) // 3
        self.rows += [a, b, self.mode]
        return slot


# Note [phantoms in plans]: a Pad with phantoms plans every term as its own
# operand and gives the inner order the padded list with None for each
# phantom; an addition with a phantom is no addition (the model's rule:
# a node loses its phantom children), so the plan is the spec's tree.
# A term that met only phantoms was added to a zero lane, which rounded it
# (fpspec.spec.expand note [lone products]): its segment becomes a value
# kind (Note [regions in plans]), which no later addition fuses.

# Note [vector lanes in plans]: a lane of vlanes(V, K, ...) holds vectors of V
# consecutive terms K*V apart and then its leftovers: no one stride run.  Where
# the lane's order is lanes(V, INNER, OUTER) (a GPU thread's V accumulators),
# accumulator q is one run of stride K*V (then leftover q, added last where
# INNER is a forward fold); where V = 1 the lane is one run of stride K.
# Otherwise every term of the lane is its own operand (as for pad) and the lane
# order reduces those slots.  Terms there enter additions on their own: an
# addition of fma or exact products fuses them (the driver's lone products);
# the compiler refuses vlanes with fused nodes.

_SINGLE = Fold()   # one term on its own (a fixed object: plans are memoized by id)


def _positive(v, what):
    if v < 1:
        raise PlanError(f"{what} must be >= 1, got {v}")
    return v


class Plan:
    """A whole plan: segments, steps sorted into levels, the root slot."""

    def __init__(self, sub):
        self.segs = sub.segs
        S = sub.segs.shape[0]
        self.num_slots = S + sub.steps.shape[0]
        self.root = sub.root
        self.steps, self.levels = _levels(S, sub.steps)
        # facts the driver asks at every call, computed once (a plan for
        # n = 10^8 has millions of segments: asking per call costs milliseconds)
        self.max_count = int(self.segs[:, 1].max())
        kinds = self.segs[:, 3]
        self.stored = torch.isin(kinds, torch.tensor(tuple(STORED_FORMATS)))   # chains stored narrower
        chain = (kinds == CHAIN) | self.stored
        self.has_chain = bool(chain.any())
        self.fold_ids = torch.nonzero(kinds == FOLD).flatten()   # (values: region_folds, mode 0)
        # mode -> the folds of a region (Note [regions in plans])
        self.region_folds = {k: torch.nonzero((kinds >= FOLD_IN) & ((kinds - FOLD_IN) // 2 == k)).flatten()
                             for k in sorted(set(((kinds[kinds >= FOLD_IN] - FOLD_IN) // 2).tolist()))}
        self.mixed = bool(self.region_folds) or bool((self.steps[:, 3] != 0).any())
        # (width, kind) -> the chain segments of one launch
        self.chain_ids = {(w, kind): torch.nonzero((kinds == kind) & (self.segs[:, 4] == w)).flatten()
                          for w, kind in sorted(set(map(tuple, self.segs[chain][:, [4, 3]].tolist())))}
        # (width, kind) -> whether a chain of that launch has a first node of width + 1 terms
        # (Note [first node of one more]): its blocks need one lane more
        self.lone_first = {key: bool((self.segs[ids, 5] == LONE_FIRST).any()) for key, ids in self.chain_ids.items()}
        leafy = (kinds >= LANES_PAIRWISE) & (kinds <= LANES_FOLD)
        self.leaf_groups = [_LeafGroup(self.segs, kind, k) for kind, k in
                            sorted(set(map(tuple, self.segs[leafy][:, 3:5].tolist())))]
        self.aligned16 = bool((self.segs[:, 0] % 16 == 0).all())
        self.height, self.upper = 0, self
        if len(self.leaf_groups) == 1 and self.leaf_groups[0].ids.numel() == S and S > 1 and not self.mixed:
            self.height, self.upper = _perfect_levels(self)
        self.devices = {}

    def on(self, device):
        """This plan's tables on `device` (copied once: a plan for n = 10^8 is hundreds of MB)."""
        key = str(device)
        got = self.devices.get(key)
        if got is None:
            got = self.devices[key] = _DevicePlan(
                self.segs.to(device), self.steps.to(device), self.fold_ids.to(device),
                {w: ids.to(device) for w, ids in self.chain_ids.items()},
                {key: ids.to(device) for key, ids in self.region_folds.items()},
                torch.arange(self.segs.shape[0], dtype=torch.int64, device=device),
                [g.on(device) for g in self.leaf_groups])
        return got


class _LeafGroup:
    """The leaf blocks of one (kind, k): their ids and compact start/count tables.

    The kernel reads 12 bytes a block instead of a 40-byte segment row (at
    n = 10^8 that is 3% of the data's bytes instead of 10%)."""

    def __init__(self, segs, kind, k):
        self.kind, self.k = kind, k
        self.ids = torch.nonzero((segs[:, 3] == kind) & (segs[:, 4] == k)).flatten()
        counts = segs[self.ids, 1]
        main = counts - counts % k
        self.rows = max(1, int(main.max()) // k)
        # a block with main == 0 folds its first term into nothing: its tail starts at 1
        self.tail = int((counts - main).max())
        self.starts, self.counts = segs[self.ids, 0].contiguous(), counts.to(torch.int32)
        self.aligned = bool((self.starts % k == 0).all())   # numpy's blocks start at multiples of 8

    def on(self, device):
        """The same group with its tables on `device`."""
        got = object.__new__(_LeafGroup)
        got.__dict__.update(self.__dict__)
        got.ids, got.starts, got.counts = self.ids.to(device), self.starts.to(device), self.counts.to(device)
        return got


def _levels(S, steps):
    """Steps as (dst, a, b, mode) rows sorted by height, and the (first row, count) of each height."""
    T = steps.shape[0]
    if not T:
        return torch.zeros((0, 4), dtype=torch.int64), []
    heights = _heights(S, steps)
    order = torch.argsort(heights, stable=True)
    dst = torch.arange(S, S + T, dtype=torch.int64)
    rows = torch.stack([dst[order], steps[order, 0], steps[order, 1], steps[order, 2]], 1).contiguous()
    levels, lo = [], 0
    for c in torch.bincount(heights).tolist():
        if c:
            levels.append((lo, c))
            lo += c
    return rows, levels


def _heights(S, steps):
    """Height of every step above the segments (steps come after their children)."""
    T = steps.shape[0]
    h = torch.zeros(S + T, dtype=torch.int64)
    # steps are appended in dependency order, but sub-plans merged side by
    # side interleave: sweep until nothing changes (height <= depth of tree)
    a, b = steps[:, 0], steps[:, 1]
    while True:
        new = 1 + torch.maximum(h[a], h[b])
        if torch.equal(new, h[S:]):
            return new
        h[S:] = new


def _perfect_levels(p):
    """(H, upper): the bottom H levels pair consecutive slots, and the plan above them.

    Note [perfect levels]: level 1 adds slots (0, 1), (2, 3), ... of the
    leaf blocks, level 2 adds those results in consecutive pairs, and so on
    for H levels: each 2^H consecutive leaf blocks form a perfect pairwise
    tree, which the kernels reduce in registers (fp_pairs) with no step table.
    `upper` holds the rest: its first slots are the level-H results in order,
    then its own steps; the driver combines it like any plan (H = 0: itself)."""
    prev = torch.arange(p.segs.shape[0], dtype=torch.int64)
    H = 0
    for lo, cnt in p.levels:
        if prev.numel() % 2 or cnt != prev.numel() // 2:
            break
        st = p.steps[lo:lo + cnt]
        if not (torch.equal(st[:, 1], prev[0::2]) and torch.equal(st[:, 2], prev[1::2])):
            break
        prev = st[:, 0]
        H += 1
    if H == 0:
        return 0, p
    done = p.levels[H - 1][0] + p.levels[H - 1][1]   # (no builtin sum: see _outer)
    rest = p.steps[done:]
    new = torch.full((p.num_slots,), -1, dtype=torch.int64)
    new[prev] = torch.arange(prev.numel(), dtype=torch.int64)
    new[rest[:, 0]] = prev.numel() + torch.arange(rest.shape[0], dtype=torch.int64)
    up_steps = torch.stack([new[rest[:, 0]], new[rest[:, 1]], new[rest[:, 2]], rest[:, 3]], 1)
    if bool((up_steps < 0).any()):   # a step above reads a slot below level H: not perfect after all
        return 0, p
    return H, _Upper(up_steps.contiguous(), [(lo - done, cnt) for lo, cnt in p.levels[H:]],
                     int(new[p.root]), prev.numel() + rest.shape[0])


class _Upper:
    """The steps above the perfect levels, over their own slots (Note [perfect levels])."""

    def __init__(self, steps, levels, root, num_slots):
        self.steps, self.levels, self.root, self.num_slots = steps, levels, root, num_slots
        self.devices = {}

    def on(self, device):
        key = str(device)
        got = self.devices.get(key)
        if got is None:
            got = self.devices[key] = _DevicePlan(None, self.steps.to(device), None, {}, {}, None, [])
        return got


class _DevicePlan:
    def __init__(self, segs, steps, fold_ids, chain_ids, region_folds, all_ids, leaf_groups):
        self.segs, self.steps, self.fold_ids, self.chain_ids, self.all_ids = segs, steps, fold_ids, chain_ids, all_ids
        self.region_folds = region_folds
        self.leaf_groups = leaf_groups
        self.tails = {}   # first small level -> its (lo, count) table on the device


def plan(root, orders, n, leaves=False, fused_width=None):
    return Plan(Planner(root, orders, n, leaves, fused_width).run(root, n, 1))
