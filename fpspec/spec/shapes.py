"""The output shapes a gemv / gemm spec holds for: its `shapes` section, else the
shape it was revealed at.

A library may compute each output shape with other kernels (OpenBLAS runs
gemv for one row, other micro-kernels on edge tiles), so an order revealed at
4 x 4 outputs says nothing about 5 x 6.  A spec therefore covers:

- the outputs its `shapes` section names, where it has one:

      shapes {
          m = any           # rows of the output: any, an integer, or "4, 8, 16..64"
          ncols = "8..24"   # columns (gemm only), the same forms
      }

- else the shape its provenance records (`provenance { shape { m = 4 ncols = 4 } }`,
  written by `fpspec reveal`; `m`, `ncols` in the provenance itself, by fpspec.infer);
- else any shape (a spec written by hand for any output).

Replicas refuse other shapes (fpspec.compile.runtime.inputs_rt `_outputs`), and
`fpspec verify` checks the replica at a covered shape.
"""
from __future__ import annotations

import re

from fpspec.errors import SpecError
from fpspec.spec import ast as A

SECTION = "shapes"
KEYS = ("m", "ncols")
_ITEM = re.compile(r"^\s*(\d+)\s*(?:\.\.\s*(\d*)\s*)?$")

# (lo, hi) intervals of one dimension, hi None for "and above"; None alone: any size
Sizes = "tuple[tuple[int, int | None], ...] | None"


def covered_shapes(spec: A.Spec) -> tuple:
    """(rows, cols) the spec's replicas take, each a tuple of (lo, hi) intervals or None (any);
    (None, None) for a sum or a dot.  cols is None for a gemv (its one column)."""
    op = spec.header.op or "sum"
    if op not in ("gemv", "gemm"):
        return None, None
    section = spec.header.section(SECTION)
    if section is not None:
        sizes = parse_section(section, op)
        return sizes.get("m"), sizes.get("ncols") if op == "gemm" else None
    m, ncols = provenance_shape(spec)
    rows = None if m is None else ((m, m),)
    cols = None if ncols is None or op != "gemm" else ((ncols, ncols),)
    return rows, cols


def provenance_shape(spec: A.Spec) -> tuple[int | None, int | None]:
    """(m, ncols) of the output a spec was revealed on: its provenance's `shape { m, ncols }`
    (fpspec reveal) or `m`, `ncols` (fpspec.infer); None where it says nothing."""
    prov = spec.header.provenance
    found = {"m": None, "ncols": None}
    shape = prov.get("shape") if prov is not None else None
    for where in (shape, prov):
        if where is not None and hasattr(where, "get"):
            for key in found:
                v = getattr(where.get(key), "value", where.get(key))
                if found[key] is None and isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    found[key] = v
    return found["m"], found["ncols"]


def parse_section(section: A.Block, op: str) -> dict:
    """key -> intervals (None: any) of a `shapes` section; SpecError on anything else."""
    if op not in ("gemv", "gemm"):
        raise SpecError(f"a `{SECTION}` section is for gemv and gemm (their output shape); op {op} has one "
                        "output", section.loc)
    keys = KEYS if op == "gemm" else KEYS[:1]
    out: dict = {}
    for e in section.entries:
        if e.key not in keys:
            raise SpecError(f"{SECTION}: unknown key {e.key!r}; expected {' or '.join(keys)} (op {op})",
                            e.loc or section.loc)
        if e.key in out:
            raise SpecError(f"{SECTION}: {e.key} is given twice", e.loc or section.loc)
        out[e.key] = _sizes(e)
    return out


def _sizes(e: A.Entry):
    v = e.value
    expected = (f"expected `{e.key} = any`, a size such as `{e.key} = 8`, or sizes and ranges in quotes "
                f"(`{e.key} = \"4, 8, 16..64\"`)")
    if isinstance(v, A.Ident) and v.name == "any":
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 1:
            raise SpecError(f"{SECTION}: {e.key} = {v}; {expected}", e.loc)
        return ((v, v),)
    if isinstance(v, str):
        out = []
        for part in v.split(","):
            found = _ITEM.match(part)
            lo = int(found.group(1)) if found else 0
            hi = lo if found and found.group(2) is None else (int(found.group(2)) if found and found.group(2)
                                                              else None)
            if not found or lo < 1 or (hi is not None and hi < lo):
                raise SpecError(f"{SECTION}: {e.key} = {v!r}: {part.strip()!r} is not a size or range; {expected}",
                                e.loc)
            out.append((lo, hi))
        return tuple(out)
    raise SpecError(f"{SECTION}: {e.key} = {v}; {expected}", e.loc)


def check_shapes(spec: A.Spec) -> None:
    """SpecError where a `shapes` section is malformed, or widens the shape an `if` on the
    output position was written for (its conditions hold at that shape only)."""
    section = spec.header.section(SECTION)
    if section is None:
        return
    sizes = parse_section(section, spec.header.op or "sum")
    from fpspec.spec.positions import position_guard

    if position_guard(spec) is None:
        return
    m, ncols = provenance_shape(spec)
    revealed = {"m": ((m, m),) if m else None, "ncols": ((ncols, ncols),) if ncols else None}
    for key, got in sizes.items():
        if got != revealed[key]:
            raise SpecError(f"{SECTION}: {key} = {section.get(key)}, but the order's `if` on the output position i, j "
                            f"is written for the revealed shape ({key} = {revealed[key][0][0] if revealed[key] else '?'}, "
                            "provenance { shape { ... } }): its conditions say nothing of other shapes", section.loc)


def covering_any(spec: A.Spec) -> A.Spec:
    """`spec` with a `shapes` section that covers every output shape (its order is the same for
    every output, whatever the shape: a batch-invariant replica)."""
    from dataclasses import replace

    if (spec.header.op or "sum") not in ("gemv", "gemm") or covered_shapes(spec) == (None, None):
        return spec
    keys = KEYS if spec.header.op == "gemm" else KEYS[:1]
    section = A.Block(SECTION, tuple(A.Entry(k, A.Ident("any")) for k in keys))
    sections = tuple(b for b in spec.header.sections if b.name != SECTION) + (section,)
    return replace(spec, header=replace(spec.header, sections=sections))


def shape_advice(spec: A.Spec) -> list[str]:
    """What `fpspec check` says of a gemv / gemm spec that covers the shape it was revealed at only."""
    if spec.header.section(SECTION) is not None:
        return []
    rows, cols = covered_shapes(spec)
    if rows is None and cols is None:
        return []
    shape = (f"{rows[0][0]} rows" if spec.header.op == "gemv" else
             f"{'any' if rows is None else rows[0][0]} x {'any' if cols is None else cols[0][0]} outputs")
    return [f"its replicas take {shape} only (the shape in its provenance, where it was revealed): other shapes "
            "may take other orders; where the order is known to hold for them, say so in "
            "`shapes { m = ... ncols = ... }` (docs/fps.md, \"Output shapes\")"]
