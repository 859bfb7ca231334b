"""Pictures of summation trees in the style of the FPRev paper's figures.

Leaves are boxes labelled "#i" along the bottom, additions are small circles
labelled "+", fused (multi-term) nodes are wider boxes labelled "Σ w" with an
edge from each of their w children; the root is at the top.  The DOT text is
built here (no dependency); turning it into SVG/PNG needs Graphviz's `dot`
program, found on PATH (the `graphviz` Python package is not needed).
"""
from __future__ import annotations

import shutil
import subprocess

from fpspec.errors import FpspecError
from fpspec.io import write_atomic
from fpspec.tree import Tree, postorder

FORMATS = ("svg", "png")


def to_dot(tree: Tree, title: str = "") -> str:
    """DOT source of the tree (iterative: deep trees are fine)."""
    lines = [
        "digraph summation_tree {",
        "  rankdir=BT;",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [arrowsize=0.5, color="#444444"];',
    ]
    if title:
        lines.append(f'  labelloc="t"; label="{_escape(title)}";')
    ids: list[str] = []
    leaf_names = []
    counter = 0
    for s in postorder(tree):
        if isinstance(s, int):
            name = f"l{s}"
            lines.append(f'  {name} [label="#{s}", shape=box, style=rounded, width=0.3, height=0.25];')
            leaf_names.append(name)
            ids.append(name)
            continue
        k = len(s.children)
        kids = ids[-k:]
        del ids[-k:]
        name = f"n{counter}"
        counter += 1
        if s.fused:
            lines.append(f'  {name} [label="Σ{k}", shape=box, style=filled, fillcolor="#dde8f5"];')
        else:
            lines.append(f'  {name} [label="+", shape=circle, width=0.3, fixedsize=true];')
        lines.extend(f"  {c} -> {name};" for c in kids)
        ids.append(name)
    if len(leaf_names) > 1:
        # leaves left to right in index order, as in FPRev's figures: invisible
        # same-rank edges fix their order, the tree's edges may cross
        in_order = [f"l{i}" for i in sorted(int(x[1:]) for x in leaf_names)]
        lines.append("  { rank=same; " + " -> ".join(in_order) + " [style=invis]; }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def graphviz() -> str:
    """The path of Graphviz's `dot`; FpspecError when it is missing (callers ask before any work)."""
    dot = shutil.which("dot")
    if dot is None:
        raise FpspecError("drawing needs the Graphviz 'dot' program on PATH (e.g. apt install graphviz)")
    return dot


def render(tree: Tree, path, fmt: str = "svg", title: str = "") -> None:
    """Write the tree as an SVG or PNG picture (atomically); needs Graphviz's `dot` program."""
    if fmt not in FORMATS:
        raise FpspecError(f"picture format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    dot = graphviz()
    proc = subprocess.run([dot, f"-T{fmt}"], input=to_dot(tree, title).encode(), capture_output=True)
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise FpspecError(f"dot failed: {msg[0] if msg else 'exit code ' + str(proc.returncode)}")
    write_atomic(path, proc.stdout)
