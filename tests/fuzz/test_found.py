"""Minimal specs the replica fuzz found (benchmarks/soak_replicas.py), kept as regressions:
each compiled for numpy and numba, imported fresh from its file, compared bit for bit with
the spec's reference evaluation (tests/fuzz/fuzz_replicas.py)."""
import pytest

from fpspec.spec import check, parse
from fuzz_replicas import fuzz

HEAD = "op sum\narithmetic { input = fp32 product = none accumulator = fp32 init = none output = fp32 }\n"

FOUND = {
    # a reverse fold over strided partial sums indexed vals[j + lm - 1 * k]: (m - 1) lost its parentheses
    "chunks then reverse lanes": HEAD + "n in 18\norder chunks(min(7, n), seq, lanes(3, rev, seq))",
}


@pytest.mark.parametrize("name", FOUND)
def test_found_spec_runs_fresh(name, tmp_path):
    spec = parse(FOUND[name])
    check(spec)
    outcomes = fuzz([(0, spec)], ("numpy", "numba"), tmp_path, ns_count=1, tree_backends=("numpy",))
    assert [(o.backend, o.status, o.detail) for o in outcomes] == [("numpy", "ok", ""), ("numba", "ok", "")]
    assert outcomes[0].tree == "ok"
