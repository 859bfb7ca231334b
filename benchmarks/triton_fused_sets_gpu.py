#!/usr/bin/env python3
"""Every distinct named fused parameter set through the emulated Triton path on a GPU (TRITON_INTERPRET=0):
Triton bits == NumPy replica bits == the model, on the blocks of tests/triton/test_fused_params.py.

    TRITON_INTERPRET=0 PYTHONPATH=. SLICE=k SLICES=10 [SKIP=OLD_LOG] python3 benchmarks/triton_fused_sets_gpu.py [LOG]

The sets go in an order that meets one set of each kind (input formats, output, combine; fp6 and
fp4 last) before a second of any; SLICE / SLICES run every SLICES-th set of that order from the k-th (a set compiles
its Triton kernel unless one that ran before shares it, Triton's cache holding it for every slice:
run slices side by side; benchmarks/triton/fused_set_kernels.py counts the kernels).  Prints a line per set as it
finishes (appended to LOG too, so that a run cut short keeps what it did), then a summary.
SKIP: a LOG of an earlier run, whose sets are left out (a second run takes the rest).
"""
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tests.triton.test_fused_params as T  # noqa: E402
from fpspec.arith.fused import fused_chain  # noqa: E402
from fpspec.io import write_atomic  # noqa: E402


DEVICE = os.environ.get("DEVICE", "cuda")      # cpu with TRITON_INTERPRET=1: to try the script
NARROW = ("fp6e2m3", "fp6e3m2", "fp4e2m1")


def kind(params) -> tuple:
    return params.input, params.input_b, params.output, params.combine


def ordered_sets() -> list:
    """(label, params) of every distinct set: the first of each kind (fp6 / fp4 kinds after the
    others), then the second of each, ..."""
    seen: dict = {}
    ranked = []
    for params, label in sorted(T.DISTINCT.items(), key=lambda item: item[1]):
        rank = seen[kind(params)] = seen.get(kind(params), -1) + 1
        ranked.append((rank, label, params))
    return [(label, params) for _, label, params in
            sorted(ranked, key=lambda r: (r[0], bool(set(kind(r[2])) & set(NARROW)), r[1]))]


def _load(source: str, folder: Path, name: str):
    path = folder / f"{name}.py"
    write_atomic(path, source)
    spec = importlib.util.spec_from_file_location(f"replica_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_set(label: str, params, folder: Path) -> str:
    """'equal' when Triton (on the GPU), the NumPy replica and the model give the same bits, else what differs."""
    a, b = T._blocks(params, [params.w, len(label)])
    rows_a = np.repeat(a, T.N, axis=0)
    rows_b = np.tile(b.T, (T.M, 1))
    with np.errstate(all="ignore"):
        want = fused_chain(rows_a, rows_b, 0.0, params).reshape(T.M, T.N)
    source_triton, source_numpy = T._sources(params)
    safe = label.replace("-", "_")
    fb = params.input_b or params.input
    tri = _load(source_triton, folder, f"t_{safe}")
    A = torch.from_numpy(a.astype(np.float32)).to(getattr(torch, T._torch_dtype(params.input))).to(DEVICE)
    B = torch.from_numpy(b.astype(np.float32)).to(getattr(torch, T._torch_dtype(fb))).to(DEVICE)
    got_triton = tri.gemm(A, B, path="emulated").double().cpu().numpy()
    num = _load(source_numpy, folder, f"n_{safe}")
    with np.errstate(all="ignore"):
        got_numpy = np.asarray(num.gemm(a.astype(T.NUMPY.get(params.input, np.float32)),
                                        b.astype(T.NUMPY.get(fb, np.float32))), np.float64)
    wrong = [what for what, got in (("triton", got_triton), ("numpy", got_numpy))
             if not np.array_equal(T._bits(got.reshape(T.M, T.N)), T._bits(want))]
    return "equal" if not wrong else "differ: " + ", ".join(wrong)


def main() -> int:
    k, parts = int(os.environ.get("SLICE", "0")), int(os.environ.get("SLICES", "1"))
    log = sys.argv[1] if len(sys.argv) > 1 else None
    done = set()
    if os.environ.get("SKIP"):
        done = {line.split(" ", 1)[0] for line in Path(os.environ["SKIP"]).read_text().splitlines() if line}
    chosen = [(label, params) for label, params in ordered_sets() if label not in done][k::parts]
    bad = 0
    t0 = time.time()
    with tempfile.TemporaryDirectory() as folder:
        for label, params in chosen:
            t = time.time()
            try:
                verdict = run_set(label, params, Path(folder))
            except Exception as e:     # a set the kernels refuse or fail on: named with its error
                verdict = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            bad += verdict != "equal"
            line = f"{label} {kind(params)}: {verdict} ({time.time() - t:.1f} s)"
            print(line, flush=True)
            if log:
                with open(log, "a") as f:
                    f.write(line + "\n")
    print(f"slice {k} of {parts}: {len(chosen)} of {len(T.DISTINCT)} distinct sets on {torch.cuda.get_device_name() if DEVICE == 'cuda' else DEVICE}, "
          f"{time.time() - t0:.1f} s; {bad} not equal")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
