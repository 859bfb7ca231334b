"""Reading and writing the user's files: one-line errors naming the file, and
writes that leave what the user had untouched when they fail."""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

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
    _note_input(p)
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

    Only regular files are written: a symlink is followed (the file it points
    to is replaced, the link stays), a device, pipe or socket is refused
    (renaming over /dev/null would replace the device with a file), and so is
    a file this command read as its input (`inputs_guarded`).  The written
    file keeps the mode of the file it replaces; a new file gets the umask's
    mode (0666 & ~umask), as open() would give it.  On failure the temporary
    file is removed and the OSError names `path`: the temporary name is ours,
    not something the user can act on."""
    shown = path
    path = _destination(Path(path))
    data = text.encode() if isinstance(text, str) else text
    tmp = None
    try:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", os.fspath(shown))
            raise FpspecError(f"{shown}: not a regular file ({_kind(st.st_mode)}); expected a file name "
                              "to write (fpspec writes regular files only)")
        if st is not None and _guarded is not None and (st.st_dev, st.st_ino) in _guarded:
            raise FpspecError(f"{shown}: is an input of this command; refusing to overwrite it "
                              "(expected another output file name)")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp makes 0600 files: give the result the mode the user's file had or would get
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)      # root rewriting a user's file keeps it theirs
            except OSError:
                pass
        os.replace(tmp, path)
    except OSError as e:
        _remove(tmp)
        if e.errno is None:
            raise
        # OSError(errno, ...) builds the matching subclass (IsADirectoryError, ...)
        raise OSError(e.errno, e.strerror, os.fspath(shown)) from None
    except BaseException:
        _remove(tmp)
        raise


def _destination(path: Path) -> Path:
    """The file a write to `path` replaces: a symlink's target (followed through
    every link), so that the link keeps pointing where it did."""
    if not path.is_symlink():
        return path
    return Path(os.path.realpath(path))


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a file"


def _umask() -> int:
    # the only portable read of the umask sets it; put it straight back
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# (st_dev, st_ino) of the files read by `read_text` while `inputs_guarded()` is active
_guarded: set | None = None


@contextmanager
def inputs_guarded() -> Iterator[None]:
    """While active, write_atomic refuses to replace a file read_text has read:
    `fpspec compile s.fps -o s.fps` must not put Python over the spec.  (A
    command that rewrites its input on purpose, `fmt -i`, uses `replacing_input`.)"""
    global _guarded
    previous, _guarded = _guarded, set()
    try:
        yield
    finally:
        _guarded = previous


@contextmanager
def replacing_input(path) -> Iterator[None]:
    """Allow write_atomic to replace `path` although it was read as an input."""
    try:
        st = os.stat(path)
    except OSError:
        yield
        return
    key = (st.st_dev, st.st_ino)
    held = _guarded is not None and key in _guarded
    if held:
        _guarded.discard(key)
    try:
        yield
    finally:
        if held and _guarded is not None:
            _guarded.add(key)


def _note_input(path: Path) -> None:
    if _guarded is not None:
        try:
            st = os.stat(path)
        except OSError:
            return
        _guarded.add((st.st_dev, st.st_ino))


def _remove(tmp) -> None:
    if tmp is None:
        return
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
