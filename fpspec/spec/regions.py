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
