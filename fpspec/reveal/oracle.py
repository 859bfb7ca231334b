"""The query oracle: l(i, j) for many pairs, with as few library calls as it can.

l_S(i, j) = the number of leaves of S u {i, j} under the lowest common ancestor
of i and j, where S is the set of leaves carrying the unit (all leaves unless
given).  One query: +M at i, -M at j, u on S - {i, j}, zero elsewhere; the
output is u * (units not swamped).  With S = all leaves this is FPRev's l(i, j).

Batching (the adapter's whole job, DESIGN.md "Op kinds"):
- gemv/gemm: one query per row of A read against a column of units, and (gemm)
  one per column of B read against a row of ones in A, on the outputs the
  engine found to compute like element (0, 0) (set_channels);
- sum: one library call over a (b, n) matrix (numpy.sum(X, axis=-1)) when the
  target offers `call_rows` and a sample of batched answers matches single
  calls;
- otherwise one call per query on a preallocated buffer changed in place.
"""
from __future__ import annotations

import numpy as np

from fpspec.errors import RevealRefused
from fpspec.reveal.masks import MaskPlan, plan_masks

SCRATCH_BYTES = 1 << 25     # operand buffers up to 32 MB are kept for the next call (LcaOracle._matrix)
_SCRATCH: dict = {}
REPEAT_OUTPUTS = 256        # idle outputs that stand for a repeated call (note [repeat])
ROW_BUDGET = 1 << 19        # elements per batched call: 2 MB of fp32 (fastest of 2^16..2^20 here, numpy.sum n=4096)


def _first_fit(items, bits: int) -> list:
    """Pack (key, width) items into rows of `bits` bits, first fit in the order given:
    [[bits used, [(key, offset, width)]]]."""
    blocks: list[list] = []
    for k, w in items:
        for blk in blocks:
            if blk[0] + w <= bits:
                blk[1].append((k, blk[0], w))
                blk[0] += w
                break
        else:
            blocks.append([w, [(k, 0, w)]])
    return blocks


class MasksOverflow(RevealRefused):
    """An output was inf or nan: a mask overflowed somewhere in the target
    (fpspec.reveal.masks note [masks within a narrower part])."""


class LcaOracle:
    """Answers l(i, j) queries on a Target; counts queries and library calls.

    >>> LcaOracle(target).l_many([[0, 1], [0, 5]])        # FPRev's l, units on every leaf
    >>> oracle.l_many(pairs, units=[S0, S1], groups=g)     # l_S with S = units[g[k]] for pair k
    """

    def __init__(self, target, plan: MaskPlan | None = None, *, batch: bool = True, rows=None):
        self.target = target
        self.plan = plan or plan_masks(target)
        self.n = target.n
        self.queries = 0
        self.calls = 0
        self.batch = batch
        # gemv/gemm channels, see set_channels: rows of A read at column `read_col`, and columns
        # of B read at row `ones_row` (none until the engine opens them)
        self.rows = np.arange(target.m) if rows is None else np.asarray(rows)
        self.read_col = 0
        self.cols = np.zeros(0, np.int64)
        self.ones_row = -1
        # gemv/gemm: (row of A, output bits) of the engine's fingerprint call, repeated on the idle
        # rows of the next query call; repeat_same: None until then, then whether the bits agreed
        self.repeat = None
        self.repeat_same: bool | None = None
        self.fingerprint_masked = False
        self._same = None           # set_channels' outputs computing like (0, 0), for _diagonal
        self._rows_ok: bool | None = None if (target.call_rows is not None and batch) else False
        probe = target.native(np.zeros(2))
        self._is_numpy = isinstance(probe, np.ndarray)
        self._dtype = probe.dtype if self._is_numpy else None
        self._is_torch = type(probe).__module__.startswith("torch")
        self._b_cache = None
        self._bufs: dict = {}
        self._buf = None
        self._buf_key = None
        self._dirty = None

    # ------------------------------------------------------------ public
    def l(self, i: int, j: int, units=None) -> int:
        return int(self.l_many(np.array([[i, j]]), units)[0])

    def l_many(self, pairs, units=None, groups=None) -> np.ndarray:
        """l_S for each pair; S = every leaf, or `units` (one leaf array, or a list indexed by `groups`)."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        q = len(pairs)
        if q == 0:
            return np.zeros(0, np.int64)
        if np.any(pairs[:, 0] == pairs[:, 1]) or pairs.min() < 0 or pairs.max() >= self.n:
            raise ValueError("query pairs need two different leaves in 0..n-1")
        if units is None:
            sets, groups = [None], np.zeros(q, np.int64)
        elif groups is None:
            sets, groups = [np.asarray(units, np.int64)], np.zeros(q, np.int64)
        else:
            sets, groups = list(units), np.asarray(groups, np.int64)
        W = self.plan.window
        # each unit set becomes windows of at most W units (masks overwrite their own units)
        bases, base_of_set, sizes = [], [], np.empty(len(sets), np.int64)
        for s in sets:
            leaves = np.arange(self.n) if s is None else np.unique(s)
            sizes[len(base_of_set)] = len(leaves)
            fits = len(leaves) <= W + 2
            chunks = [leaves] if fits else [leaves[k:k + W] for k in range(0, len(leaves), W)]
            ids = []
            for c in chunks:
                b = np.zeros(self.n)
                b[c] = 1.0
                ids.append(len(bases))
                bases.append(b)
            base_of_set.append(ids)
        in_set = np.stack(bases)  # (chunks, n) of 0/1
        # rows: one per (pair, window of its set)
        counts_per_set = np.array([len(ids) for ids in base_of_set])
        if np.all(counts_per_set == 1):
            row_pair = np.arange(q)
            row_base = np.array([ids[0] for ids in base_of_set])[groups]
        else:
            row_pair = np.repeat(np.arange(q), counts_per_set[groups])
            row_base = np.concatenate([base_of_set[g] for g in groups.tolist()])
        ri, rj = pairs[row_pair, 0], pairs[row_pair, 1]
        units_in_row = in_set.sum(1)[row_base] - in_set[row_base, ri] - in_set[row_base, rj]
        with np.errstate(all="ignore"):   # overflow shows up as a refusal below, not as a warning
            out = self._run(ri, rj, in_set, row_base)
        c = out / self.plan.u
        ok = np.isfinite(c) & (c == np.round(c)) & (c >= 0) & (c <= units_in_row)
        if not np.all(ok):
            bad = int(np.flatnonzero(~ok)[0])
            raise (MasksOverflow if not np.isfinite(out[bad]) else RevealRefused)(
                f"output {float(out[bad])!r} for masks at {ri[bad]}, {rj[bad]} is not a whole number of units "
                f"in [0, {int(units_in_row[bad])}]: l is not an integer in [2, n], so the target is not "
                f"a summation tree over its inputs{self._scaled_hint(c[bad], units_in_row[bad])}")
        counted = np.bincount(row_pair, weights=c, minlength=q).astype(np.int64)
        S_sizes = sizes[groups]
        total = S_sizes.copy()
        if units is not None:
            # masks outside S still count as leaves of the lca subtree
            member = np.zeros(self.n, bool)
            for g in np.unique(groups).tolist():
                sel = np.flatnonzero(groups == g)
                member[sets[g]] = True
                total[sel] += (~member[pairs[sel, 0]]).astype(np.int64) + ~member[pairs[sel, 1]]
                member[sets[g]] = False
        self.queries += q
        return total - counted

    def l_everywhere(self, i, j) -> np.ndarray:
        """l at every output element of a gemv/gemm, row r of A asking the pair (i[r], j[r]) (or
        (i, j) in every row); NaN where an output is not a whole number of units."""
        p = self.plan
        count = None
        for res in self._everywhere_outputs(i, j):
            c = res / p.u
            c = np.where(np.isfinite(c) & (c == np.round(c)), c, np.nan)
            count = c if count is None else count + c
        self.queries += self.target.m
        return self.n - count

    def agrees_everywhere(self, i, j, expect) -> np.ndarray:
        """l(i[r], j[r]) == expect[r] at every element of row r (scalars: the same in every row),
        as a bool array of the output's shape.

        One window: the output must be exactly (n - expect) units, which is the same test as
        l == expect (u is a power of two at most 1, so res / u is exact or overflows, and
        an output that is no whole number of units equals no whole count) on one compare."""
        t = self.target
        expect = np.broadcast_to(np.asarray(expect), (t.m,))
        shape = (t.m,) + (1,) * (len(t.output_shape) - 1)
        if self.n - 2 > self.plan.window:
            return self.l_everywhere(i, j) == expect.reshape(shape)
        (res,) = self._everywhere_outputs(i, j, native=True)
        self.queries += t.m
        # a count below 2^p times u is exact in the output format: compared there, unconverted
        return res == ((self.n - expect) * self.plan.u).reshape(shape).astype(res.dtype)

    def _everywhere_outputs(self, i, j, native: bool = False):
        """Outputs (float64, output shape) with masks at i[r], j[r] in row r of A and the unit in
        every column of B, one call per window of units; `native`: a numpy output unconverted."""
        t, p = self.target, self.plan
        W = p.window
        I = np.broadcast_to(np.asarray(i, np.int64), (t.m,))
        J = np.broadcast_to(np.asarray(j, np.int64), (t.m,))
        rows = np.arange(t.m)
        if self.n - 2 <= W and not p.split:
            # one window, masks in A alone: the units everywhere else, B the cached units
            A = self._matrix("A", (t.m, self.n), p.a_unit)
            A[rows, I], A[rows, J] = p.a_mask, -p.a_mask
            with np.errstate(all="ignore"):
                res = t.fn(A if self._dtype is not None else self._conv(A), self._ones_b())
            self.calls += 1
            if not (native and isinstance(res, np.ndarray)):
                res = t.to_float64(res)
            yield res.reshape(t.output_shape)
            return
        for lo in range(0, max(1, self.n - 2), W):
            # window k: the units on the k-th W of the leaves other than the row's masks
            A = np.zeros((t.m, self.n))
            rank = np.arange(self.n)[None, :] - (np.arange(self.n)[None, :] > I[:, None]) \
                - (np.arange(self.n)[None, :] > J[:, None])
            A[(rank >= lo) & (rank < lo + W)] = p.a_unit
            A[rows, I], A[rows, J] = p.a_mask, -p.a_mask
            B = np.full((self.n,) if t.op == "gemv" else (self.n, t.ncols), p.b_unit)
            if p.split:
                # the masks' second factor differs from the unit's: one pair for every row
                B[I[0]] = B[J[0]] = p.b_mask
            with np.errstate(all="ignore"):
                res = t.fn(self._conv(A), self._conv(B))
            yield t.to_float64(res).reshape(t.output_shape)
            self.calls += 1

    def _conv(self, X):
        """float64 values (exact in the format) -> the library's array."""
        if self._dtype is not None:
            return X.astype(self._dtype)
        return self.target.native(X)

    # ------------------------------------------------------------ gemv/gemm channels
    def set_channels(self, same) -> None:
        """Open the outputs that may answer queries: `same` (output shape, bool) marks the elements
        that compute in the order of element (0, 0) (engine: equal bits on one random input).

        A query row of A is read at column `read_col` against a column of units in B; with a gemm
        and masks in A alone, a query column of B is also read at `ones_row`, a row of ones in A
        (the row and column products that would mix masks are never read): about m + ncols
        queries per call."""
        t = self.target
        same = np.asarray(same, bool).reshape(t.m, -1)
        self._same = same
        c0 = int(np.argmax(same.sum(0)))
        self.read_col = c0
        self.cols, self.ones_row = np.zeros(0, np.int64), -1
        if t.op == "gemm" and not self.plan.split and t.ncols > 1:
            wide = same.sum(1) - same[:, c0]
            r1 = int(np.argmax(wide))
            cols = np.flatnonzero(same[r1])
            cols = cols[cols != c0]
            # worth a row of A; and one row must stay a query row (a call without batching
            # asks through rows only)
            if len(cols) > int(same[r1, c0]) and int(same[:, c0].sum()) > int(same[r1, c0]):
                self.cols, self.ones_row = cols, r1
        rows = np.flatnonzero(same[:, c0])
        self.rows = rows[rows != self.ones_row]

    def _diagonal(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols): distinct rows and distinct columns pairing outputs that compute like
        element (0, 0) (a greedy matching on set_channels' `same`; without it rows by columns
        0, 1, ...): masks split across A and B ask one query per such output."""
        if self._same is None:
            k = min(len(self.rows), self.target.ncols)
            return self.rows[:k], np.arange(k)
        free = self._same.copy()
        rows, cols = [], []
        for c in range(free.shape[1]):
            r = int(np.argmax(free[:, c]))
            if free[r, c]:
                rows.append(r)
                cols.append(c)
                free[r, :] = False
        if not self.batch:
            rows, cols = rows[:1], cols[:1]
        return np.array(rows, np.int64), np.array(cols, np.int64)

    def channel_elements(self) -> np.ndarray:
        """Output elements (as a bool array of the output's shape) that answer queries."""
        t = self.target
        used = np.zeros((t.m, max(1, t.ncols) if t.op == "gemm" else 1), bool)
        if self.plan.split and t.op == "gemm":
            used[self._diagonal()] = True
            return used.reshape(t.output_shape)
        used[self.rows, self.read_col] = True
        if self.ones_row >= 0:
            used[self.ones_row, self.cols] = True
        return used.reshape(t.output_shape)

    def _ones_b(self):
        """The second operand of a gemv/gemm with the unit everywhere, converted once."""
        if self._b_cache is None:
            t = self.target
            shape = (self.n,) if t.op == "gemv" else (self.n, t.ncols)
            if self._dtype is not None:
                # read-only for the library: one copy for every oracle of this shape
                slot = ("ones_b", shape, np.dtype(self._dtype).str, self.plan.b_unit)
                if slot not in _SCRATCH:
                    _SCRATCH[slot] = np.full(shape, self.plan.b_unit, self._dtype)
                self._b_cache = _SCRATCH[slot]
            else:
                self._b_cache = t.native(np.full(shape, self.plan.b_unit))
        return self._b_cache

    def _matrix(self, key: str, shape, fill):
        """An operand buffer refilled for each call: numpy's dtype, float64 for other libraries
        (converted by _conv).  Kept between calls and between oracles (_SCRATCH): fresh
        megabytes cost page faults on every touch, about a fifth of a 512^3 gemm call here."""
        dtype = np.dtype(self._dtype or np.float64)
        slot = (key, tuple(shape), dtype.str)
        buf = _SCRATCH.get(slot)
        if buf is None:
            buf = np.empty(shape, dtype)
            if buf.nbytes <= SCRATCH_BYTES:
                if sum(b.nbytes for b in _SCRATCH.values()) > 4 * SCRATCH_BYTES:
                    _SCRATCH.clear()        # many shapes: keep only the latest
                _SCRATCH[slot] = buf
        buf.fill(fill)
        return buf

    # ------------------------------------------------------------ rows of queries
    def _run(self, ri, rj, in_set, row_base) -> np.ndarray:
        """Outputs for queries (ri, rj), query k with units on in_set[row_base[k]]."""
        out = np.empty(len(ri))
        p = self.plan
        one_base = len(in_set) == 1          # FPRev's queries: skip the grouping by base
        for b in [0] if one_base else np.unique(row_base).tolist():
            idx = np.arange(len(ri)) if one_base else np.flatnonzero(row_base == b)
            base = in_set[b] * p.a_unit
            if p.split:
                out[idx] = self._split_rows(ri[idx], rj[idx], base)
                continue
            q = len(idx)
            rr = np.repeat(np.arange(q), 2)                     # row order: no sort needed later
            cc = np.stack([ri[idx], rj[idx]], 1).ravel()
            vv = np.tile([p.a_mask, -p.a_mask], q)
            out[idx] = self._eval_rows(base, rr, cc, vv, q)
        return out

    def _check_rows(self, base) -> bool:
        """Trust one call over many rows only if it answers a sample exactly like single calls."""
        rng = np.random.default_rng(12345)
        k = 48
        i = rng.integers(0, self.n, size=k)
        # random pairs, and near ones (i, i + 2^r): a batched call that sums its rows with another
        # thread layout (torch on CUDA picks its launch by the number of rows) differs there
        near = 2 ** rng.integers(0, max(1, int(self.n - 1).bit_length()), size=k)
        j = np.where(np.arange(k) < 16, (i + rng.integers(1, self.n, size=k)) % self.n, (i + near) % self.n)
        j = np.where(j == i, (i + 1) % self.n, j)
        rr = np.concatenate([np.arange(k), np.arange(k)])
        cc = np.concatenate([i, j])
        vv = np.concatenate([np.full(k, self.plan.a_mask), np.full(k, -self.plan.a_mask)])
        self._rows_ok = True
        try:
            batched = self._eval_rows(base, rr, cc, vv, k)
        except Exception:
            batched = None
        self._rows_ok = False
        single = self._eval_rows(base, rr, cc, vv, k)
        return batched is not None and bool(np.array_equal(batched, single))

    def _tile(self, native_row, rows):
        if self._is_numpy:
            return np.tile(native_row, (rows, 1))
        if self._is_torch:
            return native_row.unsqueeze(0).repeat(rows, 1)
        return np.tile(np.asarray(native_row), (rows, 1))

    def _put(self, X, r, c, value):
        if self._is_torch:
            import torch

            if isinstance(value, np.ndarray):
                value = torch.from_numpy(value).to(X.dtype).to(X.device)
            X[torch.from_numpy(np.asarray(r, np.int64)), torch.from_numpy(np.asarray(c, np.int64))] = value
        else:
            X[r, c] = value

    def _split_rows(self, ri, rj, base) -> np.ndarray:
        """Masks split across both operands: the second operand changes with every pair, so a dot
        or gemv answers one query per call and a gemm one per (row, column) on the diagonal."""
        t, p = self.target, self.plan
        q = len(ri)
        out = np.empty(q)
        if t.op == "dot":
            for k in range(q):
                a = base.copy()
                a[ri[k]], a[rj[k]] = p.a_mask, -p.a_mask
                b = np.full(self.n, p.b_unit)
                b[ri[k]] = b[rj[k]] = p.b_mask
                out[k] = float(t.to_float64(t.fn(t.native(a), t.native(b))))
            self.calls += q
            return out
        rows = self.rows if self.batch else self.rows[:1]
        # gemm: query k at output (rows[k], cols[k]), outputs that compute like (0, 0)
        rows, cols = (rows, None) if t.op == "gemv" else self._diagonal()
        lanes = 1 if t.op == "gemv" or not self.batch else len(rows)
        for lo in range(0, q, lanes):
            hi = min(q, lo + lanes)
            A = np.zeros((t.m, self.n))
            sel = rows[:hi - lo]
            A[sel] = base
            A[sel, ri[lo:hi]] = p.a_mask
            A[sel, rj[lo:hi]] = -p.a_mask
            if t.op == "gemv":
                B = np.full(self.n, p.b_unit)
                B[ri[lo]] = B[rj[lo]] = p.b_mask
                out[lo:hi] = t.to_float64(t.fn(t.native(A), t.native(B))).reshape(t.m)[sel]
            else:
                B = np.full((self.n, t.ncols), p.b_unit)
                c = cols[:hi - lo]
                B[ri[lo:hi], c] = p.b_mask
                B[rj[lo:hi], c] = p.b_mask
                out[lo:hi] = t.to_float64(t.fn(t.native(A), t.native(B))).reshape(t.m, t.ncols)[sel, c]
            self.calls += 1
        return out

    # ------------------------------------------------------------ packed frames
    def can_pack(self) -> bool:
        """Several queries per row need units that add up exactly: masks in one operand only."""
        return not self.plan.split

    def packs_groups(self) -> bool:
        """l_groups pays off where a row costs what a call costs: a sum batched over rows."""
        return self.can_pack() and self.target.op == "sum" and self._rows_ok is not False \
            and self.n - 2 <= self.plan.window

    def l_groups(self, witness: int, groups: list, pairs: list) -> list[np.ndarray]:
        """l(a, b) for pairs inside disjoint leaf groups that hang off one pivot's path (the
        groups of one FPRev frame; `witness` is its pivot), several groups sharing each row.

        Note [witness]: group k carries its units at scale 2^off_k, the witness leaf at its
        own scale, every other leaf zero.  The levels of a pivot's path are subtrees, so the
        lca of two leaves of group G_t either stays inside G_t or holds the level below it,
        the pivot included.  A row whose witness unit survived therefore had every lca inside
        its own group: each count is read from its own bits and is that pair's l.  A row whose
        witness was swamped gives -1 for all its pairs (some pair's lca left its group).
        """
        p = self.plan
        bits = min(52, int(p.window + 1).bit_length() - 1) - 1       # one bit for the witness
        width = [int(len(g)).bit_length() for g in groups]
        order = sorted(range(len(groups)), key=lambda k: -len(pairs[k]))
        blocks = _first_fit([(k, width[k]) for k in order], bits)
        out: list = [None] * len(groups)
        for used, members in blocks:
            base = np.zeros(self.n)
            base[witness] = p.a_unit * 2.0 ** used
            rows = max(len(pairs[k]) for k, _, _ in members)
            rr, cc, vv = [], [], []
            for k, off, _ in members:
                base[groups[k]] = p.a_unit * 2.0 ** off
                q = len(pairs[k])
                rr += [np.arange(q), np.arange(q)]
                cc += [pairs[k][:, 0], pairs[k][:, 1]]
                vv += [np.full(q, p.a_mask), np.full(q, -p.a_mask)]
            total = self._packed_counts(base, rr, cc, vv, rows, used + 1)
            overflow = total < 0
            total = np.maximum(total, 0)
            seen = (total >> used) & 1 == 1
            for k, off, w in members:
                q = len(pairs[k])
                count = (total[:q] >> off) & ((1 << w) - 1)
                out[k] = np.where(seen[:q], len(groups[k]) - count, -1)
                again = np.flatnonzero(overflow[:q])
                if again.size:   # asked alone, witness included: an lca that left the group holds it
                    S = np.union1d(groups[k], [witness]).astype(np.int64)
                    L = self.l_many(pairs[k][again], S)
                    out[k][again] = np.where(L > len(groups[k]), -1, L)
        self.queries += sum(len(x) for x in pairs)
        return out

    def l_frames(self, pivots, js_list, units_list) -> list[np.ndarray]:
        """l_S(p_k, j) for every j of every frame k, several frames sharing each row.

        Note [packing]: frame k's units carry the scale 2^off_k, so the output of a
        row is sum_k count_k * 2^off_k and each count is read back from its own
        bits.  Frames of one wave hold disjoint leaf groups, and a query whose lca
        stays inside its own group masks nothing of the others; only a query whose
        lca is a fused parent (l_S = |G| + 1, the context leaf masked) reaches
        outside, so every row holding such an answer is asked again alone.
        """
        bits = min(52, int(self.plan.window + 1).bit_length() - 1)
        out: list = [None] * len(pivots)
        packable, alone = [], []
        for k, (js, S) in enumerate(zip(js_list, units_list)):
            w = int(len(S)).bit_length()
            (packable if w <= bits and len(S) <= self.plan.window else alone).append((k, w))
        packable.sort(key=lambda kw: -len(js_list[kw[0]]))
        blocks = _first_fit(packable, bits)
        redo: list[tuple[int, np.ndarray]] = []
        for used, members in blocks:
            base = np.zeros(self.n)
            rr, cc, vv = [], [], []
            rows = max(len(js_list[k]) for k, _, _ in members)
            for k, off, _ in members:
                S, js = units_list[k], js_list[k]
                scale = self.plan.a_unit * 2.0 ** off
                base[S[:-1] if len(S) > len(js) + 1 else S] += scale   # group leaves (+ context below)
                if len(S) > len(js) + 1:
                    base[S[-1]] += scale                                # a context leaf may be shared
                q = len(js)
                rr += [np.arange(q), np.arange(q)]
                cc += [np.full(q, pivots[k]), js]
                vv += [np.full(q, self.plan.a_mask), np.full(q, -self.plan.a_mask)]
            total = self._packed_counts(base, rr, cc, vv, rows, used)
            spoiled = total < 0
            total = np.maximum(total, 0)
            for k, off, w in members:
                q = len(js_list[k])
                cnt = (total[:q] >> off) & ((1 << w) - 1)
                S = units_list[k]
                if np.any(cnt > len(S) - 2):
                    raise RevealRefused("an output holds more units than the query put in: the target "
                                        "is not a summation tree over its inputs")
                lk = len(S) - cnt
                out[k] = lk
                group = len(js_list[k]) + 1
                spoiled[:q] |= lk > group                  # the lca reached a fused parent
            if len(members) > 1 and spoiled.any():
                for k, _, _ in members:
                    q = len(js_list[k])
                    redo.append((k, np.flatnonzero(spoiled[:q])))
        self.queries += sum(len(js_list[k]) for k, _ in packable)
        # frames too wide to pack, and rows spoiled by a fused parent: one query per row
        again = [(k, np.arange(len(js_list[k]))) for k, _ in alone] + [r for r in redo if len(r[1])]
        if again:
            pairs = np.concatenate([np.stack([np.full(len(idx), pivots[k]), js_list[k][idx]], 1)
                                    for k, idx in again])
            groups = np.concatenate([np.full(len(idx), g) for g, (k, idx) in enumerate(again)])
            L = self.l_many(pairs, [units_list[k] for k, _ in again], groups)
            pos = 0
            for k, idx in again:
                if out[k] is None:
                    out[k] = np.empty(len(js_list[k]), np.int64)
                out[k][idx] = L[pos:pos + len(idx)]
                pos += len(idx)
        return out

    def _packed_counts(self, base, rr, cc, vv, rows: int, bits: int) -> np.ndarray:
        """Rows of packed queries (lists of rr, cc, vv pieces) -> their outputs as whole numbers of
        units below 2^bits (else the target is no summation tree: refused).  A row holding several
        queries whose +M met before their -M may overflow (inf, or nan from inf - inf: masks.py
        fact 4): such rows give -1 and the callers ask their queries again one per row."""
        with np.errstate(all="ignore"):
            res = self._eval_rows(base, np.concatenate(rr), np.concatenate(cc), np.concatenate(vv), rows)
        total = res / self.plan.u
        crowded = np.bincount(np.concatenate(rr), minlength=rows)[:rows] > 2
        overflow = ~np.isfinite(total) & crowded
        total = np.where(overflow, 0.0, total)
        ok = np.isfinite(total) & (total == np.round(total)) & (total >= 0) & (total < 2.0 ** bits)
        if not np.all(ok):
            bad = int(np.flatnonzero(~ok)[0])
            raise (MasksOverflow if not np.isfinite(res[bad]) else RevealRefused)(
                f"output {float(res[bad])!r} is not a whole number of units: l is not an integer in [2, n], "
                f"so the target is not a summation tree over its inputs{self._scaled_hint(total[bad], 2.0 ** bits)}")
        return np.where(overflow, -1, total.astype(np.int64))

    def _scaled_hint(self, count: float, most: float) -> str:
        """A count that is a whole count of at most `most` units once multiplied by n: the target
        divides its sum by n (numpy.mean).  (A norm's square root answers nothing of the kind.)"""
        scaled = count * self.n
        if 0 <= scaled <= most and abs(scaled - round(scaled)) <= 1e-6 * max(1.0, scaled):
            return "; it is a whole count times 1/n: a mean? reveal the sum it divides"
        return ""

    def _eval_rows(self, base, rr, cc, vv, rows) -> np.ndarray:
        """Outputs of `rows` inputs: operand A = base (float64 values) with (rr, cc) set to vv."""
        t, p = self.target, self.plan
        out = np.empty(rows)
        if len(rr) > 1 and np.any(rr[1:] < rr[:-1]):
            order = np.argsort(rr, kind="stable")
            rr, cc, vv = rr[order], cc[order], vv[order]
        bounds = np.searchsorted(rr, np.arange(rows + 1))
        if t.op == "sum" and self._rows_ok is None:
            self._rows_ok = self._check_rows(base)
        if t.op == "sum" and self._rows_ok:
            per_call = max(1, ROW_BUDGET // self.n)
            native_base = t.native(base)
            key = base.tobytes()
            if self._is_numpy:
                # flat positions in the row buffer: one put per chunk, no 2-d fancy index
                flat = (rr % per_call) * self.n + cc
                vals = vv.astype(native_base.dtype)
            for lo in range(0, rows, per_call):
                hi = min(rows, lo + per_call)
                X = self._rows_buffer(native_base, key, hi - lo)
                a, b = bounds[lo], bounds[hi]
                if self._is_numpy:
                    X.reshape(-1)[flat[a:b]] = vals[a:b]
                    self._dirty = flat[a:b]
                    out[lo:hi] = t.call_rows(X)
                else:
                    self._put(X, rr[a:b] - lo, cc[a:b], vv[a:b])
                    self._dirty = (rr[a:b] - lo, cc[a:b])
                    out[lo:hi] = t.to_float64(t.call_rows(X)).reshape(-1)
                self.calls += 1
            return out
        if t.op in ("sum", "dot"):
            second = None if t.op == "sum" else t.native(np.full(self.n, p.b_unit))
            mutable = self._is_numpy or self._is_torch
            orig = base.copy()          # t.native may hand back `base` itself: restore from a copy
            buf = t.native(base) if mutable else None
            for r in range(rows):
                a, b = bounds[r], bounds[r + 1]
                if mutable:
                    self._put1(buf, cc[a:b], vv[a:b])
                    arg = buf
                else:
                    row = orig.copy()
                    row[cc[a:b]] = vv[a:b]
                    arg = t.native(row)
                res = t.fn(arg) if second is None else t.fn(arg, second)
                out[r] = float(t.to_float64(res))
                if mutable:
                    self._put1(buf, cc[a:b], orig[cc[a:b]])
            self.calls += rows
            return out
        return self._eval_matrix(base, rr, cc, vv, rows, bounds)

    def _eval_matrix(self, base, rr, cc, vv, rows, bounds) -> np.ndarray:
        """gemv/gemm: query k in a row of A (read at read_col) or in a column of B (read at
        ones_row), as many per call as the channels hold."""
        t, p = self.target, self.plan
        out = np.empty(rows)
        R = self.rows if self.batch else self.rows[:1]
        C = self.cols if self.batch else self.cols[:0]
        cap = len(R) + len(C)
        c0, r1 = self.read_col, self.ones_row
        for lo in range(0, rows, cap):
            hi = min(rows, lo + cap)
            nr = min(hi - lo, len(R))
            nc = hi - lo - nr
            a, mid, b = bounds[lo], bounds[lo + nr], bounds[hi]
            A = self._matrix("A", (t.m, self.n), 0.0)
            A[R[:nr]] = base
            A[R[rr[a:mid] - lo], cc[a:mid]] = vv[a:mid]
            idle = None
            if self.repeat is not None and self.repeat_same is None:
                # rows of A that answer nothing repeat the fingerprint input (note [repeat])
                idle = np.ones(t.m, bool)
                idle[R[:nr]] = False
                if nc:
                    idle[r1] = False
                A[idle] = self.repeat[0]
            if nc:
                A[r1] = p.b_unit
                B = self._matrix("B", (self.n, t.ncols), p.b_unit)
                cols = C[:nc]
                if cols[-1] - cols[0] == nc - 1:      # one run of columns: a strided slice, no gather
                    B[:, cols[0]:cols[-1] + 1] = base[:, None]
                else:
                    B[:, cols] = base[:, None]
                B[cc[mid:b], C[rr[mid:b] - lo - nr]] = vv[mid:b]
                B = self._conv(B) if self._dtype is None else B
            else:
                B = self._ones_b()
            with np.errstate(all="ignore"):      # the products that mix masks overflow; never read
                res = t.fn(A if self._dtype is not None else self._conv(A), B)
            # a numpy output is read where it is (the float64 conversion of two slices is exact)
            res = (res if self._dtype is not None else t.to_float64(res)).reshape(t.m, -1)
            ones = np.ones(res.shape[1], bool)
            ones[C[:nc]] = False
            # enough outputs to stand for a second call (else _settle_repeat makes one)
            if idle is not None and idle.sum() * ones.sum() >= min(REPEAT_OUTPUTS, t.m * t.ncols // 4):
                got = res[idle][:, ones].view(f"u{res.itemsize}")
                self.repeat_same = bool(np.array_equal(got, self.repeat[1].reshape(t.m, -1)[idle][:, ones]))
            out[lo:lo + nr] = res[R[:nr], c0]
            if nc:
                out[lo + nr:hi] = res[r1, C[:nc]]
            self.calls += 1
        return out

    def _rows_buffer(self, native_row, key, rows):
        """`rows` copies of a row in a buffer kept between calls (fresh memory costs page faults);
        when the row is the one already there, only the masks of the last call are put back."""
        buf = self._buf
        if buf is None or len(buf) < rows or buf.dtype != native_row.dtype:
            buf = self._buf = self._tile(native_row, max(rows, max(1, ROW_BUDGET // self.n)))
            self._buf_key, self._dirty = key, None
        elif self._buf_key == key and self._dirty is not None:
            if self._is_numpy:          # flat positions (numpy rows of n): restore the row's values
                buf.reshape(-1)[self._dirty] = native_row[self._dirty % self.n]
            else:
                r, c = self._dirty
                self._put(buf, r, c, native_row[c.tolist()])
        elif self._buf_key != key:
            if self._is_torch:
                buf.copy_(native_row.unsqueeze(0).expand(len(buf), -1))
            else:
                buf[...] = native_row
            self._buf_key = key
        self._dirty = None
        return buf[:rows]

    def _put1(self, buf, idx, values):
        if self._is_torch:
            import torch

            buf[torch.from_numpy(np.asarray(idx, np.int64))] = torch.from_numpy(np.asarray(values)).to(buf.dtype).to(buf.device)
        else:
            buf[idx] = values
