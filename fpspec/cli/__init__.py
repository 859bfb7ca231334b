"""The `fpspec` command: one typer app, each command in its own module.

A command module defines functions decorated with `@app.command()`; importing
it registers them.  Errors derived from FpspecError print as one line and exit
with their code; nothing else reaches the user as a traceback.
"""
from __future__ import annotations

import importlib
import sys

import typer

from fpspec.errors import FpspecError

app = typer.Typer(
    name="fpspec",
    help="Reveal, specify, replicate and verify floating-point accumulation orders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# each module registers its commands on `app` when imported
COMMAND_MODULES = ("reveal", "spec", "probe", "compile", "verify")


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f"fpspec.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"fpspec.cli.{name}":
                raise


def main(argv: list[str] | None = None) -> int:
    _register()
    try:
        # standalone_mode=False: click returns a command's typer.Exit code
        # instead of raising SystemExit, so pass it on
        rc = app(args=argv, standalone_mode=False)
    except FpspecError as e:
        print(f"fpspec: error: {e}", file=sys.stderr)
        return e.exit_code
    except typer.Exit as e:
        return e.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("fpspec: aborted", file=sys.stderr)
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except Exception as e:  # a usage error from click, or a bug: still one line
        import click

        if isinstance(e, click.exceptions.UsageError):
            e.show()
            return 2
        if isinstance(e, click.exceptions.ClickException):
            e.show()
            return e.exit_code
        print(f"fpspec: internal error: {type(e).__name__}: {e} (set FPSPEC_DEBUG=1 for a traceback)", file=sys.stderr)
        import os

        if os.environ.get("FPSPEC_DEBUG"):
            raise
        return 1
    return rc if isinstance(rc, int) else 0


def entry() -> None:
    sys.exit(main())
