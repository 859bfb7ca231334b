"""`fpspec show`, `fpspec check`, `fpspec fmt`: reading and writing .fps specs.

(`fpspec diff` lives in cli/verify.py and calls fpspec.spec.diff_specs.)
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from fpspec.cli import app
from fpspec.cli.common import at_least, check_output, write_output
from fpspec.errors import FpspecError
from fpspec.io import read_text


def _read(path: Path) -> str:
    return read_text(path, ".fps spec")


def read_spec_text(path) -> str:
    """The text of a .fps spec; a bracket tree file (which `show` reads) is named as one."""
    text = _read(path)
    if _is_tree_text(text):
        raise FpspecError(f"{path}: a bracket tree, not a .fps spec (fpspec show reads trees; "
                          "fpspec reveal -o writes specs)")
    return text


def _is_tree_text(text: str) -> bool:
    """A bracket tree file: '#' comment lines, then a tree (a '(' '[' or a leaf)."""
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            return s[0] in "([" or s[0].isdigit()
    return False


def load_spec_or_tree(path: Path):
    """(spec, tree or None): a .fps file parses; a bracket tree file is lowered."""
    from fpspec.spec import lower, parse
    from fpspec.tree import TreeSyntaxError, parse_tree

    text = _read(path)
    if _is_tree_text(text):
        body = "\n".join(line for line in text.splitlines() if not line.strip().startswith("#"))
        try:
            tree = parse_tree(body)
        except (TreeSyntaxError, ValueError) as e:
            raise FpspecError(f"{path}: not a tree: {e}") from None
        return lower(tree, _header_from_comments(text)), tree
    return parse(text, str(path)), None


def _header_from_comments(text: str):
    """`# key: value` lines of a tree file (what `fpspec reveal -o` writes) as
    the spec's header: target, op and n, the rest as provenance."""
    import json

    from fpspec.spec import make_header

    prov: dict = {}
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("#") or ":" not in s:
            continue
        key, _, value = s[1:].partition(":")
        key, value = key.strip(), value.strip()
        try:
            value = json.loads(value)
        except ValueError:
            pass
        if isinstance(value, (list, float)):
            value = json.dumps(value)
        k, i = key, 2
        while k in prov:  # repeated keys (notes) keep every line
            k, i = f"{key}_{i}", i + 1
        prov[k] = value
    if not isinstance(prov.get("n"), int):
        prov.pop("n", None)
    return make_header(provenance=prov) if prov else None


@app.command()
def show(
    file: Path = typer.Argument(..., metavar="FILE", help="a .fps spec or a bracket tree file"),
    n: Optional[int] = typer.Option(None, "-n", help="reduction length to expand (default: the spec's single n)"),
    svg: Optional[Path] = typer.Option(None, "--svg", help="also draw the tree to this SVG file"),
    png: Optional[Path] = typer.Option(None, "--png", help="also draw the tree to this PNG file"),
    at: Optional[str] = typer.Option(None, "--at", help="the output element I,J whose tree to show (gemv/gemm "
                                                        "specs whose order depends on the output position)"),
) -> None:
    """Print a spec (canonical form) and the tree it gives at n."""
    from fpspec.spec import check, expand
    from fpspec.tree import format_tree, stats

    at_least(n, 1, "-n")
    check_output(svg, "--svg")
    check_output(png, "--png")
    spec, tree = load_spec_or_tree(file)
    if tree is None:
        check(spec)
        r = spec.header.n
        if n is None:
            if r is None or r.lo != r.hi:
                raise FpspecError(f"{file}: the spec holds for n in {str(r)[5:] if r else 'any range'}; "
                                  "give the n to expand with -n N")
            n = r.lo
        tree = expand(spec, n, _position(at))
    elif n is not None and n != stats(tree).leaves:
        raise FpspecError(f"{file}: the tree has {stats(tree).leaves} leaves; expected -n to match or no -n")
    typer.echo(str(spec), nl=False)
    where = f", output ({at})" if at else ""
    typer.echo(f"\n# tree at n = {stats(tree).leaves}{where}: {stats(tree)}")
    typer.echo(format_tree(tree))
    for path, fmt in ((svg, "svg"), (png, "png")):
        if path is not None:
            from fpspec.draw import render

            try:
                render(tree, path, fmt, title=f"{file.name} n={stats(tree).leaves}")
            except OSError as e:
                raise FpspecError(f"--{fmt} {path}: cannot write: {e.strerror or e}") from None
            typer.echo(f"wrote {path}")


def _position(at: str | None) -> tuple[int, int]:
    if at is None:
        return (0, 0)
    try:
        i, j = (int(v) for v in at.split(",")) if "," in at else (int(at), 0)
        if i < 0 or j < 0:
            raise ValueError
        return (i, j)
    except ValueError:
        raise FpspecError(f"--at takes a row and column like 3,8 (both >= 0), got {at!r}") from None


@app.command("check")
def check_cmd(file: Path = typer.Argument(..., metavar="FILE", help="a .fps spec")) -> None:
    """Validate a spec: syntax, names, the range of n, sizes, termination."""
    from fpspec.spec import check, parse
    from fpspec.spec.check import sample_ns

    spec = parse(read_spec_text(file), str(file))
    check(spec)
    r = spec.header.n
    checked = sample_ns(r)
    typer.echo(f"{file}: ok ({str(r)}; {len(spec.lets)} named orders; "
               f"{len(checked)} values of n checked, {checked[0]}..{checked[-1]})")


@app.command()
def fmt(
    file: Path = typer.Argument(..., metavar="FILE", help="a .fps spec"),
    check_only: bool = typer.Option(False, "--check", help="exit 1 if the file is not in canonical form"),
    in_place: bool = typer.Option(False, "-i", "--in-place", help="rewrite the file in canonical form"),
) -> None:
    """Print a spec in canonical form (or check it, or rewrite it with -i)."""
    from fpspec.spec import parse

    if check_only and in_place:
        raise FpspecError("fmt: --check and --in-place exclude each other (--check only reports, -i rewrites)")
    text = read_spec_text(file)
    canonical = str(parse(text, str(file)))
    if check_only:
        if text != canonical:
            raise NotCanonical(f"{file}: not in canonical form (run: fpspec fmt -i {file})")
        typer.echo(f"{file}: canonical")
        return
    if in_place:
        if text != canonical:
            from fpspec.io import replacing_input

            with replacing_input(file):
                write_output(file, canonical, "-i")
            typer.echo(f"reformatted {file}")
        return
    typer.echo(canonical, nl=False)


class NotCanonical(FpspecError):
    """`fmt --check` found a difference: a verdict, exit code 1."""

    exit_code = 1
