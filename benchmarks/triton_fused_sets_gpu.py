#!/usr/bin/env python3
"""Every distinct named fused parameter set through the emulated Triton path on a GPU (TRITON_INTERPRET=0):
Triton bits vs the NumPy replica's bits vs the model's, on the blocks of tests/triton/test_fused_params.py.

    TRITON_INTERPRET=0 PYTHONPATH=. JOBS=14 python3 benchmarks/triton_fused_sets_gpu.py [LOG [LABEL ...]]

Compiling the kernels is the slow part (the wide fp8 / fp6 / fp4 kernels take 20-60 s each; the 139 sets
need 68 of them and 7 tile-form ones, benchmarks/triton/fused_set_kernels.py).  So the sets' launches are
captured first (interpreter children, no GPU work), grouped by the kernel a GPU compiles for them, and a pool of
JOBS processes sharing one TRITON_CACHE_DIR runs the first set of every kernel side by side (each compiling its
kernel); a set whose kernel another set compiled runs as soon as that one has finished, from the cache.

Prints a row per set as it finishes (set, kernel, blocks, mismatching outputs of Triton vs the model, the NumPy
replica vs the model, Triton vs the NumPy replica, seconds), appended to LOG too: a run cut short keeps what it
did, and a later run with the same LOG runs only the sets LOG lacks (a set that raised is run again).  Then the
summary and the whole table, by set.  blocks: the fused nodes one gemm computes (16 x 16 outputs, K = 2 w: two
w-product nodes each, the second taking the first's result as c).
LABEL ...: only these sets.  SKIP: a LOG of an earlier run whose sets are left out too.  SLICE / SLICES: every
SLICES-th of the remaining sets from the SLICE-th.  DEVICE=cpu with TRITON_INTERPRET=1 runs the same under the
interpreter (to try the pool and the resume logic).
"""
import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks" / "triton")]

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tests.triton.test_fused_params as T  # noqa: E402
from fpspec.arith.fused import fused_chain  # noqa: E402
from fpspec.io import write_atomic  # noqa: E402


DEVICE = os.environ.get("DEVICE", "cuda")      # cpu with TRITON_INTERPRET=1: to try the script
NARROW = ("fp6e2m3", "fp6e3m2", "fp4e2m1")
BY_LABEL = {label: params for params, label in T.DISTINCT.items()}
COLUMNS = ("set", "kernel", "blocks", "triton/model", "numpy/model", "triton/numpy", "s")


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


def _differ(x, y) -> int:
    return int(np.count_nonzero(T._bits(x) != T._bits(y)))


def run_set(label: str, params, folder: Path) -> tuple:
    """(blocks, outputs where Triton differs from the model, the NumPy replica from the model,
    Triton from the NumPy replica)."""
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
    got_triton = tri.gemm(A, B, path="emulated").double().cpu().numpy().reshape(T.M, T.N)
    num = _load(source_numpy, folder, f"n_{safe}")
    with np.errstate(all="ignore"):
        got_numpy = np.asarray(num.gemm(a.astype(T.NUMPY.get(params.input, np.float32)),
                                        b.astype(T.NUMPY.get(fb, np.float32))), np.float64).reshape(T.M, T.N)
    blocks = T.M * T.N * a.shape[1] // params.w
    return blocks, _differ(got_triton, want), _differ(got_numpy, want), _differ(got_triton, got_numpy)


_FOLDER = None


def _job(label: str) -> tuple:
    """(in a pool process) label, its row's numbers or its error, seconds."""
    global _FOLDER
    if _FOLDER is None:
        _FOLDER = Path(tempfile.mkdtemp(prefix="fused_sets_"))
    t = time.time()
    try:
        result = run_set(label, BY_LABEL[label], _FOLDER)
    except Exception as e:     # a set the kernels refuse or fail on: named with its error
        result = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    return label, result, time.time() - t


def kernels_of(labels: list, children: int) -> dict:
    """label -> the name of the kernel a GPU compiles for it ("tile-<hash of the set's name>": the tile form,
    one per set; "wide-<hash>": the wide form, the hash of its signature and constexprs, the same in every run)."""
    import fused_set_kernels as K
    from fpspec.compile.triton_kernels import mm_chain_emulated_wide as fn

    launches = K.launches_of(sorted(labels), children)
    found = {}
    for label in sorted(labels):
        if launches[label] == "tile" or K._tile_on_gpu(BY_LABEL[label]):
            found[label] = f"tile-{hashlib.sha256(label.encode()).hexdigest()[:8]}"
        else:
            key = repr(K.kernel_key(fn, launches[label])[2]).encode()
            found[label] = f"wide-{hashlib.sha256(key).hexdigest()[:8]}"
    return found


def row(cells) -> str:
    widths = (38, 13, 6, 12, 11, 12, 7)
    return " ".join(f"{c:<{w}}" if i < 2 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths)))


def line_of(label: str, kernel: str, result, seconds: float) -> str:
    if isinstance(result, str):
        return f"{row((label, kernel, '', '', '', '', f'{seconds:.1f}'))} {result}"
    return row((label, kernel, *result, f"{seconds:.1f}"))


def recorded(path) -> dict:
    """label -> its row, of the rows of a LOG (a set that raised: not recorded)."""
    if not path or not Path(path).exists():
        return {}
    return {line.split(" ", 1)[0]: line for line in Path(path).read_text().splitlines()
            if line.strip() and not line.startswith("#") and " error: " not in line}


def main() -> int:
    k, parts = int(os.environ.get("SLICE", "0")), int(os.environ.get("SLICES", "1"))
    jobs = int(os.environ.get("JOBS", "1"))
    log = sys.argv[1] if len(sys.argv) > 1 else None
    wanted = set(sys.argv[2:])
    unknown = wanted - set(BY_LABEL)
    if unknown:
        raise SystemExit(f"no named set {sorted(unknown)[0]!r}")
    rows = recorded(log)
    done = set(rows) | set(recorded(os.environ.get("SKIP")))
    chosen = [label for label, _ in ordered_sets() if label not in done and (not wanted or label in wanted)][k::parts]
    t0 = time.time()
    try:
        kernels = kernels_of(chosen, min(jobs, 4)) if chosen else {}
    except Exception as e:   # (another Triton's kernel objects) every set on its own: compiles may repeat
        print(f"kernels not told apart ({type(e).__name__}: {e}); each set compiles its own", flush=True)
        kernels = {label: f"set-{hashlib.sha256(label.encode()).hexdigest()[:8]}" for label in chosen}
    print(f"{len(chosen)} sets to run ({len(done)} recorded before), {len(set(kernels.values()))} kernels, "
          f"launches captured in {time.time() - t0:.1f} s; {jobs} processes", flush=True)
    print(row(COLUMNS), flush=True)
    # the first set of each kernel compiles it; the others wait for it.  The slowest compiles first, so that
    # none starts last (H200 host, 14 side by side: wide kernels with fp16 nodes 125-150 s, with fp32 nodes
    # 60-90 s, fp6 / fp4 ones the slower of these; tile ones 2-7 s)
    firsts, waiting = [], {}
    for label in chosen:
        kernel = kernels[label]
        if kernel in waiting:
            waiting[kernel].append(label)
        else:
            waiting[kernel] = []
            firsts.append(label)
    firsts.sort(key=lambda label: (kernels[label].startswith("tile"), BY_LABEL[label].output != "fp16",
                                   not set(kind(BY_LABEL[label])) & set(NARROW)))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    bad = 0
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        running = {pool.submit(_job, label) for label in firsts}
        while running:
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                label, result, seconds = future.result()
                line = line_of(label, kernels[label], result, seconds)
                bad += isinstance(result, str) or any(result[1:])
                rows[label] = line
                print(line, flush=True)
                if log:
                    with open(log, "a") as f:
                        f.write(line + "\n")
                running |= {pool.submit(_job, other) for other in waiting.pop(kernels[label], [])}
    device = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    print(f"{len(chosen)} of {len(T.DISTINCT)} distinct sets run on {device} in {time.time() - t0:.1f} s, "
          f"{bad} with a mismatch or an error; {len(rows)} recorded, {len(T.DISTINCT) - len(rows)} not")
    print(row(COLUMNS))
    for label in sorted(rows):
        print(rows[label])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
