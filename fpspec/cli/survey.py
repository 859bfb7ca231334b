"""`fpspec survey`, `fpspec report`: many targets x formats x shapes x
environments into one database, and the report of which compute alike."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from fpspec.cli import app
from fpspec.errors import FpspecError


@app.command()
def survey(
    plan: Path = typer.Argument(..., metavar="PLAN", help="the plan (TOML): targets x formats x n x shapes x variants"),
    db: Path = typer.Option(Path("fpspec.db"), "--db", help="the SQLite store (created, or resumed)"),
    compare: Optional[Path] = typer.Option(None, "--compare", metavar="BASELINE",
                                           help="exit 1 naming every job whose class differs from BASELINE.db's"),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="a Ray cluster (ray://HOST:PORT or auto)"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="local worker processes (default: the cores)"),
):
    """Run a survey plan: each job reveals (or infers over a range) and stores a row; jobs already stored for
    this environment are skipped, so an interrupted survey resumes."""
    from fpspec.survey import Store, compare as compare_stores, load_plan, run_survey

    if jobs is not None and jobs < 1:
        raise FpspecError(f"--jobs must be at least 1, got {jobs}")
    if compare is not None and not compare.is_file():
        raise FpspecError(f"--compare {compare}: no such database")
    the_plan = load_plan(plan)
    with Store(db) as store:
        summary = run_survey(the_plan, store, cluster=cluster, parallel=jobs)
        typer.echo(f"{the_plan.name}: {summary.ran} jobs ran, {summary.skipped} already stored, "
                   f"{summary.failed} failed; {len(summary.environments)} environment(s) -> {db}")
        if compare is None:
            return
        with Store(compare) as baseline:
            changes, missing = compare_stores(store, baseline, summary.keys)
    for m in missing:
        typer.echo(f"not in the baseline: {m}")
    if changes:
        for c in changes:
            typer.echo(f"CHANGED: {c}")
        typer.echo(f"{len(changes)} job(s) changed order or arithmetic against {compare}")
        raise typer.Exit(1)
    typer.echo(f"no order changed against {compare}")


@app.command()
def report(
    db: Path = typer.Argument(..., metavar="DB", help="a survey database"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="the report's folder (index.html inside)"),
    as_csv: Optional[Path] = typer.Option(None, "--csv", metavar="FILE", help="also write every result as CSV"),
):
    """Write the static HTML report of a survey database (a heat map of classes per row and environment, a page
    per cell), and/or a CSV export."""
    from fpspec.survey import Store
    from fpspec.survey.report import write_csv, write_report

    if not db.is_file():
        raise FpspecError(f"{db}: no such database")
    if output is None and as_csv is None:
        raise FpspecError("nothing to write: give -o FOLDER for the HTML report and/or --csv FILE")
    with Store(db) as store:
        if output is not None:
            index = write_report(store, output)
            typer.echo(f"wrote {index}")
        if as_csv is not None:
            write_csv(store, as_csv)
            typer.echo(f"wrote {as_csv}")
