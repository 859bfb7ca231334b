"""Batch-invariant replicas against cuBLAS and batch_invariant_ops, side by side in one run (GPU).

    FPSPEC_BIO=/path/to/batch_invariant_ops PYTHONPATH=. python benchmarks/bench_batch.py \
        [--size 4096] [--m 1,8,64,512,4096] [--dtype bf16,fp16] [--sweep [--sweep-m 1,8,64] [--jobs 12]]

Per dtype: the replica of cuBLAS's order at M = N = K = size (examples/batch/
cublas_<dtype>_chain16.fps, compiled with --batch-invariant), cuBLAS itself
(torch.matmul) and, where FPSPEC_BIO names a checkout of
thinking-machines-lab/batch_invariant_ops (never copied into fpspec), its
Triton matmul_persistent.  For each M: median time (triton.testing.do_bench),
TFLOP/s, the ratio to cuBLAS, and the bits: whether the first M rows equal the
same rows computed at M = size ("rows = prefill") for each, and whether the
replica equals cuBLAS's own bits at M = size.

--sweep: the replica's small-batch tiles (BM = 64, one warpgroup: Note [tiles and
bits] in fpspec/compile/batch.py) at each --sweep-m, every dtype, against cuBLAS in
the same run, with the bits checked; the kernels are compiled first in --jobs
processes (Triton's disk cache hands them to this one).  Only tiles of M and N
vary: every output keeps the spec's order along K, so the bits may not move.
"""
import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fpspec.compile import compile_spec, load_replica  # noqa: E402
from fpspec.compile.batch import batch_invariant, mark  # noqa: E402
from fpspec.spec import load  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# small-batch tiles tried by --sweep: one 64-row warpgroup (BM stays 64, Note [tiles and bits]);
# narrow BN gives a single row more programs over B, deeper pipelines more bytes in flight
SWEEP = [dict(BM=64, BN=BN, BK=BK, GROUP=8, num_warps=4, num_stages=st)
         for BN, BK, st in ((16, 64, 8), (16, 128, 6), (16, 128, 8), (16, 256, 4),
                            (32, 64, 8), (32, 128, 4), (32, 128, 6), (32, 128, 8), (32, 256, 3), (32, 256, 4),
                            (64, 64, 8), (64, 128, 4), (64, 128, 6), (64, 256, 3))]


def bio_matmul():
    path = os.environ.get("FPSPEC_BIO")
    if not path:
        return None
    sys.path.insert(0, path)
    from batch_invariant_ops.batch_invariant_ops import matmul_persistent

    return matmul_persistent


def bench(fn, rep=200):
    return do_bench(fn, warmup=25, rep=rep, return_mode="median")


def host_us(fn, calls=200):
    """Host time of one call, launches back to back (the GPU catches up at the end)."""
    import time

    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def same(a, b):
    return bool(torch.equal(a.view(torch.int16), b.view(torch.int16)))


def replica(name, tmp):
    """The batch-invariant replica of cuBLAS's order for dtype `name`, loaded."""
    spec, note = batch_invariant(load(ROOT / "examples" / "batch" / f"cublas_{name}_chain16.fps"))
    path = Path(tmp) / f"replica_{name}.py"
    path.write_text(mark(compile_spec(spec, "triton"), "triton", note))
    return load_replica(path.read_text(), f"bench-{name}")


def tiles(cfg):
    return f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']} w{cfg['num_warps']} s{cfg['num_stages']}"


def _compile(job):
    """Compile (by one call) the replica's kernel for each tile set of `job` at each M."""
    name, cfgs, ms, S = job
    with tempfile.TemporaryDirectory() as tmp:
        rep = replica(name, tmp)
        A = torch.zeros((max(ms), S), device="cuda", dtype=DTYPES[name])
        B = torch.zeros((S, S), device="cuda", dtype=DTYPES[name])
        for cfg in cfgs:
            rep.REPLICA.batch_tiles = ((S, cfg),)
            for M in ms:
                try:
                    rep.gemm(A[:M], B)
                except Exception:   # a tile set the compiler refuses: reported by the sweep
                    break
        torch.cuda.synchronize()


def sweep(args, reps):
    """Time every SWEEP tile set at each --sweep-m against cuBLAS: one table, the bits checked."""
    import multiprocessing as mp

    S = args.size
    jobs = [(name, SWEEP[i::args.jobs], args.sweep_m, S) for name in args.dtype for i in range(args.jobs)]
    with mp.get_context("spawn").Pool(min(len(jobs), args.jobs)) as pool:
        pool.map(_compile, [j for j in jobs if j[1]])
    print(f"\nsmall-batch tiles (replica, BM = 64; bits: rows equal the replica's M = {S} rows)")
    print(f"{'dtype':5} {'M':>5} {'tiles':20} {'us':>7} {'x cuBLAS':>8}  bits")
    for name in args.dtype:
        rep, A, B, big = reps[name]
        own = rep.REPLICA.batch_tiles
        for M in args.sweep_m:
            a = A[:M].contiguous()
            t_c = bench(lambda: torch.matmul(a, B), rep=100)
            best = None
            for cfg in SWEEP:
                rep.REPLICA.batch_tiles = ((S, cfg),)
                try:
                    ok = "yes" if same(rep.gemm(a, B), big[:M]) else "DIFFER"
                    t = bench(lambda: rep.gemm(a, B), rep=100)
                except Exception as e:   # a tile set the compiler refuses (shared memory)
                    t, ok = float("nan"), f"refused: {type(e).__name__}"
                print(f"{name:5} {M:5d} {tiles(cfg):20} {t * 1e3:7.1f} {t / t_c:8.2f}  {ok}", flush=True)
                if ok == "yes" and (best is None or t < best[0]):
                    best = (t, cfg)
            print(f"{name:5} {M:5d} {'cuBLAS':20} {t_c * 1e3:7.1f}     1.00  best: {tiles(best[1])} "
                  f"{best[0] / t_c:.2f} x cuBLAS", flush=True)
        rep.REPLICA.batch_tiles = own


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--m", type=lambda v: [int(x) for x in v.split(",")], default=[1, 8, 64, 512, 4096])
    ap.add_argument("--dtype", type=lambda v: v.split(","), default=["bf16", "fp16"])
    ap.add_argument("--sweep", action="store_true", help="also time other small-batch tiles")
    ap.add_argument("--sweep-m", type=lambda v: [int(x) for x in v.split(",")], default=[1, 8, 64])
    ap.add_argument("--jobs", type=int, default=12, help="processes compiling the swept kernels")
    args = ap.parse_args()
    bio = bio_matmul()
    S = args.size
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}; "
          f"N = K = {S}; batch_invariant_ops: {'yes' if bio else 'not given (FPSPEC_BIO)'}")
    print("us: median GPU time a call (triton.testing.do_bench); host us: Python time a call, launches back to back")
    head = (f"{'dtype':5} {'M':>5} | {'cuBLAS us':>9} {'TFLOP/s':>7} | {'replica us':>10} {'TFLOP/s':>7} {'x cuBLAS':>8} "
            f"| {'bio us':>8} {'TFLOP/s':>7} {'x cuBLAS':>8} | host us: cuBLAS replica bio "
            f"| rows = prefill: cuBLAS replica bio")
    print(head)
    print("-" * len(head))
    reps = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.dtype:
            dt = DTYPES[name]
            rep = replica(name, tmp)
            g = torch.Generator(device="cuda").manual_seed(0)
            A = torch.randn((S, S), device="cuda", generator=g).to(dt)
            B = torch.randn((S, S), device="cuda", generator=g).to(dt)
            ref = torch.matmul(A, B)
            big = rep.gemm(A, B)
            equal_cublas = same(big, ref)
            path_used = rep.last_path()
            reps[name] = (rep, A, B, big)
            bio_big = bio(A, B) if bio else None
            for M in args.m:
                a = A[:M].contiguous()
                flops = 2.0 * M * S * S
                t_c = bench(lambda: torch.matmul(a, B))
                t_r = bench(lambda: rep.gemm(a, B))
                rows_c = same(torch.matmul(a, B), ref[:M])
                rows_r = same(rep.gemm(a, B), big[:M])
                h_c, h_r = host_us(lambda: torch.matmul(a, B)), host_us(lambda: rep.gemm(a, B))
                if bio:
                    t_b = bench(lambda: bio(a, B))
                    rows_b = same(bio(a, B), bio_big[:M])
                    h_b = f"{host_us(lambda: bio(a, B)):5.1f}"
                    bio_cols = f"{t_b * 1e3:8.1f} {flops / t_b / 1e9:7.1f} {t_b / t_c:8.2f}"
                else:
                    rows_b, h_b, bio_cols = None, f"{'-':>5}", f"{'-':>8} {'-':>7} {'-':>8}"
                print(f"{name:5} {M:5d} | {t_c * 1e3:9.1f} {flops / t_c / 1e9:7.1f} | {t_r * 1e3:10.1f} "
                      f"{flops / t_r / 1e9:7.1f} {t_r / t_c:8.2f} | {bio_cols} | {h_c:15.1f} {h_r:7.1f} {h_b} | "
                      f"{'yes' if rows_c else 'NO':>14} {'yes' if rows_r else 'NO':>7} "
                      f"{'-' if rows_b is None else 'yes' if rows_b else 'NO':>3}", flush=True)
            print(f"{name}: replica at M = {S} {'equals' if equal_cublas else 'DIFFERS FROM'} cuBLAS bit for bit "
                  f"(path {path_used})", flush=True)
        if args.sweep:
            sweep(args, reps)


if __name__ == "__main__":
    main()
