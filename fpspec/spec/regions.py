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

import dataclasses

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
        return _order_only(spec.header.formats)
    try:
        return Arithmetic.from_entries(block.entries)
    except SpecError as e:
        raise SpecError(e.message, _named_entry(block, e.message) or e.location or block.loc) from None


def _order_only(formats: A.Block | None) -> Arithmetic:
    """A spec without an arithmetic section: its `formats` input (fp32 where absent) and output
    (the input where absent), partial sums in the wider of fp32 and the input, so that its
    replicas take and return the formats the spec names (a reveal with --no-probe writes such
    specs), and verify feeds and compares those formats (fpspec.verify.spec_format)."""
    given = [e for e in (formats.entries if formats else ()) if e.key in ("input", "output")]
    try:
        base = Arithmetic.from_entries(given) if given else Arithmetic()
    except SpecError as e:
        raise SpecError(e.message, e.location or formats.loc) from None
    from fpspec.formats import get_format

    wider = base.input if get_format(base.input).precision > get_format("fp32").precision else "fp32"
    output = base.output if any(e.key == "output" for e in given) else base.input
    return dataclasses.replace(base, accumulator=wider, output=output)


def _named_entry(block: A.Block, message: str):
    """The location of the entry an arithmetic message names (`arithmetic: init = 1.0: ...`,
    `arithmetic.fused: aligned = ...`): the last one written with that key."""
    import re

    m = re.match(r"arithmetic(\.fused)?: (\w+)( =| given twice| is required)", message)
    if m is None:
        return None
    entries = block.entries
    if m.group(1):
        inner = [e.value for e in entries if e.key == "fused" and isinstance(e.value, A.Block)]
        if not inner:
            return None
        entries = inner[-1].entries
    found = [e.loc for e in entries if e.key == m.group(2) and e.loc is not None]
    return found[-1] if found else None


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
    if "fused" not in given and "fused" in entries and main.fused is not None:
        # an inherited fused block keeps writing the main format (fpspec.arith.model note [fused output])
        block = entries["fused"].value
        if not any(e.key == "output" for e in block.entries):
            pinned = A.Block(block.name, block.entries + (A.Entry("output", A.Ident(main.fused.output)),), loc=block.loc)
            entries["fused"] = A.Entry("fused", pinned, loc=entries["fused"].loc)
    entries.update(given)
    try:
        arith = Arithmetic.from_entries(tuple(entries.values()))
    except SpecError as e:
        # point at the entry of this section the message names, else at the section
        message = e.message.removeprefix("arithmetic: ")
        loc = next((given[k].loc for k in given if message.startswith(f"{k} ") and given[k].loc), section.loc)
        raise SpecError(f"{where}: {message}", loc) from None
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


def using_names(*orders) -> set:
    """The arithmetic names every `using` in these orders refers to."""
    from fpspec.spec.check import order_children

    found, stack = set(), list(orders)
    while stack:
        o = stack.pop()
        if isinstance(o, A.Using):
            found.add(o.name)
        stack.extend(order_children(o))
    return found


def node_key(t) -> tuple:
    """(smallest leaf, number of leaves): names a subtree of a tree with distinct leaves."""
    return (t, 1) if isinstance(t, int) else (t.first, t.size)


def override_entries(main: Arithmetic, arith: Arithmetic) -> tuple:
    """The fewest entries of `arithmetic NAME { ... }` that turn `main` into `arith`."""
    base = {e.key: e for e in main.to_entries()}
    mine = [e for e in arith.to_entries() if e.key not in WHOLE]
    changed = [e for e in mine if base.get(e.key) != e]
    tries = ([e for e in changed if e.key != "fused"],   # an inherited fused block keeps its output
             changed,
             [e for e in mine if base.get(e.key) != e or e.key == "product"],
             mine)
    main_block = A.Block("arithmetic", main.to_entries())
    for entries in tries:
        if named_arithmetic(main_block, main, A.NamedArithmetic("x", tuple(entries))) == arith:
            return tuple(entries)
    raise SpecError(f"internal error: no arithmetic section gives {arith}")   # pragma: no cover


# Note [parts]: where a probe may find a different arithmetic.  The root
# order is cut into parts: each field of its combinator (tail's body,
# split's halves, lanes' and blocks' inner order) except `outer`, whose
# nodes join the parts and keep the main arithmetic; inside a part every
# field of a combinator is a part again, down to PART_DEPTH levels, and a
# guard's arms are cut alike, an arm with no fields (`seq`, say) being a
# part itself (sdot: an fp32 kernel whose FMA lanes meet in plain fp32 adds,
# inside an fp64 loop; dgemv: a K < 4 path in another arithmetic).  `partition` wraps each part in
# using(PART, ...); probes give each part the arithmetics that fit
# (fpspec.arith.probe.region_keep_sets) at every probed n, and `choose`
# keeps, top down, what fits at all of them.
_FIELDS = {A.Tail: ("body", "outer"), A.Split: ("first", "rest"), A.Lanes: ("inner", "outer"),
           A.Blocks: ("inner", "outer"), A.Chunks: ("inner", "outer"),
           A.Pad: ("order",)}
PART_DEPTH = 4


def _wrap_fields(o, prefix: str, top: bool, parents: dict, parent, depth: int = PART_DEPTH):
    from dataclasses import replace

    if isinstance(o, A.Guard):
        def arm(x, name):
            if depth and not isinstance(x, A.Guard) and type(x) not in _FIELDS:
                # an arm with no parts of its own is one (OpenBLAS dgemv's K < 4 scalar code)
                parents[name] = parent
                return A.Using(name, x)
            return _wrap_fields(x, name, top, parents, parent, depth)
        cases = tuple(replace(c, order=arm(c.order, f"{prefix}b{i}")) for i, c in enumerate(o.cases))
        return replace(o, cases=cases, otherwise=arm(o.otherwise, f"{prefix}b{len(o.cases)}"))
    fields = _FIELDS.get(type(o))
    if fields is None or depth == 0:
        return o
    changes = {}
    for f in fields:
        if top and f == "outer":
            continue
        name = f"{prefix}_{f}" if prefix else f
        parents[name] = parent
        changes[f] = A.Using(name, _wrap_fields(getattr(o, f), name, False, parents, name, depth - 1))
    return replace(o, **changes)


def partition(spec: A.Spec):
    """(order, parents): the spec's root order with its parts (note [parts]) wrapped
    in using(PART, ...), and part -> enclosing part (None: the main arithmetic).
    None when the order has no parts.  Named orders are left whole."""
    parents: dict = {}
    new = _wrap_fields(spec.order, "", True, parents, None)
    return (new, parents) if parents else None


def part_names(spec: A.Spec, order, n: int) -> dict:
    """node key -> part name for the nodes made inside a part at n."""
    from fpspec.spec.expand import apply_order, lets_of

    names: dict = {}
    apply_order(order, range(n), lets_of(spec), names)
    return {k: v for k, v in names.items() if k[1]}   # (leaf, 0): expand's note [lone products], not a part


def section_name(a: Arithmetic) -> str:
    """A section name that says what the arithmetic is: fma_fp32, rounded_fp32, ..."""
    words = ["fused" if a.fused is not None else a.product]
    if a.product_format:
        words.append(a.product_format)
    return "_".join(words + [a.accumulator])


def choose(order, parents: dict, keep: dict, main: Arithmetic):
    """(order, sections): every part in one arithmetic that fit it at every probed n
    (keep: part -> candidates, absent when nothing constrained it), written as
    using(SECTION, ...) only where it differs from the enclosing arithmetic;
    sections: name -> Arithmetic.  Preference: the enclosing arithmetic, then
    the latest one already chosen (a sibling's), then the probes' first.  A combinator whose parts all
    got the same arithmetic takes one using around it."""
    from dataclasses import replace

    chosen: dict = {}
    sections: dict = {}

    def pick(name, enclosing):
        fits = keep.get(name)
        if fits is None or enclosing in fits:
            return enclosing
        for a in reversed(list(chosen.values())):    # the latest chosen first: a sibling's
            if a in fits:
                return a
        return fits[0]

    def walk(o, enclosing):
        if isinstance(o, A.Using):
            a = chosen[o.name] = pick(o.name, enclosing)
            inner = walk(o.order, a)
            return inner if a == enclosing else A.Using(section_for(a, sections), inner)
        if isinstance(o, A.Guard):
            return replace(o, cases=tuple(replace(c, order=walk(c.order, enclosing)) for c in o.cases),
                           otherwise=walk(o.otherwise, enclosing))
        fields = _FIELDS.get(type(o))
        if fields is None:
            return o
        new = {f: walk(getattr(o, f), enclosing) for f in fields}
        names = {x.name if isinstance(x, A.Using) else None for x in new.values()}
        if len(names) == 1 and None not in names:      # every part in one arithmetic: one using around
            name = names.pop()
            return A.Using(name, replace(o, **{f: x.order for f, x in new.items()}))
        return replace(o, **new)

    return walk(order, main), sections


def section_for(a: Arithmetic, sections: dict) -> str:
    """The name of arithmetic `a` in `sections` (name -> Arithmetic), added under a
    new name (section_name, numbered from _2 on a clash) when it is not there yet."""
    for k, v in sections.items():
        if v == a:
            return k
    base = section_name(a)
    name, i = base, 2
    while name in sections:
        name, i = f"{base}_{i}", i + 1
    sections[name] = a
    return name


def with_sections(spec: A.Spec, order, main: Arithmetic, sections: dict) -> A.Spec:
    """`spec` with `order`, the main arithmetic section and `arithmetic NAME { ... }` sections."""
    from dataclasses import replace

    used = using_names(order)
    base = tuple(b for b in spec.header.sections if b.name != "arithmetic")
    header = replace(spec.header, sections=base + (A.Block("arithmetic", main.to_entries()),),
                     arithmetics=tuple(A.NamedArithmetic(k, override_entries(main, a))
                                       for k, a in sections.items() if k in used))
    return replace(spec, header=header, order=order)


MAIN_TRIES = 4   # candidates for the joining nodes checked on sample inputs


def probe_spec_arithmetic(spec: A.Spec, targets: dict, trees: dict, start, *, seed: int = 0,
                          checks: int = 256, probe_ns=None):
    """The arithmetic of a spec whose order fits `trees` (n -> revealed tree; targets:
    n -> Target), checked bit for bit on sample inputs at every n of `trees`.

    start: fpspec.arith.probe's ProbeReport at one n (its arithmetic is the
    whole-tree answer).  One arithmetic when it passes every sample check;
    else one per part (note [parts], fpspec.arith.probe note [region probes]),
    probed at `probe_ns` (default: every n of trees).  RevealRefused when no
    choice passes: a spec the sample check contradicts is never made.
    Returns (spec, lines)."""
    from fpspec.arith.probe import region_keep_sets, sample_check
    from fpspec.errors import RevealRefused

    first = start.arithmetic
    ns = sorted(trees)
    target_name = targets[ns[0]].name
    whole = with_sections(spec, spec.order, first, {})
    results = [(n,) + sample_check(targets[n], trees[n], first, seed=seed + n, count=checks) for n in ns]
    bad = [(n, c, b) for n, c, b in results if b]
    total = sum(c for _, c, _ in results)
    if getattr(start, "consistent", True) and not bad:
        return whole, [f"sample check: {total} random and special inputs at {len(ns)} n, all equal to the "
                       "model bit for bit"]
    n0, c0, b0 = bad[0] if bad else results[0]
    lines = [f"one arithmetic for the whole tree ({_short(first)}) differs from {target_name} on {b0} of "
             f"{c0} sample inputs at n = {n0}: probing its parts"]
    stored = _stored_fused_spec(spec, first, targets, ns, seed, checks, targets[ns[0]].out_fmt)
    if stored is not None:
        out, fmt, checked = stored
        return out, lines + [f"the fused parts' results are stored in {fmt} before they are added (split-K "
                             f"partials, fpspec.arith.model note [fused output]); sample check of the spec: "
                             f"{checked} random and special inputs at {len(ns)} n, all equal bit for bit"]
    parted = partition(spec)
    if parted is None:
        from fpspec.arith.probe import sample_difference

        example = sample_difference(targets[n0], trees[n0], first, seed=seed + n0, count=checks)
        raise RevealRefused(f"{target_name}: no arithmetic reproduces it ({b0} of {c0} sample inputs differ at "
                            f"n = {n0}; {example}) and its order has no parts to probe apart")
    order, parents = parted
    keep: dict = {}
    probed: set = set()
    pending = list(probe_ns or ns)
    for _ in range(len(ns) + 1):
        # a check that fails at an n not probed yet adds that n's probes and chooses again
        for n in pending:
            names = part_names(spec, order, n)
            for name, fits in region_keep_sets(targets[n], trees[n], names, first, seed=seed + n).items():
                keep[name] = [a for a in keep[name] if a in fits] if name in keep else fits
            probed.add(n)
        empty = [k for k, v in keep.items() if not v]
        if empty:
            paired = _fused_pairs(spec, order, parents, {k for k in empty if k is not None}, targets, trees,
                                  seed=seed, checks=checks, probe_ns=probe_ns)
            if paired is not None:
                return paired[0], lines + paired[1]
            what = ", ".join("the joining nodes" if k is None else f"part {k}" for k in empty)
            raise RevealRefused(f"{target_name}: no arithmetic in the model's space fits {what} at every "
                                f"probed n ({compress_ns(sorted(probed))})")
        parts = dict(keep)
        joins = parts.pop(None, None)
        # the most shared candidate: a part in the main arithmetic needs no section
        # the most shared candidate first; the probes may leave the joins' accumulator open
        # where a narrower one differs only on sample inputs: the others are checked in turn
        mains = (sorted(joins, key=lambda a: (-sum(a in v for v in parts.values()), joins.index(a)))[:MAIN_TRIES]
                 if joins else [first])
        for main in mains:
            new_order, sections = choose(order, parents, parts, main)
            out = with_sections(spec, new_order, main, sections)
            checked, failed = _check_spec(out, targets, ns, lambda n: seed + 7 * n + 1, checks)
            if failed is None:
                break
        if failed is None:
            break
        if failed[0] in probed:
            from fpspec.arith.probe import sample_difference
            from fpspec.spec.expand import expand_arith

            n1 = failed[0]
            tree1, main1, regions1 = expand_arith(out, n1)
            example = sample_difference(targets[n1], tree1, main1, regions1, seed=seed + 7 * n1 + 1, count=checks)
            raise RevealRefused(f"{target_name} at n = {n1}: the per-part arithmetic differs on "
                                f"{failed[2]} of {failed[1]} sample inputs ({example})")
        pending = [failed[0]]
    for k, a in sections.items():
        lines.append(f"arithmetic {k}: {_short(a)}")
    lines.append(f"main arithmetic (the joining nodes): {_short(main)}")
    lines.append(f"probed per part at n = {compress_ns(sorted(probed))}; sample check of the spec: {checked} "
                 f"random and special inputs at {len(ns)} n, all equal bit for bit")
    return out, lines


# Note [fused pairs]: a fused node of two children reveals as a binary node
# (fpspec.arith.probe note [chain pairs]), so an order whose part makes only
# such pairs (blocks(2, fused, seq)) is fitted with binary nodes there, and no
# binary arithmetic fits that part.  Such a part is tried as `fused`: where the
# order so changed gives every revealed tree (each of the part's nodes has two
# children), its fused parameters are probed on the new tree and the spec's
# arithmetic is probed again; the sample checks decide as for any spec.
def _fused_pairs(spec: A.Spec, order, parents: dict, parts: set, targets: dict, trees: dict, *, seed: int,
                 checks: int, probe_ns):
    """(spec, lines) with `parts` (names of partition's parts that no arithmetic fits)
    made fused nodes, when that gives every tree of `trees` and its arithmetic passes
    the sample checks; else None (note [fused pairs])."""
    from fpspec.arith.probe import probe_arithmetic
    from fpspec.errors import FpspecError
    from fpspec.spec.check import map_children
    from fpspec.spec.expand import expand
    from fpspec.tree import Node, observable, postorder

    if not parts:
        return None

    def unwrap(o):
        if isinstance(o, A.Using) and o.name in parents:
            return A.Fused() if o.name in parts else unwrap(o.order)
        return map_children(o, unwrap)

    paired = dataclasses.replace(spec, order=unwrap(order))
    if paired.order == spec.order:
        return None   # those parts are fused nodes already: nothing new to probe
    fused_trees = {}
    for n, t in trees.items():
        try:
            new = expand(paired, n)
        except SpecError:
            return None
        if observable(new) != observable(t):
            return None
        fused_trees[n] = new
    with_pairs = [n for n, t in fused_trees.items() if any(isinstance(s, Node) and s.fused for s in postorder(t))]
    if not with_pairs:
        return None
    n = max(with_pairs)
    try:
        report = probe_arithmetic(targets[n], fused_trees[n], seed=seed + n)
        if not report.consistent:
            return None
        out, lines = probe_spec_arithmetic(paired, targets, fused_trees, report, seed=seed, checks=checks,
                                           probe_ns=probe_ns)
    except FpspecError:      # (RevealRefused is one): the caller's refusal stands
        return None
    names = ", ".join(sorted(parts))
    return out, [f"part {names}: no binary arithmetic fits its nodes of two operands; as fused pairs "
                 "(a fused node of two children reveals as a binary node) it does"] + lines


def _stored_fused_spec(spec: A.Spec, main: Arithmetic, targets: dict, ns: list, seed: int, checks: int,
                       output: str):
    """(spec, format, inputs checked) with every fused node or chain below a binary parent in
    using(stored_FMT, ...), FMT a format narrower than the accumulator (the output's first),
    when that passes every sample check; else None (fpspec.arith.model note [fused output])."""
    from dataclasses import replace

    from fpspec.formats import get_format
    from fpspec.spec.check import map_children

    if main.fused is None:
        return None

    def wrap(o, name, top):
        if isinstance(o, (A.Fused, A.Chain)) and not top:
            return A.Using(name, o)
        if isinstance(o, A.Using):
            return o
        return map_children(o, lambda x: wrap(x, name, False))

    def passes(main, order, name, fmt):
        """(spec, inputs checked) when the stored spec passes every sample check, else None."""
        out = with_sections(spec, order, main, {name: replace(main, accumulator=fmt)})
        checked, failed = _check_spec(out, targets, ns, lambda n: seed + 11 * n + 3, checks)
        return None if failed else (out, checked)

    width = get_format(main.accumulator).precision
    formats = sorted({f for f in (output, "bf16", "fp16") if get_format(f).precision < width},
                     key=lambda f: (f != output, f))
    for fmt in formats:
        name = f"stored_{fmt}"
        order = wrap(spec.order, name, True)
        if order == spec.order:
            return None
        got = passes(main, order, name, fmt)
        if got is None:
            continue
        # the probes could not fix the floor through stored partials: a known GPU's floor
        # that passes too is preferred (it lets the Triton replica take the Tensor Cores)
        for floor in _known_floors(main.fused):
            other = passes(replace(main, fused=replace(main.fused, exponent_floor=floor)), order, name, fmt)
            if other is not None:
                got = other
                break
        return got[0], fmt, got[1]
    return None


def _check_spec(spec: A.Spec, targets: dict, ns: list, seed_at, checks: int):
    """(inputs checked, None) when `spec` passes the sample check at every n of ns, else
    (inputs checked, (n, inputs, differing)) at the first n where it does not."""
    from fpspec.arith.probe import sample_check
    from fpspec.spec.expand import expand_arith

    checked = 0
    for n in ns:
        tree, m, regions = expand_arith(spec, n)
        c, b = sample_check(targets[n], tree, m, regions, seed=seed_at(n), count=checks)
        checked += c
        if b:
            return checked, (n, c, b)
    return checked, None


def _known_floors(fused) -> list:
    """Exponent floors of the named GPU parameter sets (fpspec.arith.params) for these nodes' other
    parameters, other than fused's own."""
    from dataclasses import replace

    from fpspec.arith.params import PARAMS

    floors = []
    for p in PARAMS.values():
        same = replace(p, w=fused.w, exponent_floor=fused.exponent_floor, output=fused.output)
        if same == fused and p.exponent_floor not in floors + [fused.exponent_floor]:
            floors.append(p.exponent_floor)
    return floors


def compress_ns(ns: list) -> str:
    """1 2 3 7 8 -> '1..3 7 8' (runs of three or more)."""
    out, i = [], 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        out += [f"{ns[i]}..{ns[j]}"] if j - i >= 2 else [str(x) for x in ns[i:j + 1]]
        i = j + 1
    return " ".join(out)


def with_probed_arithmetic(spec: A.Spec, n: int, tree, target, report, *, seed: int = 0, checks: int = 256):
    """probe_spec_arithmetic at one revealed n (fpspec reveal -o)."""
    return probe_spec_arithmetic(spec, {n: target}, {n: tree}, report, seed=seed, checks=checks)


def _short(a: Arithmetic) -> str:
    return (f"{a.product} products" + (f" to {a.product_format}" if a.product_format else "")
            + f", {a.accumulator} accumulator")
