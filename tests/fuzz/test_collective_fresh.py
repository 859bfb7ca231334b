"""A collective spec's replica as a user runs it: compiled for numpy, numba and
triton (TRITON_INTERPRET=1), imported from its file in a fresh interpreter (no
sys.modules entry, no warm-up call), its sums(X) of a [W, L] stack equal, bit
for bit, to the spec's order of every element (fpspec.collective)."""
from pathlib import Path

import numpy as np

from fpspec.collective import evaluate_columns, sample_stack, section, spec_orders
from fpspec.compile import compile_spec
from fpspec.spec import check, parse
from fuzz_replicas import BACKENDS, run_jobs

SPEC = Path(__file__).resolve().parents[2] / "examples" / "collective" / "nccl_h200" / "nccl_ring_1024.fps"


def small_ring() -> str:
    """The example's four orders over 4 ranks, for 16 elements instead of 1024 (the
    Triton interpreter runs a program per block of elements)."""
    text = SPEC.read_text()
    for old, new in (("m = 1024", "m = 16"), ("numel = 1024", "numel = 16"), ("i < 256", "i < 4"),
                     ("i >= 256 and i < 512", "i >= 4 and i < 8"), ("i >= 768", "i >= 12")):
        assert old in text
        text = text.replace(old, new)
    return text


def test_collective_sums_in_a_fresh_interpreter(tmp_path):
    spec = parse(small_ring(), "ring16.fps")
    check(spec)
    W, L = spec.header.n.lo, int(section(spec)["numel"])
    trees, labels = spec_orders(spec, L)
    assert len(trees) == 4          # elements in four orders: the dispatch on i is exercised
    X = sample_stack(W, L, "fp32", L, seed=5)
    want = evaluate_columns(trees, labels, X, "fp32")
    data = tmp_path / "data.npz"
    np.savez(data, X=X, want=want)
    jobs = []
    for backend in BACKENDS:        # one interpreter, each replica imported fresh from its own file
        replica = tmp_path / f"replica_{backend}.py"
        replica.write_text(compile_spec(spec, target=backend))
        jobs.append({"id": backend, "index": 0, "backend": backend, "file": str(replica), "data": str(data),
                     "op": "sum", "fmt": "fp32", "m": None, "ncols": None, "tree": None,
                     "calls": [{"function": "sums", "args": ["X"], "want": "want", "n": W,
                                "what": f"{W} x {L} stack"}]})
    results = run_jobs(jobs, tmp_path)
    assert {b: (results[b]["status"], results[b].get("error", ""), results[b].get("outputs")) for b in BACKENDS} \
        == {b: ("ok", "", L) for b in BACKENDS}
