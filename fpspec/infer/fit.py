"""Observed trees at many n -> the most compact order that explains them all.

The search is top-down.  Given a set of observations (trees over operand
positions 0..n-1, at several n), `Fitter.fit` tries, cheapest first:

1. a parameter-free order (seq, rev, pairwise, gpu_tree, fused) or a fused
   chain: built at each n and compared with ==;
2. a structural order whose parameter is fitted as an expression in n
   (fpspec.infer.exprs) -- split, tail, lanes, blocks, chunks, pad, and
   vlanes (constant V, K constant or max(1, n // c), where nothing plainer
   fits) -- after which each part (FIRST/REST, BODY/OUTER, INNER/OUTER) is a
   smaller fitting problem over the sub-observations the parts saw
   (fpspec.infer.shapes);
3. at the root only, FIRST and REST of a split may be the root order itself
   (`Ref`): recursion on sub-ranges, as numpy's pairwise_sum; so may a part
   of blocks, lanes, vlanes, chunks or tail that no plain order explains
   (note [recursive parts]).

When no single order explains every n, `fit_guarded` cuts the sorted n into
maximal runs that one order explains and joins them with guards `n <= c`.
Nothing is accepted without being checked: every candidate is compared with
every observation it claims, and the caller re-expands the final spec at
every observed n (a recursive `Ref` is only provisional until then).
"""
from __future__ import annotations

import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from fpspec.errors import SpecError
from fpspec.spec import ast as A
from fpspec.spec.check import ORDER_FIELDS, order_children
from fpspec.spec.expand import apply_order, eval_cond, eval_expr
from fpspec.spec.lower import chunk_size_expr
from fpspec.infer.check import replace_at, walk
from fpspec.infer.exprs import constants, expr_cost, fit_values, roundness
from fpspec.infer.rules import decision_list
from fpspec.infer.shapes import (Obs, block_parts, chunk_parts, equal_shifted, lane_candidates, lane_parts, lane_parts_left, lane_strides, prefix_sizes,
                                 sized_chunk_parts, vlane_candidates, vlane_parts,
                                 split_parts, split_point, tail_parts)
from fpspec.tree import Tree, building, chain_shape, observable, postorder

N = A.Var()
SIMPLE = (A.Seq(), A.Pairwise(), A.Rev(), A.GpuTree(), A.Fused())
SEARCHED = A.Ref("searched arm")   # note [simple lists]: a guard arm whose order a search fits
MAX_DEPTH = 5
SAMPLE = 10  # observations a search starts from (see Fitter.fit)
MAX_RUNS = 16  # guard arms beyond this are a case list, not a spec: give up
MAX_EXCEPTIONS = 4  # notes [simple runs], [small exceptions]: single n given as their trees, at most this many
EXCEPTION_N = 9     # note [small exceptions]: n up to this may be exceptions to the order of the rest
EXCEPTION_DEPTH = 1  # note [small exceptions]: tried this many levels below the root too (a part's guard)
THRESHOLD_MOVE = 8  # note [moved thresholds]
RESIDUE_AFTER = 3  # more range arms than this: try residue classes of n too
RESIDUE_MODULI = (2, 4, 8, 16)
RESIDUE_DEPTH = 1  # residue guards this many levels below the root at most (each is a search per class)
CLASS_MODULI = tuple(range(2, 9))  # note [residue classes]: moduli whose classes are read off the trees
CLASS_WORK = 80    # note [residue classes]: a proposal's arms may cost this many searches of the sample
CLASS_EXCEPTIONS = 1  # note [residue classes]: n a class's fixed feature may miss, given their own arms
PAD_MULTIPLES = (8, 16, 4)   # vector widths a kernel pads its partial vector to (pad)
PAD_OTHER = (2, 5, 3, 6, 7)  # other multiples, tried near the root only (PAD_OTHER_DEPTH)
PAD_OTHER_DEPTH = 1          # deeper, pad(2, ...) competes with lanes of 2 for the same trees
PAD_DEPTH = 3                # pad is tried this many levels below the root at most
VLANE_TRIES = 3   # (V, K) of vlanes tried, from the subtrees above leaf 0
FOUND_WORK = 160   # note [found orders]: leaves per sampled operand the search spends past a found order
SCALED_DEPTH = 0  # notes [scaled vector lanes], [scaled chunks]: how deep they are tried
VLANE_LOOK = 4    # note [scaled vector lanes]: observations whose trees propose a vector width
BLOCK_COUNTS = tuple(range(2, 9))  # blocks(max(1, n // c)), lanes(max(1, n // c)): the c tried
OUTER_BLOCK_MIN = 256        # note [outer blocks]: a library's outermost blocking is at least this
# Note [blocks seen]: a block size b is taken from the largest observation's
# tree; where it splits only the two largest n (63 and 64 over 1..64), every
# smaller n is one whole block and the inner order is the whole fitting
# problem again, one level deeper: a guard in disguise that costs a full
# search (blocks(60, blocks(max(1, n // 6), ...), seq) for blocks(max(1, n // 6),
# rev, seq)).  So b must cut at least this many observations into blocks;
# a larger b is a guard arm (`if n <= b: ...`) or an outer block.  (Fewer
# observations than that: each must be cut.)
BLOCKS_SEEN = 3
_NOT_TAKEN = object()   # Fitter._part: nothing kept for that key yet
TAKEN_LEAVES = 2_000_000  # Fitter._part keeps the parts of observations of this many leaves in all (memory)


# Note [bounded search]: the search is exponential in the depth of the order
# (every combinator tried at every level, each with guards below it), and a
# black box no combinator fits well (np.einsum's lanes whose inner order
# depends on the whole n) can keep it busy for hours.  So every search runs
# on a Budget: CPU seconds the fit may use in all (a share of the caller's
# time limit, counted in this process's CPU time so that a loaded machine
# does not starve the fit of its share), the caller's deadline (wall
# clock), and optionally a count of leaves it
# may build or take apart (deterministic: the same observations give the
# same answer on any machine; tests and the soak use it).  Spending past any
# of them raises Stopped, which the caller turns into a fallback spec that
# holds where it was observed (note [fallback] in fpspec.infer.engine), or a
# refusal; never into a guess.
# The fit's share is half the limit: revealing 1..4096 at designed and held-out n
# takes seconds to a quarter of a minute here, while at 1/20 a 60 s limit left the
# fit 3 s, and numpy.sum's plain tail/lanes order ended in a fallback
FIT_SHARE = 1 / 2       # of the time limit, for the fit search (300 CPU s of the default 600)


class Stopped(Exception):
    """A search or an inference ran out of its budget (work or time): the message says which."""


class Capped(Stopped):
    """A tentative sub-search (Budget.capped) ran out of its own cap; only its opener catches it."""

    def __init__(self, token: object):
        super().__init__("a tentative sub-search used its cap")
        self.token = token


@dataclass
class Budget:
    work: int | None = None          # leaves the fitter may build or take apart in all
    deadline: float | None = None    # time.monotonic() after which nothing new starts
    limit: float | None = None       # the time limit in seconds, for messages
    fit_seconds: float | None = None  # CPU seconds the fit search may use in all
    spent: int = 0
    fit_used: float = 0.0
    progress: Callable[[int], None] | None = None   # told the leaves spent (fpspec.progress)
    _fit_start: float | None = None
    _caps: list = field(default_factory=list)       # (spent limit, token) of the open capped sub-searches

    def charge(self, leaves: int) -> None:
        self.spent += leaves
        if self.progress is not None:
            self.progress(leaves)
        if self.work is not None and self.spent > self.work:
            raise Stopped(f"the fit search used its whole budget ({self.work:,} leaves built and compared)")
        for limit, token in self._caps:   # outermost first: it is the one that ends
            if self.spent > limit:
                raise Capped(token)
        if self.fit_seconds is not None and self._fit_start is not None and (
                self.fit_used + time.process_time() - self._fit_start > self.fit_seconds):
            raise Stopped(f"the fit search used its share of the time limit ({self.fit_seconds:g} CPU s"
                          + (f" of {self.limit:g} s)" if self.limit else ")"))
        self.check_time("fitting")

    def check_time(self, doing: str) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Stopped(f"the time limit ({self.limit:g} s) was reached while {doing}")

    @contextmanager
    def capped(self, leaves: int):
        """A tentative sub-search that may spend at most `leaves` more: past them it
        raises Capped(token), the token this yields (a nested cap's Capped passes through)."""
        token = object()
        self._caps.append((self.spent + leaves, token))
        try:
            yield token
        finally:
            self._caps.pop()

    @contextmanager
    def fitting(self):
        """Count the CPU time inside against fit_seconds."""
        self._fit_start = time.process_time()
        try:
            yield
        finally:
            self.fit_used += time.process_time() - self._fit_start
            self._fit_start = None


def order_cost(o) -> int:
    """Size of an order: one per combinator, expression and guard arm."""
    if isinstance(o, (A.Seq, A.Rev, A.GpuTree, A.Fused, A.Ref)):
        return 1
    if isinstance(o, A.Pairwise):
        return 1 + (expr_cost(o.split) if o.split is not None else 0)
    if isinstance(o, A.Chain):
        return 1 + expr_cost(o.w)
    if isinstance(o, A.Lanes):
        return (1 + expr_cost(o.k) + order_cost(o.inner) + order_cost(o.outer)
                + (0 if o.left is None else order_cost(o.left)) + (0 if o.unroll is None else expr_cost(o.unroll)))
    if isinstance(o, A.VLanes):
        return 1 + expr_cost(o.v) + expr_cost(o.k) + order_cost(o.inner) + order_cost(o.outer)
    if isinstance(o, A.Chunks):
        return 1 + expr_cost(o.size) + order_cost(o.inner) + order_cost(o.outer)
    if isinstance(o, A.Pad):
        return 1 + expr_cost(o.m) + order_cost(o.order)
    if isinstance(o, A.Blocks):
        return 1 + expr_cost(o.b) + order_cost(o.inner) + order_cost(o.outer)
    if isinstance(o, A.Tail):
        return 1 + expr_cost(o.k) + order_cost(o.body) + order_cost(o.outer)
    if isinstance(o, A.Split):
        return 1 + expr_cost(o.at) + order_cost(o.first) + order_cost(o.rest)
    if isinstance(o, A.Guard):
        return 1 + sum(2 + order_cost(c.order) for c in o.cases) + order_cost(o.otherwise)
    if isinstance(o, A.Literal):
        return 10 + (1 if isinstance(o.tree, int) else o.tree.size)
    if isinstance(o, A.Using):     # the arithmetic per part (fpspec.spec.regions): the tree is its order's
        return 1 + order_cost(o.order)
    raise TypeError(f"not an order: {o!r}")


@dataclass
class Run:
    """A maximal run of observed n that one order explains."""

    lo: int          # smallest observed n of the run
    hi: int          # largest observed n of the run
    order: object


@dataclass
class Fitter:
    name: str = "order"                     # the root's name, for recursion
    pool: dict = field(default_factory=dict)  # n -> observed root tree
    allow_ref: bool = True
    seen: set = field(default_factory=set)  # constants worth trying (lanes, blocks, splits)
    candidates: int = 0                     # orders compared with observations
    _memo: dict = field(default_factory=dict)
    _built: dict = field(default_factory=dict)
    _verified: dict = field(default_factory=dict)
    _taken: dict = field(default_factory=dict)   # (shapes function, Obs.key, args) -> its parts (_part)
    _taken_leaves: int = 0                       # leaves of the observations whose parts _taken holds
    runs: list = field(default_factory=list)  # the root guard's runs, for refinement
    budget: Budget = field(default_factory=Budget)  # note [bounded search]

    # ------------------------------------------------------------ entry points
    def fit_root(self, obs: list[Obs]):
        """The root order for the observations, recursion and guards allowed."""
        with building():  # one pause of the cyclic GC for the whole search
            simple = self._simple_runs(obs)
            if simple is None or len(simple) > RESIDUE_AFTER:
                listed = self._simple_list(obs)
                if listed is not None:
                    ns = sorted({o.n for o in obs})
                    self.runs = [Run(ns[0], ns[-1], listed)]
                    return listed
            try:
                return self._outer_blocks(obs) or self.fit_guarded(obs, 0, root=True)
            except Stopped:
                if simple is None:
                    raise
                # note [simple runs]: the search ran out; what every observation agrees with stands
                self.runs = sorted(simple, key=lambda r: r.lo)
                return _guard_of(simple)

    # Note [simple runs]: the search is cheapest when it succeeds; an order that
    # needs guards first fails whole searches (every combinator, every sample)
    # over sets of n no one order explains, and a fit budget can run out there
    # on orders as plain as `if n <= 27: pairwise else: seq`.  So before it,
    # the runs of consecutive observed n that one order of SIMPLE explains are
    # noted (building those trees costs little and is not charged); when the
    # search stops on its budget, those runs, if every n has one and there are
    # at most MAX_RUNS of them, are the answer (each checked against its every
    # observation, then held out like any other fit).  Up to MAX_EXCEPTIONS
    # single n that no simple order gives are kept as their trees (`n == c`).
    def _simple_runs(self, obs: list[Obs]):
        by_n: dict[int, list[Obs]] = {}
        for o in obs:
            by_n.setdefault(o.n, []).append(o)
        runs: list[Run] = []
        live: list = []
        exceptions: list[Run] = []
        for n in sorted(by_n):
            fits = [order for order in SIMPLE[:4] if all(self._same(order, o) for o in by_n[n])]
            if not fits:
                # one n no simple order gives: its tree, as an exception `n == c`
                if len({hash(o.tree) for o in by_n[n]}) > 1 or len(exceptions) >= MAX_EXCEPTIONS:
                    return None
                exceptions.append(Run(n, n, A.Literal(by_n[n][0].tree)))
                continue
            keep = [order for order in live if order in fits]
            if runs and keep:
                runs[-1] = Run(runs[-1].lo, n, keep[0])
                live = keep
            else:
                runs.append(Run(n, n, fits[0]))
                live = fits
            if len(runs) + len(exceptions) > MAX_RUNS:
                return None
        return (exceptions + runs) if runs else None

    # Note [simple lists]: runs of one order are ranges of n; a kernel that
    # picks its order by size and alignment at once (`if n > 39 or n % 3 != 1:
    # rev else: seq`) gives more runs than MAX_RUNS, none of them a residue
    # class alone, and the search fails at every combinator before the runs
    # are cut.  The n a simple order gives are known without a search, so the
    # guard is read off the n themselves (fpspec.infer.rules.decision_list,
    # conditions that are conjunctions of thresholds and residues), the n no
    # simple order gives taking one more arm, SEARCHED, whose order one search
    # over exactly those n then fits (`if n > 33 and n % 2 == 1: split(...)
    # else: pairwise`).  A few such n may instead keep their trees as `n == c`
    # arms (note [simple runs]): all of them, or those up to EXCEPTION_N, or
    # up to twice it (a hand-written case for n = 10 breaks the residue class
    # the others share, and a class's first members can only join it as
    # exceptions below it).  The whole guard is checked against every
    # observation.
    def _simple_list(self, obs: list[Obs]):
        by_n: dict[int, list[Obs]] = {}
        for o in obs:
            by_n.setdefault(o.n, []).append(o)
        labels: dict[int, frozenset] = {}
        odd = []
        for n in sorted(by_n):
            if n <= 2:
                continue   # every order gives the same tree
            fits = frozenset(i for i, order in enumerate(SIMPLE[:4]) if all(self._same(order, o) for o in by_n[n]))
            if fits:
                labels[n] = fits
            elif len({hash(o.tree) for o in by_n[n]}) > 1:
                return None
            else:
                odd.append(n)
        if len(labels) < SAMPLE:
            return None
        variants = [(odd, [])] if len(odd) <= MAX_EXCEPTIONS else []
        small = [n for n in odd if n <= EXCEPTION_N]
        if small and len(small) <= MAX_EXCEPTIONS and len(small) < len(odd):
            variants.append((small, [n for n in odd if n > EXCEPTION_N]))
        if odd:
            variants.append(([], odd))
        wider = [n for n in odd if n <= 2 * EXCEPTION_N]   # (last: the fewest literal trees first)
        if len(small) < len(wider) <= MAX_EXCEPTIONS and len(wider) < len(odd):
            variants.append((wider, [n for n in odd if n > 2 * EXCEPTION_N]))
        searched = len(SIMPLE[:4])   # the label of the n whose arm is searched
        for exceptions, rest in variants:
            listed = decision_list({**labels, **{n: frozenset({searched}) for n in rest}},
                                   list(SIMPLE[:4]) + [SEARCHED])
            if listed is None:
                continue
            if rest:
                arm = self._searched_arm(listed, by_n)
                if arm is None:
                    continue
                if self._explains(arm, obs):
                    return arm   # one order after all (lanes(4, seq, seq) is seq up to n = 4)
                listed = _with_searched(listed, arm)
            if exceptions:
                arms = tuple(A.Case(A.Compare("==", N, A.Num(n)), A.Literal(by_n[n][0].tree)) for n in exceptions)
                listed = (A.Guard(arms + listed.cases, listed.otherwise) if isinstance(listed, A.Guard)
                          else A.Guard(arms, listed))
            if self._explains(listed, obs):
                return listed
        return None

    def _searched_arm(self, listed, by_n: dict):
        """The order of the guard's SEARCHED arm, fitted to the observations at the n
        that take that arm; None if none fits."""
        cases = listed.cases if isinstance(listed, A.Guard) else ()
        orders = [c.order for c in cases] + [listed.otherwise if isinstance(listed, A.Guard) else listed]
        i = orders.index(SEARCHED)
        arm_of = {n: next((j for j, c in enumerate(cases) if eval_cond(c.cond, n)), len(cases)) for n in by_n}
        arm = [o for n in by_n if arm_of[n] == i for o in by_n[n]]
        got = self.fit(arm, 0, True)
        if got is None and len(cases) == 1 and i == 1:
            # a plain order's run, then the rest: residue classes, as in note [simple ends]
            got = self._rest_classes(arm, 0, True)
        return got

    def _same(self, order, o: Obs) -> bool:
        try:
            return o.n <= 1 or hash(self._build(order, o.n)) == hash(o.tree)
        except SpecError:
            return False

    def _outer_blocks(self, obs: list[Obs]):
        """Note [outer blocks]: a library's outermost loop cuts n into big blocks
        (OpenBLAS sgemv: 4096 terms at a time, inside its scalar tail).  The
        order fitted to the observations up to a block size B alone, with one
        of its sub-orders X put in `blocks(B, X, OUTER)`, often explains all of
        them.  Tried first because the whole search would fit the range below
        B again inside every combinator it tries at the root."""
        big = max(obs, key=lambda o: o.n)
        for b in sorted((p for p in prefix_sizes(big) if OUTER_BLOCK_MIN <= p < big.n), key=roundness)[:3]:
            small = [o for o in obs if o.n <= b]
            if len({o.n for o in small}) < SAMPLE:
                continue
            base = self.fit_guarded(small, 0, root=True)
            if base is None:
                continue
            if self._explains(base, obs):
                return None    # no outer blocks: the whole search finds this order or a cheaper one
            for cand in _lifted(base, A.Num(b)):
                if self._explains(cand, obs):
                    ns = sorted({o.n for o in obs})
                    self.runs = [Run(ns[0], ns[-1], cand)]
                    self.seen.add(b)
                    return cand
        return None

    def fit_guarded(self, obs: list[Obs], depth: int = 0, root: bool = False, residues: int = 2):
        """An order for every observation, with guards on n where needed:
        ranges of n, or residue classes (`n % c == r`) when a library picks its
        kernel by n's alignment (cuBLAS: odd K, K % 8 == 0, the rest)."""
        ns = sorted({o.n for o in obs})
        one_each = _dedupe(obs)
        if one_each is None:
            return None   # two trees at one n: no order in n alone gives both, guarded or not
        classes = self._class_proposals(one_each) if residues and depth <= RESIDUE_DEPTH else []
        exact = [c for c in classes if not c[2]]
        classed = self._class_guard(obs, depth, root, residues, exact) if exact else None
        if classed is not None:
            if root:
                self.runs = [Run(ns[0], ns[-1], classed)]
            return classed
        got = None
        if len(exact) < len(classes):
            # classes with exceptions only where no one order explains every n (an
            # exception is a guess that would cut a plain order), tried after a plain
            # search capped like a class (a failing search over every n is the dearest)
            with self.budget.capped(self._class_cap(obs)) as token:
                try:
                    got = self.fit(obs, depth, root)
                except Capped as e:
                    if e.token is not token:
                        raise
            if got is None:
                got = self._class_guard(obs, depth, root, residues, [c for c in classes if c[2]])
        hopeless = False
        if got is None:
            got, hopeless = (self._small_exceptions(obs, depth, root) if root or depth <= EXCEPTION_DEPTH
                              else (None, False))
        if got is None and not hopeless:
            got = self.fit(obs, depth, root)
        if got is not None:
            if root:
                self.runs = [Run(ns[0], ns[-1], got)] if ns else []
            return got
        by_n: dict[int, list[Obs]] = {}
        for o in obs:
            by_n.setdefault(o.n, []).append(o)
        ns = sorted(by_n)
        # greedy runs from the smallest n up, and from the largest down: the
        # structure of large n often explains everything above a small
        # threshold, which the upward pass cuts into pieces; keep the cheaper
        ends = self._simple_end(ns, by_n, depth, root)
        options = [ends] if ends is not None else [
            r for r in (self._runs(ns, by_n, depth, root, False), self._runs(ns, by_n, depth, root, True))
            if r is not None]
        ranged = None
        if options:
            runs = _merge_runs(min(options, key=lambda rs: sum(2 + order_cost(r.order) for r in rs)))
            if root:
                self.runs = runs
            if len(runs) == 1:
                return runs[0].order
            cases = tuple(A.Case(A.Compare("<=", N, A.Num(r.hi)), r.order) for r in runs[:-1])
            ranged = A.Guard(cases, runs[-1].order)
            if len(runs) <= RESIDUE_AFTER:
                return ranged
        classed = self._residue_guard(obs, depth, root, residues) if residues and depth <= RESIDUE_DEPTH else None
        if classed is not None and (ranged is None or order_cost(classed) < order_cost(ranged)):
            return classed
        if root and options:
            self.runs = runs
        return ranged

    # Note [small exceptions]: a kernel often special-cases a few small n (a
    # hand-written tree for n == 6) and runs one order everywhere else.  The
    # whole search fails on such a set, and cutting it into runs costs a
    # failing search per step of each run's binary search.  So at the root the
    # n above EXCEPTION_N are fitted alone first; when their order explains all
    # but at most MAX_EXCEPTIONS of the small n, those get `n == c` arms (their
    # own order, else their tree); more of them share one order below a
    # threshold, when one does.  An order that explains every n explains
    # those above EXCEPTION_N, so this fit comes first: where it explains the
    # small n too it is the answer, and where nothing explains the n above,
    # nothing explains them all (the search on all of them is skipped).
    def _small_exceptions(self, obs: list[Obs], depth: int, root: bool = True):
        """(the order, or None; whether the search on every n is hopeless)."""
        above = [o for o in obs if o.n > EXCEPTION_N]
        if len({o.n for o in above}) < SAMPLE or len(above) == len(obs):
            return None, False
        if self._plain_past(obs, EXCEPTION_N + 1):
            return None, False   # a plain loop below a size, not exceptions: note [simple ends]
        order = self.fit(above, depth, root)
        if order is None:
            return None, True
        bad = sorted({o.n for o in obs if o.n <= EXCEPTION_N and not self._verify(order, o, root)})
        if len(bad) > MAX_EXCEPTIONS:
            # too many for `n == c` arms: one order for every n up to the last of them, a
            # threshold (a kernel's plain loop below a size, its blocked recursion above)
            low = self.fit([o for o in obs if o.n <= bad[-1]], depth + 1)
            if low is None:
                return None, False
            cut = A.Guard((A.Case(A.Compare("<=", N, A.Num(bad[-1])), low),), order)
            # (one order for every n, where a capped search finds one, is simpler)
            with self.budget.capped(self._class_cap(obs)) as token:
                try:
                    whole = self.fit(obs, depth, root)
                except Capped as e:
                    if e.token is not token:
                        raise
                    whole = None
            return (whole if whole is not None and order_cost(whole) <= order_cost(cut) else cut), False
        if not bad:
            return order, False
        cases = [self._exception(obs, n, depth) for n in bad]
        if None in cases:
            return None, False
        below = [o for o in obs if o.n <= bad[-1]]
        if len({c.order for c in cases}) == 1 and self._explains(cases[0].order, below):
            # one order for every n up to the last exception: a threshold, as a kernel writes it
            cases = [A.Case(A.Compare("<=", N, A.Num(bad[-1])), cases[0].order)]
        return A.Guard(tuple(cases), order), False

    # Note [residue classes]: a guard `if n % 5 == 1: A else: B` makes the
    # whole search fail at the root (no one order explains both classes),
    # then cuts n into runs of one n each, and the fit budget runs out before
    # the residue guards after it are tried.  But such a guard shows in the
    # trees themselves: one class of n has a root cut at a fixed place (split
    # of 5 terms, a tail of 2) or one parameter-free order, and the other
    # class never has it.  So before any search, each n's root is described by
    # features that one order keeps fixed across n (left part's size, right
    # part's size, the parameter-free orders that give it), and a residue
    # class `n % m == r` (m in CLASS_MODULI) is proposed when on it a feature
    # takes one value that no n outside it takes.  Small n (below 2m + 2) are
    # left out of the test: there the orders' min(k, n - 1) clamps agree.
    # Each proposal is only a guess: its arms are fitted and checked like
    # any other order, and the smallest modulus whose arms fit wins.  A guess
    # costs at most CLASS_WORK searches' worth of leaves (Budget.capped): a
    # wrong one (a tail by 4 read as classes mod 4) otherwise sends the search
    # into nested guards for minutes.  Part sizes equal to n % m on the
    # classes where they are fixed are such cuts, and are not proposed.
    # A kernel's hand-written case for one n (`if n == 25: ...`) breaks the
    # fixed feature of its side: up to CLASS_EXCEPTIONS such n are proposed
    # with the class, and get their own `n == c` arms before it.
    def _class_proposals(self, obs: list[Obs]) -> list[tuple[int, int]]:
        by_n = {o.n: o for o in obs}
        feats: dict[int, tuple] = {}
        for n, o in by_n.items():
            h = split_point(o) if n > 2 else None
            simple = tuple(type(order).__name__ for order in SIMPLE[:4] if self._same(order, o))
            feats[n] = (h, None if h is None else n - h, simple)
        out = []
        for m in CLASS_MODULI:
            ns = [n for n in sorted(by_n) if n >= 2 * m + 2]
            # a part size that is n % m on the classes where it is fixed is the cut
            # of a tail, lanes or pad by m, which the unguarded search explains
            own = []
            for k in range(2):
                fixed = [(r, c.pop()) for r in range(m)
                         for c in [{feats[n][k] for n in ns if n % m == r}] if len(c) == 1 and None not in c]
                if len(fixed) >= 2 and all(v % m == r for r, v in fixed):
                    own.append(k)
            for r in range(m):
                inside = [n for n in ns if n % m == r]
                outside = [n for n in ns if n % m != r]
                if len(inside) < 3 or len(outside) < 3:
                    continue
                for k in range(3):
                    if k in own:
                        continue
                    # the side whose feature is fixed (inside first), else either with exceptions
                    sides = [side for side in (inside, outside) if len({feats[n][k] for n in side}) == 1][:1]
                    odd = None
                    for side in sides or (inside, outside):
                        odd = self._fixed_but(feats, k, side, outside if side is inside else inside)
                        if odd is not None:
                            break
                    if odd is not None:
                        out.append((m, r, odd))
                        break
        return sorted(out, key=lambda p: len(p[2]))   # stable: exact classes first, by modulus

    @staticmethod
    def _fixed_but(feats: dict, k: int, side: list, other: list):
        """The n of `side` whose feature k differs from the one value all the others
        share, a value no n of `other` takes (at most CLASS_EXCEPTIONS of them; none:
        ()); None when there is no such value."""
        values = [feats[n][k] for n in side]
        v = max(set(values), key=values.count)
        odd = tuple(n for n in side if feats[n][k] != v)
        if len(odd) > CLASS_EXCEPTIONS or v is None or v == () or any(feats[n][k] == v for n in other):
            return None
        return odd

    def _class_guard(self, obs: list[Obs], depth: int, root: bool, residues: int, classes: list[tuple]):
        """Note [residue classes]: `if n % m == r: A else: (the rest, guarded)` for the
        classes the trees propose (m, r, exceptions), the first whose arms fit; each
        exception n first, as `n == c` with its own order (else its tree)."""
        cap = self._class_cap(obs)
        for m, r, odd in classes:
            cls = [o for o in obs if o.n % m == r and o.n not in odd]
            rest = [o for o in obs if o.n % m != r and o.n not in odd]
            with self.budget.capped(cap) as token:
                try:
                    a = self.fit(cls, depth, root)
                    if a is not None and all(self._verify(a, o, root) for o in obs):
                        return a   # the class was a guess: its order explains every n
                    b = None if a is None else self.fit_guarded(rest, depth, root, residues - 1)
                    arms = [] if b is None else [self._exception(obs, n, depth) for n in odd]
                except Capped as e:
                    if e.token is not token:
                        raise
                    continue
            if b is None or None in arms:
                continue
            case = A.Case(A.Compare("==", A.BinOp("%", N, A.Num(m)), A.Num(r)), a)
            cases = tuple(arms) + (case,)
            return A.Guard(cases + b.cases, b.otherwise) if isinstance(b, A.Guard) else A.Guard(cases, b)
        return None

    @staticmethod
    def _class_cap(obs: list[Obs]) -> int:
        return CLASS_WORK * sum(o.n for o in _spread(sorted(obs, key=lambda o: o.n), SAMPLE))

    def _exception(self, obs: list[Obs], n: int, depth: int):
        """`n == c` with the order of the observations at n (else their tree); None
        when they differ."""
        at = [o for o in obs if o.n == n]
        if len({hash(o.tree) for o in at}) > 1:
            return None
        own = self.fit(at, depth + 1)
        return A.Case(A.Compare("==", N, A.Num(n)), own if own is not None else A.Literal(at[0].tree))

    def _residue_guard(self, obs: list[Obs], depth: int, root: bool, residues: int):
        """`if n % c == r: A else: (the rest, guarded)`, the cheapest over c and r."""
        best = None
        for c in RESIDUE_MODULI:
            for r in range(c):
                cls = [o for o in obs if o.n % c == r]
                rest = [o for o in obs if o.n % c != r]
                if len({o.n for o in cls}) < 3 or not rest:
                    continue
                a = self.fit(cls, depth, root)
                if a is None:
                    continue
                b = self.fit_guarded(rest, depth, root, residues - 1)
                if b is None:
                    continue
                case = A.Case(A.Compare("==", A.BinOp("%", N, A.Num(c)), A.Num(r)), a)
                g = (A.Guard((case,) + b.cases, b.otherwise) if isinstance(b, A.Guard)
                     else A.Guard((case,), b))
                if best is None or order_cost(g) < order_cost(best):
                    best = g
            if best is not None:
                return best   # the smallest modulus that works: the simplest rule
        return best

    # Note [simple ends]: a kernel often runs a plain loop up to a size and a
    # structured order above it (`if n <= 31: seq else: blocks(12, ...)`).
    # The binary search of _runs finds that cut with failing searches over
    # sets of n that straddle it, each a whole search; but the n a simple
    # order gives are seen at no cost (their trees are built, not searched).
    # So the longest run of n from either end that one simple order gives
    # (at least 3 n above 2) is cut off first, and one search fits the rest:
    # when it does, the two runs are the guard.
    def _simple_end(self, ns: list[int], by_n: dict, depth: int, root: bool):
        for downward in (False, True):
            walk = ns[::-1] if downward else ns
            live, count, seen = list(SIMPLE[:4]), 0, 0
            for n in walk:
                keep = [order for order in live if all(self._same(order, o) for o in by_n[n])]
                if not keep:
                    break
                live, count, seen = keep, count + 1, seen + (n > 2)
            if seen < 3 or count == len(walk):
                continue
            rest = [o for n in walk[count:] for o in by_n[n]]
            got = self.fit(rest, depth, root)
            if got is None and depth <= RESIDUE_DEPTH:
                # note [residue classes]: the plain order's run hides classes of the n above it
                got = self._rest_classes(rest, depth, root)
            if got is not None:
                plain, rest = Run(min(walk[:count]), max(walk[:count]), live[0]), Run(
                    min(walk[count:]), max(walk[count:]), got)
                return sorted((plain, rest), key=lambda r: r.lo)
        return None

    def _plain_past(self, obs: list[Obs], n_past: int) -> bool:
        """Does one parameter-free order give every observation up to n_past and past it?"""
        live = list(SIMPLE[:4])
        for o in sorted(obs, key=lambda o: o.n):
            live = [order for order in live if self._same(order, o)]
            if not live:
                return False
            if o.n > n_past:
                return True
        return False

    def _rest_classes(self, rest: list[Obs], depth: int, root: bool):
        """A residue-class guard for the n beyond a plain order's run, where their trees
        propose exact classes (note [residue classes]), else None."""
        one_each = _dedupe(rest)
        if one_each is None:
            return None
        exact = [c for c in self._class_proposals(one_each) if not c[2]]
        return self._class_guard(rest, depth, root, 1, exact) if exact else None

    def _runs(self, ns: list[int], by_n: dict, depth: int, root: bool, downward: bool):
        """Maximal runs of consecutive observed n that one order explains each
        (binary search per run: an order explaining a set explains its subsets)."""
        order_ns = ns[::-1] if downward else ns
        runs: list[Run] = []
        i = 0
        while i < len(order_ns):
            lo_j, hi_j, best = i, len(order_ns) - 1, None
            while lo_j <= hi_j:
                mid = (lo_j + hi_j) // 2
                got = self.fit([o for n in order_ns[i:mid + 1] for o in by_n[n]], depth, root)
                if got is not None:
                    best, lo_j = (mid, got), mid + 1
                else:
                    hi_j = mid - 1
            if best is None:  # no order explains even this one n: a literal tree
                group = by_n[order_ns[i]]
                if len({hash(o.tree) for o in group}) > 1:
                    return None
                best = (i, A.Literal(group[0].tree))
            a, b = order_ns[i], order_ns[best[0]]
            runs.append(Run(min(a, b), max(a, b), best[1]))
            if len(runs) > MAX_RUNS:
                return None
            i = best[0] + 1
        return sorted(runs, key=lambda r: r.lo)

    def fit(self, obs: list[Obs], depth: int = 0, root: bool = False):
        """The cheapest unguarded order explaining every observation, or None.

        Counterexample-guided: search on a small sample of the observations,
        check the winner against all of them, add what it gets wrong to the
        sample and search again.  Observations are mostly redundant (one
        order, many n), so the sample stays small and the search cheap.
        """
        obs = _dedupe(obs)
        if obs is None:
            return None
        obs = sorted((o for o in obs if o.n > 1), key=lambda o: o.n)  # a lone operand: any order
        if not obs:
            return A.Seq()
        sample = _spread(obs, SAMPLE)
        while True:
            got = self._fit_sample(sample, depth, root)
            if got is None:
                return None
            bad = [o for o in obs if not self._verify(got, o, root)]
            if not bad:
                return got
            moved = self._moved_threshold(got, obs, bad, root)
            if moved is not None:
                return moved
            chosen = {o.n for o in sample}
            extra = [o for o in (bad[0], bad[-1], bad[len(bad) // 2]) if o.n not in chosen]
            if not extra:
                return None   # wrong where it was searched (a part found as the root, `Ref`): no progress
            sample = sorted(sample + list({o.n: o for o in extra}.values()), key=lambda o: o.n)

    # Note [moved thresholds]: a guard fitted on a sample puts its threshold
    # anywhere in the gap between two sampled n (`if n <= 27: seq` where the
    # order changes after 31), and the next round searches everything again
    # with three more n.  So first each threshold in turn is moved by at most
    # THRESHOLD_MOVE to where the fewest of the wrong observations stay wrong
    # (the nearest such place), kept when fewer observations are wrong in all
    # (two passes: guards nested in parts have their own thresholds); only an
    # order right at every observation is returned.
    def _moved_threshold(self, got, obs: list[Obs], bad: list[Obs], root: bool):
        if not _guarded(got):
            return None
        for _ in range(2):
            for path, node in list(walk(got)):
                if not (isinstance(node, A.Compare) and node.op in ("<=", "<", ">", ">=")
                        and isinstance(node.left, A.Var) and isinstance(node.right, A.Num)):
                    continue
                moves = []
                for d in range(-THRESHOLD_MOVE, THRESHOLD_MOVE + 1):
                    if d and node.right.value + d >= 0:
                        cand = replace_at(got, path, A.Compare(node.op, node.left, A.Num(node.right.value + d)))
                        moves.append((sum(not self._verify(cand, o, root) for o in bad), abs(d), cand))
                if not moves:
                    continue
                left, _, cand = min(moves, key=lambda m: m[:2])
                if left < len(bad):
                    worse = [o for o in obs if not self._verify(cand, o, root)]
                    if len(worse) < len(bad):
                        got, bad = cand, worse
                        if not bad:
                            return got
        return None

    def _fit_sample(self, obs: list[Obs], depth: int, root: bool):
        key = (root, tuple(o.key for o in obs))
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # guards against re-entry on the same set
        try:
            got = self._search(obs, depth, root)
        except Stopped:
            del self._memo[key]   # a capped sub-search stopped here: not an answer (Budget.capped)
            raise
        self._memo[key] = got
        return got

    def _verify(self, order, o: Obs, root: bool) -> bool:
        """Does `order` give o's tree?  A split into the root itself (`Ref`)
        is checked as far as the root's observations allow."""
        if o.n == 1:
            return True
        key = (order, o.key)
        got = self._verified.get(key)
        if got is None:
            got = self._verified[key] = self._verify_now(order, o)
        return got

    def _verify_now(self, order, o: Obs) -> bool:
        if isinstance(order, A.Split) and isinstance(order.first, A.Ref):
            h = split_point(o)
            try:
                if h is None or eval_expr(order.at, o.n) != h:
                    return False
            except SpecError:
                return False
            left, right = o.tree.children
            seen_l, seen_r = self.pool.get(h), self.pool.get(o.n - h)
            return ((seen_l is None or seen_l == left)
                    and (seen_r is None or equal_shifted(right, seen_r, h)))
        return self._explains(order, [o])

    # ------------------------------------------------------------ the search
    # Note [found orders]: each combinator's search fits its parts, and a
    # part's search can be the dearest thing there is (split(n - 1, FIRST,
    # REST) over chunks whose FIRST is every chunk but the last, searched
    # again at every level) while an order that explains the sample is
    # already in hand (chunks(max(1, n // 2), seq, seq)).  So once an
    # unguarded order is found, the combinators after it share FOUND_WORK
    # leaves per sampled operand (Budget.capped): a cheaper order they find
    # within it replaces the found one; past it the found one stands.  (A
    # guarded order found leaves them uncapped: pad and vlanes come after it,
    # for the orders the others explain only case by case.)
    def _search(self, obs: list[Obs], depth: int, root: bool):
        self.budget.charge(sum(o.n for o in obs))   # each combinator below takes every observation apart
        obs = sorted(obs, key=lambda o: -o.n)  # large n reject fastest
        for o in SIMPLE:
            if self._explains(o, obs):
                return o
        chain = self._chain(obs)
        if chain is not None:
            return chain
        if depth >= MAX_DEPTH:
            return None
        best = None
        with ExitStack() as capped:
            token = None
            for maker in (self._chunks, self._split, self._tail, self._lanes, self._blocks, self._pad, self._vlanes):
                if maker in (self._pad, self._vlanes) and best is not None and not _guarded(best):
                    # pad is for orders the others explain only case by case (cuts by n % M);
                    # vlanes for lanes fed whole vectors, which lanes or pad explain where they can
                    break
                if best is not None and token is None and not _guarded(best):
                    # note [found orders]
                    token = capped.enter_context(self.budget.capped(FOUND_WORK * sum(o.n for o in obs)))
                try:
                    for cand in maker(obs, depth, root):
                        if root and _unchecked_ref(cand) and not self._explains(cand, obs):
                            continue   # note [recursive parts]: a part was the root where the root was seen
                        if best is None or order_cost(cand) < order_cost(best):
                            best = cand
                except Capped as e:
                    if token is None or e.token is not token:
                        raise
                    break
        return best

    @cached_property
    def _pool_arms(self) -> tuple:
        """`n == c: TREE` for every size the root was observed at (note [recursive parts])."""
        return tuple((m, A.Case(A.Compare("==", N, A.Num(m)), A.Literal(t))) for m, t in sorted(self.pool.items()))

    def _part(self, parts, o: Obs, *args):
        """parts(o, *args) (a shapes function taking o apart), charged to the budget.

        Kept: the searches of a guard's runs and of every sample take the same
        observations apart again (numpy.sum over 1..65537: blocks of one tree of
        8192 leaves cut the same way five times over), and rebuilding the parts'
        trees was most of the fit's time.  Charged each time all the same, so that
        a work budget stops a search where it did before."""
        self.budget.charge(o.n)
        key = (parts, o.key, args)   # (as the search's memo: a tree by its structural hash)
        got = self._taken.get(key, _NOT_TAKEN)
        if got is _NOT_TAKEN:
            got = parts(o, *args)
            self._taken_leaves += o.n
            if self._taken_leaves > TAKEN_LEAVES:
                self._taken.clear()
                self._taken_leaves = o.n
            self._taken[key] = got
        return got

    def _build(self, order, n: int) -> Tree:
        key = (order, n)
        t = self._built.get(key)
        if t is None:
            # observations are revealed trees; the root itself (note [recursive parts]) is
            # its observed tree at the other sizes it was seen at (at n itself it would
            # explain itself), the order itself elsewhere
            lets = None
            if _has_ref(order):
                arms = tuple(c for m, c in self._pool_arms if m != n)
                lets = {self.name: A.Let(self.name, A.Guard(arms, order) if arms else order)}
            t = apply_order(order, range(n), lets)
            if _fuses(order):     # (observable walks the whole tree: only where a fused node may be)
                t = observable(t)
            if len(self._built) > 20000:
                self._built.clear()
            self._built[key] = t
        return t

    def _explains(self, order, obs: list[Obs]) -> bool:
        self.candidates += 1
        try:
            for o in sorted(obs, key=lambda o: o.n):  # the small n first: cheapest to build, as likely to reject
                if o.n > 1:
                    if (order, o.n) not in self._built:
                        self.budget.charge(o.n)
                    if hash(self._build(order, o.n)) != hash(o.tree):
                        return False
            return True
        except SpecError:  # a fitted parameter out of range at some n
            return False

    def _chain(self, obs: list[Obs]):
        shapes = [chain_shape(o.tree) for o in obs]
        if None in shapes:
            return None
        w = max(s[0] for s in shapes)
        if w >= max(o.n for o in obs):
            return None  # one fused node: `fused` already tried
        cand = A.Chain(A.Num(w))
        if self._explains(cand, obs):
            return cand
        # the short group elsewhere: its index as an expression in n, e.g. a K
        # loop in tiles of T that starts with the partial tile: n % T // w
        samples = [(o.n, lambda v, at=(o.n // w if s[1] is None else s[1]), full=o.n // w: min(v, full) == at)
                   for o, s in zip(obs, shapes) if s[0] == w and o.n % w]
        # (tiles of w << j products each, a loop over w << k of them: n % (w << k) // (w << j))
        tiles = [A.BinOp("//", A.BinOp("%", N, A.Num(w << k)), A.Num(w << j))
                 for j in range(8) for k in range(j + 1, 9)]
        for e in [A.Num(c) for c in range(8)] + tiles:
            if all(ok(eval_expr(e, n)) for n, ok in samples):
                cand = A.Chain(A.Num(w), e)
                if self._explains(cand, obs):
                    return cand
        return None

    # ------------------------------------------------------------ structural orders
    def _split(self, obs, depth, root):
        hs = []
        for o in obs:
            h = split_point(o)
            if h is None:
                return
            hs.append((o, h))
        self.seen.update(h for _, h in hs if h > 1)
        exprs = fit_values("split", tuple((o.n, h) for o, h in hs), self.seen, limit=2)
        for e in exprs:
            pw = A.Pairwise(None if _is_half(e) else e)
            if self._explains(pw, obs):
                yield pw
                return
            parts = [self._part(split_parts, o, h) for o, h in hs]
            firsts = [p[0] for p in parts]
            rests = [p[1] for p in parts]
            if root and self.allow_ref and self._ref_consistent(firsts + rests):
                yield A.Split(e, A.Ref(self.name), A.Ref(self.name))
                continue
            first = self.fit_guarded(firsts, depth + 1)
            if first is None:
                continue
            rest = first if self._explains(first, rests) else self.fit_guarded(rests, depth + 1)
            if rest is not None:
                yield A.Split(e, first, rest)

    def _ref_consistent(self, subs: list[Obs]) -> bool:
        """Sub-observations agree with the root's own observations where the
        same n was observed (the rest is checked on the final spec)."""
        return all(o.n == 1 or self.pool.get(o.n, o.tree) == o.tree for o in subs)

    def _tail(self, obs, depth, root):
        ks = set()
        for o in obs:
            for p in prefix_sizes(o):
                if p * 2 > o.n:  # the body is most of the operands
                    ks.update(k for k in _divisors(p) if k > o.n - p)
        ks = sorted(ks & set(constants(self.seen)) or ks, key=roundness)[:12]
        found = 0
        for k in ks:
            fitted = self._body_outer([self._part(tail_parts, o, k) for o in obs], depth, root)
            if fitted is None:
                continue
            body, outer = fitted
            if _nested_seq_tail(k, body, outer):
                continue
            self.seen.add(k)
            yield A.Tail(A.Num(k), body, outer)
            found += 1
            if found >= 2:
                return
        if not found:
            yield from self._tail_scaled(obs, depth, root)

    def _body_outer(self, parts, depth, root=False):
        """(body, outer) of a tail fitted to its parts' bodies and outer operands, or None (also
        where an observation does not split so, or none has both a body and outer operands)."""
        if any(p is False for p in parts) or not any(b is not None and t is not None for b, t in parts):
            return None
        bodies = [b for b, _ in parts if b is not None]
        body = self._sub(bodies, depth, root and all(t is not None for _, t in parts)) if bodies else A.Seq()
        if body is None:
            return None
        outers = [t for _, t in parts if t is not None]
        outer = self._sub(outers, depth, root and all(b is not None for b, _ in parts)) if outers else A.Seq()
        return None if outer is None else (body, outer)

    def _tail_scaled(self, obs, depth, root=False):
        """tail(max(1, n // c), ...): a body over the first n - n % (n // c), tried
        where the largest observation has that prefix (as _blocks_scaled)."""
        big = obs[0]
        prefixes = set(prefix_sizes(big))
        for c in BLOCK_COUNTS:
            k = big.n // c
            if k < 2 or big.n % k == 0 or big.n - big.n % k not in prefixes:
                continue
            fitted = self._body_outer([self._part(tail_parts, o, max(1, o.n // c)) for o in obs], depth, root)
            if fitted is None:
                continue
            body, outer = fitted
            yield A.Tail(A.Call("max", (A.Num(1), A.BinOp("//", N, A.Num(c)))), body, outer)
            return

    def _lanes(self, obs, depth, root):
        big = obs[0]
        # the strides the tree proposes first: constants seen elsewhere in the search are
        # rounder, and would push them past the tries
        own = lane_candidates(big) - {1}
        ks = sorted(own, key=roundness) + sorted({c for c in self.seen if 1 < c < big.n} - own, key=roundness)
        found = 0
        for k in ks[:8]:
            if k >= big.n:
                continue
            parts = []
            for o in obs:
                p = self._part(lane_parts, o, k)
                if p is None:
                    break
                parts.append(p)
            else:
                fitted = self._inner_outer(parts, depth, root)
                if fitted is None:
                    continue
                inner, outer = fitted
                self.seen.add(k)
                yield A.Lanes(A.Num(k), inner, outer)
                found += 1
                if found >= 2:
                    return
        if not found:
            for got in self._lanes_scaled(obs, depth, ks, root):
                yield got
                return
        for k in [k for k in lane_strides(big) if 1 < k < big.n][:8]:
            # the unroll u: k itself (torch.sum), else a power-of-two multiple
            # of k (OpenBLAS's sgemm: 2 accumulators, 8 terms a loop turn)
            # (a larger u needs most observations at n >= u: below u LEFT orders
            # everything, which would let a huge u explain anything)
            for u in [k] + [k << i for i in range(1, 4)
                            if 2 * sum(o.n >= k << i for o in obs) >= max(3, len(obs))]:
                got = self._lanes_left(obs, k, depth, u)
                if got is not None:
                    self.seen.add(k)
                    yield got
                    return

    def _vlanes(self, obs, depth, root):
        """vlanes(V, K, inner, outer): K lanes fed V consecutive operands at a time,
        (V, K) read off the lane above the largest observation's leaf 0."""
        big = obs[0]
        found = False
        for v, k in vlane_candidates(big)[:VLANE_TRIES]:
            fitted = self._vlane_fit(obs, depth, root, v, lambda n, k=k: k)
            if fitted is not None:
                found = True
                yield A.VLanes(A.Num(v), A.Num(k), *fitted)
        if not found and depth <= SCALED_DEPTH:
            yield from self._vlanes_scaled(obs, depth, root)

    # Note [scaled vector lanes]: a kernel that starts n // c threads, each
    # fed whole vectors, has as many lanes as n // c; at most n that is more
    # lanes than vectors, each vector its own lane, and the largest
    # observation (n = 64: eight vectors of 8 in eight lanes) shows no lane
    # with two vectors, so no (V, K) is read off it.  An n with leftovers
    # shows the width V (its leftover joins lane 0 after vector 0), so the
    # widths come from the VLANE_LOOK largest observations, and the lane count
    # is tried as max(1, n // c), c in BLOCK_COUNTS: the small n, where the
    # leftovers outnumber the lanes, tell the c apart.  Near the root only
    # (note [scaled chunks]).
    def _vlanes_scaled(self, obs, depth, root=False):
        """vlanes(V, max(1, n // c), ...), V read off the largest observations."""
        # (a lane's own accumulators propose narrower widths at one n or another, the
        # vector width at every n: the widths most observations propose, widest first)
        seen = Counter(v for o in obs[:VLANE_LOOK] for v in {v for v, _ in vlane_candidates(o)})
        for v in sorted(seen, key=lambda v: (-seen[v], -v))[:VLANE_TRIES]:
            for c in BLOCK_COUNTS:
                fitted = self._vlane_fit(obs, depth, root, v, lambda n, c=c: max(1, n // c))
                if fitted is not None:
                    yield A.VLanes(A.Num(v), A.Call("max", (A.Num(1), A.BinOp("//", N, A.Num(c)))), *fitted)
                    return

    def _vlane_fit(self, obs, depth, root, v: int, lanes_at):
        """(inner, outer) of vlanes(v, lanes_at(n), ...) fitted to every observation, or None."""
        parts = []
        for o in obs:
            p = self._part(vlane_parts, o, v, lanes_at(o.n))
            if p is None:
                return None
            parts.append(p)
        if sum(len(p[0]) > 1 for p in parts) < min(BLOCKS_SEEN, len(parts)):
            return None   # one lane at most n: the inner order alone, a guard in disguise (note [blocks seen])
        return self._inner_outer(parts, depth, root)

    def _lanes_scaled(self, obs, depth, strides, root=False):
        """lanes(max(1, n // c), ...): as many lanes as n // c, tried where the largest
        observation's stride is one of the strides its tree proposes."""
        big = obs[0]
        for c in BLOCK_COUNTS:
            if big.n // c not in strides or big.n // c < 2:
                continue
            parts = []
            for o in obs:
                p = self._part(lane_parts, o, max(1, o.n // c))
                if p is None:
                    break
                parts.append(p)
            else:
                fitted = self._inner_outer(parts, depth, root)
                if fitted is None:
                    continue
                yield A.Lanes(A.Call("max", (A.Num(1), A.BinOp("//", N, A.Num(c)))), *fitted)
                return

    def _inner_outer(self, parts, depth, root=False):
        """(inner, outer) fitted to the parts' leaves and to their outer operands, or None."""
        # (a part that is a whole observation, one block or blocks of one, is never the root)
        inner = self._sub([x for p in parts for x in p[0]], depth,
                          root and not any(len(p[0]) == 1 for p in parts))
        if inner is None:
            return None
        outer = self._sub([p[1] for p in parts], depth, root and not any(all(x.n == 1 for x in p[0]) for p in parts))
        return None if outer is None else (inner, outer)

    # Note [recursive parts]: a library that recurses through its blocks,
    # lanes or chunks (`let r = if n <= 9: ... else: blocks(3, r, r)`) shows
    # in a part of the root the root's own trees at the part's sizes.  So at
    # the root, a part whose observations are the root's own observations at
    # those sizes (at least one of them of 3 operands or more) and that no
    # unguarded order explains within a capped search (an unrolled recursion
    # is a guard per level) is the root itself, `Ref`;
    # such an order is built with the root's observed trees at the sizes
    # observed and the order itself elsewhere (_build), checked on the sample
    # it was found on (a part's size the root was not seen at was taken on
    # trust), and the final spec is expanded at every observation as any
    # other (fpspec.infer.engine._fit).
    def _sub(self, obs: list[Obs], depth: int, root: bool):
        """A part's order: a fitted one, else (none, or only a guarded one within a capped
        search) the root itself where it may be (note [recursive parts])."""
        if not (root and self.allow_ref and any(o.n > 2 and o.n in self.pool for o in obs)
                and self._ref_consistent(obs)):
            return self.fit_guarded(obs, depth + 1)
        got = None
        with self.budget.capped(self._class_cap(obs)) as token:
            try:
                got = self.fit_guarded(obs, depth + 1)
            except Capped as e:
                if e.token is not token:
                    raise
        return got if got is not None and not _guarded(got) else A.Ref(self.name)

    def _chunks(self, obs, depth, root):
        """chunks(SIZE, inner, outer): contiguous chunks added one after the
        other, SIZE a rule in the operands left (fpspec.spec.lower.chunk_size_expr)."""
        got = self._chunks_read(obs, depth, root)
        if got is not None:
            yield got
        elif depth <= SCALED_DEPTH:
            yield from self._chunks_scaled(obs, depth, root)

    def _chunks_read(self, obs, depth, root=False):
        parts = [self._part(chunk_parts, o) for o in obs]
        if any(p is None for p in parts) or all(len(p[1]) < 2 for p in parts):
            return None
        size = chunk_size_expr([x for p in parts for x in p[0]])
        if size is None:
            return None
        fitted = self._inner_outer([p[1:] for p in parts], depth, root)
        return None if fitted is None else A.Chunks(size, *fitted)

    # Note [scaled chunks]: chunks(max(1, n // c), ...) cut a fixed share of
    # the operands left each time (32, 16, 8, ..., 1, 1 at n = 64 for c = 2):
    # the last chunks are lone leaves, and the chunks' order need not add
    # them one after the other, so the tree's left spine shows no chunk
    # boundaries (chunk_parts).  The first chunk does show as a prefix of
    # the largest observation, n // c of it; each such c is tried, the tree
    # cut where that SIZE cuts it.  The count of such chunks (and of scaled
    # vector lanes) grows with n, as a kernel's grid sized from n does: they
    # are tried at the root and its guard arms only (SCALED_DEPTH), where a
    # kernel picks its grid; below, every tree with a seq inside has every
    # prefix, and each c would cut it and search its parts again.
    def _chunks_scaled(self, obs, depth, root=False):
        """chunks(max(1, n // c), ...), c where the largest observation has that first chunk."""
        big = obs[0]
        prefixes = set(prefix_sizes(big))
        for c in BLOCK_COUNTS:
            if big.n // c not in prefixes:
                continue
            size = A.Call("max", (A.Num(1), A.BinOp("//", N, A.Num(c))))
            parts = []
            for o in obs:
                p = self._part(sized_chunk_parts, o, size)
                if p is None:
                    break
                parts.append(p)
            else:
                fitted = self._inner_outer(parts, depth, root)
                if fitted is not None:
                    yield A.Chunks(size, *fitted)
                    return

    def _pad(self, obs, depth, root):
        """pad(M, order): the order fitted where M divides n (nothing padded),
        then checked at every n (a partial vector first, zeros above it).
        Near the root only: each try is a whole sub-search, at every node of
        the search it would multiply the work (a kernel's padding sits at its
        top, inside the scalar tail at most)."""
        if depth > PAD_DEPTH:
            return
        for m in PAD_MULTIPLES + (PAD_OTHER if depth <= PAD_OTHER_DEPTH else ()):
            whole = [o for o in obs if o.n % m == 0]
            if len(whole) < 2 or len(whole) == len(obs):
                continue
            inner = self.fit(whole, depth + 1)
            if inner is None:
                continue
            cand = A.Pad(A.Num(m), inner)
            if self._explains(cand, obs):
                yield cand
                return

    def _lanes_left(self, obs, k: int, depth: int, u: int | None = None):
        """lanes(k, inner, outer, left[, u]): the leftovers join lane 0 (torch.sum)."""
        if u == k:
            u = None
        parts = [self._part(lane_parts_left, o, k, u) for o in obs]
        if any(p is None for p in parts) or not any(p[2] is not None and p[1] is not None for p in parts):
            return None
        inner_obs = [x for p in parts for x in p[0]]
        inner = self.fit_guarded(inner_obs, depth + 1) if inner_obs else A.Seq()
        if inner is None:
            return None
        outer_obs = [p[1] for p in parts if p[1] is not None]
        outer = self.fit_guarded(outer_obs, depth + 1)
        if outer is None:
            return None
        left = self.fit_guarded([p[2] for p in parts if p[2] is not None], depth + 1)
        return None if left is None else A.Lanes(A.Num(k), inner, outer, left, None if u is None else A.Num(u))

    def _blocks(self, obs, depth, root):
        big = obs[0]
        bs = sorted({p for p in prefix_sizes(big) if 1 < p < big.n and big.n - p >= 2}, key=roundness)
        # a first block whose inner order is seq has every smaller prefix: the end of the
        # run 2, 3, ..., b of prefix sizes is b
        run_end = next((b for b in range(2, big.n) if b + 1 not in bs), None) if 2 in bs else None
        # (and the first prefix above that run: blocks of 12 whose inner order is
        # blocks(9, seq, ...) have prefixes 2..9 and 12, and 12 is the block)
        above = min((b for b in bs if run_end is not None and b > run_end), default=None)
        bs = bs[:6] + [b for b in (run_end, above) if b is not None and b not in bs[:6]]
        found = 0
        for b in bs:
            parts = []
            for o in obs:
                p = self._part(block_parts, o, b)
                if p is None:
                    break
                parts.append(p)
            else:
                if sum(len(p[0]) > 1 and p[0][0].n > 1 for p in parts) < min(BLOCKS_SEEN, len(parts)):
                    continue   # note [blocks seen]
                fitted = self._inner_outer(parts, depth, root)
                if fitted is None:
                    continue
                inner, outer = fitted
                self.seen.add(b)
                yield A.Blocks(A.Num(b), inner, outer)
                found += 1
                if found >= 2:
                    return
        if not found:
            yield from self._blocks_scaled(obs, depth, set(bs) | set(prefix_sizes(big)), root)

    def _blocks_scaled(self, obs, depth, prefixes: set, root=False):
        """blocks(max(1, n // c), ...): a block size growing with n (c blocks and a rest),
        tried where the largest observation has a first block of big.n // c."""
        big = obs[0]
        for c in BLOCK_COUNTS:
            if big.n // c not in prefixes:
                continue
            parts = []
            for o in obs:
                b = max(1, o.n // c)
                p = ([o], Obs(1, 0)) if b >= o.n else self._part(block_parts, o, b)
                if p is None:
                    break
                parts.append(p)
            else:
                fitted = self._inner_outer(parts, depth, root)
                if fitted is None:
                    continue
                yield A.Blocks(A.Call("max", (A.Num(1), A.BinOp("//", N, A.Num(c)))), *fitted)
                return


# ---------------------------------------------------------------- functions


def _fuses(order) -> bool:
    """May the order make a fused node (fused, chain, a literal with one)?  The root
    itself (`Ref`) is the order, its other sizes the observed trees (Fitter._build)."""
    stack = [order]
    while stack:
        o = stack.pop()
        if isinstance(o, (A.Fused, A.Chain)):
            return True
        if isinstance(o, A.Literal) and o.tree.__class__ is not int and any(
                s.__class__ is not int and s.fused for s in postorder(o.tree)):
            return True
        stack.extend(order_children(o))
    return False


def _nested_seq_tail(k: int, body, outer) -> bool:
    """tail(k, tail(K, X, seq), seq) with k dividing K: the same trees as tail(K, X, seq)
    (the leftovers of both tails are added one by one after X), one level deeper, which
    the depth limit would take from X; that tail is found on its own."""
    return (isinstance(outer, A.Seq) and isinstance(body, A.Tail) and isinstance(body.outer, A.Seq)
            and isinstance(body.k, A.Num) and body.k.value % k == 0)


def _guard_of(runs: list[Run]):
    """`if n == C: TREE ... elif n <= HI: ORDER ...`: literal runs (one n each) first, as
    exceptions, then the consecutive runs of orders (one run alone: its order)."""
    exact = tuple(A.Case(A.Compare("==", N, A.Num(r.lo)), r.order) for r in runs if isinstance(r.order, A.Literal))
    ranged = [r for r in runs if not isinstance(r.order, A.Literal)]
    cases = exact + tuple(A.Case(A.Compare("<=", N, A.Num(r.hi)), r.order) for r in ranged[:-1])
    return A.Guard(cases, ranged[-1].order) if cases else ranged[-1].order


def _with_searched(listed, arm):
    """The guard with `arm` in place of its SEARCHED arm (note [simple lists])."""
    if not isinstance(listed, A.Guard):
        return arm
    return A.Guard(tuple(A.Case(c.cond, arm if c.order == SEARCHED else c.order) for c in listed.cases),
                   arm if listed.otherwise == SEARCHED else listed.otherwise)


def _lifted(order, b):
    """`order` with one of its sub-orders X (itself included) as blocks(b, X, OUTER),
    OUTER one of the simple orders; outermost positions first (note [outer blocks])."""
    from dataclasses import replace

    for outer in (A.Seq(), A.Pairwise()):
        yield A.Blocks(b, order, outer)
    if isinstance(order, A.Guard):
        arms = [c.order for c in order.cases] + [order.otherwise]
        for i, arm in enumerate(arms):
            for x in _lifted(arm, b):
                new = arms[:i] + [x] + arms[i + 1:]
                yield replace(order, cases=tuple(replace(c, order=o) for c, o in zip(order.cases, new)),
                              otherwise=new[-1])
        return
    fields = next((fs for cls, fs in ORDER_FIELDS if isinstance(order, cls)), ())
    for f in fields:
        sub = getattr(order, f)
        if sub is not None:
            for x in _lifted(sub, b):
                yield replace(order, **{f: x})

def _has_ref(order) -> bool:
    """Does the order refer to a named order (the root, note [recursive parts])?"""
    stack = [order]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Ref):
            return True
        stack.extend(order_children(x))
    return False


def _unchecked_ref(order) -> bool:
    """A part of the order is the root (note [recursive parts]), other than the two parts
    of a split, which _verify_now checks where the root was observed."""
    return _has_ref(order) and not (isinstance(order, A.Split) and isinstance(order.first, A.Ref))


def _guarded(order) -> bool:
    """Does a guard (or a literal tree) occur anywhere in the order?"""
    stack = [order]
    while stack:
        x = stack.pop()
        if isinstance(x, (A.Guard, A.Literal)):
            return True
        stack.extend(order_children(x))
    return False


def _dedupe(obs: list[Obs]) -> list[Obs] | None:
    """One observation per n; None when two differ at the same n (then no
    order in n alone explains them)."""
    by_n: dict[int, Obs] = {}
    for o in obs:
        prev = by_n.get(o.n)
        if prev is None:
            by_n[o.n] = o
        elif hash(prev.tree) != hash(o.tree):
            # hashes are structural; equal hashes are trusted here because
            # the final spec is compared with every observation exactly
            return None
    return list(by_n.values())


def _spread(obs: list[Obs], k: int) -> list[Obs]:
    """k observations spread over the sorted list, the largest n included."""
    if len(obs) <= k:
        return list(obs)
    idx = {round(i * (len(obs) - 1) / (k - 1)) for i in range(k)}
    idx |= {len(obs) - 2, 1}
    return [obs[i] for i in sorted(idx)]


def _merge_runs(runs: list[Run]) -> list[Run]:
    out: list[Run] = []
    for r in runs:
        if out and out[-1].order == r.order:
            out[-1] = Run(out[-1].lo, r.hi, r.order)
        else:
            out.append(r)
    return out


def _is_half(e) -> bool:
    return (isinstance(e, A.BinOp) and e.op == "//" and isinstance(e.left, A.Var)
            and isinstance(e.right, A.Num) and e.right.value == 2)


def _divisors(p: int) -> list[int]:
    out = set()
    d = 1
    while d * d <= p:
        if p % d == 0:
            out.update((d, p // d))
        d += 1
    return sorted(out)


