"""The query oracle: l(i, j) for many pairs, with as few library calls as it can.

l_S(i, j) = the number of leaves of S u {i, j} under the lowest common ancestor
of i and j, where S is the set of leaves carrying the unit (all leaves unless
given).  One query: +M at i, -M at j, u on S - {i, j}, zero elsewhere; the
output is u * (units not swamped).  With S = all leaves this is FPRev's l(i, j).

Batching (the adapter's whole job, DESIGN.md "Op kinds"):
- gemv/gemm: one query per row of A against a column (or columns) of ones;
- sum: one library call over a (b, n) matrix (numpy.sum(X, axis=-1)) when the
  target offers `call_rows` and a sample of batched answers matches single
  calls;
- otherwise one call per query on a preallocated buffer changed in place.
"""
from __future__ import annotations

import numpy as np

from fpspec.errors import RevealRefused
from fpspec.reveal.masks import MaskPlan, plan_masks

ROW_BUDGET = 1 << 19        # elements per batched call (keeps the matrix in cache-sized chunks)


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
        # rows of A that carry queries for gemv/gemm (the engine narrows them after its sharing check)
        self.rows = np.arange(target.m) if rows is None else np.asarray(rows)
        self._rows_ok: bool | None = None if (target.call_rows is not None and batch) else False
        probe = target.native(np.zeros(2))
        self._is_numpy = isinstance(probe, np.ndarray)
        self._is_torch = type(probe).__module__.startswith("torch")
        self._b_cache = None
        self._tiled = None
        self._buf = None

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
            raise RevealRefused(
                f"output {out[bad]!r} for masks at {ri[bad]}, {rj[bad]} is not a whole number of units "
                f"in [0, {int(units_in_row[bad])}]: l is not an integer in [2, n], so the target is not "
                "a summation tree over its inputs")
        counted = np.bincount(row_pair, weights=c, minlength=q).astype(np.int64)
        S_sizes = sizes[groups]
        total = S_sizes.copy()
        if units is not None:
            # masks outside S still count as leaves of the lca subtree
            for g in np.unique(groups).tolist():
                sel = np.flatnonzero(groups == g)
                total[sel] += (~np.isin(pairs[sel, 0], sets[g])).astype(np.int64)
                total[sel] += ~np.isin(pairs[sel, 1], sets[g])
        self.queries += q
        return total - counted

    def l_everywhere(self, i: int, j: int) -> np.ndarray:
        """l(i, j) at every output element of a gemv/gemm: the same pair in every row and column."""
        t, p = self.target, self.plan
        W = p.window
        others = np.setdiff1d(np.arange(self.n), [i, j])
        count = np.zeros(t.output_shape)
        for lo in range(0, max(1, len(others)), W):
            a = np.zeros(self.n)
            a[others[lo:lo + W]] = p.a_unit
            a[i], a[j] = p.a_mask, -p.a_mask
            A = np.tile(a, (t.m, 1))
            B = np.full((self.n,) if t.op == "gemv" else (self.n, t.ncols), p.b_unit)
            B[i] = B[j] = p.b_mask
            with np.errstate(all="ignore"):
                res = t.to_float64(t.fn(t.native(A), t.native(B))).reshape(t.output_shape)
            self.calls += 1
            c = res / p.u
            count += np.where(np.isfinite(c) & (c == np.round(c)), c, np.nan)
        self.queries += 1
        return self.n - count

    # ------------------------------------------------------------ rows of queries
    def _run(self, ri, rj, in_set, row_base) -> np.ndarray:
        op = self.target.op
        if op == "sum":
            return self._sum_rows(ri, rj, in_set, row_base)
        if op == "dot":
            return self._dot_rows(ri, rj, in_set, row_base)
        return self._matrix_rows(ri, rj, in_set, row_base)

    # sum -----------------------------------------------------------------
    def _sum_rows(self, ri, rj, in_set, row_base) -> np.ndarray:
        t, p = self.target, self.plan
        if self._rows_ok is None:
            self._rows_ok = self._check_rows(in_set[0])
        if self._rows_ok:
            return self._batched(ri, rj, in_set, row_base, t.call_rows, p.a_mask, p.a_unit)
        return self._single(ri, rj, in_set, row_base, t.fn, p.a_mask, p.a_unit)

    def _check_rows(self, base01) -> bool:
        """Trust one call over many rows only if it answers a sample exactly like single calls."""
        rng = np.random.default_rng(12345)
        k = 16
        i = rng.integers(0, self.n, size=k)
        j = (i + rng.integers(1, self.n, size=k)) % self.n
        stack = base01[None, :]
        zeros = np.zeros(k, np.int64)
        p = self.plan
        try:
            batched = self._batched(i, j, stack, zeros, self.target.call_rows, p.a_mask, p.a_unit)
        except Exception:
            return False
        single = self._single(i, j, stack, zeros, self.target.fn, p.a_mask, p.a_unit)
        return bool(np.array_equal(batched, single))

    def _native_stack(self, in_set, unit):
        return self.target.native(in_set * unit)

    def _batched(self, ri, rj, in_set, row_base, call_rows, mask, unit) -> np.ndarray:
        t = self.target
        q = len(ri)
        per_call = max(1, ROW_BUDGET // self.n)
        out = np.empty(q)
        if len(in_set) == 1:
            # one base for every row: keep a tiled buffer, set the masks, call, put the units back
            key = (in_set[0].tobytes(), unit)
            if self._tiled is None or self._tiled[0] != key:
                self._tiled = (key, self._tile(t.native(in_set[0] * unit), min(q, per_call)))
            X = self._tiled[1]
            if len(X) < min(q, per_call):
                X = self._tile(t.native(in_set[0] * unit), min(q, per_call))
                self._tiled = (key, X)
            bi = in_set[0][ri] * unit
            bj = in_set[0][rj] * unit
            for lo in range(0, q, per_call):
                hi = min(q, lo + per_call)
                r = np.arange(hi - lo)
                self._put(X, r, ri[lo:hi], mask)
                self._put(X, r, rj[lo:hi], -mask)
                out[lo:hi] = t.to_float64(call_rows(X[: hi - lo])).reshape(-1)
                self._put(X, r, ri[lo:hi], bi[lo:hi])
                self._put(X, r, rj[lo:hi], bj[lo:hi])
                self.calls += 1
            return out
        stack = self._native_stack(in_set, unit)
        for lo in range(0, q, per_call):
            hi = min(q, lo + per_call)
            X = self._take(stack, row_base[lo:hi])
            r = np.arange(hi - lo)
            self._put(X, r, ri[lo:hi], mask)
            self._put(X, r, rj[lo:hi], -mask)
            out[lo:hi] = t.to_float64(call_rows(X)).reshape(-1)
            self.calls += 1
        return out

    def _tile(self, native_row, rows):
        if self._is_numpy:
            return np.tile(native_row, (rows, 1))
        if self._is_torch:
            return native_row.unsqueeze(0).repeat(rows, 1)
        import numpy

        return numpy.tile(numpy.asarray(native_row), (rows, 1))

    def _take(self, stack, idx):
        if self._is_torch:
            import torch

            return stack[torch.from_numpy(np.asarray(idx, np.int64))].clone()
        return stack[idx]  # fancy indexing copies

    def _put(self, X, r, c, value):
        if self._is_torch:
            import torch

            if isinstance(value, np.ndarray):
                value = torch.from_numpy(value).to(X.dtype).to(X.device)
            X[torch.from_numpy(np.asarray(r, np.int64)), torch.from_numpy(np.asarray(c, np.int64))] = value
        else:
            X[r, c] = value

    def _single(self, ri, rj, in_set, row_base, call, mask, unit, second=None) -> np.ndarray:
        """One call per query, on a buffer changed in place where the library allows it."""
        t = self.target
        out = np.empty(len(ri))
        current = -1
        buf = None
        mutable = self._is_numpy or self._is_torch
        for k in range(len(ri)):
            b, i, j = int(row_base[k]), int(ri[k]), int(rj[k])
            if mutable:
                if b != current:
                    buf = t.native(in_set[b] * unit)
                    current = b
                bi, bj = in_set[b, i] * unit, in_set[b, j] * unit
                buf[i] = mask
                buf[j] = -mask
                res = call(buf) if second is None else call(buf, second)
                buf[i] = bi
                buf[j] = bj
            else:
                row = in_set[b] * unit
                row[i], row[j] = mask, -mask
                res = call(t.native(row)) if second is None else call(t.native(row), second)
            out[k] = float(t.to_float64(res))
        self.calls += len(ri)
        return out

    # dot -----------------------------------------------------------------
    def _dot_rows(self, ri, rj, in_set, row_base) -> np.ndarray:
        t, p = self.target, self.plan
        if not p.split:
            ones = t.native(np.full(self.n, p.b_unit))
            return self._single(ri, rj, in_set, row_base, t.fn, p.a_mask, p.a_unit, second=ones)
        out = np.empty(len(ri))
        for k in range(len(ri)):
            i, j = int(ri[k]), int(rj[k])
            a = in_set[row_base[k]] * p.a_unit
            a[i], a[j] = p.a_mask, -p.a_mask
            b = np.full(self.n, p.b_unit)
            b[i] = b[j] = p.b_mask
            out[k] = float(t.to_float64(t.fn(t.native(a), t.native(b))))
        self.calls += len(ri)
        return out

    # gemv / gemm -----------------------------------------------------------
    def _matrix_rows(self, ri, rj, in_set, row_base) -> np.ndarray:
        t, p = self.target, self.plan
        q = len(ri)
        out = np.empty(q)
        rows = self.rows if self.batch else self.rows[:1]
        if p.split:
            # the mask positions live in the second operand too: a GEMV answers one
            # query per call, a GEMM one per (row, column) on the diagonal
            lanes = 1 if t.op == "gemv" or not self.batch else min(len(rows), t.ncols)
        else:
            lanes = len(rows)
        if not p.split and self._b_cache is None:
            shape = (self.n,) if t.op == "gemv" else (self.n, t.ncols)
            self._b_cache = t.native(np.full(shape, p.b_unit))
        for lo in range(0, q, lanes):
            hi = min(q, lo + lanes)
            A = np.zeros((t.m, self.n))
            sel = rows[:hi - lo]
            A[sel] = in_set[row_base[lo:hi]] * p.a_unit
            A[sel, ri[lo:hi]] = p.a_mask
            A[sel, rj[lo:hi]] = -p.a_mask
            if not p.split:
                res = t.to_float64(t.fn(t.native(A), self._b_cache)).reshape(t.m, -1)
                out[lo:hi] = res[sel, 0]
            elif t.op == "gemv":
                B = np.full(self.n, p.b_unit)
                B[ri[lo]] = B[rj[lo]] = p.b_mask
                res = t.to_float64(t.fn(t.native(A), t.native(B))).reshape(t.m)
                out[lo:hi] = res[sel]
            else:
                B = np.full((self.n, t.ncols), p.b_unit)
                c = np.arange(hi - lo)
                B[ri[lo:hi], c] = p.b_mask
                B[rj[lo:hi], c] = p.b_mask
                res = t.to_float64(t.fn(t.native(A), t.native(B))).reshape(t.m, t.ncols)
                out[lo:hi] = res[sel, c]
            self.calls += 1
        return out

    # ------------------------------------------------------------ packed frames
    def can_pack(self) -> bool:
        """Several queries per row need units that add up exactly: masks in one operand only."""
        return not self.plan.split

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
        blocks: list[list] = []         # [[bits used, [(k, offset, width)]]]
        for k, w in packable:
            for blk in blocks:
                if blk[0] + w <= bits:
                    blk[1].append((k, blk[0], w))
                    blk[0] += w
                    break
            else:
                blocks.append([w, [(k, 0, w)]])
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
            rr, cc, vv = np.concatenate(rr), np.concatenate(cc), np.concatenate(vv)
            with np.errstate(all="ignore"):
                res = self._eval_rows(base, rr, cc, vv, rows)
            total = res / self.plan.u
            ok = np.isfinite(total) & (total == np.round(total)) & (total >= 0) & (total < 2.0 ** used)
            if not np.all(ok):
                bad = int(np.flatnonzero(~ok)[0])
                raise RevealRefused(
                    f"output {res[bad]!r} is not a whole number of units: l is not an integer in [2, n], "
                    "so the target is not a summation tree over its inputs")
            total = total.astype(np.int64)
            spoiled = np.zeros(rows, bool)
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

    def _eval_rows(self, base, rr, cc, vv, rows) -> np.ndarray:
        """Outputs of `rows` inputs: operand A = base (float64 values) with (rr, cc) set to vv."""
        t, p = self.target, self.plan
        out = np.empty(rows)
        order = np.argsort(rr, kind="stable")
        rr, cc, vv = rr[order], cc[order], vv[order]
        bounds = np.searchsorted(rr, np.arange(rows + 1))
        if t.op == "sum" and self._rows_ok is None:
            self._rows_ok = self._check_rows(np.ones(self.n))
        if t.op == "sum" and self._rows_ok:
            per_call = max(1, ROW_BUDGET // self.n)
            native_base = t.native(base)
            for lo in range(0, rows, per_call):
                hi = min(rows, lo + per_call)
                X = self._rows_buffer(native_base, hi - lo)
                a, b = bounds[lo], bounds[hi]
                self._put(X, rr[a:b] - lo, cc[a:b], vv[a:b])
                out[lo:hi] = t.to_float64(t.call_rows(X)).reshape(-1)
                self.calls += 1
            return out
        if t.op in ("sum", "dot"):
            second = None if t.op == "sum" else t.native(np.full(self.n, p.b_unit))
            mutable = self._is_numpy or self._is_torch
            buf = t.native(base) if mutable else None
            for r in range(rows):
                a, b = bounds[r], bounds[r + 1]
                if mutable:
                    self._put1(buf, cc[a:b], vv[a:b])
                    arg = buf
                else:
                    row = base.copy()
                    row[cc[a:b]] = vv[a:b]
                    arg = t.native(row)
                res = t.fn(arg) if second is None else t.fn(arg, second)
                out[r] = float(t.to_float64(res))
                if mutable:
                    self._put1(buf, cc[a:b], base[cc[a:b]])
            self.calls += rows
            return out
        lanes = len(self.rows) if self.batch else 1
        if self._b_cache is None:
            shape = (self.n,) if t.op == "gemv" else (self.n, t.ncols)
            self._b_cache = t.native(np.full(shape, p.b_unit))
        for lo in range(0, rows, lanes):
            hi = min(rows, lo + lanes)
            A = np.zeros((t.m, self.n))
            sel = self.rows[:hi - lo]
            A[sel] = base
            a, b = bounds[lo], bounds[hi]
            A[sel[rr[a:b] - lo], cc[a:b]] = vv[a:b]
            res = t.to_float64(t.fn(t.native(A), self._b_cache)).reshape(t.m, -1)
            out[lo:hi] = res[sel, 0]
            self.calls += 1
        return out

    def _rows_buffer(self, native_row, rows):
        """`rows` copies of a row in a buffer kept between calls (fresh memory costs page faults)."""
        buf = self._buf
        if buf is None or len(buf) < rows or buf.dtype != native_row.dtype:
            buf = self._buf = self._tile(native_row, max(rows, max(1, ROW_BUDGET // self.n)))
        X = buf[:rows]
        if self._is_torch:
            X.copy_(native_row.unsqueeze(0).expand(rows, -1))
        else:
            X[...] = native_row
        return X

    def _put1(self, buf, idx, values):
        if self._is_torch:
            import torch

            buf[torch.from_numpy(np.asarray(idx, np.int64))] = torch.from_numpy(np.asarray(values)).to(buf.dtype).to(buf.device)
        else:
            buf[idx] = values
