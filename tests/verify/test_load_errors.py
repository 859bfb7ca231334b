"""fpspec.verify.load_spec and the target sides as a library user meets them:
one FpspecError (SpecError where there is a place in the file), never a
UnicodeDecodeError or a parser's view of an empty file."""
from __future__ import annotations

import textwrap

import pytest

from fpspec.errors import FpspecError, SpecError
from fpspec.verify import SideFailure, load_spec, make_target_side


def test_binary_spec(tmp_path):
    p = tmp_path / "b.fps"
    p.write_bytes(b'target "x"\nop \xff\xfe sum\n')
    with pytest.raises(SpecError, match=r"b\.fps:2:4: binary data \(byte 0xff\), expected a \.fps spec in UTF-8"):
        load_spec(p)


@pytest.mark.parametrize("content", ["", "\n \n"])
def test_empty_spec(tmp_path, content):
    p = tmp_path / "e.fps"
    p.write_text(content)
    with pytest.raises(FpspecError, match=r"e\.fps: the file is empty, expected a \.fps spec$"):
        load_spec(p)


def test_missing_spec_and_folder(tmp_path):
    with pytest.raises(FpspecError, match="nosuch.fps: no such spec file"):
        load_spec(tmp_path / "nosuch.fps")
    with pytest.raises(FpspecError, match="is a directory, expected a .fps spec"):
        load_spec(tmp_path)


def test_a_target_failing_on_samples_is_named_once(tmp_path, monkeypatch):
    from fpspec import inputs

    (tmp_path / "fpspec_test_verify_later.py").write_text(textwrap.dedent("""
        import numpy as np
        calls = 0
        def later(x):
            global calls
            calls += 1
            if calls > 4:      # tried by make_target_side, then again at n = 8 by the side (ones, twos)
                raise ValueError("gave up")
            return np.sum(x)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    side = make_target_side("fpspec_test_verify_later:later", "sum", "fp32")
    batch = list(inputs.samples("sum", 8, "fp32", 2, seed=0))
    with pytest.raises(SideFailure) as info:
        side.outputs(8, batch)
    text = str(info.value)
    assert text.startswith("target fpspec_test_verify_later:later raised ValueError: gave up on n=8 "), text
