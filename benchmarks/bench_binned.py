"""Binned (order-independent) replicas against the library ops, side by side in one run.

    python benchmarks/bench_binned.py [--cpu] [--gpu] [--bits] [--n N] [--gpu-n N] [--out FILE]
        [--variants "[OP:]STREAMS,PREFETCH,CHUNK,BLOCK[,BITS,VECTORS[,LOCALITY]];..."]
        [--gemm-variants "STEPS,TILE[,BITS,VECTORS];..."]
        [--tilings BLOCK/WARPS/PER_SM,...]
    REPROBLAS_PATH=$HOME/src/ReproBLAS python benchmarks/bench_binned.py --cpu    # + ReproBLAS rows
    (REPROBLAS_PATH: a ReproBLAS checkout, built on first use with no network, or a folder with its
    libreproblas.so; default $HOME/src/ReproBLAS; without either the table says so)

CPU (Numba replicas, fp64): sum and dot at n = 10^7 on 1 and 2 threads against numpy.sum / numpy.dot
(time ratio, lower is better; --variants: other deposit loops too), gemm 512^3 on 1 and 2 threads against
numpy.matmul (GFLOP/s, and ReproBLAS's rdgemm when REPROBLAS_PATH is set).  GPU (Triton replicas): sum
at n = 10^8 in fp32 and fp64 against torch.sum (GB/s of input read, CUDA events over 10 calls; the
share of the best and of the median of --repeat timings) for several tilings.  Every binned result is also
checked to be the same bits on every thread count and on the GPU as on the CPU; --bits checks the
GPU against the NumPy and Numba replicas on adversarial inputs, permuted and split.  Best of --repeat
runs each.
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


def emit(rows: list, row: str) -> None:
    """Keep a table row and print it at once (a run cut short still shows what it measured)."""
    rows.append(row)
    print(row, flush=True)


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


def variant(setting: str):
    """A deposit loop "STREAMS,PREFETCH,CHUNK,BLOCK[,BITS,VECTORS[,LOCALITY]]" (fpspec.compile.binned.DEPOSIT
    and, when given, REGS: the deposit in vector registers, BITS 0 the CPU's widest, VECTORS 0 for
    none, LOCALITY the prefetches' cache level; for every op; the bits do not depend on it) applied
    while a replica is made: a context for `replica`."""
    import contextlib

    from fpspec.compile import binned

    @contextlib.contextmanager
    def applied():
        saved, saved_regs = dict(binned.DEPOSIT), dict(binned.REGS)
        values = tuple(map(int, setting.split(",")))
        binned.DEPOSIT.update(dict.fromkeys(saved, values[:4]))
        if len(values) > 4:
            binned.REGS.update(dict.fromkeys(saved_regs, (values[4:7] + (3,))[:3]))
        try:
            yield
        finally:
            binned.DEPOSIT.update(saved)
            binned.REGS.update(saved_regs)

    return applied()


def gemm_variant(setting: str):
    """A gemm lanes kernel "STEPS,TILE[,BITS,VECTORS]" (fpspec.compile.binned._LANE_STEPS,
    binned_numba._GEMM_TILE and, when given, binned.GEMM_REGS: lanes in vector registers, 0,0 for
    none; the bits do not depend on it) applied while a replica is made."""
    import contextlib

    from fpspec.compile import binned, binned_numba

    @contextlib.contextmanager
    def applied():
        saved = binned._LANE_STEPS, binned_numba._GEMM_TILE, binned.GEMM_REGS
        values = tuple(map(int, setting.split(",")))
        binned._LANE_STEPS, binned_numba._GEMM_TILE = values[:2]
        if len(values) > 2:
            binned.GEMM_REGS = values[2:4]
        try:
            yield
        finally:
            binned._LANE_STEPS, binned_numba._GEMM_TILE, binned.GEMM_REGS = saved

    return applied()


def cpu_rows(n: int, repeat: int, mm: int, variants=(), gemm_variants=()) -> list[str]:
    import numba

    from fpspec.compile import binned
    from reproblas_ref import load_reproblas, where

    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    rows = []
    rb = load_reproblas()
    if rb is None:
        emit(rows, f"# no ReproBLAS rows: no checkout or libreproblas.so at {where()} (REPROBLAS_PATH)")
    before = numba.get_num_threads()
    shapes = {op: ",".join(map(str, binned.DEPOSIT[kind] + binned.REGS[kind]))
              for op, kind in (("sum", "sum"), ("dot", "product"))}
    if mm:
        A = rng.standard_normal((mm, mm))
        B = rng.standard_normal((mm, mm))
        flops = 2.0 * mm ** 3
        from fpspec.compile import binned_numba

        t_lib = best(lambda: A @ B, repeat)
        emit(rows, f"{'CPU, fp64':44} {'GFLOP/s':>14} {'GFLOP/s':>14} {'share':>8}")
        kernel = ",".join(map(str, (binned._LANE_STEPS, binned_numba._GEMM_TILE, *binned.GEMM_REGS)))
        values = set()
        for setting in (kernel, *gemm_variants):
            with gemm_variant(setting):
                rep = replica("gemm", "fp64", "numba")
            what = "" if setting == kernel else f" [{setting}]"
            for threads in (1, 2):
                numba.set_num_threads(min(threads, before))
                t_bin = best(lambda: rep.gemm(A, B), max(1, repeat // 2))
                values.add(rep.gemm(A, B).tobytes())
                emit(rows, f"{f'gemm {mm}^3 {threads} thr{what} vs matmul ({before} thr)':44} "
                           f"{flops / t_lib / 1e9:>14.2f} {flops / t_bin / 1e9:>14.2f} {t_lib / t_bin:>7.1%}  "
                           f"{'same' if len(values) == 1 else 'DIFFER'}")
            numba.set_num_threads(before)
        rep = replica("gemm", "fp64", "numba")
        if rb is not None:
            t_rb = best(lambda: rb.gemm(A, B), 1)
            same = rb.gemm(A, B).tobytes() == rep.gemm(A, B).tobytes()
            emit(rows, f"{'gemm: ReproBLAS rdgemm (1 thread)':44} {flops / t_lib / 1e9:>14.2f} "
                       f"{flops / t_rb / 1e9:>14.2f} {t_lib / t_rb:>7.1%}  {'same as fpspec' if same else 'DIFFER'}")
    emit(rows, f"{'CPU, fp64':44} {'reference':>14} {'fpspec binned':>14} {'ratio':>8}  bits")
    for op, lib, name in (("sum", lambda: np.sum(x), "numpy.sum"), ("dot", lambda: np.dot(x, y), "numpy.dot")):
        t_lib = best(lib, repeat)
        values = set()
        default = shapes[op]
        # a variant "OP:SETTING" is timed for that op alone
        mine = [v.split(":", 1)[-1] for v in variants if v.split(":", 1)[0] in (op, v)]
        for setting in (default, *mine):
            with variant(setting):
                rep = replica(op, "fp64", "numba")
            call = (lambda: rep.sum(x)) if op == "sum" else (lambda: rep.dot(x, y))
            what = "" if setting == default else f" [{setting}]"
            for threads in (1, 2):
                numba.set_num_threads(min(threads, before))
                t = best(call, repeat)
                values.add(np.float64(call()).tobytes())
                emit(rows, f"{f'{op} n={n:.0e} {threads} thr{what} vs {name}':44} {t_lib * 1e3:>11.2f} ms "
                           f"{t * 1e3:>11.2f} ms {t / t_lib:>7.2f}x  {'same' if len(values) == 1 else 'DIFFER'}")
            numba.set_num_threads(before)
        if rb is not None:
            rep = replica(op, "fp64", "numba")
            call = (lambda: rep.sum(x)) if op == "sum" else (lambda: rep.dot(x, y))
            t_rb = best((lambda: rb.sum(x)) if op == "sum" else (lambda: rb.dot(x, y)), repeat)
            same = np.float64(call()).tobytes() == ((rb.sum(x) if op == "sum" else rb.dot(x, y)).tobytes())
            emit(rows, f"{f'{op}: ReproBLAS rd{op} (1 thread)':44} {t_lib * 1e3:>11.2f} ms "
                       f"{t_rb * 1e3:>11.2f} ms {t_rb / t_lib:>7.2f}x  {'same as fpspec' if same else 'DIFFER'}")
    return rows


def _device():
    import torch

    # a CPU with TRITON_INTERPRET=1 runs the same code (a dry run of this script)
    return "cuda" if torch.cuda.is_available() else "cpu"


def gpu_time(fn, repeat: int, calls: int = 10) -> tuple:
    """Seconds a call: (best, median) of `repeat` timings of `calls` back-to-back calls (CUDA events
    on a GPU)."""
    import torch

    fn()
    if not torch.cuda.is_available():
        t = best(fn, repeat)
        return t, t
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return min(times), float(np.median(times))


# (LANES, BLOCK, WARPS, PROGRAMS_PER_SM), after the replica's default; the bits do not depend on them
GPU_CONFIGS = ((True, 1024, 4, 8), (True, 2048, 4, 8), (True, 1024, 4, 16), (True, 2048, 8, 8),
               (True, 4096, 8, 8), (True, 2048, 4, 4), (True, 512, 1, 32), (True, 1024, 1, 32),
               (True, 1024, 2, 16), (True, 2048, 2, 16), (False, 1024, 4, 8))


def _configure(rep, config):
    r = rep.REPLICA
    r.LANES, r.BLOCK, r.WARPS, r.PROGRAMS_PER_SM = config


def gpu_rows(n: int, repeat: int, configs=GPU_CONFIGS) -> list[str]:
    import torch

    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "none: interpreter"
    rows = []
    emit(rows, f"{'GPU (' + name + ')':46} {'torch.sum':>10} {'binned':>10} {'share':>7} "
               f"{'median':>7}  bits (vs Numba on the CPU)")
    for fmt, dtype in (("fp32", torch.float32), ("fp64", torch.float64)):
        rep = replica("sum", fmt, "triton")
        cpu_rep = replica("sum", fmt, "numba")
        default = (rep.REPLICA.LANES, rep.REPLICA.BLOCK, rep.REPLICA.WARPS, rep.REPLICA.PROGRAMS_PER_SM)
        # randn: signs cancel; rand: all positive, the slot totals pass 2^63 ulps at n = 10^8
        for kind, x in (("randn", torch.randn(n, dtype=torch.float64, device=_device()).mul_(2.0 ** 20).to(dtype)),
                        ("rand", torch.rand(n, dtype=torch.float64, device=_device()).to(dtype))):
            lib_best, lib_median = gpu_time(lambda: torch.sum(x), repeat)
            gbs = x.numel() * x.element_size() / 1e9
            cpu = np.asarray(cpu_rep.sum(x.cpu().numpy())).tobytes()
            for config in (dict.fromkeys((default,) + tuple(configs)) if kind == "randn" else (default,)):
                _configure(rep, config)
                t_best, t_median = gpu_time(lambda: rep.sum(x), repeat)
                same = rep.sum(x).cpu().numpy().tobytes() == cpu
                what = f"{'lanes' if config[0] else 'tile sums'} {config[1]}/{config[2]}w/{config[3]}per SM"
                emit(rows, f"{f'sum {fmt} {kind} n={n:.0e} {what} GB/s':46} {gbs / lib_best:>10.1f} "
                           f"{gbs / t_best:>10.1f} {lib_best / t_best:>7.1%} {lib_median / t_median:>7.1%}  "
                           f"{'same' if same else 'DIFFER'}")
            _configure(rep, default)
            del x
    return rows


def adversarial(rng, n: int, dtype) -> dict:
    """Inputs that reach every path of the kernels: wide ranges, cancellation, the top bin (index 0),
    subnormals, the largest value last (the index moves up), inf and nan, zeros, random bits."""
    fi = np.finfo(dtype)
    ramp = rng.standard_normal(n) * 2.0 ** np.linspace(-30, 30, n)
    wide = rng.standard_normal(n) * 2.0 ** rng.integers(-100, 100, n)
    itype = np.int64 if dtype == np.float64 else np.int32
    raw = rng.integers(np.iinfo(itype).min, np.iinfo(itype).max, n, dtype=itype, endpoint=True).view(dtype)
    cases = {"randn": rng.standard_normal(n), "ramp up": ramp, "wide": wide,
             "cancel": np.concatenate([wide[: n // 2], -wide[: n // 2], [1.0]])[:n],
             "top bin": np.concatenate([np.full(3, fi.max), np.full(2, -fi.max), rng.standard_normal(n)])[:n],
             "subnormal": rng.standard_normal(n) * float(fi.smallest_subnormal) * 64,
             "near subnormal": rng.standard_normal(n) * float(fi.smallest_subnormal) * 2.0 ** 40,
             "inf": np.concatenate([rng.standard_normal(n - 1), [np.inf]]),
             "inf - inf": np.concatenate([[np.inf], rng.standard_normal(max(n - 2, 0)), [-np.inf]])[:n],
             "nan": np.concatenate([[np.nan], rng.standard_normal(n - 1)]),
             "-0": np.full(n, -0.0),
             "random bits": np.where(np.isfinite(raw), raw, 1.0),
             "overflow": np.full(n, float(fi.max) / 2)}
    with np.errstate(over="ignore"):
        return {k: np.asarray(v, dtype=dtype) for k, v in cases.items() if len(v) == n}


# splits: the GPU replica's tiles, programs and kernels (LANES, BLOCK, WARPS, PROGRAMS_PER_SM)
SPLITS = ((True, 64, 2, 1), (True, 4096, 8, 16), (False, 256, 4, 2), (True, 2048, 8, 4))


def gpu_bits(sizes=(1, 7, 1000, 4099, 1000003), perms: int = 3, mk=(48, 16), formats=("fp32", "fp64")) -> list[str]:
    """The Triton replica on the GPU = the NumPy and Numba replicas on the CPU, bit for bit: sum, dot,
    gemv, gemm in fp32 and fp64, on random and adversarial inputs, each also permuted and (sum, dot)
    split differently on the GPU (tile size, program count, kernel)."""
    import torch

    dev = _device()
    rows = []
    rng = np.random.default_rng(1)
    for fmt, dtype in (("fp32", np.float32), ("fp64", np.float64)):
        if fmt not in formats:
            continue
        for op in ("sum", "dot"):
            gpu, ref_np, ref_nb = (replica(op, fmt, t) for t in ("triton", "numpy", "numba"))
            default = (gpu.REPLICA.LANES, gpu.REPLICA.BLOCK, gpu.REPLICA.WARPS, gpu.REPLICA.PROGRAMS_PER_SM)
            equal = total = inputs = 0
            bad = []
            for n in sizes:
                for kind, x in adversarial(rng, n, dtype).items():
                    y = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(dtype)
                    inputs += 1
                    with np.errstate(all="ignore"):
                        want = [(ref_np.sum(x) if op == "sum" else ref_np.dot(x, y)),
                                (ref_nb.sum(x) if op == "sum" else ref_nb.dot(x, y))]
                    tx, ty = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
                    got = []
                    for p in range(perms + 1):
                        perm = torch.randperm(n, device=dev) if p else torch.arange(n, device=dev)
                        for config in (default,) + (SPLITS if p < 2 else ()):
                            _configure(gpu, config)
                            g = gpu.sum(tx[perm]) if op == "sum" else gpu.dot(tx[perm], ty[perm])
                            got.append((f"perm {p} split {config}", g.cpu().numpy()))
                    _configure(gpu, default)
                    ok_cpu = np.asarray(want[0]).tobytes() == np.asarray(want[1]).tobytes()
                    for how, g in got:
                        total += 1
                        if ok_cpu and g.tobytes() == np.asarray(want[0]).tobytes():
                            equal += 1
                        elif len(bad) < 5:
                            bad.append(f"{kind} n={n} {how}: GPU {g!r}, numpy {want[0]!r}, numba {want[1]!r}")
            emit(rows, f"{op} {fmt}: {equal} of {total} GPU results = NumPy = Numba ({inputs} inputs: "
                        f"{len(adversarial(rng, 8, dtype))} kinds x n in {list(sizes)}; {perms} permutations, "
                        f"{len(SPLITS)} splits)")
            rows += [f"  DIFFER {b}" for b in bad]
        m, cols = mk
        for op in ("gemv", "gemm"):
            gpu, ref_np, ref_nb = (replica(op, fmt, t) for t in ("triton", "numpy", "numba"))
            equal = total = 0
            bad = []
            for K in (1, 777, 5000):
                kinds = list(adversarial(rng, K, dtype).values())
                A = np.stack([kinds[i % len(kinds)] for i in range(m)])
                B = (rng.standard_normal((K, cols)) * 2.0 ** rng.integers(-30, 30, (K, cols))).astype(dtype)
                if op == "gemv":
                    B = B[:, 0]
                with np.errstate(all="ignore"):
                    want = [getattr(r, op)(A, B) for r in (ref_np, ref_nb)]
                tA, tB = torch.from_numpy(A).to(dev), torch.from_numpy(B).to(dev)
                for p in range(perms + 1):
                    perm = torch.randperm(K, device=dev) if p else torch.arange(K, device=dev)
                    g = getattr(gpu, op)(tA[:, perm].contiguous(), tB[perm].contiguous()).cpu().numpy()
                    cells = [c.view(np.uint8).reshape(c.size, -1) for c in (g, *want)]
                    same = np.all(cells[0] == cells[1], axis=1) & np.all(cells[1] == cells[2], axis=1)
                    total += same.size
                    equal += int(same.sum())
                    if not same.all() and len(bad) < 5:
                        bad.append(f"K={K} perm {p}: {int((~same).sum())} outputs differ")
            emit(rows, f"{op} {fmt}: {equal} of {total} GPU outputs = NumPy = Numba ({m}x{cols} outputs, K in "
                        f"[1, 777, 5000], rows of every input kind; {perms} permutations of K)")
            rows += [f"  DIFFER {b}" for b in bad]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--gpu", action="store_true", help="Triton sum against torch.sum (GB/s)")
    ap.add_argument("--bits", action="store_true", help="GPU = CPU bit for bit (sum, dot, gemv, gemm)")
    ap.add_argument("--n", type=int, default=10 ** 7)
    ap.add_argument("--gpu-n", type=int, default=10 ** 8)
    ap.add_argument("--mm", type=int, default=512, help="gemm size (0: no gemm)")
    ap.add_argument("--tilings", help="GPU tilings to time besides the default, BLOCK/WARPS/PER_SM,... "
                                      "(default: GPU_CONFIGS)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--variants", default="", help="CPU deposit variants to time besides the default, "
                                                  "[OP:]STREAMS,PREFETCH,CHUNK,BLOCK[,BITS,VECTORS[,LOCALITY]];... "
                                                  "(OP: sum or dot alone) "
                                                  "(fpspec.compile.binned.DEPOSIT, REGS)")
    ap.add_argument("--gemm-variants", default="", help="gemm lanes kernels to time besides the default, "
                                                       "STEPS,TILE[,BITS,VECTORS];... (fpspec.compile.binned._LANE_STEPS, "
                                                       "binned_numba._GEMM_TILE, binned.GEMM_REGS)")
    ap.add_argument("--formats", default="fp32,fp64", help="--bits: the formats checked")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if not (args.cpu or args.gpu or args.bits):
        args.cpu = True
    # FPSPEC_COMMIT first: a copy of the tree run elsewhere may sit inside another checkout
    commit = os.environ.get("FPSPEC_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip() or "(no git)"
    lines = [f"# {' '.join(['python', *sys.argv])}", f"# commit {commit}, {time.strftime('%Y-%m-%d')}, "
             f"{platform.processor() or platform.machine()}, numpy {np.__version__}"]
    print("\n".join(lines), flush=True)
    if args.cpu:
        emit(lines, f"# CPU: {os.cpu_count()} cores")
        lines += cpu_rows(args.n, args.repeat, args.mm, [v for v in args.variants.split(";") if v],
                          [v for v in args.gemm_variants.split(";") if v])
    if args.gpu:
        configs = GPU_CONFIGS if not args.tilings else tuple(
            (True, *map(int, t.split("/"))) for t in args.tilings.split(","))
        lines += gpu_rows(args.gpu_n, args.repeat, configs)
    if args.bits:
        formats = args.formats.split(",")
        lines += (gpu_bits(formats=formats) if _device() == "cuda"
                  else gpu_bits(sizes=(1, 7, 300), perms=1, mk=(3, 2), formats=formats))
    text = "\n".join(lines) + "\n"
    if args.out:
        from fpspec.io import write_atomic

        write_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
