"""benchmarks/soak_replicas.py's bookkeeping: workers spread over the visible GPUs, and the
per-backend summary that ends a run (failures and revelation-engine errors by kind)."""
import collections
import sys
from pathlib import Path

from fuzz_replicas import Outcome

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import soak_replicas as S  # noqa: E402


def test_workers_spread_over_the_visible_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5,7")
    gpus = S.visible_gpus()
    assert gpus == ["2", "3", "5", "7"]
    assert collections.Counter(S.gpu_of(k, gpus) for k in range(60)) == {"2": 15, "3": 15, "5": 15, "7": 15}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert S.visible_gpus() == []


def test_summary_lists_each_kind_of_failure_per_backend():
    counts = {"numpy": collections.Counter(ok=5, failed=2), "triton": collections.Counter(ok=1, refused=3)}
    failures = [Outcome(4, "numpy", "failed", "dot() at n = 12: got 1.0, want 2.0"),
                Outcome(9, "numpy", "failed", "dot() at n = 30: got 3.0, want 5.5")]
    trees = [Outcome(25, "triton", "ok", "", "error: ValueError: range() arg 3 must not be zero (oracle.py:612)")]
    assert S.summary(counts, failures, trees) == [
        "per backend (ok / refused / failed / invalid):",
        "  numpy: 5 / 0 / 2 / 0",
        "    2 x dot() at n = #: got #, want #  [specs 4, 9]",
        "  triton: 1 / 3 / 0 / 0",
        "    1 x tree error: error: ValueError: range() arg # must not be zero (oracle.py:#)  [specs 25]",
    ]
