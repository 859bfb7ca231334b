"""The survey report: a static HTML heat map and a page per cell, and a CSV export.

Rows are what was computed (target, op, format, n, shape, device), columns the
environments, and a cell's colour its equivalence class within the row: the
row's most common class is colour 0, the next colour 1, ... (FLiT's "how many
different answers" per configuration).  Each cell links to a page with its
spec, the tree (SVG through Graphviz where `dot` is installed), how the order
depends on n where a range was inferred, and the first differing subtree
against each other class of its row.  Everything is in the files written: no
script or style is fetched from elsewhere.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fpspec.errors import FpspecError
from fpspec.io import write_atomic
from fpspec.resources import templates_dir
from fpspec.survey.store import Environment, Result, Store

PALETTE = ("#4e9a06", "#3465a4", "#f57900", "#cc0000", "#75507b", "#c4a000", "#06989a", "#8f5902", "#555753",
           "#ad7fa8", "#729fcf", "#e9b96e")
STATUS_COLOURS = {"refused": "#d3d7cf", "error": "#2e3436"}
PICTURE_LEAVES = 128


@dataclass(frozen=True)
class Cell:
    result: Result
    class_index: int | None     # None: refused or error
    colour: str


@dataclass(frozen=True)
class Row:
    name: str
    cells: dict                 # env id -> Cell
    classes: int


def build_rows(results: list[Result]) -> list[Row]:
    grouped: dict[str, list[Result]] = {}
    for r in results:
        grouped.setdefault(r.row, []).append(r)
    rows = []
    for name in sorted(grouped):
        latest: dict[int, Result] = {}
        for r in grouped[name]:
            latest[r.env_id] = r        # ids ascend: a later result of a cell replaces the earlier
        counts = Counter(r.class_hash for r in latest.values() if r.status == "ok")
        order = {h: k for k, (h, _) in enumerate(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))}
        cells = {}
        for env_id, r in latest.items():
            if r.status == "ok":
                k = order[r.class_hash]
                cells[env_id] = Cell(r, k, PALETTE[k % len(PALETTE)])
            else:
                cells[env_id] = Cell(r, None, STATUS_COLOURS.get(r.status, "#000000"))
        rows.append(Row(name, cells, len(counts)))
    return rows


def write_report(store: Store, out, *, cell_pages: bool = True) -> Path:
    """Write the report into `out` (index.html, cells/); returns the index's path.

    The report is built in a temporary folder beside `out` and swapped in
    whole, so a failed run leaves the previous report as it was.  A folder
    that is not a report (no index.html) but holds files is refused.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FpspecError(f"-o {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / "index.html").is_file():
        raise FpspecError(f"-o {out}: a folder with other files in it (the report replaces its folder whole)")
    results, envs = store.results(), store.environments()
    if not results:
        raise FpspecError(f"{store.path}: the database holds no results yet (run `fpspec survey PLAN --db FILE`)")
    rows = build_rows(results)
    env_ids = [e.id for e in envs if any(e.id in row.cells for row in rows)]
    by_env = {e.id: e for e in envs}
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (building / "cells").mkdir()
        env = _jinja()
        if cell_pages:
            cell = env.get_template("survey_cell.html.j2")
            pictures = _Pictures(building / "cells")
            for row in rows:
                for env_id, c in row.cells.items():
                    page = cell.render(row=row, cell=c, environment=by_env[env_id], others=_others(row, c),
                                       picture=pictures.of(c.result), n_table=_n_table(c.result))
                    (building / "cells" / f"{c.result.id}.html").write_text(page, encoding="utf-8")
        index = env.get_template("survey_report.html.j2").render(
            rows=rows, environments=[by_env[i] for i in env_ids], database=store.path.name, results=len(results),
            palette=PALETTE, status_colours=STATUS_COLOURS)
        (building / "index.html").write_text(index, encoding="utf-8")
        _swap(building, out)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return out / "index.html"


def _swap(new: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        os.replace(out, old / "report")
    os.replace(new, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_csv(store: Store, path) -> None:
    envs = {e.id: e for e in store.environments()}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["row", "target", "op", "dtype", "n", "shape", "device", "variant", "environment", "environment_hash",
                "status", "class", "message", "seconds", "spec"])
    for r in store.results():
        e = envs[r.env_id]
        w.writerow([r.row, r.target, r.op or "", r.dtype, r.n, r.shape, r.device, r.variant, e.label, e.hash,
                    r.status, r.class_hash or "", r.message or "", r.seconds if r.seconds is not None else "",
                    r.spec or ""])
    write_atomic(path, buf.getvalue())


def _jinja():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _others(row: Row, cell: Cell) -> list[dict]:
    """The first differing subtree against one cell of each other class of the row."""
    if cell.class_index is None:
        return []
    seen, out = {cell.result.class_hash}, []
    for other in row.cells.values():
        h = other.result.class_hash
        if other.class_index is None or h in seen:
            continue
        seen.add(h)
        out.append({"class": other.class_index, "colour": other.colour, "result": other.result.id,
                    "difference": _first_difference(cell.result, other.result)})
    return out


def _first_difference(a: Result, b: Result) -> str:
    return _class_difference(a.class_hash, b.class_hash, a.spec, b.spec, tuple(sorted(a.trees.items())),
                             tuple(sorted(b.trees.items())), a.arithmetic, b.arithmetic)


@lru_cache(maxsize=4096)
def _class_difference(class_a, class_b, spec_a, spec_b, trees_a, trees_b, arith_a, arith_b) -> str:
    from fpspec.tree import diff

    a_trees, b_trees = dict(trees_a), dict(trees_b)
    common = sorted(set(a_trees) & set(b_trees), key=_n_of)
    for key in common:
        if a_trees[key] == b_trees[key]:
            continue
        n, pos = _n_of(key), _pos_of(key)
        d = diff(_tree(spec_a, n, pos), _tree(spec_b, n, pos))
        if d is not None:
            return f"at n = {n}, output {pos}: {d}"
    if arith_a != arith_b:
        return "same trees at every n compared; the arithmetic differs:\n" + _arith_diff(arith_a, arith_b)
    return "no tree compared differs (the specs differ where no tree was hashed)"


@lru_cache(maxsize=256)
def _tree(spec_text: str, n: int, pos: tuple[int, int]):
    from fpspec.spec import expand, parse

    return expand(parse(spec_text), n, pos)


def _arith_diff(a: str | None, b: str | None) -> str:
    la, lb = (a or "").splitlines(), (b or "").splitlines()
    return "\n".join([f"- {x.strip()}" for x in la if x not in lb] + [f"+ {x.strip()}" for x in lb if x not in la])


def _n_of(key: str) -> int:
    return int(key.split("@")[0])


def _pos_of(key: str) -> tuple[int, int]:
    i, j = key.split("@")[1].split(",")
    return int(i), int(j)


def _n_table(r: Result) -> list[tuple[str, str]]:
    """How the tree depends on n, where a range was inferred: runs of n with the same tree."""
    if ".." not in r.n or not r.trees:
        return []
    return [(k, v) for k, v in sorted(r.trees.items(), key=lambda kv: (_n_of(kv[0]), kv[0]))]


class _Pictures:
    """One SVG per (class, n) shared by the cells that show it; the tree as text without Graphviz's dot."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.dot = shutil.which("dot")
        self.made: dict[str, dict] = {}

    def of(self, r: Result) -> dict | None:
        if r.status != "ok" or not r.trees:
            return None
        key = min(r.trees, key=_n_of)
        n, pos = _n_of(key), _pos_of(key)
        if n > PICTURE_LEAVES:
            return {"n": n, "file": None, "text": None, "note": f"the tree at n = {n} is too large to draw here"}
        name = f"tree_{r.class_hash}_{n}.svg"
        if name not in self.made:
            self.made[name] = self._draw(_tree(r.spec, n, pos), n, name)
        return self.made[name]

    def _draw(self, tree, n: int, name: str) -> dict:
        from fpspec.draw import to_dot
        from fpspec.tree import format_tree

        drawn = None
        if self.dot:
            done = subprocess.run([self.dot, "-Tsvg"], input=to_dot(tree, f"n = {n}"), capture_output=True, text=True)
            if done.returncode == 0:
                write_atomic(self.folder / name, done.stdout)
                drawn = name
        return {"n": n, "file": drawn, "text": format_tree(tree),
                "note": None if drawn else "Graphviz's dot is not installed: the tree as text"}
