"""Reveal torch.matmul on the GPU, compile the revealed order for Triton, and check the
replica against torch.matmul bit for bit on both paths; numpy.sum's order on the GPU
against numpy.sum on the CPU.

    PYTHONPATH=. python examples/gpu/gpu_validate.py OUTDIR [--quick] [--shapes=MxNxK,...] [--no-sum]

Writes OUTDIR/validate.txt (one line per check) and OUTDIR/trees.txt (the
revealed trees).  --quick: small shapes, for a CPU dry run under TRITON_INTERPRET=1.
"""
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from orders import matmul_kernel, numpy_sum_kernel  # noqa: E402

from fpspec.compile import compile_spec, load_replica  # noqa: E402
from fpspec.compile.backends.triton import BACKEND  # noqa: E402
from fpspec.reveal.engine import reveal  # noqa: E402
from fpspec.reveal.targets import resolve_target  # noqa: E402
from fpspec.spec import load as load_spec  # noqa: E402
from fpspec.tree import format_tree, stats  # noqa: E402

OUT = Path(sys.argv[1])
QUICK = "--quick" in sys.argv
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DT = {"fp16": torch.float16, "bf16": torch.bfloat16}
SHAPES = ([(8, 8, 40), (4, 4, 17)] if QUICK else
          [(64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (4096, 4096, 4096), (128, 128, 1000),
           (96, 80, 77), (64, 64, 4096), (16, 16, 8192), (2048, 2048, 520)])
for arg in sys.argv[2:]:
    if arg.startswith("--shapes="):   # e.g. --shapes=96x80x77,64x64x4096
        SHAPES = [tuple(int(v) for v in s.split("x")) for s in arg.split("=", 1)[1].split(",") if s]
SUMS = ([1, 9, 129, 1000, 4099, 10 ** 5 + 3] if QUICK else
        [1, 9, 129, 1000, 4099, 10 ** 5 + 3, 10 ** 7, 10 ** 8, 10 ** 8 + 3])
if "--no-sum" in sys.argv:
    SUMS = []
OUT.mkdir(parents=True, exist_ok=True)
REPLICAS = tempfile.mkdtemp()
log_file = open(OUT / "validate.txt", "w")
tree_file = open(OUT / "trees.txt", "w")


def log(*parts):
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    log_file.write(line + "\n")
    log_file.flush()


def load(kernel, tag):
    src = BACKEND.render(kernel)
    path = Path(REPLICAS) / f"replica_{tag}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def same_bits(a, b):
    a16, b16 = a.view(torch.int16), b.view(torch.int16)
    nan = torch.isnan(a.float()) & torch.isnan(b.float())
    return int(((a16 != b16) & ~nan).sum())


def random_inputs(shape, fmt, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-4, 5, shape, generator=g).float())
    return x.to(DT[fmt]).to(DEVICE)


def spec_pipeline(tag, fmt, M, N, K):
    """The user's road: `fpspec reveal -o` (tree, probed and sample-checked arithmetic), compile, compare."""
    spec_path = OUT / f"{tag}.fps"
    cmd = [sys.executable, "-m", "fpspec", "reveal", "torch.matmul", "-n", str(K), "--dtype",
           {"fp16": "float16", "bf16": "bfloat16"}[fmt], "--m", str(M), "--ncols", str(N), "--device", DEVICE,
           "-o", str(spec_path)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        return f"spec: reveal -o refused ({done.stderr.strip().splitlines()[-1]})"
    rep = load_replica(compile_spec(load_spec(spec_path), "triton"), f"spec_{tag}")
    out = []
    for path in ("emulated", "native"):
        bad = 0
        try:
            for seed in range(3):
                A, B = random_inputs((M, K), fmt, seed), random_inputs((K, N), fmt, seed + 100)
                bad += same_bits(rep.gemm(A, B, path=path), torch.matmul(A, B))
            out.append(f"{path} {'EQUAL' if bad == 0 else f'{bad} differ'} (ran {rep.last_path()})")
        except ValueError as e:
            out.append(f"{path} not run ({e})")
    return "spec (reveal -o, compile): " + ", ".join(out)


log(f"device: {torch.cuda.get_device_name() if DEVICE == 'cuda' else 'cpu'}; torch {torch.__version__}; "
    f"triton {__import__('triton').__version__}")
for fmt in ("fp16", "bf16"):
    for M, N, K in SHAPES:
        tag = f"{fmt}_{M}x{N}x{K}"
        t0 = time.perf_counter()
        try:
            target = resolve_target("torch.matmul", op="gemm", n=K, dtype=fmt, m=M, ncols=N, device=DEVICE)
            rev = reveal(target)
        except Exception as e:   # a refusal is a result too
            log(tag, "REVEAL FAILED:", type(e).__name__, e)
            continue
        text = format_tree(rev.tree)
        tree_file.write(f"{tag} ({stats(rev.tree)}; {rev.queries} queries, {rev.calls} calls, "
                        f"{rev.seconds:.1f} s; notes {list(rev.notes)}):\n{text}\n\n")
        tree_file.flush()
        try:
            kernel = matmul_kernel(rev.tree, fmt)
        except ValueError as e:
            log(tag, f"revealed in {rev.seconds:.1f}s ({stats(rev.tree)}), NOT COMPILED: {e}")
            continue
        rep = load(kernel, tag)
        results = []
        for path in ("emulated", "native"):
            bad = 0
            try:
                for seed in range(3 if M * N * K <= 2 ** 30 else 1):
                    A, B = random_inputs((M, K), fmt, seed), random_inputs((K, N), fmt, seed + 100)
                    want = torch.matmul(A, B)
                    got = rep.gemm(A, B, path=path)
                    bad += same_bits(got, want)
                results.append(f"{path}: {'EQUAL' if bad == 0 else f'{bad} elements differ'} "
                               f"(ran {rep.last_path()})")
            except ValueError as e:
                results.append(f"{path}: not run ({e})")
        if M * N * K <= 2 ** 28:
            results.append(spec_pipeline(tag, fmt, M, N, K))
        log(tag, f"order {type(kernel.root).__name__}"
                 f"{'' if len(rev.differing) == 0 else f' (outputs with other orders: {len(rev.differing)})'}",
            f"revealed in {rev.seconds:.1f}s;", "; ".join(results), f"[{time.perf_counter() - t0:.1f}s]")

# numpy.sum's order on the GPU
rep = load(numpy_sum_kernel(), "numpy_sum")
rng = np.random.default_rng(0)
for n in SUMS:
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-10, 11, n))).astype(np.float32)
    t0 = time.perf_counter()
    got = rep.sum(torch.from_numpy(x).to(DEVICE)).cpu().numpy()
    want = np.sum(x)
    log(f"numpy.sum n={n}: replica {'EQUAL' if got.view(np.uint32) == want.view(np.uint32) else 'DIFFERS'} "
        f"({got!r} vs numpy {want!r}) [{time.perf_counter() - t0:.1f}s incl. planning]")
