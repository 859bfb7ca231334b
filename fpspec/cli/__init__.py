"""The `fpspec` command: one typer app, each command in its own module.

A command module defines functions decorated with `@app.command()`; importing
it registers them.  main() is the one funnel for every way out: an
FpspecError prints as `fpspec: error: MESSAGE` and exits with its code (2 bad
input, 1 a verdict, 3 a refusal), a usage error of click's (unknown command
or option, missing or malformed value) reads the same and exits 2, Ctrl-C
prints `fpspec: interrupted` and exits 130, a closed stdout pipe exits 141
quietly; only a bug in fpspec says `internal error` (FPSPEC_DEBUG=1 re-raises
it).  The checks the commands share live in fpspec.cli.common.
"""
from __future__ import annotations

import importlib
import os
import re
import sys

import typer

from fpspec.errors import FpspecError
from fpspec.io import inputs_guarded

app = typer.Typer(
    name="fpspec",
    help="Reveal, specify, replicate and verify floating-point accumulation orders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# each module registers its commands on `app` when imported
COMMAND_MODULES = ("reveal", "spec", "probe", "compile", "verify", "survey")


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f"fpspec.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"fpspec.cli.{name}":
                raise


def main(argv: list[str] | None = None) -> int:
    """Run the fpspec command line; returns the exit code.

    Every way out is one line on stderr: `fpspec: error: ...` for a mistake in
    the command (exit 2, or the FpspecError's own code), `fpspec: interrupted`
    for Ctrl-C (130), `fpspec: internal error: ...` only for a bug in fpspec.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] in (["--version"], ["-V"]):
        print(f"fpspec {_version()}")
        return 0
    # with --json the answer on stdout is JSON, an error too (`{"error": ..., "exit_code": ...}`)
    as_json = "--json" in args[1:]
    if not args:
        _register()
        # bare `fpspec`: the overview, then the one line that says what was missing
        main(["--help"])
        return _error(f"no command given (expected one of {', '.join(_command_names())})", 2)
    # typer's app() in library mode turns Ctrl-C into a silent exit code 130;
    # driving the click command directly lets every exception reach the
    # handlers below as itself
    try:
        _register()     # imports numpy and friends: Ctrl-C may land here
        command = typer.main.get_command(app)
        from fpspec.cli.progress_bar import progress_bars
        from fpspec.reveal.targets import isolated_first_calls

        with inputs_guarded(), isolated_first_calls(), progress_bars(), \
                command.make_context("fpspec", args) as ctx:
            rv = command.invoke(ctx)
    except FpspecError as e:
        return _error(str(e), e.exit_code, as_json)
    except typer.Exit as e:               # --help, or a command's own exit code
        return e.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("fpspec: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `fpspec show big.fps | head`: the reader left; say nothing more
        _quiet_stdout()
        return 141
    except typer.TyperException as e:     # click's usage errors and its other complaints
        return _error(_usage_message(e, args), getattr(e, "exit_code", 2), as_json)
    except MemoryError:
        return _error("out of memory (is -n, --m or --ncols far larger than meant?)", 1, as_json)
    except UnicodeDecodeError as e:
        return _error(f"input is not UTF-8 text ({e.reason} at byte {e.start})", 2, as_json)
    except OSError as e:
        # an error of the file system (disk full, permission, a vanished
        # directory) the command did not catch itself: still the user's file
        name = e.filename2 or e.filename    # os.replace(tmp, path) names path second
        where = f"{name}: " if name else ""
        return _error(f"{where}{e.strerror or e}", 2, as_json)
    except Exception as e:
        if os.environ.get("FPSPEC_DEBUG"):
            raise
        message = f"internal error: {type(e).__name__}: {_one_line(str(e))} (set FPSPEC_DEBUG=1 for a traceback)"
        print(f"fpspec: {message}", file=sys.stderr)
        if as_json:
            _json_error(message, 1)
        return 1
    return rv if isinstance(rv, int) else 0


def _error(message: str, code: int, as_json: bool = False) -> int:
    print(f"fpspec: error: {_one_line(message)}", file=sys.stderr)
    if as_json:
        _json_error(_one_line(message), code)
    return code


def _json_error(message: str, code: int) -> None:
    import json

    try:
        print(json.dumps({"error": message, "exit_code": code}, indent=2))
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        _quiet_stdout()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fpspec")
    except PackageNotFoundError:      # run from a source tree that is not installed
        import fpspec

        return fpspec.__version__


def _one_line(text: str) -> str:
    """Messages from libraries may span lines; the user gets one."""
    return " ".join(part.strip() for part in text.strip().splitlines() if part.strip())


def _command_names() -> list[str]:
    return [c.name or c.callback.__name__ for c in app.registered_commands]


def _usage_message(e: Exception, args: list[str]) -> str:
    """click's usage complaint as fpspec says it: which command, what is wrong, the value
    that was wrong, and where the help is (click prints the usage block and a
    capitalized sentence on several lines)."""
    ctx = getattr(e, "ctx", None)
    path = ctx.command_path if ctx is not None else "fpspec"
    if path == "fpspec" and args and args[0] in _command_names():
        path = f"fpspec {args[0]}"     # the parser's complaints come without the command's context
    text = _one_line(e.format_message()) if hasattr(e, "format_message") else str(e)
    names = ", ".join(_command_names())
    unknown = re.match(r"No such command '(.*?)'\.\s*(.*)", text)
    if unknown:
        guess = unknown.group(2).rstrip("?").replace("Did you mean", "did you mean")
        guess = f"{guess}? " if guess else ""
        return f"no such command {unknown.group(1)!r} ({guess}expected one of {names})"
    param = getattr(e, "param", None)
    value = _value_given(param, args) if param is not None else None
    bad = re.match(r"Invalid value for (.*?): (.*)", text)
    if bad:
        reason = bad.group(2)
        if reason.startswith("Input should be a valid integer"):
            reason = "expected an integer"
        elif reason.startswith("Input should be a valid number"):
            reason = "expected a number"
        given = f" {value!r}" if value is not None else ""
        text = f"invalid value{given} for {bad.group(1)}: {_lower_first(reason)}"
    text = re.sub(r"\s*\(Possible options: (.*?)\)", r"; did you mean one of \1?", text)
    text = _lower_first(text).rstrip(".")
    where = path[len("fpspec "):] + ": " if path.startswith("fpspec ") else ""
    return f"{where}{text} (see {path} --help)"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _value_given(param, args: list[str]) -> str | None:
    """The text the user gave for option `param` (the last one, as click keeps the last)."""
    opts = [*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]
    value = None
    for i, a in enumerate(args):
        for opt in opts:
            if a == opt and i + 1 < len(args):
                value = args[i + 1]
            elif opt.startswith("--") and a.startswith(opt + "="):
                value = a[len(opt) + 1:]
            elif not opt.startswith("--") and a.startswith(opt) and len(a) > len(opt):
                value = a[len(opt):]                 # -nabc
    return value


def _quiet_stdout() -> None:
    # stdout's buffer still holds what the closed pipe refused; point the fd at
    # /dev/null so the interpreter's final flush does not complain
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def entry() -> None:
    sys.exit(main())
