"""`fpspec compile SPEC --target numpy|numba|triton [-n N] -o replica.py`."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from fpspec.cli import app
from fpspec.cli.common import check_backend, check_output, write_output
from fpspec.cli.spec import read_spec_text


@app.command("compile")
def compile_command(
    spec_path: Path = typer.Argument(..., metavar="SPEC", help="the .fps spec to compile"),
    target: str = typer.Option("numpy", "--target", "-t", help="backend: numpy, numba or triton"),
    n: Optional[int] = typer.Option(None, "-n", help="specialize the replica for this one length"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the replica here (default: stdout)"),
    path: Optional[str] = typer.Option(None, "--path", help="triton: emulated | native | auto (the replica's default path)"),
    batch_invariant: bool = typer.Option(False, "--batch-invariant", help="one order for every output whatever the "
                                         "batch M: output (0, 0)'s (fpspec/compile/batch.py)"),
) -> None:
    """Compile a spec into a replica: a self-contained module computing the same bits."""
    from fpspec.compile import compile_kernel
    from fpspec.compile.build import build_kernel
    from fpspec.spec import check, parse

    check_backend(target)
    check_output(output, "-o")
    text = read_spec_text(spec_path)
    spec = parse(text, str(spec_path))
    check(spec)
    note = None
    if batch_invariant:
        from fpspec.compile.batch import batch_invariant as invariant

        one, note = invariant(spec)
        if one is not spec:
            spec, text = one, str(one)
    # the whole module is built before anything is written: an error leaves no file
    options = {} if path is None else {"path": path}
    source = compile_kernel(build_kernel(spec, n=n, name=spec_path.name, source=text), target, **options)
    if note is not None:
        from fpspec.compile.batch import mark

        source = mark(source, target, note)
    if output is None:
        typer.echo(source, nl=False)
    else:
        write_output(output, source, "-o")
        typer.echo(f"wrote {output} ({target}, {source.count(chr(10))} lines)", err=True)
