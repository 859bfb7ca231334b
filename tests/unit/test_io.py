"""fpspec.io: the one reader of the user's text files and the atomic writer."""
from __future__ import annotations

import os

import pytest

from fpspec.errors import FpspecError, SpecError
from fpspec.io import read_text, write_atomic


def test_read_text_names_binary_data_where_it_starts(tmp_path):
    p = tmp_path / "x.fps"
    p.write_bytes(b'target "x"\nop \xff\xfe sum\n')
    with pytest.raises(SpecError) as info:
        read_text(p, ".fps spec")
    assert str(info.value) == f"{p}:2:4: binary data (byte 0xff), expected a .fps spec in UTF-8 text"
    assert (info.value.location.line, info.value.location.column) == (2, 4)


@pytest.mark.parametrize("content", [b"", b"\n  \n", b"\xef\xbb\xbf"])
def test_read_text_empty_file(tmp_path, content):
    p = tmp_path / "e.fps"
    p.write_bytes(content)
    with pytest.raises(FpspecError, match=r"e\.fps: the file is empty, expected a \.fps spec$"):
        read_text(p, ".fps spec")


def test_read_text_folder_and_missing(tmp_path):
    with pytest.raises(FpspecError, match="is a directory, expected a tree"):
        read_text(tmp_path, "tree")
    with pytest.raises(FpspecError, match="nosuch: cannot read: No such file"):
        read_text(tmp_path / "nosuch")
    assert read_text(_file(tmp_path, b"\xef\xbb\xbfok\n")) == "ok\n"     # a byte-order mark is not text


def _file(d, data: bytes):
    p = d / "f.txt"
    p.write_bytes(data)
    return p


def test_write_atomic_failure_names_the_destination_and_leaves_no_temporary(tmp_path):
    dest = tmp_path / "out.fps"
    dest.mkdir()                      # os.replace cannot put a file over a folder
    with pytest.raises(OSError) as info:
        write_atomic(dest, "text")
    assert info.value.filename == str(dest)
    assert ".tmp" not in str(info.value) and str(dest) in str(info.value)
    assert os.listdir(tmp_path) == ["out.fps"]


def test_write_atomic_missing_folder_names_the_destination(tmp_path):
    dest = tmp_path / "nodir" / "out.fps"
    with pytest.raises(FileNotFoundError) as info:
        write_atomic(dest, b"bytes")
    assert info.value.filename == str(dest) and ".tmp" not in str(info.value)


def test_write_atomic_replaces(tmp_path):
    dest = tmp_path / "out.fps"
    dest.write_text("old")
    write_atomic(dest, "new")
    assert dest.read_text() == "new" and os.listdir(tmp_path) == ["out.fps"]
