"""Named arithmetic sections and the `using(NAME, order)` regions of a spec.

A spec has one main `arithmetic { ... }` section and any number of named
ones, `arithmetic NAME { ... }`, whose entries override the main section's
(keys not given are inherited; product_format only together with product).
input, output and init describe the whole accumulation, not a part of it,
so a named section may repeat them only with the main section's values, and
a sum (product = none) stays a sum.

`arithmetics(spec)` resolves every section to an `Arithmetic`;
`expand_arith(spec, n)` (fpspec.spec.expand) gives the tree and, for every
node made inside a `using`, its arithmetic: `Regions`, keyed by
(smallest leaf, number of leaves), which names one subtree of a tree
because its leaves are distinct (two subtrees with the same smallest leaf
are nested, so their sizes differ).
"""
from __future__ import annotations

from fpspec.arith.model import Arithmetic
from fpspec.errors import SpecError
from fpspec.spec import ast as A

# node key (smallest leaf, number of leaves) -> the arithmetic of that node
Regions = dict

# keys that describe the whole accumulation: a named section may not change them
WHOLE = ("input", "output", "init")


def main_arithmetic(spec: A.Spec) -> Arithmetic:
    block = spec.header.arithmetic
    if block is None:
        return Arithmetic()
    try:
        return Arithmetic.from_entries(block.entries)
    except SpecError as e:
        raise SpecError(e.message, e.location or block.loc) from None


def named_arithmetic(main_block: A.Block | None, main: Arithmetic, section: A.NamedArithmetic) -> Arithmetic:
    """The arithmetic of `arithmetic NAME { ... }` over the main section."""
    where = f"arithmetic {section.name}"
    given = {}
    for e in section.entries:
        if e.key in given:
            raise SpecError(f"{where}: {e.key} given twice; expected it at most once", e.loc or section.loc)
        given[e.key] = e
    entries = {e.key: e for e in (main_block.entries if main_block is not None else ())}
    if "product" in given:
        entries.pop("product_format", None)     # a new product mode does not inherit its old format
    entries.update(given)
    try:
        arith = Arithmetic.from_entries(tuple(entries.values()))
    except SpecError as e:
        raise SpecError(f"{where}: {e.message.removeprefix('arithmetic: ')}", e.location or section.loc) from None
    for key in WHOLE:
        if getattr(arith, key) != getattr(main, key):
            loc = given[key].loc if key in given else section.loc
            raise SpecError(f"{where}: {key} = {getattr(arith, key)} differs from the main arithmetic's "
                            f"{getattr(main, key)}; expected the same {', '.join(WHOLE)} in every section", loc)
    if (main.product == "none") != (arith.product == "none"):
        loc = given["product"].loc if "product" in given else section.loc
        raise SpecError(f"{where}: product = {arith.product} where the main arithmetic has product = "
                        f"{main.product}; expected a sum to stay a sum (product = none everywhere)", loc)
    return arith


def arithmetics(spec: A.Spec) -> dict:
    """name -> Arithmetic for every named section; None -> the main arithmetic."""
    main = main_arithmetic(spec)
    out = {None: main}
    for section in spec.header.arithmetics:
        out[section.name] = named_arithmetic(spec.header.arithmetic, main, section)
    return out


def has_regions(spec: A.Spec) -> bool:
    """Whether any order of the spec says `using`."""
    from fpspec.spec.check import order_children

    stack = [spec.order] + [d.order for d in spec.lets]
    while stack:
        o = stack.pop()
        if isinstance(o, A.Using):
            return True
        stack.extend(order_children(o))
    return False


def node_key(t) -> tuple:
    """(smallest leaf, number of leaves): names a subtree of a tree with distinct leaves."""
    return (t, 1) if isinstance(t, int) else (t.first, t.size)


def override_entries(main: Arithmetic, arith: Arithmetic) -> tuple:
    """The fewest entries of `arithmetic NAME { ... }` that turn `main` into `arith`."""
    base = {e.key: e for e in main.to_entries()}
    mine = [e for e in arith.to_entries() if e.key not in WHOLE]
    tries = ([e for e in mine if base.get(e.key) != e],
             [e for e in mine if base.get(e.key) != e or e.key == "product"],
             mine)
    main_block = A.Block("arithmetic", main.to_entries())
    for entries in tries:
        if named_arithmetic(main_block, main, A.NamedArithmetic("x", tuple(entries))) == arith:
            return tuple(entries)
    raise SpecError(f"internal error: no arithmetic section gives {arith}")   # pragma: no cover


# the parts of a top-level order that `regionalize` may give their own arithmetic
_PARTS = {A.Tail: ("body",), A.Split: ("first", "rest"), A.Lanes: ("inner",), A.Blocks: ("inner",)}


def regionalize(spec: A.Spec, n: int):
    """(order, names) where `order` is the spec's order at n with each part of
    its top-level combinator wrapped in using(PART, ...) (tail: its body; split:
    both halves; lanes and blocks: the inner order), and `names` maps the key
    of every node made inside a part to the part's name.  None when the order
    at n has no parts (fpspec.arith.probe note [region probes] uses these)."""
    from fpspec.spec.expand import apply_order, eval_cond, lets_of

    lets = lets_of(spec)
    o = spec.order
    for _ in range(100):      # guards and named orders decided for the root list (length n)
        if isinstance(o, A.Ref) and o.name in lets:
            o = lets[o.name].order
        elif isinstance(o, A.Guard):
            o = next((c.order for c in o.cases if eval_cond(c.cond, n)), o.otherwise)
        else:
            break
    parts = _PARTS.get(type(o))
    if parts is None:
        return None
    from dataclasses import replace

    order = replace(o, **{p: A.Using(p, getattr(o, p)) for p in parts})
    names: dict = {}
    apply_order(order, range(n), lets, names)
    return order, names


def with_probed_arithmetic(spec: A.Spec, n: int, tree, target, report, *, seed: int = 0, checks: int = 256):
    """`spec` (the order revealed at n, lowered) with the arithmetic the probes found,
    checked on random and special inputs against `target` (fpspec.arith.probe
    note [region probes]).  `report`: probe_arithmetic's.  One arithmetic when it
    passes the sample check, else one per top-level part plus the joining nodes;
    RevealRefused when neither passes: a spec the check contradicts is never made.
    Returns (spec, lines): lines say what was found and checked."""
    from dataclasses import replace

    from fpspec.arith.probe import probe_regions, sample_check
    from fpspec.errors import RevealRefused

    first = report.arithmetic
    checked, bad = sample_check(target, tree, first, seed=seed, count=checks)
    if report.consistent and bad == 0:
        header = replace(spec.header, sections=spec.header.sections + (A.Block("arithmetic", first.to_entries()),))
        return replace(spec, header=header), [f"sample check: {checked} random and special inputs, all equal "
                                              "to the model bit for bit"]
    lines = [f"one arithmetic for the whole tree ({_short(first)}) differs from {target.name} "
             f"on {bad} of {checked} sample inputs: probing its parts"]
    parts = regionalize(spec, n)
    if parts is None:
        raise RevealRefused(f"{target.name} at n = {n}: no arithmetic reproduces it ({bad} of {checked} sample "
                            "inputs differ) and its order has no parts to probe apart")
    order, names = parts
    rr = probe_regions(target, tree, names, first, seed=seed, checks=checks)
    lines += rr.lines
    if not rr.consistent:
        raise RevealRefused(f"{target.name} at n = {n}: no arithmetic reproduces it, for the whole tree or per "
                            f"part ({rr.lines[-1]})")
    used = sorted(k for k in set(names.values()) if rr.regions.get(k, rr.main) != rr.main)
    # a part in the main arithmetic needs no using
    order = replace(order, **{k: getattr(order, k).order for k in set(names.values()) if k not in used})
    header = replace(spec.header, sections=spec.header.sections + (A.Block("arithmetic", rr.main.to_entries()),),
                     arithmetics=tuple(A.NamedArithmetic(k, override_entries(rr.main, rr.regions[k]))
                                       for k in used))
    out = replace(spec, header=header, order=order)
    # the spec as written, expanded again, must give what was checked
    from fpspec.arith.probe import sample_check as check_again
    from fpspec.spec.expand import expand_arith

    tree2, main, regions = expand_arith(out, n)
    checked, bad = check_again(target, tree2, main, regions, seed=seed + 7, count=checks)
    if bad:
        raise RevealRefused(f"{target.name} at n = {n}: the per-part arithmetic differs on {bad} of {checked} "
                            "fresh sample inputs")
    lines.append(f"sample check of the written spec: {checked} fresh inputs, all equal bit for bit")
    return out, lines


def _short(a: Arithmetic) -> str:
    return f"{a.product} products" + (f" to {a.product_format}" if a.product_format else "") + \
        f", {a.accumulator} accumulator"
