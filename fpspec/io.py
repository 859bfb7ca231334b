"""Reading and writing the user's files: one-line errors naming the file, and
writes that leave what the user had untouched when they fail."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fpspec.errors import FpspecError, Location, SpecError


def read_text(path, what: str = "file") -> str:
    """The UTF-8 text of `path`; FpspecError naming the file when it is missing,
    unreadable or empty, SpecError at the first byte that is not text when it
    is binary (`FILE:LINE:COL: binary data ...`)."""
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
        raise SpecError(f"binary data (byte 0x{data[bad]:02x}), expected a {what} in UTF-8 text",
                        Location(str(path), line, column))
    if not text.strip():
        raise FpspecError(f"{path}: the file is empty, expected a {what}")
    return text


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write to a temporary file beside `path`, then rename over it.

    On failure the temporary file is removed and the OSError names `path`:
    the temporary name is ours, not something the user can act on."""
    path = Path(path)
    data = text.encode() if isinstance(text, str) else text
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        _remove(tmp)
        if e.errno is None:
            raise
        # OSError(errno, ...) builds the matching subclass (IsADirectoryError, ...)
        raise OSError(e.errno, e.strerror, os.fspath(path)) from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp) -> None:
    if tmp is None:
        return
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
