"""A numba binned replica compiles in each process from its file alone: no cache directory
(a cache written under one module name cannot be loaded under another)."""
import os

from fpspec.compile import compile_spec
from fpspec.verify import load_spec

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_binned_numba_replica_asks_for_no_cache():
    source = compile_spec(load_spec(os.path.join(ROOT, "examples", "binned", "sum_fp64.fps")), target="numba")
    assert "cache=True" not in source
    assert "\n_nogil = _parallel\n" in source
