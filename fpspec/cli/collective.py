"""`fpspec reveal torch.distributed.all_reduce --world 4 --backend nccl --numel L`: the
collective's orders over ranks (fpspec.collective), called from `fpspec reveal`."""
from __future__ import annotations

import json
import shlex
import sys

import typer

from fpspec.cli.common import at_least, check_output, write_output
from fpspec.errors import FpspecError


def reveal_collective(target: str, *, n: str | None, world: int | None, backend: str | None,
                      numel: list[int] | None, dtype: str, output: str | None, seed: int, as_json: bool) -> None:
    from fpspec.collective import reveal_specs
    from fpspec.formats import get_format

    if n is not None:
        try:
            n_world = int(n)
        except ValueError:
            raise FpspecError(f"-n {n}: for a collective, n is the world size (an integer)") from None
        if world is not None and world != n_world:
            raise FpspecError(f"-n {n} and --world {world} disagree: both are the world size")
        world = n_world
    if world is None:
        raise FpspecError(f"{target} needs the world size: --world W (or -n W)")
    at_least(world, 2, "--world")
    sizes = list(numel or [])
    if not sizes:
        raise FpspecError(f"{target} needs the buffer size: --numel L (repeatable)")
    for L in sizes:
        at_least(L, 1, "--numel")
    check_output(output, "-o")
    if output and len(sizes) > 1 and "{numel}" not in output:
        raise FpspecError(f"-o {output}: with {len(sizes)} buffer sizes, name the files with {{numel}} "
                          "(e.g. -o ar_{numel}.fps)")
    try:
        fmt = get_format(dtype).name
    except ValueError as e:
        raise FpspecError(str(e)) from None
    backend = backend or "gloo"
    argv = ["reveal", target, "--world", str(world), "--backend", backend, "--dtype", dtype]
    for L in sizes:
        argv += ["--numel", str(L)]
    if output:
        argv += ["-o", output]
    command = "fpspec " + " ".join(shlex.quote(a) for a in argv)
    results, start = reveal_specs(target, world=world, backend=backend, numels=sizes, fmt=fmt, command=command,
                                  seed=seed, log=None if as_json else lambda line: typer.echo(line, err=True))
    for L, rv, spec in results:
        if output:
            write_output(output.replace("{numel}", str(L)), str(spec), "-o")
    if as_json:
        from fpspec.tree import format_tree

        typer.echo(json.dumps({
            "target": target, "world": world, "backend": backend, "dtype": fmt, "start_seconds": round(start, 3),
            "sizes": [{"numel": L, "queries": rv.queries, "calls": rv.calls, "seconds": round(rv.seconds, 6),
                       "call_seconds": round(rv.call_seconds, 6),
                       "orders": [{"tree": format_tree(t), "elements": c, "first": int((rv.labels == k).argmax())}
                                  for k, (t, c) in enumerate(zip(rv.trees, rv.counts()))]}
                      for L, rv, _ in results]}, indent=2))
        return
    if not output:
        for _, _, spec in results:
            typer.echo(str(spec))
    typer.echo(f"{sum(rv.calls for _, rv, _ in results)} calls, {sum(rv.queries for _, rv, _ in results)} queries, "
               f"{sum(rv.seconds for _, rv, _ in results):.3f} s revealing, {start:.1f} s starting "
               f"{world} {backend} ranks", err=True)
    sys.stdout.flush()
