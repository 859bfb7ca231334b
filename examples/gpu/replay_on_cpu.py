"""Replay GPU products recorded by record_matmul.py through a replica, bit for bit.

    python examples/gpu/replay_on_cpu.py matmul_fp16_replica.py h100_matmul_fp16.npz

Prints how many outputs differ (0 when the replica reproduces the GPU); exit 1 otherwise.
"""
from __future__ import annotations

import importlib.util
import sys

import numpy as np

try:
    import ml_dtypes  # noqa: F401  (bf16 views, when installed)
except ImportError:
    ml_dtypes = None

FLOATS = {"float16": np.float16, "float32": np.float32}


def load(path):
    spec = importlib.util.spec_from_file_location("replica", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    replica_path, record_path = sys.argv[1:3]
    replica = load(replica_path)
    record = np.load(record_path)
    dtype = str(record["dtype"])
    if dtype not in FLOATS:
        sys.exit(f"{record_path}: {dtype} records replay through a replica that takes raw bits; see docs/replicas.md")
    as_float = FLOATS[dtype]
    differ = total = 0
    for a, b, c in zip(record["A"], record["B"], record["C"]):
        got = np.asarray(replica.gemm(a.view(as_float), b.view(as_float)))
        differ += int(np.count_nonzero(got.view(c.dtype) != c))
        total += c.size
    print(f"{record_path} ({record['device']}, torch {record['torch']}): {differ} of {total} outputs differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
