"""Functions for the Triton backend tests: render a kernel to a file and import it.

Triton reads a kernel's source with inspect, so a replica must be a real file
(exec of a string would not do).  Everything runs on the CPU interpreter
(tests/conftest.py sets TRITON_INTERPRET=1) unless a GPU is present.
"""
import importlib.util
import itertools

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

_COUNTER = itertools.count()


@pytest.fixture
def load_replica(tmp_path):
    from fpspec.compile.backends.triton import BACKEND

    def load(kernel, path="auto"):
        src = BACKEND.render(kernel, path=path)
        file = tmp_path / f"replica_{next(_COUNTER)}.py"
        file.write_text(src)
        spec = importlib.util.spec_from_file_location(file.stem, file)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load


@pytest.fixture
def numpy_pairwise():
    """numpy's pairwise sum order (float32, contiguous) as an IR reducer named "pw":
    8 lanes under 129 terms, halves at a multiple of 8 above."""
    from fpspec.compile.ir import BinOp, Call, Case, Compare, Const as c, Fold, Guard, Lanes, Pairwise, Part, Segments, Var

    m = Var("m")
    half = BinOp("-", BinOp("//", m, c(2)), BinOp("%", BinOp("//", m, c(2)), c(8)))
    block = Segments((Part(BinOp("-", m, BinOp("%", m, c(8))), Lanes(c(8), Fold(), Pairwise())),
                      Part(BinOp("%", m, c(8)), None)), Fold())
    split = Segments((Part(half, Call("pw")), Part(BinOp("-", m, half), Call("pw"))), Fold())
    return Guard((Case(Compare("<", m, c(8)), Fold()), Case(Compare("<=", m, c(128)), block)), split)
