"""What fpspec writes: regular files only, through symlinks, never over its own
input, with the mode the file had or the umask gives."""
from __future__ import annotations

import os
import stat

import pytest

from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.io import inputs_guarded, read_text, write_atomic

SPEC = "op sum\nn in 8\n\norder seq\n"


def test_a_symlink_is_followed_and_kept(tmp_path):
    target = tmp_path / "real.fps"
    target.write_text("old")
    link = tmp_path / "link.fps"
    link.symlink_to("real.fps")
    write_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real.fps"
    assert target.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.fps", "real.fps"]


def test_devices_and_pipes_are_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(FpspecError, match=r"pipe: not a regular file \(a named pipe\)"):
        write_atomic(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(FpspecError, match=r"^/dev/null: not a regular file \(a character device\)"):
        write_atomic("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_cli_refuses_a_device_before_any_work(tmp_path, capsys):
    spec = tmp_path / "s.fps"
    spec.write_text(SPEC)
    assert main(["compile", str(spec), "-o", "/dev/null"]) == 2
    assert capsys.readouterr().err == ("fpspec: error: -o /dev/null: cannot write: not a regular file; expected a "
                                       "file name (fpspec writes regular files only)\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_modes_follow_the_old_file_and_the_umask(tmp_path):
    old = tmp_path / "run.py"
    old.write_text("x")
    old.chmod(0o755)
    write_atomic(old, "y")
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o755
    mask = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.fps", "z")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "new.fps").st_mode) == 0o640


def test_an_input_is_never_overwritten(tmp_path, capsys):
    spec = tmp_path / "s.fps"
    spec.write_text(SPEC)
    assert main(["compile", str(spec), "-o", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err == (f"fpspec: error: -o {spec}: is an input of this command; refusing to overwrite it "
                   "(expected another output file name)\n")
    assert spec.read_text() == SPEC
    with inputs_guarded():
        read_text(spec)
        with pytest.raises(FpspecError, match="is an input of this command"):
            write_atomic(spec, "x")
    write_atomic(spec, SPEC + "\n")     # outside a command nothing is guarded


def test_fmt_in_place_rewrites_through_a_link(tmp_path, capsys):
    real = tmp_path / "messy.fps"
    real.write_text("op sum\nn in 8\norder   seq\n")
    link = tmp_path / "link.fps"
    link.symlink_to(real)
    assert main(["fmt", "-i", str(link)]) == 0
    assert link.is_symlink() and real.read_text() == SPEC
