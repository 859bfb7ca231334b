"""What every command does with the user's output files and numbers, so that
each mistake reads the same: one line naming the file, option or target.

(Not a command module: nothing here registers on the app.)
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Iterator

import numpy as np

from fpspec.errors import FpspecError


def check_output(path, option: str) -> None:
    """Refuse before any work an output path that cannot be written: its folder
    must exist and it must not be a folder itself.  (The write is atomic: a
    failed run never leaves a half-written file or clobbers an old one.)"""
    if path is None:
        return
    if not str(path).strip():
        raise FpspecError(f"{option}: empty file name")
    p = Path(path)
    if p.is_dir():
        raise FpspecError(f"{option} {path}: cannot write: it is a directory, expected a file name")
    if p.exists() and not p.is_file():
        # a device, pipe or socket: write_atomic would rename a file over it (-o /dev/null as root)
        raise FpspecError(f"{option} {path}: cannot write: not a regular file; expected a file name "
                          "(fpspec writes regular files only)")
    p = Path(os.path.realpath(p)) if p.is_symlink() else p      # a link: its target is written
    parent = p.parent
    if not parent.is_dir():
        raise FpspecError(f"{option} {path}: cannot write: no directory {str(parent)!r}")
    if not os.access(parent, os.W_OK):
        raise FpspecError(f"{option} {path}: cannot write: directory {str(parent)!r} is not writable")


def write_output(path, text, option: str) -> None:
    """fpspec.io.write_atomic, with a failure (disk full, permissions) as one line."""
    from fpspec.io import write_atomic

    try:
        write_atomic(path, text)
    except FpspecError as e:
        raise FpspecError(f"{option} {e}") from None
    except OSError as e:
        raise FpspecError(f"{option} {path}: cannot write: {e.strerror or e}") from None


def at_least(value, lowest: int, option: str) -> None:
    """An integer option below its least sensible value is a mistake, not a default;
    one past numpy's index range is a typo, not a length."""
    if value is not None and value < lowest:
        raise FpspecError(f"{option} {value}: expected an integer >= {lowest}")
    if value is not None and value > np.iinfo(np.intp).max:
        raise FpspecError(f"{option} {value}: too large (numpy arrays hold at most {np.iinfo(np.intp).max})")


def check_dtype(dtype: str | None, option: str = "--dtype") -> None:
    if dtype is None:
        return
    from fpspec.formats import get_format

    try:
        get_format(dtype)
    except ValueError as e:
        raise FpspecError(f"{option} {dtype}: {_dtype_hint(dtype) or e}") from None


def _dtype_hint(dtype: str) -> str | None:
    """What a numpy dtype string the format table does not know means, and the name to use."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError):
        if dtype.lstrip()[:1] in "[(":
            return ("a list is not a format; expected one format name (float64, float32, float16, bfloat16, "
                    "tf32, fp8e4m3, fp8e5m2)")
        return None
    if dt.kind == "f":
        from fpspec.formats import get_format

        try:
            get_format(dt.name)
        except ValueError:       # float128: x87 extended precision, which no fpspec format models
            return (f"numpy's {dt.name} (long double) is not a format fpspec models; expected one of float64, "
                    "float32, float16, bfloat16, tf32, fp8e4m3, fp8e5m2")
        if dtype.strip()[:1] in "<>=|":
            return f"a {dt.name} with a byte order: fpspec names formats, not byte orders; expected --dtype {dt.name}"
        return f"numpy's type code for {dt.name}; expected the format's name: --dtype {dt.name}"
    return (f"numpy's {dt.name} is not a floating-point format; expected one of float64, float32, float16, "
            "bfloat16, tf32, fp8e4m3, fp8e5m2")


def check_device(device: str, option: str = "--device") -> None:
    """cpu, cuda or cuda:N: the devices the targets' adapters know how to place operands on."""
    import re

    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise FpspecError(f"{option} {device}: unknown device; expected cpu, cuda or cuda:N")


def check_backend(name: str, option: str = "--target") -> None:
    """A replica backend (fpspec.compile.backends.BACKENDS), checked before the spec is read."""
    from fpspec.compile.backends import BACKENDS

    if name not in BACKENDS:
        raise FpspecError(f"{option}: unknown target {name!r}; expected one of {', '.join(BACKENDS)}")


@contextmanager
def target_prints_to_stderr() -> Iterator[None]:
    """What a target prints while it runs goes to stderr: stdout holds fpspec's
    answer (a tree, a spec, JSON), which a chatty callable must not corrupt.
    Both Python's sys.stdout and file descriptor 1 (C code's printf) are moved."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
        saved = os.dup(fd)
        os.dup2(sys.stderr.fileno(), fd)
    except (AttributeError, OSError, ValueError):   # stdout is not a file (a test's capture)
        fd = saved = None
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            sys.stdout.flush()
            os.dup2(saved, fd)
            os.close(saved)
