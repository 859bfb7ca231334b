"""Batch-invariant replicas against cuBLAS and batch_invariant_ops, side by side in one run (GPU).

    FPSPEC_BIO=/path/to/batch_invariant_ops PYTHONPATH=. python benchmarks/bench_batch.py \
        [--size 4096] [--m 1,8,64,512,4096] [--dtype bf16,fp16] [--small-configs]

Per dtype: the replica of cuBLAS's order at M = N = K = size (examples/batch/
cublas_<dtype>_chain16.fps, compiled with --batch-invariant), cuBLAS itself
(torch.matmul) and, where FPSPEC_BIO names a checkout of
thinking-machines-lab/batch_invariant_ops (never copied into fpspec), its
Triton matmul_persistent.  For each M: median time (triton.testing.do_bench),
TFLOP/s, the ratio to cuBLAS, and the bits: whether the first M rows equal the
same rows computed at M = size ("rows = prefill") for each, and whether the
replica equals cuBLAS's own bits at M = size.
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
# other tiles tried with --small-configs (first dtype only): one 64-row warpgroup up to M = 64,
# 128-row tiles (two warpgroups) above; BM stays a multiple of 64 (Note [tiles and bits])
SMALL = [dict(BM=64, BN=BN, BK=BK, GROUP=8, num_warps=4, num_stages=st)
         for BN, BK, st in ((32, 128, 4), (16, 128, 6), (16, 256, 4), (32, 64, 8), (32, 256, 3), (64, 128, 4))]
MEDIUM = [dict(BM=BM, BN=BN, BK=BK, GROUP=8, num_warps=w, num_stages=st)
          for BM, BN, BK, w, st in ((128, 128, 64, 8, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4),
                                    (128, 256, 64, 8, 3), (64, 64, 128, 4, 4))]


def bio_matmul():
    path = os.environ.get("FPSPEC_BIO")
    if not path:
        return None
    sys.path.insert(0, path)
    from batch_invariant_ops.batch_invariant_ops import matmul_persistent

    return matmul_persistent


def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--m", type=lambda v: [int(x) for x in v.split(",")], default=[1, 8, 64, 512, 4096])
    ap.add_argument("--dtype", type=lambda v: v.split(","), default=["bf16", "fp16"])
    ap.add_argument("--small-configs", action="store_true", help="also time other small-batch tiles")
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
    tuning = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.dtype:
            dt = DTYPES[name]
            spec, note = batch_invariant(load(ROOT / "examples" / "batch" / f"cublas_{name}_chain16.fps"))
            path = Path(tmp) / f"replica_{name}.py"
            path.write_text(mark(compile_spec(spec, "triton"), "triton", note))
            rep = load_replica(path.read_text(), f"bench-{name}")
            g = torch.Generator(device="cuda").manual_seed(0)
            A = torch.randn((S, S), device="cuda", generator=g).to(dt)
            B = torch.randn((S, S), device="cuda", generator=g).to(dt)
            ref = torch.matmul(A, B)
            big = rep.gemm(A, B)
            equal_cublas = same(big, ref)
            path_used = rep.last_path()
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
                if args.small_configs and name == args.dtype[0] and M <= 1024:
                    own = rep.REPLICA.batch_tiles
                    for cfg in SMALL if M <= 64 else MEDIUM:
                        rep.REPLICA.batch_tiles = ((S, cfg),)
                        try:
                            t = bench(lambda: rep.gemm(a, B))
                            ok = same(rep.gemm(a, B), big[:M])
                        except Exception as e:   # a tile shape the compiler refuses
                            t, ok = float("nan"), f"failed: {type(e).__name__}"
                        tuning.append((name, M, cfg, t, t / t_c, ok))
                    rep.REPLICA.batch_tiles = own
            print(f"{name}: replica at M = {S} {'equals' if equal_cublas else 'DIFFERS FROM'} cuBLAS bit for bit "
                  f"(path {path_used})", flush=True)
    if tuning:
        print(f"\nother tiles (replica, {args.dtype[0]}; bits: rows equal the M = {S} rows)")
        for name, M, cfg, t, ratio, ok in tuning:
            tiles = f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']} w{cfg['num_warps']} s{cfg['num_stages']}"
            print(f"{name:5} {M:5d} {tiles:22} {t * 1e3:8.1f} us {ratio:6.2f} x cuBLAS  bits {ok}")


if __name__ == "__main__":
    main()
