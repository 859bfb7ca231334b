"""The command line as a demanding user meets it: every mistake is one line on
stderr starting `fpspec: error:` and naming the bad thing, with the usual exit
code (2 for a usage error or bad input, 1 for a verdict, 130 for Ctrl-C), and
no traceback; a failed run leaves the user's files as they were."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fpspec.cli import main

ROOT = Path(__file__).resolve().parents[2]
SUM_SPEC = str(ROOT / "examples" / "cpu" / "numpy_sum.fps")


def _commands() -> list:
    from fpspec.cli import _command_names, _register

    _register()
    return _command_names()


COMMANDS = _commands()      # every registered command, in registration order

USER_MODULE = textwrap.dedent("""
    import numpy as np
    NOT_CALLABLE = 3
    def raises(x):
        raise RuntimeError("boom")
    def wrong_shape(x):
        return np.zeros(3, dtype=x.dtype)
    def wrong_dtype(x):
        return np.sum(x).astype(np.int32)
    def returns_none(x):
        return None
    def interrupted(x):
        raise KeyboardInterrupt
    def good(x):
        return np.sum(x)
""")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "empty.fps").write_text("")
    (d / "blank.fps").write_text("\n  \n")
    (d / "binary.fps").write_bytes(b"target \"x\"\nop \xff\xfe sum\n")
    (d / "nul.fps").write_bytes(b"ab\0cd")
    (d / "bad.fps").write_text("target numpy.sum\n")
    (d / "folder").mkdir()
    (d / "fpspec_cli_user_targets.py").write_text(USER_MODULE)
    return d


@pytest.fixture
def user_targets(files, monkeypatch):
    monkeypatch.syspath_prepend(str(files))


def one_line_error(capsys, argv, code, *fragments):
    """Run `fpspec argv`; assert the exit code and a single `fpspec: error:` line holding the fragments."""
    rc = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == code, err
    assert len(lines) == 1, err
    assert lines[0].startswith("fpspec: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err
    return lines[0]


# ------------------------------------------------------------------ usage errors (click's, said our way)

@pytest.mark.parametrize("argv, fragments", [
    (["nosuch"], ["no such command 'nosuch'", "expected one of " + ", ".join(COMMANDS)]),
    (["revael"], ["no such command 'revael'", "did you mean 'reveal'"]),
    (["--bogus"], ["no such option: --bogus"]),
    (["reveal"], ["reveal: missing argument 'TARGET'"]),
    (["reveal", "numpy.sum"], ["reveal: missing option '-n'", "fpspec reveal --help"]),
    (["reveal", "numpy.sum", "-n", "8", "--bogus"], ["reveal: no such option: --bogus"]),
    (["reveal", "numpy.sum", "-n", "8", "--seed", "x"], ["invalid value 'x' for '--seed': expected an integer"]),
    (["probe", "numpy.sum", "-n", "abc"], ["probe: invalid value 'abc' for '-n': expected an integer"]),
    (["probe", "numpy.sum", "-nabc"], ["invalid value 'abc' for '-n'"]),
    (["reveal", "numpy.sum", "-n"], ["reveal: option '-n' requires an argument", "(see fpspec reveal --help)"]),
    (["reveal", "numpy.sum", "-n", "8", "--json=yes"], ["reveal: option '--json' does not take a value"]),
    (["reveal", "numpy.sum", "numpy.sum", "-n", "8"], ["reveal: got unexpected extra argument"]),
    (["verify", SUM_SPEC, "-n", "abc"], ["verify: invalid value 'abc' for '-n'"]),
    (["show"], ["show: missing argument 'FILE'"]),
    (["compile"], ["compile: missing argument 'SPEC'"]),
    (["diff", SUM_SPEC], ["diff: missing argument 'B'"]),
    (["check"], ["check: missing argument 'FILE'"]),
    (["fmt"], ["fmt: missing argument 'FILE'"]),
    (["probe"], ["probe: missing argument 'TARGET'"]),
    (["verify"], ["verify: missing argument 'SPEC'"]),
])
def test_usage_errors_exit_2_in_one_line(capsys, argv, fragments):
    line = one_line_error(capsys, argv, 2, *fragments)
    assert "internal error" not in line


@pytest.mark.parametrize("module", ["fpspec", "fpspec.cli"])
def test_unknown_command_from_the_shell(module):
    # the whole entry point, as a user types it: exit 2, one line, no traceback
    p = subprocess.run([sys.executable, "-m", module, "nosuch"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    assert p.stderr == f"fpspec: error: no such command 'nosuch' (expected one of {', '.join(COMMANDS)})\n"


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert "Commands" in out
    assert err == f"fpspec: error: no command given (expected one of {', '.join(COMMANDS)})\n"


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_exits_0(capsys, command):
    assert main([command, "--help"] if command else ["--help"]) == 0
    out, err = capsys.readouterr()
    assert "Usage" in out and err == ""


# ------------------------------------------------------------------ bad option values

@pytest.mark.parametrize("argv, code, fragments", [
    (["reveal", "numpy.sum", "-n", "abc"], 2, ["-n must be an integer or a range like 1..65536, got 'abc'"]),
    (["reveal", "numpy.sum", "-n", "0"], 2, ["-n 0: n must be an integer >= 2"]),
    (["reveal", "numpy.sum", "-n", "-5"], 2, ["-n -5: n must be an integer >= 2"]),
    (["reveal", "numpy.sum", "-n", "10..2"], 2, ["-n 10..2: a range LO..HI needs 1 <= LO <= HI"]),
    (["reveal", "numpy.sum", "-n", "1..1"], 2, ["-n 1..1: a sum of one term reveals nothing; a range LO..HI needs HI >= 2"]),
    (["reveal", "numpy.sum", "-n", "8", "--dtype", "float7"], 2, ["--dtype float7: unknown format 'float7'"]),
    (["reveal", "numpy.sum", "-n", "8", "--device", "tpu"], 2, ["--device tpu: unknown device"]),
    (["reveal", "numpy.matmul", "-n", "8", "--op", "gemv", "--m", "0"], 2, ["--m 0: expected an integer >= 1"]),
    (["reveal", "numpy.sum", "-n", "8", "--format", "xml"], 2, ["--format must be fps or tree, got 'xml'"]),
    (["probe", "numpy.sum", "-n", "0"], 2, ["-n 0: expected an integer >= 2"]),
    (["probe", "numpy.sum", "-n", "8", "--dtype", "float7"], 2, ["--dtype float7"]),
    (["probe", "numpy.sum", "-n", "8", "--device", "tpu"], 2, ["--device tpu"]),
    (["compile", SUM_SPEC, "--target", "cobol"], 2,
     ["--target: unknown target 'cobol'; expected one of numpy, numba, triton"]),
    (["compile", SUM_SPEC, "-n", "0"], 2, ["-n 0 is outside the spec's range 1..65536"]),
    (["show", SUM_SPEC, "-n", "-3"], 2, ["-n -3: expected an integer >= 1"]),
    (["verify", SUM_SPEC, "--target", "cobol", "-n", "8", "--samples", "20"], 2, ["--target: unknown target 'cobol'"]),
    (["verify", SUM_SPEC, "-n", "-5", "--samples", "20"], 2, ["-n -5: expected an integer >= 2"]),
    (["verify", SUM_SPEC, "-n", "8", "--samples", "20", "--device", "tpu", "--against", "numpy.sum"], 2,
     ["--device tpu"]),
    (["verify", SUM_SPEC, "--samples", "20", "--max-n", "0"], 2, ["--max-n 0: expected an integer >= 2"]),
    (["diff", "numpy.sum", "numpy.sum", "-n", "8", "--dtype", "float7"], 2, ["--dtype float7"]),
    (["diff", "numpy.sum", "numpy.sum", "-n", "0"], 2, ["-n 0"]),
    (["fmt", "--check", "-i", SUM_SPEC], 2, ["--check and --in-place exclude each other"]),
    (["reveal", "numpy.sum", "-n", "99999999999999999999999"], 2, ["-n 99999999999999999999999: too large"]),
    (["show", SUM_SPEC, "-n", "99999999999999999999999"], 2, ["-n 99999999999999999999999: too large"]),
    (["reveal", "numpy.sum", "-n", "8", "--arithmetic", SUM_SPEC], 2, ["--arithmetic applies to a range -n LO..HI"]),
    (["reveal", "numpy.sum", "-n", "8", "-o", ""], 2, ["-o: empty file name"]),
    (["probe", "numpy.sum", "-n", "8", "--tree", ""], 2, ["--tree: empty"]),
    (["probe", "numpy.sum", "-n", "8", "--tree", "5"], 2,
     ["--tree: tree leaves must be numbered from 0: a tree of one leaf is `0`, not `5`"]),
    (["probe", "numpy.sum", "-n", "8", "--tree", "((0 1) 2"], 2, ["--tree: column 1: '(' is never closed"]),
])
def test_bad_values_name_the_option(capsys, argv, code, fragments):
    one_line_error(capsys, argv, code, *fragments)


# ------------------------------------------------------------------ files that are not specs

BAD_FILES = [
    ("nosuch.fps", "nosuch.fps: "),
    ("folder", "folder: is a directory, expected a .fps spec"),
    ("empty.fps", "empty.fps: the file is empty, expected a .fps spec"),
    ("blank.fps", "blank.fps: the file is empty"),
    ("binary.fps", "binary.fps:2:4: binary data (byte 0xff), expected a .fps spec in UTF-8 text"),
    ("nul.fps", "nul.fps:1:3: binary data (byte 0x00)"),
    ("bad.fps", "bad.fps:1:8: unexpected 'numpy'; expected a string"),
    ("empty.fps/inside.fps", "inside.fps: cannot read: Not a directory"),   # unreadable, even for root
]


@pytest.mark.parametrize("command", [["show"], ["check"], ["fmt"], ["compile"], ["verify"], ["diff", SUM_SPEC]])
@pytest.mark.parametrize("name, fragment", BAD_FILES)
def test_bad_spec_files(capsys, files, command, name, fragment):
    if name == "nosuch.fps" and command[0] in ("verify", "diff"):
        fragment = "nosuch.fps: no such spec file"
    elif name == "nosuch.fps":
        fragment = "nosuch.fps: cannot read: No such file or directory"
    if name == "empty.fps/inside.fps" and command[0] in ("verify", "diff"):
        fragment = "inside.fps: no such spec file"      # Path.exists() is False under a file
    one_line_error(capsys, [*command, str(files / name)], 2, fragment)


def test_tree_files_are_not_specs(capsys, files):
    tree = files / "tree3.txt"
    tree.write_text("# n: 3\n((0 1) 2)\n")
    for command in (["check"], ["fmt"], ["compile"], ["verify"]):
        one_line_error(capsys, [*command, str(tree)], 2, f"{tree}: a bracket tree, not a .fps spec")
    assert main(["show", str(tree)]) == 0       # show reads trees


def test_a_byte_order_mark_is_not_part_of_the_spec(capsys, files):
    bom = files / "bom.fps"
    bom.write_bytes(b"\xef\xbb\xbf" + Path(SUM_SPEC).read_bytes())
    assert main(["check", str(bom)]) == 0
    assert capsys.readouterr().out.startswith(f"{bom}: ok")


def test_bad_arithmetic_file_for_a_range(capsys, files):
    one_line_error(capsys, ["reveal", "numpy.sum", "-n", "4..8", "--arithmetic", str(files / "binary.fps")], 2,
                   "binary.fps:2:4: binary data")
    one_line_error(capsys, ["reveal", "numpy.sum", "-n", "4..8", "--arithmetic", str(files / "folder")], 2,
                   "folder: is a directory")


def test_bad_replica_and_tree_files(capsys, files):
    one_line_error(capsys, ["verify", SUM_SPEC, "-n", "8", "--samples", "20", "--replica", str(files / "binary.fps")],
                   2, "binary.fps:2:4: binary data", "replica")
    one_line_error(capsys, ["probe", "numpy.sum", "-n", "8", "--tree", str(files / "nosuch.txt")],
                   2, "--tree", "nosuch.txt: no such file")
    one_line_error(capsys, ["probe", "numpy.sum", "-n", "8", "--tree", str(files / "binary.fps")],
                   2, "binary.fps:2:4: binary data", "expected a tree")


# ------------------------------------------------------------------ outputs that cannot be written

@pytest.mark.parametrize("argv", [
    ["reveal", "numpy.sum", "-n", "8", "--no-probe", "-o"],
    ["compile", SUM_SPEC, "-o"],
    ["probe", "numpy.sum", "-n", "8", "--tree", "(((0 1) (2 3)) ((4 5) (6 7)))", "--rows", "20", "-o"],
    ["show", SUM_SPEC, "-n", "8", "--svg"],
])
def test_unwritable_outputs(capsys, files, argv):
    flag = argv[-1]
    one_line_error(capsys, [*argv, str(files / "nodir" / "out.x")], 2,
                   f"{flag} {files / 'nodir' / 'out.x'}: cannot write: no directory")
    one_line_error(capsys, [*argv, str(files / "folder")], 2,
                   f"{flag} {files / 'folder'}: cannot write: it is a directory")


def test_failed_runs_leave_files_alone(capsys, files, tmp_path):
    old = "what the user had\n"
    kept = tmp_path / "kept.fps"
    kept.write_text(old)
    one_line_error(capsys, ["compile", str(files / "bad.fps"), "-o", str(kept)], 2, "bad.fps:1:8")
    # numpy.sum at n = 4 adds in sequence: the arithmetic probed in this tree reproduces nothing
    one_line_error(capsys, ["probe", "numpy.sum", "-n", "4", "--rows", "20", "--tree", "((0 1) (2 3))",
                            "-o", str(kept)], 1, "does not reproduce numpy.sum", f"{kept} not written")
    bad = tmp_path / "bad.fps"
    bad.write_text("target numpy.sum\n")
    one_line_error(capsys, ["fmt", "-i", str(bad)], 2, "bad.fps:1:8")
    assert kept.read_text() == old and bad.read_text() == "target numpy.sum\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.fps", "kept.fps"]   # no temporary left


# ------------------------------------------------------------------ targets

@pytest.mark.parametrize("target, op, fragment", [
    ("nosuchmodule.func", None, "cannot import 'nosuchmodule' for target 'nosuchmodule.func'"),
    ("nosuchmodule:func", "sum", "cannot import 'nosuchmodule'"),
    ("fpspec_cli_user_targets:nosuch", "sum", "'fpspec_cli_user_targets' has no attribute 'nosuch'"),
    ("fpspec_cli_user_targets:NOT_CALLABLE", "sum", "'fpspec_cli_user_targets:NOT_CALLABLE' is not callable"),
    ("fpspec_cli_user_targets:good", None, "is a user callable: give its op kind (--op"),
    ("fpspec_cli_user_targets:good", "foo", "unknown op 'foo'"),
    ("fpspec_cli_user_targets:raises", "sum", "target fpspec_cli_user_targets:raises raised RuntimeError: boom"),
    ("fpspec_cli_user_targets:wrong_shape", "sum", "returned shape (3,), expected a scalar"),
    ("fpspec_cli_user_targets:wrong_dtype", "sum", "returned int32 values, expected floating point (fp32)"),
    ("fpspec_cli_user_targets:returns_none", "sum", "returned None, expected a number"),
    ("numpy", None, "cannot find 'numpy': name a callable as package.module:function"),
    ("numpy.nosuch", None, "unknown numpy target 'numpy.nosuch'"),
])
@pytest.mark.parametrize("command", ["reveal", "probe"])
def test_bad_targets(capsys, user_targets, command, target, op, fragment):
    argv = [command, target, "-n", "8", *(["--op", op] if op else [])]
    one_line_error(capsys, argv, 2, fragment)


def test_bad_targets_in_verify_and_diff(capsys, user_targets):
    for argv in (["verify", SUM_SPEC, "-n", "8", "--samples", "20", "--against", "fpspec_cli_user_targets:raises"],
                 ["diff", "fpspec_cli_user_targets:raises", SUM_SPEC, "-n", "8"],
                 ["diff", "fpspec_cli_user_targets:wrong_shape", "numpy.sum", "-n", "8", "--op", "sum"]):
        one_line_error(capsys, argv, 2, "target fpspec_cli_user_targets:")
    one_line_error(capsys, ["diff", "nosuchmodule.func", SUM_SPEC, "-n", "8"], 2, "cannot import 'nosuchmodule'")


def test_good_user_callable_still_reveals(capsys, user_targets):
    assert main(["reveal", "fpspec_cli_user_targets:good", "-n", "8", "--op", "sum", "--no-probe"]) == 0
    assert capsys.readouterr().out == "(((0 1) (2 3)) ((4 5) (6 7)))\n"


# ------------------------------------------------------------------ Ctrl-C and closed pipes

def test_keyboard_interrupt_exits_130(capsys, user_targets):
    assert main(["reveal", "fpspec_cli_user_targets:interrupted", "-n", "8", "--op", "sum"]) == 130
    assert capsys.readouterr().err == "fpspec: interrupted\n"


def test_sigint_from_the_shell():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # as a shell starts it: a test runner's worker may ignore SIGINT, and a child inherits an ignored signal
    p = subprocess.Popen([sys.executable, "-m", "fpspec", "reveal", "numpy.sum", "-n", "2..65536", "--no-probe"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4)       # past the imports: the interrupt lands in the work
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert err.splitlines()[-1] == "fpspec: interrupted" and "Traceback" not in err


def test_closed_pipe_is_quiet():
    # `fpspec show big.fps -n 65536 | head -1`: the reader leaves; no traceback, SIGPIPE's code
    p = subprocess.Popen([sys.executable, "-m", "fpspec", "show", SUM_SPEC, "-n", "65536"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and err == ""
