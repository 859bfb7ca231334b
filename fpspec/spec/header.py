"""Building a spec header from what revelation knows (provenance dicts)."""
from __future__ import annotations

import re

from fpspec.spec import ast as A

_KEY = re.compile(r"[^A-Za-z0-9_]")


def _key(k) -> str:
    k = _KEY.sub("_", str(k))
    return k if k and not k[0].isdigit() else f"_{k}"


def to_value(v):
    """A Python value as a block value (dict -> Block, float -> Float, other -> str)."""
    if isinstance(v, (A.Ident, A.Float, A.Block, bool, int, str)):
        return v
    if isinstance(v, float):
        return A.Float.of(v)
    if v is None:
        return A.Ident("none")
    return str(v)


def block(name: str, items: dict) -> A.Block:
    """Block `name { key = value ... }` from a dict; nested dicts become nested blocks."""
    entries = []
    for k, v in items.items():
        if v is None:
            continue
        key = _key(k)
        if isinstance(v, dict):
            entries.append(A.Entry(key, block(key, v)))
        else:
            entries.append(A.Entry(key, to_value(v)))
    return A.Block(_key(name), tuple(entries))


def make_header(target: str | None = None, op: str | None = None, n: tuple[int, int | None] | None = None,
                provenance: dict | None = None, arithmetic: A.Block | None = None,
                formats: dict | None = None) -> A.Header:
    """Header for `lower(tree, header)`: reveal -o passes its provenance dict
    (target, op and n are taken from it when not given)."""
    prov = dict(provenance or {})
    target = target if target is not None else prov.pop("target", None)
    op = op if op is not None else prov.pop("op", None)
    prov.pop("target", None), prov.pop("op", None)
    pn = prov.pop("n", None)
    if n is None and isinstance(pn, int):
        n = (pn, pn)
    sections = []
    if formats:
        # format names are identifiers (fp32, bf16), as in the arithmetic section
        sections.append(block("formats", {k: A.Ident(v) if isinstance(v, str) and v.isidentifier() else v
                                          for k, v in formats.items()}))
    if prov:
        sections.append(block("provenance", prov))
    if arithmetic is not None:
        sections.append(arithmetic)
    return A.Header(target, op, A.Range(*n) if n else None, tuple(sections))
