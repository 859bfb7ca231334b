"""What every command does with the user's files, numbers and targets, so that
each mistake reads the same: one line naming the file, option or target.

(Not a command module: nothing here registers on the app.)
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from fpspec.errors import FpspecError


def read_text(path, what: str = "file") -> str:
    """The UTF-8 text of `path`; FpspecError naming the file (and the place of
    the first byte that is not text) when it is missing, unreadable or binary."""
    p = Path(path)
    if p.is_dir():
        raise FpspecError(f"{path}: is a directory, expected a {what}")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise FpspecError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        # utf-8-sig: a byte-order mark some editors write is not part of the text
        text = data.decode("utf-8-sig")
        bad = data.find(b"\0")
    except UnicodeDecodeError as e:
        text, bad = None, e.start
    if bad >= 0 or text is None:
        # a picture, a pickle, a compiled file given by mistake: say where, not
        # what the parser makes of the bytes
        line = data.count(b"\n", 0, bad) + 1
        column = bad - (data.rfind(b"\n", 0, bad) + 1) + 1
        raise FpspecError(f"{path}:{line}:{column}: binary data (byte 0x{data[bad]:02x}), expected a {what} "
                          "in UTF-8 text")
    if not text.strip():
        raise FpspecError(f"{path}: the file is empty, expected a {what}")
    return text


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
    except OSError as e:
        raise FpspecError(f"{option} {path}: cannot write: {e.strerror or e}") from None


def at_least(value, lowest: int, option: str) -> None:
    """An integer option below its least sensible value is a mistake, not a default;
    one past numpy's index range is a typo, not a length."""
    if value is not None and value < lowest:
        raise FpspecError(f"{option} {value}: expected an integer >= {lowest}")
    if value is not None and value > np.iinfo(np.intp).max:
        raise FpspecError(f"{option} {value}: too large (numpy arrays hold at most {np.iinfo(np.intp).max})")


def checked_target(tgt):
    """`tgt` called once on operands of its op's shapes before any revelation, and
    with its function guarded: a user callable that raises, returns nothing,
    or returns the wrong shape or a non-float result is named in one line
    instead of failing deep inside the revelation."""
    fn = tgt.fn
    name = tgt.name

    def guarded(*operands):
        try:
            return fn(*operands)
        except Exception as e:
            text = " ".join(str(e).split())
            raise FpspecError(f"target {name} raised {type(e).__name__}: {text}") from None

    tgt = dataclasses.replace(tgt, fn=guarded)
    operands = [tgt.native(np.ones(shape)) for shape in tgt.operand_shapes]
    out = tgt.fn(*operands)
    what = f"target {name} ({tgt.op}"
    what += f", n={tgt.n})" if tgt.op in ("sum", "dot") else f", {' x '.join(map(str, tgt.output_shape))} outputs)"
    if out is None:
        raise FpspecError(f"{what} returned None, expected a number")
    dtype = getattr(out, "dtype", None)
    if dtype is not None and not _floating(dtype):
        raise FpspecError(f"{what} returned {dtype} values, expected floating point ({tgt.fmt})")
    if dtype is None and not isinstance(out, float):
        raise FpspecError(f"{what} returned {type(out).__name__}, expected a floating-point number or array")
    try:
        size = int(np.size(tgt.to_float64(out)))
    except (TypeError, ValueError) as e:
        raise FpspecError(f"{what} returned {type(out).__name__} that is not numeric: {e}") from None
    expected = int(np.prod(tgt.output_shape))
    if size != expected:
        shape = getattr(out, "shape", (size,))
        raise FpspecError(f"{what} returned shape {tuple(shape)}, expected {tgt.output_shape or 'a scalar'}")
    return tgt


def _floating(dtype) -> bool:
    if hasattr(dtype, "is_floating_point"):          # a torch.dtype
        return bool(dtype.is_floating_point)
    return getattr(dtype, "kind", "f") in ("f", "V")   # numpy; ml_dtypes' bfloat16 and fp8 are kind V


def check_dtype(dtype: str | None, option: str = "--dtype") -> None:
    if dtype is None:
        return
    from fpspec.formats import get_format

    try:
        get_format(dtype)
    except ValueError as e:
        raise FpspecError(f"{option} {dtype}: {e}") from None


def check_device(device: str, option: str = "--device") -> None:
    """cpu, cuda or cuda:N: the devices the targets' adapters know how to place operands on."""
    import re

    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise FpspecError(f"{option} {device}: unknown device; expected cpu, cuda or cuda:N")


def check_target_name(target: str, op: str | None, option: str = "TARGET") -> bool:
    """True when `target` names a user callable (pkg.mod:func, not numpy/torch/jax):
    its module is imported here, so that a typo reads as one (before the
    complaint that --op is missing)."""
    from fpspec.reveal.targets import _ALIASES, _import_callable

    key = _ALIASES.get(target, target)
    if not (":" in key or not key.startswith(("numpy.", "torch.", "jax.numpy."))):
        return False
    _import_callable(key)
    return True


def check_backend(name: str, option: str = "--target") -> None:
    """A replica backend (fpspec.compile.backends.BACKENDS), checked before the spec is read."""
    from fpspec.compile.backends import BACKENDS

    if name not in BACKENDS:
        raise FpspecError(f"{option}: unknown target {name!r}; expected one of {', '.join(BACKENDS)}")


def try_live_target(name: str, op: str | None, fmt: str, *, device: str = "cpu", m=None, ncols=None) -> None:
    """verify --against / diff with a user callable (pkg.mod:func[@device]): tried
    once at n = 8 (where fpspec.verify.make_target_side first resolves it), so
    that one that raises or returns the wrong thing is an error in the
    command, not a report of differences."""
    base, _, dev = name.partition("@")
    if op is None or not check_target_name(base, op):
        return
    from fpspec.reveal.targets import resolve_target

    checked_target(resolve_target(base, op=op, n=8, dtype=fmt, m=m, ncols=ncols, device=dev or device))
