"""Functions for the compiler tests: load generated replicas, compare bits.

Replicas are written under a stable cache folder (FPSPEC_REPLICA_CACHE, by
default ~/.cache/fpspec/replicas), named by the hash of their source and
written only when missing.  Replicas never use numba's on-disk cache
(tests/compile/test_fresh_process.py runs them as a user does).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from fpspec.io import write_atomic

CACHE = Path(os.environ.get("FPSPEC_REPLICA_CACHE", Path.home() / ".cache" / "fpspec" / "replicas"))


def load_replica(source: str, tag: str = "replica"):
    """Import generated source as a module (registered in sys.modules, as numba
    needs for recursive functions)."""
    name = f"fpspec_{tag}_{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    if name in sys.modules:
        return sys.modules[name]
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        write_atomic(path, source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def same_bits(a, b) -> np.ndarray:
    """Elementwise: the same bit pattern, or both NaN (payloads are not specified)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return (a.view(width) == b.view(width)) | (np.isnan(a) & np.isnan(b))


def assert_same_bits(got, want, what: str = "") -> None:
    ok = same_bits(got, want)
    if not np.all(ok):
        bad = np.flatnonzero(~np.ravel(ok))[:3]
        raise AssertionError(f"{what}: {np.size(ok) - int(np.sum(ok))} outputs differ, e.g. at {bad.tolist()}: "
                             f"got {np.ravel(got)[bad]}, want {np.ravel(want)[bad]}")


def spec_from_trees(trees, op: str, arithmetic, target: str = "test"):
    """A spec (AST) for revealed tree(s) with an arithmetic section."""
    from fpspec.spec import ast as A
    from fpspec.spec import lower

    header = A.Header(target=target, op=op, sections=(A.Block("arithmetic", arithmetic.to_entries()),))
    return lower(trees, header)


@pytest.fixture
def replica():
    return load_replica

