"""Helpers for the Triton backend tests: render a kernel to a file and import it.

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
