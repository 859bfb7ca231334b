"""`--arithmetic FILE`: a known arithmetic instead of probes."""
from fpspec.infer.__main__ import run
from fpspec.spec import parse


def test_infer_takes_the_arithmetic_of_a_spec_file(tmp_path, capsys):
    known = tmp_path / "known.fps"
    known.write_text("arithmetic {\n    input = fp32\n    accumulator = fp64\n    output = fp32\n}\norder seq\n")
    out = tmp_path / "inferred.fps"
    code = run(["numpy.sum", "-n", "1..24", "--quiet", "--arithmetic", str(known), "-o", str(out)])
    assert code in (0, 1)          # held-out/sampled verdicts may differ: the arithmetic is the user's
    spec = parse(out.read_text())
    assert spec.header.arithmetic.get("accumulator").name == "fp64"
    assert run(["numpy.sum", "-n", "1..24", "--quiet", "--arithmetic", str(tmp_path / "none.fps")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_arithmetic_file_that_is_binary_or_empty(tmp_path):
    import pytest

    from fpspec.errors import FpspecError, SpecError
    from fpspec.infer.__main__ import arithmetic_section

    binary = tmp_path / "b.fps"
    binary.write_bytes(b"arithmetic {\n\xff\n}\n")
    with pytest.raises(SpecError, match=r"b\.fps:2:1: binary data \(byte 0xff\), expected a \.fps spec with an "
                                        r"arithmetic section in UTF-8 text"):
        arithmetic_section(str(binary))
    empty = tmp_path / "e.fps"
    empty.write_text("")
    with pytest.raises(FpspecError, match=r"e\.fps: the file is empty, expected a \.fps spec with an arithmetic"):
        arithmetic_section(str(empty))
