"""Triton replicas against the library ops, side by side in one run (GPU).

    PYTHONPATH=. python benchmarks/bench_triton.py [--size 4096] [--n 100000000] [--configs]
        [--only native|emulated|sum] [--arith 0,1,2,3] [--tiles 16x32x4,32x32x8] [--gpu-node]
        [--maxnreg 0,168] [--specials auto,pass,tile]

Rows: fp16 GEMM size^3 through torch.matmul (cuBLAS), the replica's native
path and its emulated path (both bit-checked against cuBLAS); float32 sum of n
terms through torch.sum and the replica of numpy.sum's order (bit-checked
against numpy.sum on the CPU).  Times are medians of triton.testing.do_bench.
"""
import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import triton
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "gpu"))
from orders import numpy_sum_kernel  # noqa: E402

from fpspec.arith import Arithmetic, get_params  # noqa: E402
from fpspec.compile.backends.triton import BACKEND  # noqa: E402
from fpspec.compile.ir import Const, FusedChain, Kernel  # noqa: E402


def load(kernel, tmp):
    """The rendered replica of kernel, imported from a new file in tmp (one file a replica)."""
    path = Path(tmp) / f"bench_{kernel.op}_{len(list(Path(tmp).glob('bench_*.py')))}.py"
    path.write_text(BACKEND.render(kernel))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--n", type=int, default=10 ** 8)
    ap.add_argument("--configs", action="store_true", help="also try other native tile shapes")
    ap.add_argument("--only", choices=("native", "emulated", "sum"), action="append",
                    help="run only these rows (repeatable); default: all")
    ap.add_argument("--arith", type=lambda v: [int(x) for x in v.split(",")], default=[0, 1, 2, 3],
                    help="with --configs: the emulated tile kernel's ARITH forms to try (comma-separated)")
    ap.add_argument("--tiles", type=lambda v: [tuple(int(x) for x in t.split("x")) for t in v.split(",")],
                    default=[(16, 32, 4), (32, 32, 4), (32, 32, 8), (16, 64, 4)],
                    help="with --configs: emulated tiles BMxBNxWARPS[xSTAGES], comma-separated")
    ap.add_argument("--gpu-node", nargs="?", const="both", choices=("both", "only"),
                    help="with --configs: the tile rows also (both) or only (only) with GPU_NODE")
    ap.add_argument("--maxnreg", type=lambda v: [int(x) for x in v.split(",")], default=[0],
                    help="with --configs: the tile rows with these register limits (0: none)")
    ap.add_argument("--specials", type=lambda v: [{"pass": True, "tile": "tile"}.get(x, "auto") for x in v.split(",")],
                    default=["auto"], help="with --configs: auto, pass (the inf/nan test every node) and/or "
                                           "tile (one test a tile, from the host's row/column flags)")
    args = ap.parse_args()
    only = set(args.only or ("native", "emulated", "sum"))
    rows = _Table()
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        S = args.size
        flops = 2.0 * S ** 3
        ar = Arithmetic(input="fp16", product="exact", accumulator="fp32", init="none", output="fp16",
                        fused=get_params("h100-fp16"))
        gemm = load(Kernel("gemm", ar, FusedChain(Const(16)), name="h100 chain"), tmp)
        g = torch.Generator(device="cuda").manual_seed(0)
        A = torch.randn((S, S), device="cuda", generator=g).half()
        B = torch.randn((S, S), device="cuda", generator=g).half()
        ref = torch.matmul(A, B)
        t_cublas = do_bench(lambda: torch.matmul(A, B), warmup=100, rep=500, return_mode="median")
        rows.append((f"cuBLAS fp16 GEMM {S}^3", t_cublas, flops / t_cublas / 1e9, "TFLOP/s", 1.0, "reference"))
        configs = [gemm.REPLICA.native_config] if "native" in only else []
        if args.configs and configs:
            configs += [dict(BM=BM, BN=BN, BK=64, GROUP=8, num_warps=w, num_stages=st)
                        for BM, BN, w, st in [(128, 256, 8, 3), (128, 256, 8, 4), (256, 128, 8, 3), (256, 128, 8, 4),
                                              (128, 128, 8, 4), (128, 128, 4, 4), (128, 128, 8, 3)]
                        if dict(BM=BM, BN=BN, BK=64, GROUP=8, num_warps=w, num_stages=st) != configs[0]]
        for cfg in configs:
            gemm.REPLICA.native_config = cfg
            same = torch.equal(gemm.gemm(A, B, path="native").view(torch.int16), ref.view(torch.int16))
            t = do_bench(lambda: gemm.gemm(A, B, path="native"), warmup=100, rep=500, return_mode="median")
            tag = "x".join(str(cfg[k]) for k in ("BM", "BN", "BK")) + f" w{cfg['num_warps']} s{cfg['num_stages']}"
            rows.append((f"replica native {tag}", t, flops / t / 1e9, "TFLOP/s", t_cublas / t,
                         "bit-identical" if same else "DIFFERS"))
        default = gemm.REPLICA.emulated_config
        # the first row: the kernel before floating-point products (integers, inf/nan test every node)
        emulated = ([("tile", dict(BM=16, BN=32, num_warps=4), 0, True),
                     ("auto", default, "auto", gemm.REPLICA.emulated_specials)]
                    if "emulated" in only else [])
        if args.configs and emulated:
            emulated += [("tile", dict(BM=BM, BN=BN, num_warps=w, **node, **({"maxnreg": r} if r else {}),
                                       **({"num_stages": st[0]} if st else {})),
                          arith, specials) for arith in args.arith
                         for BM, BN, w, *st in args.tiles for specials in args.specials
                         for node in {None: [{}], "both": [{}, dict(GPU_NODE=True)], "only": [dict(GPU_NODE=True)]}[args.gpu_node] for r in args.maxnreg]
        default_maxnreg = gemm.REPLICA.emulated_maxnreg
        for form, cfg, arith, specials in emulated:
            gemm.REPLICA.emulated_kernel, gemm.REPLICA.emulated_config = form, cfg
            # rows other than the default: only the register limit their config names
            gemm.REPLICA.emulated_maxnreg = default_maxnreg if form == "auto" else None
            gemm.REPLICA.emulated_arith = arith
            gemm.REPLICA.emulated_specials = specials
            try:
                got = gemm.gemm(A, B, path="emulated")
            except Exception as e:   # one form failing to compile must not end the sweep
                print(f"emulated {form} {cfg} arith {arith}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            same = torch.equal(got.view(torch.int16), ref.view(torch.int16))
            t = do_bench(lambda: gemm.gemm(A, B, path="emulated"), warmup=1, rep=3, return_mode="median")
            used = gemm.REPLICA._arith(A.device) if form != "wide" else "-"
            tag = (f"{form} {cfg['BM']}x{cfg['BN']} w{cfg['num_warps']} arith {used}"
                   f"{' gpu-node' if cfg.get('GPU_NODE') else ''}{' +specials pass' if specials is True else ''}"
                   f"{' +specials tile' if specials == 'tile' else ''}"
                   f"{' maxnreg %d' % cfg['maxnreg'] if cfg.get('maxnreg') else ''}"
                   f"{' stages %d' % cfg['num_stages'] if cfg.get('num_stages') else ''}"
                   f"{' maxnreg %d' % default_maxnreg if form == 'auto' and used == 1 and default_maxnreg and specials != 'tile' else ''}")
            rows.append((f"replica emulated {tag}", t, flops / t / 1e9, "TFLOP/s", t_cublas / t,
                         "bit-identical" if same else "DIFFERS"))

        if "sum" not in only:
            return
        n = args.n
        x_cpu = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        x = torch.from_numpy(x_cpu).cuda()
        nbytes = 4.0 * n
        t_torch = do_bench(lambda: torch.sum(x), warmup=20, rep=200, return_mode="median")
        rows.append((f"torch.sum float32 n={n}", t_torch, nbytes / t_torch / 1e6, "GB/s", 1.0, "reference"))
        summ = load(numpy_sum_kernel(), tmp)
        want = np.sum(x_cpu).view(np.uint32)
        sums = [dict(summ.REPLICA.sum_config)]
        if args.configs:
            sums += [dict(sums[0], BG=bg, num_warps=w) for bg, w in [(16, 1), (16, 2), (32, 2), (32, 4), (64, 2),
                                                                      (64, 4), (128, 4)]
                     if (bg, w) != (sums[0]["BG"], sums[0]["num_warps"])]
        for cfg in sums:
            summ.REPLICA.sum_config = cfg
            same = summ.sum(x).cpu().numpy().view(np.uint32) == want   # plans once (cached per n)
            t = do_bench(lambda: summ.sum(x), warmup=20, rep=200, return_mode="median")
            rows.append((f"replica of numpy.sum order BG{cfg['BG']} w{cfg['num_warps']}", t, nbytes / t / 1e6,
                         "GB/s", t_torch / t, "bit-identical to numpy.sum" if same else "DIFFERS from numpy.sum"))


class _Table(list):
    """Rows printed as they come (a run cut short still shows what it measured)."""

    def append(self, row):
        if not self:
            print(f"\n{'what':44s} {'ms':>9s} {'rate':>10s} {'':8s} {'vs ref':>7s}  check")
        super().append(row)
        what, ms, rate, unit, ratio, check = row
        print(f"{what:44s} {ms:9.3f} {rate:10.1f} {unit:8s} {ratio:7.2f}  {check}", flush=True)


if __name__ == "__main__":
    main()
