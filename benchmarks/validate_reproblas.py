"""fpspec's binned sum and dot against ReproBLAS's own bits (same fold), on random and adversarial inputs.

    REPROBLAS_PATH=$HOME/src/ReproBLAS python benchmarks/validate_reproblas.py [--cases N] [--out FILE]

For every input: ReproBLAS's reproBLAS_r{d,s}{sum,dot} (and r{d,s}gemm on a few matrices) against
fpspec.arith.binned (the model), the NumPy replica and the Numba replica of the spec
`accumulator = binned(fold = K)`, for K = 2, 3, 4, fp64 and fp32.  NaN counts as equal to NaN
(ReproBLAS returns whatever NaN its additions made; fpspec returns the canonical one); every other
result is compared bit for bit.  Exit 1 on any difference.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reproblas_ref import load_reproblas  # noqa: E402

from fpspec.arith.binned import Binned, binned_dot  # noqa: E402
from fpspec.compile import compile_spec, load_replica  # noqa: E402
from fpspec.spec import parse  # noqa: E402

DTYPES = {"fp64": np.float64, "fp32": np.float32}


def spec(op: str, fmt: str, fold: int):
    product = "none" if op == "sum" else "rounded"
    return parse(f'target "binned"\nop {op}\nn in 1..\narithmetic {{ input = {fmt} product = {product} '
                 f"accumulator = binned(fold = {fold}) output = {fmt} }}\norder seq\n")


def inputs(rng, dtype, count: int):
    """(kind, x, y) triples: random, huge ranges, cancellation, the top bin, inf / nan, subnormals, zeros."""
    info = np.finfo(dtype)
    big, tiny = float(info.max), float(info.smallest_subnormal)
    lo, hi = (-1074, 1023) if dtype == np.float64 else (-149, 127)
    kinds = ["normal", "huge range", "cancellation", "top bin", "overflow", "inf/nan", "subnormal",
             "random bits", "zeros", "single"]
    for k in range(count):
        kind = kinds[k % len(kinds)]
        n = int(rng.integers(1, 3000))
        with np.errstate(all="ignore"):
            if kind == "normal":
                x = rng.standard_normal(n)
            elif kind == "huge range":
                x = rng.standard_normal(n) * 2.0 ** rng.integers(lo // 2, hi // 2, n).astype(float)
            elif kind == "cancellation":
                h = rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n).astype(float)
                x = np.concatenate([h, -h, rng.standard_normal(n // 10 + 1) * 2.0 ** -30])
                rng.shuffle(x)
            elif kind == "top bin":
                x = rng.uniform(-1, 1, n) * big
            elif kind == "overflow":
                x = np.concatenate([np.full(n, big * 0.75), rng.standard_normal(n)])
            elif kind == "inf/nan":
                x = rng.standard_normal(n)
                x[rng.integers(0, n, 3)] = rng.choice([np.inf, -np.inf, np.nan], 3)
            elif kind == "subnormal":
                x = rng.standard_normal(n) * tiny * 2.0 ** rng.integers(0, 30, n).astype(float)
            elif kind == "random bits":
                width = 64 if dtype == np.float64 else 32
                raw = rng.integers(0, 2 ** (width - 1), n, dtype=np.int64) * rng.choice([1, -1], n)
                x = (raw.astype(np.int64) if width == 64 else raw.astype(np.int32)).view(dtype)
            elif kind == "zeros":
                x = np.where(rng.random(n) < 0.5, 0.0, -0.0)
            else:
                x = rng.standard_normal(1) * 2.0 ** float(rng.integers(lo, hi))
            x = np.asarray(x, dtype=dtype)
            y = (rng.standard_normal(x.size) * 2.0 ** rng.integers(-20, 20, x.size).astype(float)).astype(dtype)
        yield kind, x, y


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.tobytes() == b.tobytes() or bool(np.all(np.isnan(a) & np.isnan(b)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=400, help="inputs per format and fold (default 400)")
    ap.add_argument("--out", type=Path, help="also write the report here")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rb = load_reproblas()
    if rb is None:
        print("REPROBLAS_PATH is not set to a ReproBLAS checkout (or its libreproblas.so): nothing to compare")
        return 2
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    lines = [f"# {' '.join(['python', *sys.argv])}", f"# commit {commit}, {time.strftime('%Y-%m-%d')}",
             "# fpspec's binned sum / dot vs ReproBLAS (same fold); NaN = NaN, everything else bit for bit", ""]
    lines.append(f"{'format':6} {'fold':>4} {'op':4} {'implementation':16} {'inputs':>7} {'equal':>7} {'differ':>7}")
    failures = []
    start = time.perf_counter()
    for fmt, dtype in DTYPES.items():
        for fold in (2, 3, 4):
            replicas = {(op, t): load_replica(compile_spec(spec(op, fmt, fold), t), f"{op} {fmt} {fold} {t}")
                        for op in ("sum", "dot") for t in ("numpy", "numba")}
            tally: Counter = Counter()
            for kind, x, y in inputs(np.random.default_rng(args.seed + fold), dtype, args.cases):
                want_sum, want_dot = rb.sum(x, fold), rb.dot(x, y, fold)
                got = {("sum", "model"): Binned.empty(fmt, fold).deposit(x).to_float(),
                       ("dot", "model"): binned_dot(x, y, fmt, fold).to_float()}
                for (op, t), rep in replicas.items():
                    got[(op, t)] = rep.sum(x) if op == "sum" else rep.dot(x, y)
                for (op, who), value in got.items():
                    ok = same(value, want_sum if op == "sum" else want_dot)
                    tally[(op, who, ok)] += 1
                    if not ok and len(failures) < 20:
                        failures.append(f"{fmt} fold {fold} {op} {who} on {kind} (n = {x.size}): "
                                        f"ReproBLAS {want_sum if op == 'sum' else want_dot!r}, fpspec {value!r}")
            for op in ("sum", "dot"):
                for who in ("model", "numpy", "numba"):
                    ok, bad = tally[(op, who, True)], tally[(op, who, False)]
                    lines.append(f"{fmt:6} {fold:>4} {op:4} {who:16} {ok + bad:>7} {ok:>7} {bad:>7}")
        # gemm, fold 3: a few matrices with wide ranges (most outputs on the general path), then plain
        # normal ones of two column tiles and K past fp32's endurance (the outputs deposited as lanes)
        rng = np.random.default_rng(args.seed + 9)
        rep = load_replica(compile_spec(spec("gemm", fmt, 3), "numba"), f"gemm {fmt}")
        ok = bad = 0
        for case in range(6):
            wide = case < 4
            m, k, n = (17, 300, 13) if wide else (9, 700, 300)
            A = rng.standard_normal((m, k)) * (2.0 ** rng.integers(-30, 30, (m, k)) if wide else 1.0)
            B = rng.standard_normal((k, n)) * (2.0 ** rng.integers(-30, 30, (k, n)) if wide else 1.0)
            A, B = A.astype(dtype), B.astype(dtype)
            want, got = rb.gemm(A, B), rep.gemm(A, B)
            eq = int(np.sum([same(a, b) for a, b in zip(want.ravel(), got.ravel())]))
            ok, bad = ok + eq, bad + want.size - eq
        lines.append(f"{fmt:6} {3:>4} gemm {'numba':16} {ok + bad:>7} {ok:>7} {bad:>7}")
        if bad:
            failures.append(f"{fmt} gemm: {bad} outputs differ")
    lines += ["", f"inputs per format and fold: {args.cases} (kinds: normal, huge range, cancellation, top bin, "
              "overflow, inf/nan, subnormal, random bits, zeros, single); "
              f"{time.perf_counter() - start:.1f} s", "differences: " + (str(len(failures)) if failures else "none")]
    lines += [f"  {f}" for f in failures]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        from fpspec.io import write_atomic

        write_atomic(args.out, text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
