"""The revelation engine: Target -> summation tree (FPRev, seed 000, section 5 and 8.1).

    reveal(target, algorithm="auto") -> Revelation

Algorithms (all iterative: no recursion, any order, n up to 2^20 and beyond):
- "basic": FPRev-basic (Algorithm 2): every l(i, j), then merge in ascending l
  with a union-find; a batch of merges with one l that joins k > 2 parts is a
  fused node.  n(n-1)/2 queries: small n only.
- "fprev": FPRev (Algorithm 4, multiway): pick a pivot p in the leaf set I,
  ask l(p, j) for every other j, group the j by l: the groups are the subtrees
  hanging off p's path to the root, built the same way; a group whose own top
  covers more than the group is part of a fused node (Algorithm 4's
  |J_l| != n_leaves(T_c) case).  Units on every leaf, so n - 2 counts must be
  exact in the output format.
- "modified": Algorithm 5's idea generalized: units only on the group being
  built plus one leaf beside it (its "context": the parent's pivot, which shows
  a fused parent), zeros elsewhere, and counts in windows of at most W units
  when the group is wider than the format counts exactly.  Works for fp16/bf16
  and for n beyond 2^p.  Groups of one depth share rows, each at its own
  power-of-two unit (oracle.py, Note [packing]).
- "auto": fprev when the format counts n - 2 units exactly (one base row for
  every query: the cheapest batch), else modified.

Pivots (seed 000 section 8.2 suggests randomizing): the smallest leaf first,
which takes a left-to-right sum in one pass; a group whose biggest part keeps
more than 3/4 of it hands the largest leaf to that part (one pass for a
right-to-left sum), and after a second bad split a random leaf (expected
O(n log n) queries on any tree; about 2n on a reversed sum instead of n^2/2).
All groups pending at the same depth are asked in one batch ("wave"), so a
GEMM answers a whole wave in a few calls.

Guesses (fprev): a group shaped like a lower level of its pivot's path is
guessed to be that level relabelled and proven with one query per node in the
next wave (note [hypotheses]); on a sum the proofs of one frame share rows
(note [witness]), and a sixteenth of the root wave may stand for the rest of a
halving sum (note [probe]).  numpy.sum at n = 4096: ~1.05 n queries instead of
~5 n; a 512^3 gemm: 2 waves instead of 3.

gemv/gemm: two fingerprint calls (the same masked random row in every row of A,
masks at leaves 0 and 1, then at the last two) pick the outputs that compute
like element (0, 0); rows of A and columns of B then both carry queries
(LcaOracle.set_channels), and the fingerprint input is repeated on idle rows
of the next call for the determinism check (note [repeat]).  The fingerprint
can miss an order (note [blind fingerprint]), so the tree is then checked at
every output that looked like element (0, 0): proven, one call per pair, when
its proof has at most PROOF_PAIRS pairs, else on sampled pairs in one call;
when element (0, 0) itself answers unlike the tree, the tree is asked again
from element (0, 0) alone.  A 512^3 numpy gemm takes 5 calls.

Every answer is checked: l must be an integer in [2, |S|], each level of a
pivot's path must hold exactly the leaves counted so far, and the tree is
checked against fresh queries on pairs the construction never asked, riding in
the next wave's batch (a nondeterministic or value-dependent target fails
here); a batched call is trusted only after it answered a sample exactly like
single calls.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from fpspec.errors import FpspecError, RevealRefused
from fpspec.formats import get_format
from fpspec.reveal.masks import NARROWER_PARTS, plan_masks
from fpspec.reveal.oracle import LcaOracle, MasksOverflow
from fpspec.tree import LcaIndex, Node, Tree, build_binary, building, postorder

ALGORITHMS = ("auto", "basic", "fprev", "modified")
MAX_LISTED = 4096           # differing output elements listed one by one
BASIC_MAX_N = 1024          # n(n-1)/2 queries: beyond this FPRev-basic is hopeless


@dataclass(frozen=True)
class Revelation:
    tree: Tree
    n: int
    queries: int
    calls: int
    seconds: float
    algorithm: str
    notes: tuple[str, ...] = ()
    # gemv/gemm: output elements (row, col) whose order differs from the revealed one
    differing: tuple[tuple[int, ...], ...] = ()
    checked_outputs: int = 0
    plan: str = ""
    target: str = ""
    differing_count: int = 0                # all of them; `differing` lists the first MAX_LISTED
    # gemv/gemm: bool array of the output's shape, the elements found to compute in the revealed order
    shared: np.ndarray | None = field(default=None, compare=False, repr=False)

    def summary(self) -> dict:
        from fpspec.tree import stats

        return {
            "target": self.target, "n": self.n, "algorithm": self.algorithm,
            "queries": self.queries, "calls": self.calls, "seconds": round(self.seconds, 6),
            "tree_stats": str(stats(self.tree)), "masks": self.plan,
            "differing_outputs": self.differing_count,
            "differing_sample": [list(d) for d in self.differing[:20]],
            "checked_outputs": self.checked_outputs, "notes": list(self.notes),
        }


@dataclass
class _Learned:
    """What FPRev learned: per frame (a leaf group) its pivot and unit set; per level of the
    pivot's path its l, its child (a frame id, or ~leaf for a single leaf), whether it exceeds
    the group (the group hangs under a fused parent) and one member leaf (for cross-checks)."""

    pivot: list = field(default_factory=list)
    units: list = field(default_factory=list)           # leaf array, or None for every leaf
    span: list = field(default_factory=list)            # (first level, end) per frame
    lev_l: list = field(default_factory=list)           # per wave: arrays over that wave's levels
    lev_child: list = field(default_factory=list)
    lev_exceeds: list = field(default_factory=list)
    lev_rep: list = field(default_factory=list)
    shape: list = field(default_factory=list)           # a proven guess (_Shape) instead of a frame
    unasked: list = field(default_factory=list)         # cross-checks left for one more call

    def alloc(self, k: int) -> list:
        """k new frame ids (children get larger ids than their parents)."""
        base = len(self.pivot)
        for lst in (self.pivot, self.units, self.shape):
            lst.extend([None] * k)
        self.span.extend([(0, 0)] * k)
        return list(range(base, base + k))

    def levels(self):
        cat = np.concatenate
        return cat(self.lev_l), cat(self.lev_child), cat(self.lev_exceeds), cat(self.lev_rep)


def reveal(target, *, algorithm: str = "auto", seed: int = 0, progress: bool = False,
           pivot: str = "adaptive", split: bool | None = None, check: bool = True,
           guess: bool = True) -> Revelation:
    """Reveal the summation tree of `target`; raise RevealRefused with a one-line reason."""
    if algorithm not in ALGORITHMS:
        raise FpspecError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
    # Note [gc during a reveal]: a reveal makes thousands of small containers (query
    # bookkeeping, then n - 1 Nodes) and no reference cycles.  With the collector running,
    # every 700 of them start a collection and every tenth of those scans an older
    # generation, up to the whole heap of the process: about a third of numpy.sum's reveal
    # at n = 4096 went there.  Paused for the reveal, it collects once afterwards; a big
    # tree is frozen as in fpspec.tree.building.
    with building(freeze=target.n >= FREEZE_N):
        try:
            return _reveal(target, algorithm, seed, progress, pivot, split, check, guess)
        except MasksOverflow as first:
            # masks too large for a part that adds in a narrower format: ask again with
            # masks that format holds (fpspec.reveal.masks note [masks within a narrower part])
            for within in NARROWER_PARTS:
                if get_format(within).emax >= target.accumulator.emax:
                    continue
                try:
                    return _reveal(target, algorithm, seed, progress, pivot, split, check, guess, within)
                except MasksOverflow:
                    continue
            raise first


FREEZE_N = 50_000           # trees from this many leaves are frozen after the reveal (tree.building)


def _reveal(target, algorithm, seed, progress, pivot, split, check, guess, within=None) -> Revelation:
    start = time.perf_counter()
    n = target.n
    if split is True and target.op == "sum":
        # plan_masks has no plan to offer here; its "too little range" would blame the format
        fin, acc = target.format.name, target.accumulator.name
        raise RevealRefused(
            f"split masks put sqrt(M) in each operand of a product (dot, gemv, gemm), and {target.name} is a "
            f"sum: its masks are single {fin} values, which must swamp partial sums in {acc} (the widest "
            f"accumulator assumed for {fin} inputs); use --masks unsplit or auto")
    plan = plan_masks(target, split=split, within=within)
    oracle = LcaOracle(target, plan)
    notes: list[str] = []
    rng = np.random.default_rng(seed)
    exact_all = n - 2 <= plan.window
    if algorithm == "auto":
        # units on every leaf when the format counts them all: one base row for every query,
        # which is the cheapest batch; else units per group, several groups per call
        algorithm = "fprev" if exact_all else "modified"
    if algorithm in ("fprev", "basic") and not exact_all:
        raise RevealRefused(
            f"n = {n} is too large for {plan.out} counts with {algorithm} (at most {plan.window + 2} "
            "leaves count exactly); use --algorithm modified")
    matrix = target.op in ("gemv", "gemm")
    same = None
    if matrix:
        # determinism and the outputs that compute like element (0, 0), in two calls
        same = _fingerprint(target, oracle, rng)
        oracle.set_channels(same)
    else:
        _check_deterministic(target, oracle, rng)
    attempt = 0
    last_attempt = 2 if matrix and target.m * target.ncols > 1 else 0    # one output: no retry
    while True:
        bad, err, proven = None, None, False
        try:
            tree, checks, sharing = _construct(oracle, n, rng, algorithm, pivot, progress, guess)
        except RevealRefused as e:
            err = e
        if matrix:
            _settle_repeat(target, oracle)      # nondeterminism explains a failure first
        if err is None:
            try:
                if check:
                    _validate(checks, oracle)
                if check and matrix:
                    bad, proven = _sharing_check(tree, sharing, oracle, same)
            except RevealRefused as e:
                err = e
        alone = int(oracle.channel_elements().sum()) == 1
        if err is None and (bad is None or not (bad & oracle.channel_elements().reshape(bad.shape)).any()):
            break
        if err is None and proven and not bad.flat[0]:
            break       # element (0, 0) answers the whole proof: the tree is its own; outputs that
                        # answer otherwise compute another order (Revelation.shared says which)
        if err is None and alone:
            # element (0, 0) answered every query alone and now answers unlike the tree it gave
            raise RevealRefused("answers inconsistent with any tree: element (0, 0) answered a fresh "
                                "query unlike the tree it revealed (nondeterministic or value-dependent order?)")
        if attempt == last_attempt:
            if err is not None:
                if not matrix:
                    _repeat_masked(target, rng)     # nondeterminism explains a failure first
                raise err
            break
        # outputs that answered queries failed a check: ask again where every check passed;
        # after a refusal (the culprit unknown) where a second random input also agrees with
        # element (0, 0), and after a second refusal at element (0, 0) alone.  When element
        # (0, 0) itself answers unlike the tree, the tree holds other outputs' answers
        # (note [blind fingerprint]): ask again at element (0, 0) alone
        attempt += 1
        if err is None and not bad.flat[0] and attempt < last_attempt:
            keep = same & ~bad.reshape(same.shape)
        elif err is not None and attempt == 1:
            keep = same & _fingerprint(target, oracle, rng)
        else:
            keep = np.zeros_like(same)
        # (flat, not reshape(-1): a mask in Fortran order, as a moved target's outputs give,
        # reshapes to a copy, and element (0, 0) would stay closed: no query row at all)
        keep.flat[0] = True
        oracle.set_channels(keep)
        notes.append(f"an output that answered queries failed a check; asked again at {int(keep.sum())} "
                     "outputs")
    if isinstance(tree, Node) and tree.fused and len(tree.children) == n > 2:
        _refuse_if_exact(target, rng)
    if (tree.size if isinstance(tree, Node) else 1) != n:   # every construction partitions 0..n-1
        raise RevealRefused(f"the revealed tree has {tree.size} leaves, not n = {n}")
    checked = bad.size if matrix and check else 0
    count = int(bad.sum()) if checked else 0
    # the first MAX_LISTED only: an argwhere over every differing output costs more than a gemm call
    first = np.flatnonzero(bad)[:MAX_LISTED] if count else np.zeros(0, np.int64)
    differing = tuple(zip(*(ix.tolist() for ix in np.unravel_index(first, bad.shape)))) if count else ()
    if count:
        rows = np.flatnonzero(bad.any(1)).tolist()
        cols = np.flatnonzero(bad.any(0)).tolist()
        notes.append(f"{count} of {checked} output elements (rows {_ranges(rows)}, columns "
                     f"{_ranges(cols)}) do not share the order revealed at element (0, 0)")
    shared = ~bad.reshape(target.output_shape) if checked else None
    return Revelation(tree, n, oracle.queries, oracle.calls, time.perf_counter() - start, algorithm,
                      tuple(notes), differing, checked, str(plan), target.describe(), count, shared)


def _ranges(xs: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8' (at most 4 ranges shown)."""
    out, start = [], None
    for k, x in enumerate(xs):
        if start is None:
            start = x
        if k + 1 == len(xs) or xs[k + 1] != x + 1:
            out.append(f"{start}-{x}" if x > start else f"{start}")
            start = None
    return ", ".join(out[:4]) + (f", ... ({len(out)} ranges)" if len(out) > 4 else "")


def _construct(oracle, n, rng, algorithm, pivot, progress, guess=True):
    bar = _Progress(n, progress)
    try:
        if algorithm == "basic":
            if n > BASIC_MAX_N:
                raise FpspecError(f"FPRev-basic asks n(n-1)/2 queries; use it for n <= {BASIC_MAX_N}")
            tree = _basic(oracle, n)
            return tree, _checks_from_tree(tree, rng, 24), _checks_from_tree(tree, rng, 4)
        tree, learned = _fprev_rewinding(oracle, n, rng, restricted=algorithm == "modified", pivot=pivot,
                                         bar=bar, hypotheses=guess)
        # fprev's cross-checks rode along the waves; the last wave's are left
        checks = _checks_from_learned(learned, rng, 32) if algorithm == "modified" else learned.unasked
        # sharing-check pairs: gemv/gemm only (a masked fingerprint can miss an order: note
        # [blind fingerprint])
        sharing = (_checks_from_learned(learned, rng, 8, root_only=True)
                   if oracle.target.op in ("gemv", "gemm") else [])
        return tree, checks, sharing
    finally:
        bar.close()


# ---------------------------------------------------------------- FPRev (Algorithm 4 / modified)

def build_tree(oracle, n: int, *, algorithm: str = "fprev", seed: int = 0, pivot: str = "adaptive",
               guess: bool = True) -> Tree:
    """The tree construction alone, on any object with `l_many(pairs, units, groups)` (e.g.
    fpspec.reveal.synthetic.TreeOracle for counting queries at n = 2^20)."""
    rng = np.random.default_rng(seed)
    if algorithm == "basic":
        return _basic(oracle, n)
    tree, _ = _fprev_rewinding(oracle, n, rng, restricted=algorithm == "modified", pivot=pivot,
                               bar=_Progress(n, False), hypotheses=guess)
    return tree


def _fprev_rewinding(oracle, n, rng, **kw) -> tuple[Tree, "_Learned"]:
    """_fprev, and again without the probe when a level it guessed was wrong (note [probe])."""
    try:
        return _fprev(oracle, n, rng, **kw)
    except _Rewind:
        return _fprev(oracle, n, rng, probe=False, **kw)


def _fprev(oracle: LcaOracle, n: int, rng, *, restricted: bool, pivot: str, bar,
           hypotheses: bool = True, probe: bool = True) -> tuple[Tree, _Learned]:
    """Algorithm 4 over waves: every frame pending at one depth is asked in one batch, together
    with the verification queries of the groups guessed in the wave before (note [hypotheses])."""
    learned = _Learned()
    learned.alloc(1)
    # pivot policy per frame: 0 smallest leaf (FPRev's; one pass for a left-to-right sum),
    # 1 largest (one pass for a right-to-left sum), 2 random (expected O(n log n) on any tree).
    # A frame whose biggest group keeps > 3/4 of it passes the next policy to that group.
    start_policy = {"adaptive": 0, "min": 0, "max": 1, "random": 2}[pivot]
    frames = [(0, np.arange(n), -1, start_policy)]      # (id, leaves, context leaf, policy)
    # (id, leaves, context leaf, policy, _Shape, level) where level is (pair, l) when the probe
    # guessed the group's level too (note [probe]), else None
    guesses: list = []
    guessing = hypotheses and not restricted
    packing = guessing and getattr(oracle, "packs_groups", lambda: False)()
    probing = probe and packing and pivot in ("adaptive", "min") and n >= PROBE_MIN_N and n & (n - 1) == 0
    proven_upto = n             # root levels above this l were guessed by the probe
    level_base = 0
    first = True
    # cross-checks on pairs never asked, from the frames of one wave, ride in the next batch
    ride = (np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
    while frames or guesses:
        F = len(frames)
        rpairs, rexpect = ride
        # the proofs of last wave's guesses: on a sum those of one frame share rows (note
        # [witness]), asked before this wave's batch; the others (and those on levels the probe
        # guessed, note [probe]) ride in the batch
        packed = [k for k, g in enumerate(guesses) if packing and g[5] is None]
        alone = [k for k, g in enumerate(guesses) if not (packing and g[5] is None)]
        wrong = [False] * len(guesses)
        for k, bad in zip(packed, _verify_packed(oracle, [guesses[k] for k in packed]) if packed else []):
            wrong[k] = bad
        vpairs, vexpect, vcount = _verification_queries([guesses[k][4] for k in alone],
                                                        [guesses[k][5] for k in alone])
        next_frames: list = []
        if F:
            ids = np.array([f[0] for f in frames], np.int64)
            wave_leaves = [f[1] for f in frames]
            wave_ctx = [f[2] for f in frames]
            sizes = np.fromiter((len(x) for x in wave_leaves), np.int64, F)
            cat = np.concatenate(wave_leaves)
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            local = np.repeat(np.arange(F), sizes)
            policy = np.array([f[3] for f in frames], np.int64)
            offset = np.where(policy == 0, 0, np.where(policy == 1, sizes - 1, rng.integers(0, sizes)))
            pick = starts + offset
            pivots = cat[pick]
            keep = np.ones(len(cat), bool)
            keep[pick] = False
            js, gl = cat[keep], local[keep]
            pairs = np.stack([pivots[gl], js], 1)
        else:
            pairs = np.zeros((0, 2), np.int64)
        units = None
        if restricted:
            units = [x if c < 0 else np.append(x, c) for x, c in zip(wave_leaves, wave_ctx)]
        if restricted and getattr(oracle, "can_pack", lambda: False)():
            per_frame = oracle.l_frames(pivots, np.split(js, np.cumsum(sizes - 1)[:-1]), units)
            L = np.concatenate(per_frame)
        elif restricted:
            L = oracle.l_many(pairs, units, gl)
        elif first and probing:
            L, proven_upto = _probe_root(oracle, pairs, n)
            Lv = np.zeros(0, np.int64)
        else:
            L = oracle.l_many(np.concatenate([pairs, vpairs, rpairs]))
            L, Lv, Lr = L[:len(pairs)], L[len(pairs):len(pairs) + len(vpairs)], L[len(pairs) + len(vpairs):]
            _refuse_unless_equal(rpairs, Lr, rexpect)
            ride = (np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
        bar.advance(F + len(guesses))
        if guesses:
            if alone:
                starts = np.concatenate([[0], np.cumsum(vcount)[:-1]])
                for k, bad in zip(alone, np.add.reduceat(Lv != vexpect, starts).tolist()):
                    wrong[k] = bad
            for (gid, leaves, ctx, pol, shape, level), bad in zip(guesses, wrong):
                if bad and level is not None:
                    raise _Rewind     # a level the probe guessed is wrong: start again, asking all
                if bad:             # the guess was wrong: reveal the group the ordinary way
                    next_frames.append((gid, leaves, ctx, pol))
                else:
                    learned.shape[gid] = shape
            guesses = []
        if not F:
            frames = next_frames
            continue
        if first and n > 2 and np.all(L == 2):
            raise RevealRefused("order-independent: every pair of masks cancels first (an exact or "
                                "compensated sum); there is no order to reveal")
        first = False
        order = np.lexsort((L, gl))
        L, js, gl = L[order], js[order], gl[order]
        new = np.ones(len(L), bool)
        new[1:] = (gl[1:] != gl[:-1]) | (L[1:] != L[:-1])
        g0 = np.flatnonzero(new)
        g1 = np.append(g0[1:], len(L))
        gsize = g1 - g0
        gframe, gl_val = gl[g0], L[g0]
        csum = np.cumsum(gsize)
        first_of_frame = np.ones(len(g0), bool)
        first_of_frame[1:] = gframe[1:] != gframe[:-1]
        frame_start_csum = (csum - gsize)[first_of_frame]           # per local frame
        covered = 1 + csum - frame_start_csum[gframe]
        last = np.ones(len(g0), bool)
        last[:-1] = gframe[1:] != gframe[:-1]
        has_ctx = np.asarray(wave_ctx)[gframe] >= 0
        exceeds = gl_val != covered
        # a group's top level may exceed it only when the group hangs under a fused parent:
        # by exactly the context leaf (modified) or by the parent's other leaves (fprev)
        allowed = last & has_ctx & ((gl_val == covered + 1) if restricted else (gl_val > covered))
        bad = np.flatnonzero(exceeds & ~allowed)
        if bad.size:
            k = bad[0]
            raise RevealRefused(
                f"answers inconsistent with any tree: the path from leaf {pivots[gframe[k]]} has a level "
                f"of l = {gl_val[k]} holding {covered[k]} leaves")
        # children: single leaves directly, larger groups become frames (or guesses) of the next wave
        big = gsize > 1
        child = np.where(big, 0, ~js[g0])
        nbig = int(big.sum())
        next_ids = learned.alloc(nbig)
        child[big] = next_ids
        bad_split = gsize * 4 > 3 * sizes[gframe]
        if pivot == "adaptive":
            next_policy = np.where(bad_split, np.minimum(policy[gframe] + 1, 2), policy[gframe])[big].tolist()
        else:
            next_policy = [start_policy] * nbig
        next_ctx = pivots[gframe[big]].tolist()
        fs = np.flatnonzero(first_of_frame)
        fe = np.append(fs[1:], len(g0))
        # already ascending: each frame's leaves are, and the stable lexsort keeps them so per group
        shapes = (_guess_groups(pivots, js, g0, g1, big, exceeds, covered, fs, fe) if guessing
                  else {})
        for b, (k, a, z) in enumerate(zip(np.flatnonzero(big).tolist(), g0[big].tolist(), g1[big].tolist())):
            item = (next_ids[b], js[a:z], next_ctx[b], next_policy[b])
            # a level the probe guessed: its group must be guessed too, and its own l proven
            level = None
            if gl_val[k] > proven_upto:
                if k not in shapes:
                    raise _Rewind
                level = (np.array([[pivots[gframe[k]], js[a]]]), gl_val[k:k + 1])
            if k in shapes:
                guesses.append(item + (shapes[k], level))
            else:
                next_frames.append(item)
        if proven_upto < n and np.any((gl_val > proven_upto) & ~big):
            raise _Rewind           # a single leaf on a guessed level: not the pattern guessed
        # book-keeping for assembly and cross-checks
        for f, fid in enumerate(ids.tolist()):
            learned.pivot[fid] = int(pivots[f])
            learned.units[fid] = units[f] if restricted else None
            learned.span[fid] = (level_base + int(fs[f]), level_base + int(fe[f]))
        learned.lev_l.append(gl_val)
        learned.lev_child.append(child)
        learned.lev_exceeds.append(exceeds)
        learned.lev_rep.append(js[g0])
        if not restricted:
            ride = _wave_checks(js[g0], gl_val, fs, fe, rng)
            ride = (ride[0][ride[1] <= proven_upto], ride[1][ride[1] <= proven_upto])
            proven_upto = n
        level_base += len(g0)
        frames = next_frames
    learned.unasked = [(None, a, b, l) for (a, b), l in zip(ride[0].tolist(), ride[1].tolist())]
    return _assemble(learned), learned


RIDING_CHECKS = 32      # cross-checks per wave, asked in the next wave's batch


def _wave_checks(rep, lval, fs, fe, rng) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (a in level t1, b in level t2 > t1 of one frame of this wave) and the l they must
    give: their lca is the level-t2 node.  The construction asked neither pair."""
    nlev = fe - fs
    ok = np.flatnonzero(nlev >= 2)
    if not len(ok):
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    pick = rng.choice(ok, size=min(RIDING_CHECKS, 4 * len(ok)))
    t1 = (rng.random(len(pick)) * nlev[pick]).astype(np.int64)
    t2 = (rng.random(len(pick)) * (nlev[pick] - 1)).astype(np.int64)
    t2 += t2 >= t1
    t1, t2 = fs[pick] + np.minimum(t1, t2), fs[pick] + np.maximum(t1, t2)
    return np.stack([rep[t1], rep[t2]], 1), lval[t2]


def _refuse_unless_equal(pairs, got, expect) -> None:
    bad = np.flatnonzero(got != expect)
    if bad.size:
        k = bad[0]
        raise RevealRefused(
            f"answers inconsistent with any tree: l({pairs[k, 0]}, {pairs[k, 1]}) = {got[k]} on a fresh call, the "
            f"revealed tree says {expect[k]} (nondeterministic or value-dependent order?)")


# Note [hypotheses]: many library trees repeat themselves: numpy's pairwise sum is the
# same 128-leaf block shifted, a BLAS kernel's second lane or K-block is the first one
# shifted.  When a group found on a pivot's path has as many leaves as a lower level of
# that path, with the same gaps between its sorted leaves, the group is guessed to be
# that level's subtree relabelled in order.  A guess is never trusted: it is proven by
# one query per internal node w (a leaf of each child of w, expecting l = |w|), asked in
# the next wave's batch.  Proof: the answers are the true tree's l; the lca subtrees of
# the pairs under w form a laminar family connected through shared leaves, so their union
# is the largest of them, which holds at most |w| leaves and contains w's leaves: w's
# leaves are a subtree of the true tree.  Every cluster of the guessed binary tree is then
# a cluster of the true tree, and a tree holding all 2s - 1 clusters of a binary tree is
# that tree.  A wrong guess costs its s - 1 queries and the group is revealed as usual.
# Guesses are only made with units on every leaf (fprev): the modified algorithm's
# restricted units give l_S, which the proof above does not cover.

@dataclass
class _Shape:
    """A binary tree in array form: kids[w] = (x, y), a ref >= 0 is an internal node (children
    before parents), < 0 is ~leaf; the root is the last node; leaves sorted."""

    leaves: np.ndarray
    kids: np.ndarray        # (k, 2) int64
    first: np.ndarray       # (k,) smallest leaf under each node
    size: np.ndarray        # (k,) leaves under each node

    def relabel(self, leaves: np.ndarray) -> "_Shape":
        """The same shape on another leaf set of the same size, i-th smallest to i-th smallest."""
        kids = self.kids.copy()
        neg = kids < 0
        kids[neg] = ~leaves[np.searchsorted(self.leaves, ~kids[neg])]
        return _Shape(leaves, kids, leaves[np.searchsorted(self.leaves, self.first)], self.size)


class _Chain:
    """The level nodes ((pivot part1) part2) ... of a pivot's path as one growing row array, each
    part a leaf or a _Shape; level t's node is a prefix of the rows (built on demand, once)."""

    def __init__(self, pivot: int):
        self.parts: list = []
        self.pieces: list = []                  # (rows, first, size) arrays, in row order
        self.row_of: list = []                  # level -> row index of its node
        self.cur, self.cur_first, self.cur_size = ~pivot, pivot, 1
        self.rows = np.zeros((0, 2), np.int64)
        self.first = self.size = np.zeros(0, np.int64)
        self.nrows = 0

    def level(self, t: int, leaves: np.ndarray) -> _Shape:
        """Level t's node (levels counted from 0 = the first part), on its sorted `leaves`."""
        singles: list = []

        def flush():
            if singles:
                arr = np.array(singles, np.int64)
                self.pieces.append((arr[:, :2], arr[:, 2], arr[:, 3]))
                singles.clear()
        for p in self.parts[len(self.row_of):t + 1]:
            if isinstance(p, _Shape):
                flush()
                k = len(p.size)
                self.pieces.append((np.where(p.kids >= 0, p.kids + self.nrows, p.kids), p.first, p.size))
                self.nrows += k
                ref, pf, ps = self.nrows - 1, int(p.first[-1]), int(p.size[-1])
            else:
                ref, pf, ps = ~p, p, 1
            self.cur_first = min(self.cur_first, pf)
            self.cur_size += ps
            singles.append((self.cur, ref, self.cur_first, self.cur_size))
            self.cur = self.nrows
            self.row_of.append(self.nrows)
            self.nrows += 1
        flush()
        if self.pieces:
            self.rows = np.concatenate([self.rows] + [r for r, _, _ in self.pieces])
            self.first = np.concatenate([self.first] + [f for _, f, _ in self.pieces])
            self.size = np.concatenate([self.size] + [s for _, _, s in self.pieces])
            self.pieces = []
        end = self.row_of[t] + 1
        return _Shape(leaves, self.rows[:end], self.first[:end], self.size[:end])


def _guess_groups(pivots, js, g0, g1, big, exceeds, covered, fs, fe) -> dict:
    """Group index -> guessed _Shape, for groups shaped like a lower level of their path."""
    out: dict = {}
    for f in np.flatnonzero(np.add.reduceat(big, fs) > 0).tolist():
        a, b = int(fs[f]), int(fe[f])
        chain = _Chain(int(pivots[f]))
        size_level: dict = {}       # |A_t| -> t, while every level up to t is known and binary
        known = True
        for k in range(a, b):
            if big[k]:
                shape = None
                t = None if exceeds[k] else size_level.get(int(g1[k] - g0[k]))
                if t is not None:
                    # js is sorted by (frame, l): levels a..t of this frame are one slice
                    leaves = np.sort(np.append(js[g0[a]:g1[t]], pivots[f]))
                    group = js[g0[k]:g1[k]]
                    if np.array_equal(np.diff(leaves), np.diff(group)):
                        shape = out[k] = chain.level(t - a, leaves).relabel(group)
                chain.parts.append(shape)
                known = known and shape is not None
            else:
                chain.parts.append(int(js[g0[k]]))
            known = known and not exceeds[k]
            if known:       # groups above an unknown level can still match the levels below it
                size_level[int(covered[k])] = k
    return out


PROBE_MIN_N = 1024      # the probe asks n / PROBE_PART of the root wave
PROBE_PART = 16


class _Rewind(Exception):
    """A level guessed by the probe was wrong: the construction starts again without it."""


def _probe_root(oracle, pairs, n: int) -> tuple[np.ndarray, int]:
    """The root wave (pivot 0, pairs (0, x)) asked only for x < s = n / PROBE_PART when that
    prefix looks like the start of a halving sum.

    Note [probe]: when the prefix [0, s) is the lowest level node of size s on leaf 0's path
    (l(0, x) <= s for every x < s, = s for x in [s/2, s)) and n / s is a power of two, the
    rest is guessed to double: l(0, x) = the power of two above x.  Nothing guessed is
    trusted: each guessed level's group must then be guessed as a copy of the level below
    (note [hypotheses]) and the next wave proves, with all units, the level's own pair and
    every node of the copy.  With the nodes the asked answers revealed, every node of the
    final tree then has a pair of leaves, one under each child, whose l is its size: the
    proof of note [hypotheses] covers the whole tree.  Any failure starts the construction
    again without the probe (_Rewind).  Returns l per pair and the largest l actually asked.
    """
    s = n // PROBE_PART
    x = pairs[:, 1]
    head = x < s
    L = np.empty(len(pairs), np.int64)
    L[head] = oracle.l_many(pairs[head])
    top = L[head]
    if np.all(top <= s) and np.all(top[x[head] >= s // 2] == s):
        # the power of two above x (x >= s >= 2): 2^bit_length(x)
        L[~head] = 1 << np.floor(np.log2(x[~head])).astype(np.int64) + 1
        return L, s
    L[~head] = oracle.l_many(pairs[~head])
    return L, n


def _verify_packed(oracle, guesses: list) -> list[bool]:
    """Per guess, whether its proof failed; the guesses of one frame share rows (l_groups)."""
    by_frame: dict = {}
    for k, g in enumerate(guesses):
        by_frame.setdefault(g[2], []).append(k)
    wrong = [False] * len(guesses)
    for ctx, ks in by_frame.items():
        checks = [_verification_queries([guesses[k][4]]) for k in ks]
        got = oracle.l_groups(ctx, [guesses[k][1] for k in ks], [c[0] for c in checks])
        for k, c, g in zip(ks, checks, got):
            wrong[k] = not np.array_equal(g, c[1])
    return wrong


def _verification_queries(shapes: list, extra: list | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per shape, one pair per internal node (the smallest leaf of each child) and its expected l,
    plus its `extra` (pairs, expected l) where given."""
    if not shapes:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    pairs, expect, count = [], [], []
    for k, s in enumerate(shapes):
        kids = s.kids
        pairs.append(np.where(kids < 0, ~kids, s.first[np.maximum(kids, 0)]))
        expect.append(s.size)
        if extra is not None and extra[k] is not None:
            pairs.append(extra[k][0])
            expect.append(extra[k][1])
        count.append(len(s.size) + (0 if extra is None or extra[k] is None else len(extra[k][1])))
    return np.concatenate(pairs), np.concatenate(expect), np.array(count)


def _shape_nodes(shape: _Shape) -> Node:
    return build_binary(shape.kids.tolist())


def _assemble(learned: _Learned) -> Tree:
    """Frames were numbered parents first: build children first, in reverse order."""
    # the cyclic GC paused while nodes are built (fpspec.tree.building); a
    # big tree is frozen afterwards, see note [gc after a big build]
    with building(freeze=len(learned.pivot) >= FREEZE_N):
        return _assemble_now(learned)


def _assemble_now(learned: _Learned) -> Tree:
    _, child, exceeds, _ = learned.levels()
    if not exceeds.any():
        return _assemble_binary(learned, child.tolist())
    child, exceeds = child.tolist(), exceeds.tolist()
    F = len(learned.pivot)
    result: list = [None] * F
    top_fused = [False] * F
    for f in range(F - 1, -1, -1):
        if learned.shape[f] is not None:
            result[f] = _shape_nodes(learned.shape[f])
            continue
        r: Tree = learned.pivot[f]
        a, b = learned.span[f]
        for k in range(a, b):
            c = child[k]
            if c < 0:
                sub, sub_fused = ~c, False
            else:
                sub, sub_fused = result[c], top_fused[c]
                result[c] = None
            if sub_fused:
                # the child's top is a fused node that also takes r as a child
                r = Node(sub.children + (r,), fused=True)
            elif exceeds[k]:
                r = Node((r, sub), fused=True)
            else:
                r = Node((r, sub))
        result[f] = r
        top_fused[f] = exceeds[b - 1]
    return result[0]


def _assemble_binary(learned: _Learned, child: list) -> Tree:
    """No fused node: every frame and proven guess as (x, y) rows for one bulk build."""
    rows: list = []
    ref = [0] * len(learned.pivot)         # each frame's top, as a row position
    for f in range(len(learned.pivot) - 1, -1, -1):
        shape = learned.shape[f]
        if shape is not None:
            off = len(rows)
            rows.extend(np.where(shape.kids >= 0, shape.kids + off, shape.kids).tolist())
            ref[f] = len(rows) - 1
            continue
        r = ~learned.pivot[f]
        a, b = learned.span[f]
        for c in child[a:b]:
            rows.append((r, c if c < 0 else ref[c]))
            r = len(rows) - 1
        ref[f] = r
    return build_binary(rows) if rows else ~ref[0]


def _checks_from_learned(learned: _Learned, rng, k: int, root_only: bool = False) -> list:
    """(units, a, b, expected l_S) for pairs the construction never asked: a in level t1, b in t2 > t1
    of one frame; their lca is the level-t2 node, so l_S is the recorded l of level t2."""
    L, _, _, rep = learned.levels()
    spans = np.asarray(learned.span[:1] if root_only else learned.span)
    frames = np.flatnonzero(spans[:, 1] - spans[:, 0] >= 2)
    out = []
    if not len(frames):
        return out
    for f in rng.choice(frames, size=min(k, len(frames) * 4), replace=True).tolist():
        a0, b0 = learned.span[f]
        t1, t2 = sorted(rng.choice(np.arange(a0, b0), size=2, replace=False).tolist())
        out.append((learned.units[f], int(rep[t1]), int(rep[t2]), int(L[t2])))
    return out


def _checks_from_tree(tree: Tree, rng, k: int) -> list:
    index = LcaIndex(tree)
    return [(None, a, b, index.l(a, b)) for a, b in _tree_pairs(tree, rng, k).tolist()]


# ---------------------------------------------------------------- FPRev-basic (Algorithm 2)

def _basic(oracle: LcaOracle, n: int) -> Tree:
    i, j = np.triu_indices(n, 1)
    pairs = np.stack([i, j], 1)
    L = oracle.l_many(pairs)
    if n > 2 and np.all(L == 2):
        raise RevealRefused("order-independent: every pair of masks cancels first (an exact or compensated "
                            "sum); there is no order to reveal")
    parent = list(range(n))
    tree_of: dict[int, Tree] = {k: k for k in range(n)}
    size = [1] * n

    def find(a: int) -> int:
        root = a
        while parent[root] != root:
            root = parent[root]
        while parent[a] != root:
            parent[a], a = root, parent[a]
        return root

    order = np.argsort(L, kind="stable")
    Ls, Is, Js = L[order], pairs[order, 0], pairs[order, 1]
    cut = np.flatnonzero(np.diff(Ls)) + 1
    for a, b in zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [len(Ls)]]).tolist()):
        lv = int(Ls[a])
        parts: dict[int, list[int]] = {}      # new root -> old roots merged under it at this l
        for x, y in zip(Is[a:b].tolist(), Js[a:b].tolist()):
            rx, ry = find(x), find(y)
            if rx == ry:
                continue
            kids = parts.pop(rx, [rx]) + parts.pop(ry, [ry])
            parent[ry] = rx
            size[rx] += size[ry]
            parts[rx] = kids
        for root, kids in parts.items():
            if size[root] != lv:
                raise RevealRefused(f"answers inconsistent with any tree: a node of l = {lv} holds {size[root]} leaves")
            tree_of[root] = Node(tuple(tree_of.pop(k) if k != root else tree_of[root] for k in kids),
                                 fused=len(kids) > 2)
    roots = {find(k) for k in range(n)}
    if len(roots) != 1:
        raise RevealRefused("answers inconsistent with any tree: the leaves never join into one tree")
    return tree_of[roots.pop()]


# ---------------------------------------------------------------- checks

def _random_exact(target, shape, rng, spread: int = 4) -> np.ndarray:
    """Random values exact in the target's format: integers of p bits times powers of two in
    [2^-spread, 2^spread] (no rounding pass needed)."""
    from fpspec.formats import get_format

    bits = min(get_format(target.fmt).precision, 24) - 1
    mant = rng.integers(-(1 << bits), 1 << bits, size=shape)
    scale = 2.0 ** (np.arange(-spread, spread + 1) - bits)   # a table lookup: pow over the array costs more
    return mant * scale[rng.integers(0, 2 * spread + 1, size=shape)]


def _fingerprint(target, oracle: LcaOracle, rng) -> np.ndarray:
    """gemv/gemm: every row of A the same random vector, B all ones.

    Every output then sums the same values; one whose bits equal element (0, 0)'s computes in
    its order (another order rounds random values differently): only those answer queries
    (LcaOracle.set_channels), and the others are reported as not sharing the revealed order.

    Note [repeat]: the same input must give the same bits.  The rows of A that answer no
    query in the next call carry this input again, and their outputs against the columns of
    units must not change (oracle.repeat_same); a construction that never leaves a row idle
    pays a second call instead (_settle_repeat)."""
    x = _order_sensitive(target, oracle, rng)[None, :]
    bits = _fingerprint_bits(target, oracle, x)
    oracle.calls += 1
    oracle.repeat, oracle.repeat_same = (x[0], bits), None
    same = bits == bits.reshape(-1)[0]
    if oracle.fingerprint_masked:
        # masks at leaves 0 and 1 hide every order inside their lca, and at small n the rest is
        # one or two values that every order adds alike: (((0 1) 2) 3) and ((0 1) (2 3)) both
        # give x2 + x3, (0 (1 2)) and the fused [0 1 2] both x2.  The masks moved to the last
        # two leaves see the other end of the tree (there: x0 + x1 against 0, x0 against 0),
        # so two orders pass only if both ends agree
        y = np.roll(x, -2, axis=1)
        other = _fingerprint_bits(target, oracle, y)
        oracle.calls += 1
        same &= other == other.reshape(-1)[0]
    return same


def _order_sensitive(target, oracle: LcaOracle, rng) -> np.ndarray:
    """A row for the fingerprint: random values exact in the format, and masks at leaves 0 and
    1 (unless the masks are split across A and B).  An output is the sum, in its order, of the
    values outside the lca of leaves 0 and 1: two orders give the same bits only if they agree
    on l(0, 1) and also happen to round the rest alike (random values alone give one number
    whose last few bits carry the order: two orders agree on it too often)."""
    p = oracle.plan
    oracle.fingerprint_masked = not p.split and target.n > 2
    spread = 3
    # the values' sum stays below the units a query may carry, so the masks swamp it
    top = min(10, int(np.log2(p.window * p.u)) - int(target.n).bit_length() - spread - 1)
    x = _random_exact(target, (target.n,), rng, spread) * 2.0 ** top
    if target.format.emin > -126:
        # a narrow format (fp16, fp8) has no values that far down: the ones it holds (a library's
        # own conversion would round them so; a replica that checks its inputs refuses others)
        from fpspec.formats import round_to

        x = round_to(target.format, x)
        # Note [vanished values]: below the format's smallest subnormal a value rounds to zero,
        # and with every value zero each order gives zero: every output looks like element
        # (0, 0) and all of them answer queries (fp16 at n = 3: 2^-19 scaled values round to
        # 0).  Zeros become random multiples of the smallest subnormal, below the bound where
        # the format reaches that far down (else the smallest subnormal itself).
        q = target.format.smallest_subnormal
        most = max(1, int(2.0 ** (top + spread) // q))
        zero = np.flatnonzero(x == 0)
        x[zero] = round_to(target.format, rng.integers(1, most + 1, len(zero)) * q
                           * rng.choice([-1.0, 1.0], len(zero)))
    if oracle.fingerprint_masked:
        x[0], x[1] = p.a_mask, -p.a_mask
    return x


def _fingerprint_bits(target, oracle: LcaOracle, x) -> np.ndarray:
    A = oracle._matrix("A", (target.m, target.n), 0.0)
    A[:] = x            # numpy: converted to the library's dtype in the copy
    A = A if oracle._dtype is not None else oracle._conv(A)
    B = oracle._ones_b() if oracle.plan.b_unit == 1 else oracle._conv(np.ones(target.operand_shapes[1]))
    out = target.fn(A, B)
    # a numpy output compared in its own dtype, as unsigned integers of its width
    out = out if isinstance(out, np.ndarray) else target.to_float64(out)
    return out.reshape(target.output_shape).view(f"u{out.itemsize}")


def _settle_repeat(target, oracle: LcaOracle) -> None:
    """The determinism check of note [repeat], once the construction is over (or has failed)."""
    if oracle.repeat is None or oracle.repeat_same:
        return
    x, first = oracle.repeat
    oracle.repeat = None
    oracle.calls += 1
    if not np.array_equal(_fingerprint_bits(target, oracle, x[None, :]), first):
        raise RevealRefused("nondeterministic: the same input gave different outputs on two calls")
    if oracle.repeat_same is False:
        raise RevealRefused("value-dependent: outputs changed with the values in other rows of A; "
                            "their order cannot be revealed one query per row")


# Note [exact windows]: the masks of _refuse_if_exact sit in the top binade of a ReproBLAS bin
# (fp64: bins of 40 binades, one tops at 2^64; fp32: bins of 13, one at 2^37), so a binned sum
# (fpspec.arith.binned) keeps units of 1 in its lesser bins exactly (fp64 for fold >= 2, fp32
# for fold >= 3), where a fused node of a few extra bits (p + 3 in seed 000) swamps them.
EXACT_MASKS = {"fp64": 2.0 ** 63, "fp32": 2.0 ** 36}


def _refuse_if_exact(target, rng, pairs: int = 16) -> None:
    """One fused node of every leaf: the masks swamped all units.  A sum exact over a window much
    wider than the format (exact, compensated, binned) also gives that; if every pair of masks of
    note [exact windows] cancels first, it is order-independent, as math.fsum."""
    big = EXACT_MASKS.get(target.fmt)
    if big is None:
        return
    n = target.n
    chosen = {(0, n - 1)} | {tuple(sorted(rng.choice(n, 2, replace=False).tolist())) for _ in range(pairs)}
    for i, j in sorted(chosen):
        vec = np.ones(n)
        vec[i], vec[j] = big, -big
        ops = {"sum": (vec,), "dot": (vec, np.ones(n)),
               "gemv": (np.tile(vec, (target.m, 1)), np.ones(n)),
               "gemm": (np.tile(vec, (target.m, 1)), np.ones((n, target.ncols)))}[target.op]
        if not np.all(target.run(*ops) == n - 2):
            return
    raise RevealRefused("order-independent: every pair of masks cancels first (an exact, compensated or "
                        f"binned sum: one node of all leaves, and exact at masks +-2^{int(np.log2(big))}); "
                        "there is no order to reveal")


def _repeat_masked(target, rng, pairs: int = 8) -> None:
    """Inputs of two opposite masks and ones, each called twice.  _check_deterministic's exact
    random inputs sum alike in any order, so a target that shuffles its order between calls
    passes it and fails only the construction; these inputs round differently in most orders."""
    big = 2.0 ** min(target.format.emax - 1, target.accumulator.precision + 1)   # swamps a one
    n = target.n
    for _ in range(pairs):
        i, j = rng.choice(n, 2, replace=False)
        vec = np.ones(n)
        vec[i], vec[j] = big, -big
        ops = (vec,) if target.op == "sum" else (vec, np.ones(n))
        first, second = target.run(*ops), target.run(*ops)
        if not np.array_equal(np.asarray(first), np.asarray(second), equal_nan=True):
            raise RevealRefused("nondeterministic: the same input gave different outputs on two calls")


def _check_deterministic(target, oracle: LcaOracle, rng) -> None:
    """The same input must give the same output: call twice on random inputs and on masked ones."""
    ops = [_random_exact(target, shape, rng) for shape in target.operand_shapes]
    native = [target.native(x) for x in ops]     # converted once: the queries reuse buffers too
    a = target.to_float64(target.fn(*native))
    b = target.to_float64(target.fn(*native))
    oracle.calls += 2
    if not np.array_equal(a.view(np.uint64), b.view(np.uint64)):
        raise RevealRefused("nondeterministic: the same input gave different outputs on two calls")
    # masked inputs are called again by the cross-checks in _validate


def _tree_pairs(tree: Tree, rng, k: int) -> np.ndarray:
    """Pairs that pin the tree down: for sampled nodes, first leaves of two different children."""
    nodes = [s for s in postorder(tree) if not isinstance(s, int)]
    pick = rng.choice(len(nodes), size=min(k, len(nodes)), replace=False)
    out = []
    for p in pick.tolist():
        kids = nodes[p].children
        a, b = rng.choice(len(kids), size=2, replace=False)
        fa = kids[a] if isinstance(kids[a], int) else kids[a].first
        fb = kids[b] if isinstance(kids[b], int) else kids[b].first
        out.append((fa, fb))
    n = tree.size if isinstance(tree, Node) else 1
    for _ in range(k):
        a, b = rng.choice(n, size=2, replace=False)
        out.append((int(a), int(b)))
    return np.array(out, dtype=np.int64)


def _validate(checks: list, oracle: LcaOracle) -> None:
    """Fresh queries on pairs the construction never asked must agree with the tree: catches
    nondeterminism, value-dependent orders and garbage (batched; the batching itself was
    checked against single calls when it was first used)."""
    if not checks:
        return
    sets, ids, pairs, expect = [], {}, [], []
    for units, a, b, l in checks:
        key = id(units)
        if key not in ids:
            ids[key] = len(sets)
            sets.append(np.arange(oracle.n) if units is None else units)
        pairs.append((a, b, ids[key]))
        expect.append(l)
    P = np.array(pairs, np.int64)
    _refuse_unless_equal(P, oracle.l_many(P[:, :2], sets, P[:, 2]), np.array(expect))


# Note [blind fingerprint]: the fingerprint (masks at leaves 0 and 1, then at the last two)
# sees an output's order only through the leaves outside those two lcas and the rounding of
# the rest.  Orders that agree there give the same bits: the fused [0 1 2] and ((0 2) 1) both
# swamp every value at n = 3, and fp16 values small enough to be swamped sum exactly in an
# fp32 accumulator, in any order.  Such outputs answer queries beside element (0, 0), and the
# tree mixes their orders with its own.  So the tree is checked at every output that answered
# queries: completely when it is small (PROOF_PAIRS), else on sampled pairs.  When element
# (0, 0) answers unlike the tree, the tree is rebuilt from element (0, 0)'s answers alone.

PROOF_PAIRS = 64        # trees proven at every output when their proof takes at most this many calls


def _proof_pairs(tree: Tree, limit: int) -> tuple[np.ndarray, bool] | None:
    """(rows (a, b, l), complete) that pin `tree` down, or None when even its clusters take more
    than `limit` rows.  For every node, a first leaf of its first child with one of each other
    child, expecting the node's size: every node is then a subtree of the answering tree (the
    answers are some tree's l; the lca subtrees of a node's pairs form a laminar family joined
    through shared leaves).  A fused node also needs every pair of its other children (else
    ((0 1) 2) would pass as [0 1 2]: no subtree may hold two children without all of them);
    those come next, neighbours first, as far as `limit` allows; complete: all of them fit, and
    then every cluster is a cluster of the answering tree and vice versa."""
    clusters: list = []
    siblings: list = []
    for node in postorder(tree):
        if isinstance(node, int):
            continue
        firsts = [c if isinstance(c, int) else c.first for c in node.children]
        clusters.extend((firsts[0], f, node.size) for f in firsts[1:])
        if len(clusters) > limit:
            return None
        k = len(firsts)
        for gap in range(1, k - 1):
            if len(siblings) > limit:
                break
            siblings.extend((firsts[x], firsts[x + gap], node.size) for x in range(1, k - gap))
    siblings.sort(key=lambda r: r[1] - r[0])        # neighbours first (by leaf distance)
    room = limit - len(clusters)
    rows = clusters + siblings[:room]
    return np.array(rows, np.int64).reshape(-1, 3), len(siblings) <= room


def _sharing_check(tree: Tree, checks: list, oracle: LcaOracle, same) -> tuple[np.ndarray, bool]:
    """(outputs that do not share the revealed order, proven): outputs (bool, m x ncols) whose
    bits differed from element (0, 0)'s on the fingerprint (`same`), or that answer a pair unlike
    the tree (note [blind fingerprint]).  A tree whose clusters take at most PROOF_PAIRS pairs
    is asked at every output, one call per pair (_proof_pairs); proven: the proof was complete,
    so those not marked compute in the revealed order.  Otherwise row r of A asks sampled pair
    r mod k, so one call checks every output (one call per pair when the masks are split
    across A and B)."""
    t = oracle.target
    bad = ~np.asarray(same, bool).reshape(t.m, -1)
    if int((~bad).sum()) <= 1:
        return bad, False       # no other output looked like element (0, 0) or answered its queries
    proof = _proof_pairs(tree, PROOF_PAIRS)
    if proof is not None:
        rows, complete = proof
        for i, j, e in rows.tolist():
            bad |= ~oracle.agrees_everywhere(i, j, e).reshape(t.m, -1)
        return bad, complete
    if not checks:
        return bad, False
    a = np.array([c[1] for c in checks])
    b = np.array([c[2] for c in checks])
    expect = np.array([c[3] for c in checks])
    if oracle.plan.split:
        for i, j, e in zip(a.tolist(), b.tolist(), expect.tolist()):
            bad |= ~oracle.agrees_everywhere(i, j, e).reshape(t.m, -1)
        return bad, False
    k = np.arange(t.m) % len(checks)
    return bad | ~oracle.agrees_everywhere(a[k], b[k], expect[k]).reshape(t.m, -1), False


class _Progress:
    """Leaves placed so far, reported as the phase "reveal n=N" (fpspec.progress: the
    command line shows a bar on a terminal, nothing otherwise)."""

    def __init__(self, total: int, enabled: bool):
        from fpspec.progress import phase

        self.total, self.enabled, self.done = total, enabled, 0
        self._phase = phase(f"reveal n={total}", total) if enabled else None
        self._advance = self._phase.__enter__() if enabled else None

    def advance(self, k: int) -> None:
        self.done += k
        if self._advance is not None:
            self._advance(k)

    def close(self) -> None:
        if self._phase is not None:
            self._phase.__exit__(None, None, None)
            self._phase = self._advance = None
