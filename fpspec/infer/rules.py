"""Which order at which n -> a guard on n: conditions that are conjunctions of
thresholds and residue classes.

A kernel that picks its order by n's alignment and size at once (`if n > 39 or
n % 3 != 1: rev else: seq`, `if n <= 33 or n % 2 == 0: pairwise else: ...`)
shows, n by n, an order that changes too often for ranges of n (runs of one
n each) and that no single residue class separates.  Given, for each observed
n, the set of candidate orders that give its tree, `decision_list` finds the
arms: `if C1: A elif C2: B ... else: Z`, each C a conjunction of at most
MAX_ATOMS atoms `n == c`, `n <= c`, `n > c`, `n % m == r`, `n % m != r`, every n taking
the first arm whose condition holds and that arm's order giving its tree.
Thresholds are placed at observed n (the last n of the side they keep), as
the range guards of fpspec.infer.fit are; fewer arms first, then fewer atoms.
"""
from __future__ import annotations

from itertools import combinations

from fpspec.spec import ast as A

N = A.Var()
MODULI = tuple(range(2, 9)) + (16,)
MAX_ATOMS = 3
MAX_ARMS = 3
PAIRED = 40   # atoms joined in pairs and triples (C(40, 3) = 9880 triples an arm at most)


def _atoms(ns: list[int]) -> list[tuple[object, int]]:
    """(condition, bitmask over ns of the n it holds for), every atom over these n."""
    out = [(A.Compare("==", N, A.Num(c)), 1 << i) for i, c in enumerate(ns)]
    for c in ns[:-1]:
        low = sum(1 << i for i, n in enumerate(ns) if n <= c)
        full = (1 << len(ns)) - 1
        out.append((A.Compare("<=", N, A.Num(c)), low))
        out.append((A.Compare(">", N, A.Num(c)), full & ~low))
    for m in MODULI:
        if m * 2 > ns[-1]:
            break
        for r in range(m):
            on = sum(1 << i for i, n in enumerate(ns) if n % m == r)
            out.append((A.Compare("==", A.BinOp("%", N, A.Num(m)), A.Num(r)), on))
            if m > 2:   # n % 2 != r is n % 2 == 1 - r
                out.append((A.Compare("!=", A.BinOp("%", N, A.Num(m)), A.Num(r)), ((1 << len(ns)) - 1) & ~on))
    return out


def _condition(atoms: tuple) -> object:
    cond = atoms[0]
    for a in atoms[1:]:
        cond = A.BoolOp("and", cond, a)
    return cond


def _conjunction(atoms: list, must: int, never: int, live: int):
    """The conjunction of fewest atoms holding on every n of `must` and on no n
    of `never` (bitmasks), holding on the most n of `live` among those; None if
    none of at most MAX_ATOMS atoms does."""
    usable, masks = [], set()
    for c, m in atoms:
        m &= live
        if m & must == must and m != live and m not in masks:   # one atom per set of n it keeps
            masks.add(m)
            usable.append((c, m))
    order = {id(c): i for i, (c, _) in enumerate(usable)}   # a conjunction prints its atoms in the order _atoms lists them
    for k in range(1, MAX_ATOMS + 1):
        if k == 2:   # pairs and triples of the atoms that keep the fewest n of `never`: a bounded search
            usable = sorted(usable, key=lambda a: bin(a[1] & never).count("1"))[:PAIRED]
        best = None
        for combo in combinations(usable, k):
            mask = live
            for _, m in combo:
                mask &= m
            if mask & never:
                continue
            got = bin(mask).count("1")
            if best is None or got > best[0]:
                best = (got, tuple(c for c, _ in sorted(combo, key=lambda a: order[id(a[0])])), mask)
        if best is not None:
            return best[1], best[2]
    return None


def decision_list(labels: dict[int, frozenset], orders: list, arms: int = MAX_ARMS):
    """A guard (or one order) giving every n an order of its label set (indices
    into `orders`, cheapest first), or None.  Label sets of n that any order
    gives (n = 1, 2) should be left out by the caller or be every index."""
    ns = sorted(labels)
    if not ns:
        return None
    atoms = _atoms(ns)
    got = _list(ns, labels, atoms, (1 << len(ns)) - 1, arms)
    if got is None:
        return None
    cases, last = got
    if not cases:
        return orders[last]
    return A.Guard(tuple(A.Case(_condition(c), orders[i]) for c, i in cases), orders[last])


def _list(ns, labels, atoms, live: int, arms: int):
    """(arms as (atoms, order index), the else order index) for the n in `live`."""
    members = [i for i in range(len(ns)) if live >> i & 1]
    common = frozenset.intersection(*(labels[ns[i]] for i in members)) if members else frozenset({0})
    if common:
        return [], min(common)
    if arms <= 1:
        return None
    best = None
    for order in sorted(set().union(*(labels[ns[i]] for i in members))):
        never = sum(1 << i for i in members if order not in labels[ns[i]])
        must = sum(1 << i for i in members if labels[ns[i]] == {order})
        if not must:
            continue
        found = _conjunction(atoms, must, never, live)
        if found is None:
            continue
        cond, mask = found
        rest = _list(ns, labels, atoms, live & ~mask, arms - 1)
        if rest is None:
            continue
        cand = ([(cond, order)] + rest[0], rest[1])
        size = (len(cand[0]), sum(len(c) for c, _ in cand[0]))
        if best is None or size < best[0]:
            best = (size, cand)
    return None if best is None else best[1]
