"""Binned (order-independent) replicas against the library ops, side by side in one run.

    python benchmarks/bench_binned.py [--cpu] [--gpu] [--n N] [--gpu-n N] [--out FILE]
    REPROBLAS_PATH=/work/ext/ReproBLAS python benchmarks/bench_binned.py --cpu    # + ReproBLAS columns

CPU (Numba replicas, fp64): sum and dot at n = 10^7 on 1 and 2 threads against numpy.sum / numpy.dot
(time ratio, lower is better), gemm 512^3 against numpy.matmul (GFLOP/s, and ReproBLAS's rdgemm when
REPROBLAS_PATH is set).  GPU (Triton replicas): sum at n = 10^8 in fp32 and fp64 against torch.sum
(GB/s of input read).  Every binned result is also checked to be the same bits on every thread count
and on the GPU as on the CPU.  Best of --repeat runs each.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from fpspec.compile import compile_spec, load_replica  # noqa: E402
from fpspec.spec import parse  # noqa: E402


def replica(op: str, fmt: str, target: str):
    product = "none" if op == "sum" else "rounded"
    spec = parse(f'target "binned"\nop {op}\nn in 1..\narithmetic {{ input = {fmt} product = {product} '
                 f"accumulator = binned(fold = 3) output = {fmt} }}\norder seq\n")
    return load_replica(compile_spec(spec, target), f"binned {op} {fmt} {target}")


def best(fn, repeat: int, sync=None) -> float:
    fn()
    if sync:
        sync()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
    return min(times)


def cpu_rows(n: int, repeat: int, mm: int) -> list[str]:
    import numba

    from reproblas_ref import load_reproblas

    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    rows = [f"{'CPU, fp64':36} {'reference':>14} {'fpspec binned':>14} {'ratio':>8}  bits"]
    rb = load_reproblas()
    before = numba.get_num_threads()
    for op, lib, name in (("sum", lambda: np.sum(x), "numpy.sum"), ("dot", lambda: np.dot(x, y), "numpy.dot")):
        rep = replica(op, "fp64", "numba")
        call = (lambda: rep.sum(x)) if op == "sum" else (lambda: rep.dot(x, y))
        t_lib = best(lib, repeat)
        values = set()
        for threads in (1, 2):
            numba.set_num_threads(min(threads, before))
            t = best(call, repeat)
            values.add(np.float64(call()).tobytes())
            rows.append(f"{f'{op} n={n:.0e} {threads} thread(s) vs {name}':36} {t_lib * 1e3:>11.2f} ms "
                        f"{t * 1e3:>11.2f} ms {t / t_lib:>7.2f}x  {'same' if len(values) == 1 else 'DIFFER'}")
        numba.set_num_threads(before)
        if rb is not None:
            t_rb = best((lambda: rb.sum(x)) if op == "sum" else (lambda: rb.dot(x, y)), repeat)
            same = np.float64(call()).tobytes() == ((rb.sum(x) if op == "sum" else rb.dot(x, y)).tobytes())
            rows.append(f"{f'{op}: ReproBLAS rd{op} (1 thread)':36} {t_lib * 1e3:>11.2f} ms "
                        f"{t_rb * 1e3:>11.2f} ms {t_rb / t_lib:>7.2f}x  {'same as fpspec' if same else 'DIFFER'}")
    A = rng.standard_normal((mm, mm))
    B = rng.standard_normal((mm, mm))
    flops = 2.0 * mm ** 3
    rep = replica("gemm", "fp64", "numba")
    t_lib = best(lambda: A @ B, repeat)
    t_bin = best(lambda: rep.gemm(A, B), max(1, repeat // 2))
    rows.append(f"{'':36} {'GFLOP/s':>14} {'GFLOP/s':>14} {'share':>8}")
    rows.append(f"{f'gemm {mm}^3 vs numpy.matmul ({before} thr)':36} {flops / t_lib / 1e9:>14.2f} "
                f"{flops / t_bin / 1e9:>14.2f} {t_lib / t_bin:>7.1%}")
    if rb is not None:
        t_rb = best(lambda: rb.gemm(A, B), 1)
        same = rb.gemm(A, B).tobytes() == rep.gemm(A, B).tobytes()
        rows.append(f"{'gemm: ReproBLAS rdgemm (1 thread)':36} {flops / t_lib / 1e9:>14.2f} "
                    f"{flops / t_rb / 1e9:>14.2f} {t_lib / t_rb:>7.1%}  {'same as fpspec' if same else 'DIFFER'}")
    return rows


def _device():
    import torch

    # a CPU with TRITON_INTERPRET=1 runs the same code (a dry run of this script)
    return "cuda" if torch.cuda.is_available() else "cpu"


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def gpu_rows(n: int, repeat: int, configs=((4096, 8),)) -> list[str]:
    import torch

    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "none: interpreter"
    rows = [f"{'GPU (' + name + ')':36} {'torch.sum':>14} {'fpspec binned':>14} {'share':>8}  bits"]
    for fmt, dtype in (("fp32", torch.float32), ("fp64", torch.float64)):
        rep = replica("sum", fmt, "triton")
        x = torch.randn(n, dtype=torch.float64, device=_device()).mul_(2.0 ** 20).to(dtype)
        t_lib = best(lambda: torch.sum(x), repeat, _sync)
        gbs = x.numel() * x.element_size() / 1e9
        # the same bits as the CPU replica (numba) on the same values
        cpu = np.asarray(replica("sum", fmt, "numba").sum(x.cpu().numpy())).tobytes()
        default = (rep.REPLICA.BLOCK, rep.REPLICA.WARPS)
        for block, warps in dict.fromkeys([default] + list(configs)):
            rep.REPLICA.BLOCK, rep.REPLICA.WARPS = block, warps
            t_bin = best(lambda: rep.sum(x), repeat, _sync)
            same = rep.sum(x).cpu().numpy().tobytes() == cpu
            rows.append(f"{f'sum {fmt} n={n:.0e} tile {block}/{warps}w (GB/s)':36} {gbs / t_lib:>14.1f} "
                        f"{gbs / t_bin:>14.1f} {t_lib / t_bin:>7.1%}  {'same as CPU' if same else 'DIFFER from CPU'}")
        rep.REPLICA.BLOCK, rep.REPLICA.WARPS = default
    rows.append(gpu_bits(40 if torch.cuda.is_available() else 2))
    return rows


def gpu_bits(cases: int) -> str:
    """GPU (Triton) = CPU (NumPy replica) bit for bit on adversarial inputs: sum, dot, gemm, fp32 and fp64."""
    import torch

    rng = np.random.default_rng(1)
    equal = total = 0
    for fmt, dtype in (("fp32", np.float32), ("fp64", np.float64)):
        gpu = {op: replica(op, fmt, "triton") for op in ("sum", "dot", "gemm")}
        cpu = {op: replica(op, fmt, "numpy") for op in ("sum", "dot", "gemm")}
        big = float(np.finfo(dtype).max)
        for k in range(cases):
            n = int(rng.integers(1, 200000 if _device() == "cuda" else 3000))
            with np.errstate(all="ignore"):
                x = rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n).astype(float)
                if k % 4 == 1:
                    x = np.concatenate([x, -x, [1.0]])
                if k % 4 == 2:
                    x[: 3] = big
                if k % 8 == 3:
                    x[rng.integers(0, x.size)] = rng.choice([np.inf, -np.inf, np.nan])
                x = x.astype(dtype)
                y = rng.standard_normal(x.size).astype(dtype)
            tx, ty = torch.from_numpy(x).to(_device()), torch.from_numpy(y).to(_device())
            pairs = [(gpu["sum"].sum(tx), cpu["sum"].sum(x)), (gpu["dot"].dot(tx, ty), cpu["dot"].dot(x, y))]
            for g, c in pairs:
                total += 1
                equal += np.asarray(g.cpu().numpy()).tobytes() == np.asarray(c).tobytes()
        rows_a = 64 if _device() == "cuda" else 2
        A = (rng.standard_normal((rows_a, 777)) * 2.0 ** rng.integers(-40, 40, (rows_a, 777))).astype(dtype)
        B = rng.standard_normal((777, 48 if _device() == "cuda" else 2)).astype(dtype)
        g = gpu["gemm"].gemm(torch.from_numpy(A).to(_device()), torch.from_numpy(B).to(_device())).cpu().numpy()
        c = cpu["gemm"].gemm(A, B)
        total += c.size
        equal += int(np.sum(np.all(g.view(np.uint8).reshape(c.size, -1) == c.view(np.uint8).reshape(c.size, -1),
                                   axis=1)))
    return f"GPU = CPU (NumPy replica) bit for bit on adversarial sum/dot/gemm outputs: {equal} of {total}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--n", type=int, default=10 ** 7)
    ap.add_argument("--gpu-n", type=int, default=10 ** 8)
    ap.add_argument("--mm", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if not (args.cpu or args.gpu):
        args.cpu = True
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip() or os.environ.get("FPSPEC_COMMIT", "(no git)")
    lines = [f"# {' '.join(['python', *sys.argv])}", f"# commit {commit}, {time.strftime('%Y-%m-%d')}, "
             f"{platform.processor() or platform.machine()}, numpy {np.__version__}"]
    if args.cpu:
        lines.append(f"# CPU: {os.cpu_count()} cores")
        lines += cpu_rows(args.n, args.repeat, args.mm)
    if args.gpu:
        lines += gpu_rows(args.gpu_n, args.repeat)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        from fpspec.io import write_atomic

        write_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
