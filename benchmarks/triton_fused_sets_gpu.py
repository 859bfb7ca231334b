#!/usr/bin/env python3
"""Every distinct named fused parameter set through the emulated Triton path on a GPU (TRITON_INTERPRET=0):
Triton bits == NumPy replica bits == the model, on the blocks of tests/triton/test_fused_params.py.

    TRITON_INTERPRET=0 PYTHONPATH=. SLICE=k SLICES=10 python3 benchmarks/triton_fused_sets_gpu.py

SLICE / SLICES run every SLICES-th set from the k-th (the sets compile one Triton kernel each: run
slices side by side).  Prints each set's name as it starts, then a summary line.
"""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import tests.triton.test_fused_params as T  # noqa: E402

_host_tensor = T._torch
T._torch = lambda v, fmt: _host_tensor(v, fmt).cuda()      # the blocks on the GPU


def main() -> int:
    k, parts = int(os.environ.get("SLICE", "0")), int(os.environ.get("SLICES", "1"))
    chosen = sorted(T.DISTINCT.items(), key=lambda item: item[1])[k::parts]
    differ, errors = [], []
    t0 = time.time()
    for params, label in chosen:
        print(label, flush=True)
        T.BITS[label] = params
        try:
            T.test_triton_equals_numpy_equals_model(label)
        except AssertionError:
            differ.append(label)
        except Exception as e:   # a set the kernels refuse or fail on: named with its error
            errors.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    print(f"slice {k} of {parts}: {len(chosen)} of {len(T.DISTINCT)} distinct sets on {torch.cuda.get_device_name()}, "
          f"{time.time() - t0:.1f} s; {len(differ)} differ: {', '.join(differ) or '-'}; {len(errors)} errors")
    for e in errors:
        print("  ", e)
    return 1 if differ or errors else 0


if __name__ == "__main__":
    sys.exit(main())
