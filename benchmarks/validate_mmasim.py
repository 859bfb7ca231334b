#!/usr/bin/env python3
"""fpspec's matrix-unit model vs MMA-Sim, bit for bit, for every MMA-Sim instruction family.

    MMASIM_PATH=/path/to/MMA-Sim python benchmarks/validate_mmasim.py [--blocks N] [--seed S]
        [--only SUBSTRING] [--jobs J] [--split S] [--all-shapes] [--table-out FILE]

MMA-Sim (microsoft/MMA-Sim, arXiv 2511.10909) is a bit-accurate per-instruction
reference; its checkout lives outside this project (MMASIM_PATH) and none of
its code is copied here.  For each family (architecture, instruction, input
formats, output format, k) the script draws N blocks (one output element each:
a row of A, a column of B, c, and the scale factors of block-scaled kinds):
uniform bit patterns, cancellations, spread exponents, subnormals, inf / NaN,
zeros against large operands, scale factors at their extremes; MMA-Sim
evaluates each block through its own instruction class (m = n = 1), fpspec
through fpspec.arith.units.unit_dot on all blocks at once.  It prints one row
per family: cases, mismatches (NaN equals NaN), fpspec's time and MMA-Sim's.
Exit code 1 on any mismatch.  --split S deals each family's blocks to S jobs
(seeds of their own) so that a slow family spreads over the --jobs workers.

--table-out FILE writes a small fixed table of MMA-Sim outputs (a few blocks
per family) for tests/arith/data/ (the command and MMA-Sim commit in its header).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout

import numpy as np  # noqa: E402

# MMA-Sim's dtype names -> fpspec formats
_NV_FORMATS = {"f64": "fp64", "f32": "fp32", "tf32": "tf32", "f16": "fp16", "bf16": "bf16",
               "e4m3": "fp8e4m3", "e5m2": "fp8e5m2", "e2m1": "fp4e2m1"}
_AMD_FORMATS = {"f64": "fp64", "f32": "fp32", "xf32": "tf32", "f16": "fp16", "bf16": "bf16",
                "fp8": "fp8e4m3fnuz", "bf8": "fp8e5m2fnuz"}
_GPU = {"Volta": "v100", "Turing": "t4", "Ampere": "a100", "Ada Lovelace": "ada", "Hopper": "h100",
        "Blackwell": "b200", "RTX Blackwell": "rtx-pro-6000", "CDNA1": "mi100", "CDNA2": "mi250",
        "CDNA3": "mi300x"}


# ---------------------------------------------------------------- the families

class Family:
    """One MMA-Sim instruction family and the fpspec unit that models it."""

    def __init__(self, arch, cls, qualifier, a, b, c, d, k, block=0, scale=None, amd=False):
        self.arch, self.cls, self.qualifier = arch, cls, qualifier
        self.a, self.b, self.c, self.d, self.k = a, b, c, d, k
        self.block, self.scale, self.amd = block, scale, amd

    @property
    def label(self) -> str:
        return f"{self.arch} {self.cls} {self.qualifier}"

    def unit_name(self) -> str:
        gpu = _GPU[self.arch]
        if self.amd:
            if self.a == "fp16" or self.a == "bf16":
                suffix = self.a + ("-1k" if self.qualifier.endswith("_1k") else "")
            else:
                suffix = "xf32" if self.qualifier.endswith("xf32") else (
                    self.a if self.a == self.b else f"{self.a}x{self.b}")
            return f"{gpu}-{suffix}"
        pair = self.a if self.a == self.b else f"{self.a}x{self.b}"
        if self.cls.endswith("block_scale"):
            if self.k == 64:
                return f"{gpu}-fp4e2m1-mxf4nvf4-{self.scale}-{self.block}"
            return f"{gpu}-{pair}-mxf8f6f4"
        if self.a == "fp64":
            return f"{gpu}-fp64"
        return f"{gpu}-{pair}" + ("-to-fp16" if self.d == "fp16" else "")


def families():
    from mmasim.isa import amd as amd_isa
    from mmasim.isa.nv_ptx import nv_mma

    _torch_dtypes()
    out, seen = [], set()

    def add(f: Family):
        key = (f.arch, f.cls, f.a, f.b, f.c, f.d, f.k, f.block, f.scale, f.qualifier.endswith("_1k"),
               f.qualifier.endswith("xf32"))
        if key not in seen:
            seen.add(key)
            out.append(f)

    for arch, quals in nv_mma.arch_mma_qualifiers.items():
        for q in quals:
            shape, d, a, b, c = q.split(".")
            k = int(shape.split("k")[1])
            add(Family(arch, "mma", q, _NV_FORMATS[a], _NV_FORMATS[b], _NV_FORMATS[c], _NV_FORMATS[d], k))
    for arch, quals in nv_mma.arch_mma_block_scale_qualifiers.items():
        for q in quals:
            shape, block, d, a, b, c, s = q.split(".")
            k = int(shape.split("k")[1])
            add(Family(arch, "mma_block_scale", q, _NV_FORMATS[a], _NV_FORMATS[b], "fp32", "fp32", k,
                       int(block[-2:]), s))
    for a, b, d, k in [("tf32", "tf32", "f32", 8), ("f16", "f16", "f32", 16), ("f16", "f16", "f16", 16),
                       ("bf16", "bf16", "f32", 16)] + [(x, y, d, 32) for x in ("e4m3", "e5m2")
                                                       for y in ("e4m3", "e5m2") for d in ("f32", "f16")]:
        q = f"m64n8k{k}.{d}.{a}.{b}"
        add(Family("Hopper", "wgmma", q, _NV_FORMATS[a], _NV_FORMATS[b], _NV_FORMATS[d], _NV_FORMATS[d], k))
        if a in ("e4m3", "e5m2") or k != 32:
            add(Family("Blackwell", "tcgen05mma", q.replace("m64", "m128"), _NV_FORMATS[a], _NV_FORMATS[b],
                       _NV_FORMATS[d], _NV_FORMATS[d], k))
    for a, b in [(x, y) for x in ("e4m3", "e5m2") for y in ("e4m3", "e5m2")]:
        q = f"m128n8k32.block32.f32.{a}.{b}.ue8m0"
        add(Family("Blackwell", "tcgen05mma_block_scale", q, _NV_FORMATS[a], _NV_FORMATS[b], "fp32", "fp32",
                   32, 32, "ue8m0"))
    for block, s in ((32, "ue8m0"), (16, "ue8m0"), (16, "ue4m3")):
        q = f"m128n8k64.block{block}.f32.e2m1.e2m1.{s}"
        add(Family("Blackwell", "tcgen05mma_block_scale", q, "fp4e2m1", "fp4e2m1", "fp32", "fp32", 64, block, s))
    for arch, quals in amd_isa.arch_mfma_qualifiers.items():
        for q in quals:
            obj = amd_isa.mfma(arch, q)
            names = {v: k for k, v in _AMD_TORCH.items()}
            a, b, c = names[obj.a_type], names[obj.b_type], names[obj.c_type]
            if q.endswith("xf32"):
                a = b = "tf32"
            add(Family(arch, "mfma", q, a, b, c, c, obj.k, amd=True))
    return out


_AMD_TORCH = {}


def _torch_dtypes():
    import torch

    _AMD_TORCH.update({"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16,
                       "bf16": torch.bfloat16, "fp8e4m3fnuz": torch.float8_e4m3fnuz,
                       "fp8e5m2fnuz": torch.float8_e5m2fnuz})
    return {**_AMD_TORCH, "tf32": torch.float32, "fp8e4m3": torch.float8_e4m3fn,
            "fp8e5m2": torch.float8_e5m2, "ue8m0": torch.float8_e8m0fnu, "ue4m3": torch.float8_e4m3fn}


# ---------------------------------------------------------------- the blocks

_FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
_WIDTH = {"fp64": 64, "fp32": 32, "tf32": 32, "fp16": 16, "bf16": 16, "fp8e4m3": 8, "fp8e5m2": 8,
          "fp8e4m3fnuz": 8, "fp8e5m2fnuz": 8, "ue8m0": 8, "ue4m3": 8}


def from_bits(fmt: str, bits) -> np.ndarray:
    """float64 values of bit patterns of `fmt` (through torch for the 8-bit formats)."""
    import torch

    bits = np.asarray(bits)
    if fmt == "fp4e2m1":
        return _FP4[bits & 15]
    if fmt == "fp64":
        return bits.astype(np.uint64).view(np.float64)
    if fmt in ("fp32", "tf32"):
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if fmt == "fp16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    t = torch.from_numpy(bits.astype(np.uint8)).view(_torch_dtypes()[fmt])
    return t.double().numpy()


def _random_bits(rng, fmt, shape, finite=True):
    width = _WIDTH.get(fmt, 4)
    hi = 1 << min(width, 63)
    bits = rng.integers(0, hi, size=shape, dtype=np.uint64)
    if width == 64:
        bits = bits | (rng.integers(0, 2, size=shape, dtype=np.uint64) << np.uint64(63))
    v = from_bits(fmt, bits)
    if finite:
        bad = ~np.isfinite(v)
        v[bad] = 1.0
    return v


def _values(rng, fmt, shape, lo, hi):
    """Values of fmt with exponents in [lo, hi] (rounded into the format), random signs."""
    from fpspec.formats import get_format

    f = get_format(fmt)
    e = rng.integers(lo, hi + 1, size=shape)
    m = 1.0 + rng.integers(0, 1 << max(f.precision - 1, 0), size=shape) / (1 << max(f.precision - 1, 0))
    v = np.ldexp(m, e) * rng.choice([-1.0, 1.0], size=shape)
    if fmt == "fp4e2m1":
        return _FP4[np.argmin(np.abs(_FP4[None, :] - v.reshape(-1)[:, None]), axis=1)].reshape(shape)
    if fmt in ("fp64",):
        return v
    return _round_into(fmt, v)


def _round_into(fmt, v):
    from fpspec.formats import get_format

    f = get_format(fmt)
    r = f.round(v)
    return np.where(np.isfinite(r), r, np.sign(v) * f.largest)


def blocks(fam: Family, n: int, seed: int):
    """n blocks (a, b, c, scale_a, scale_b) of this family: random and adversarial."""
    from fpspec.formats import get_format

    rng = np.random.default_rng(seed)
    k = fam.k
    kinds = ["bits", "spread", "cancel", "subnormal", "zeros", "unit"]
    sel = rng.integers(0, len(kinds), size=n)
    fa, fb = get_format(fam.a), get_format(fam.b)
    a = _random_bits(rng, fam.a, (n, k))
    b = _random_bits(rng, fam.b, (n, k))
    c = _random_bits(rng, fam.c, (n,))
    for i, kind in enumerate(kinds):
        rows = np.flatnonzero(sel == i)
        if rows.size == 0 or kind == "bits":
            continue
        m = rows.size
        if kind == "spread":
            a[rows] = _values(rng, fam.a, (m, k), fa.emin - fa.precision + 1, fa.emax)
            b[rows] = _values(rng, fam.b, (m, k), fb.emin - fb.precision + 1, fb.emax)
        elif kind == "cancel":   # pairs of equal and opposite products, c near minus their sum
            a[rows] = _values(rng, fam.a, (m, k), -2, 2)
            b[rows] = _values(rng, fam.b, (m, k), -2, 2)
            half = k // 2
            a[rows, half:2 * half] = -a[rows, :half]
            b[rows, half:2 * half] = b[rows, :half]
            j = rng.integers(0, k, size=m)
            a[rows, j] = _values(rng, fam.a, (m,), -8, 0)
        elif kind == "subnormal":
            a[rows] = _values(rng, fam.a, (m, k), fa.emin - fa.precision + 1, fa.emin + 1)
            b[rows] = _values(rng, fam.b, (m, k), fb.emin - fb.precision + 1, fb.emin + 4)
            c[rows] = np.where(rng.random(m) < 0.5, 0.0, c[rows] * 2.0 ** -100)
        elif kind == "zeros":    # zeros against large operands: which exponent a zero aligns with
            a[rows] = _values(rng, fam.a, (m, k), fa.emin, fa.emin + 3)
            b[rows] = _values(rng, fam.b, (m, k), fb.emin, fb.emin + 3)
            z = rng.random((m, k)) < 0.3
            a[rows] = np.where(z, 0.0, a[rows])
            b[rows] = np.where(z, _values(rng, fam.b, (m, k), fb.emax - 2, fb.emax), b[rows])
            c[rows] = np.where(rng.random(m) < 0.7, 0.0, c[rows])
        else:                    # sums of unit-sized values: ties and carries
            a[rows] = _values(rng, fam.a, (m, k), -1, 1)
            b[rows] = _values(rng, fam.b, (m, k), -1, 1)
            c[rows] = _values(rng, fam.c if fam.c != "fp64" else "fp64", (m,), -4, 4)
    c = _round_into(fam.c, c) if fam.c not in ("fp64",) else c
    # inf / nan in a few blocks
    special = rng.random(n) < 0.03
    if special.any() and (get_format(fam.a).has_inf or fam.a in ("fp32", "tf32", "fp16", "bf16", "fp64")):
        idx = np.flatnonzero(special)
        where = rng.integers(0, k, size=idx.size)
        a[idx, where] = rng.choice([np.inf, -np.inf, np.nan], size=idx.size)
    cspecial = rng.random(n) < 0.02
    if not (fam.cls.endswith("block_scale") and fam.k == 64):   # MMA-Sim raises on an infinite c there
        c[cspecial] = rng.choice([np.inf, -np.inf, np.nan], size=int(cspecial.sum()))
    sa = sb = None
    if fam.block:
        nblk = k // fam.block
        if fam.scale == "ue8m0":
            e = rng.integers(-127, 128, size=(n, nblk, 2))
            extreme = rng.random((n, nblk, 2)) < 0.2
            e = np.where(extreme, rng.choice([-127, 127, -126, 126], size=e.shape), e)
            s = np.ldexp(1.0, e)
            s[rng.random((n, nblk, 2)) < 0.01] = np.nan
        else:   # ue4m3: positive e4m3 values, subnormals and the largest included
            s = np.abs(_random_bits(rng, "fp8e4m3", (n, nblk, 2)))
        sa, sb = s[..., 0], s[..., 1]
        if fam.k == 32:
            sa, sb = sa[:, 0], sb[:, 0]
    return a, b, c, sa, sb


# ---------------------------------------------------------------- the two models

def mmasim_one(fam: Family, a, b, c, sa, sb):
    """MMA-Sim's result for one block, through its instruction class with m = n = 1."""
    import torch
    from mmasim.simulator import amd as amd_sim
    from mmasim.simulator import nv_ptx as nv_sim

    dt = _torch_dtypes()
    cls = {"mma": nv_sim.mma, "mma_block_scale": nv_sim.mma_block_scale, "wgmma": nv_sim.wgmma,
           "tcgen05mma": nv_sim.tcgen05mma, "tcgen05mma_block_scale": nv_sim.tcgen05mma_block_scale,
           "mfma": amd_sim.mfma}[fam.cls]
    sim = _SIMS.get(fam.label)
    if sim is None:
        sim = _SIMS[fam.label] = cls(fam.arch, fam.qualifier)
        sim.m = sim.n = 1
    ta = dt.get(fam.a) if fam.a != "fp4e2m1" else None
    if fam.a == "fp4e2m1":
        codes_a = _fp4_codes(a)
        codes_b = _fp4_codes(b)
        A = torch.tensor((codes_a[0::2] | (codes_a[1::2] << 4)).astype(np.uint8)).reshape(1, -1)
        B = torch.tensor((codes_b[0::2] | (codes_b[1::2] << 4)).astype(np.uint8)).reshape(-1, 1)
    else:
        A = torch.tensor(a, dtype=torch.float64).to(ta).reshape(1, -1)
        B = torch.tensor(b, dtype=torch.float64).to(dt[fam.b]).reshape(-1, 1)
    C = torch.tensor([[c]], dtype=torch.float64).to(dt[fam.c])
    if fam.block:
        s_dt = dt[fam.scale]
        SA = torch.tensor(np.atleast_1d(sa), dtype=torch.float64).to(s_dt).reshape(1, -1)
        SB = torch.tensor(np.atleast_1d(sb), dtype=torch.float64).to(s_dt).reshape(-1, 1)
        D = sim(A, B, C, SA, SB)
    else:
        D = sim(A, B, C)
    return float(D[0, 0].double().item())


_SIMS: dict = {}


def _widen_pairwise():
    """MMA-Sim's CDNA1/2 fp16 / bf16 path hands fp16 / bf16 slices to a function that
    asserts fp32: widen them first (exact), leaving its arithmetic as it is."""
    from mmasim.simulator import amd as amd_sim

    original = amd_sim.pairwise_dot
    if getattr(original, "_widened", False):
        return

    def pairwise_dot(a, b, flush_denormal=False):
        return original(a.float(), b.float(), flush_denormal)

    pairwise_dot._widened = True
    amd_sim.pairwise_dot = pairwise_dot


def _fp4_codes(v):
    codes = np.array([int(np.flatnonzero((_FP4 == x) & (np.signbit(_FP4) == np.signbit(x)))[0]) for x in v])
    return codes


def same(x, y, fmt):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    both_nan = np.isnan(x) & np.isnan(y)
    return both_nan | ((x == y) & (np.signbit(x) == np.signbit(y)))


def run_family(args):
    fam, n, seed = args
    from fpspec.arith.units import get_unit, mmasim_conventions, unit_dot

    a, b, c, sa, sb = blocks(fam, n, seed)
    named = get_unit(fam.unit_name())
    unit = mmasim_conventions(named)     # fpspec.arith.units note [two conventions]
    t0 = time.perf_counter()
    got = unit_dot(unit, a, b, c, sa, sb)
    t_fp = time.perf_counter() - t0
    named_got = got if named == unit else unit_dot(named, a, b, c, sa, sb)
    t0 = time.perf_counter()
    try:
        want = np.array([mmasim_one(fam, a[i], b[i], c[i], None if sa is None else sa[i],
                                    None if sb is None else sb[i]) for i in range(n)])
    except Exception as e:   # a family MMA-Sim cannot run: say so in the table
        return fam.label, fam.unit_name(), n, -1, t_fp, 0.0, f"MMA-Sim failed: {type(e).__name__} {e}", None, 0
    t_sim = time.perf_counter() - t0
    ok = same(got, want, fam.d)
    bad = np.flatnonzero(~ok)
    departs = int((~same(named_got, want, fam.d)).sum())
    first = None
    if bad.size:
        i = bad[0]
        first = (i, a[i].tolist(), b[i].tolist(), float(c[i]), None if sa is None else np.atleast_1d(sa[i]).tolist(),
                 None if sb is None else np.atleast_1d(sb[i]).tolist(), float(got[i]), float(want[i]))
    return fam.label, fam.unit_name(), n, int(bad.size), t_fp, t_sim, first, (a, b, c, sa, sb, want), departs


def mmasim_commit(path: str) -> str:
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown"


def main(argv=None):
    np.seterr(all="ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--all-shapes", action="store_true",
                    help="every shape of an instruction, not only the largest k")
    ap.add_argument("--split", type=int, default=1, help="jobs per family (its blocks dealt among them)")
    ap.add_argument("--table-out", default="")
    ap.add_argument("--table-rows", type=int, default=6)
    args = ap.parse_args(argv)
    path = os.environ.get("MMASIM_PATH")
    if not path or not os.path.isdir(os.path.join(path, "mmasim")):
        print("MMASIM_PATH must point at a checkout of microsoft/MMA-Sim", file=sys.stderr)
        return 2
    sys.path.insert(0, path)
    fams = [f for f in families() if args.only in f.label]
    if not args.all_shapes:   # one shape per (architecture, instruction, formats): the largest k
        best = {}
        for f in fams:
            key = (f.arch, f.cls, f.a, f.b, f.c, f.d, f.block, f.scale, f.unit_name())
            if key not in best or f.k > best[key].k:
                best[key] = f
        fams = [f for f in fams if best[(f.arch, f.cls, f.a, f.b, f.c, f.d, f.block, f.scale, f.unit_name())] is f]
    # MMA-Sim stores unpacked e2m1 in uint8 and cannot evaluate those instructions
    skipped = [f for f in fams if "fp4e2m1" in (f.a, f.b) and f.k != 64]
    fams = [f for f in fams if f not in skipped]
    print(f"# MMA-Sim {mmasim_commit(path)} ({path}); {args.blocks} blocks per family, seed {args.seed}")
    print("# mismatch: fpspec's unit under MMA-Sim's conventions vs MMA-Sim; named: the named set as fpspec ships\n"
          "# it (FTTN's conventions where measured: fpspec.arith.units note [two conventions]) vs MMA-Sim")
    print(f"{'family':58} {'fpspec unit':34} {'cases':>6} {'mismatch':>8} {'named':>7} {'fpspec s':>9} "
          f"{'MMA-Sim s':>10} {'ratio':>7}")
    total_bad = 0
    table = []
    split = max(1, args.split)
    jobs = [(f, args.blocks // split + (j < args.blocks % split), args.seed + i + 100003 * j)
            for i, f in enumerate(fams) for j in range(split)]
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=_init_worker, initargs=(path,)) as ex:
        for label, unit, n, bad, t_fp, t_sim, first, data, departs in _merged(ex.map(run_family, jobs), split):
            if bad < 0:
                print(f"{label:58} {unit:34} {first}", flush=True)
                continue
            total_bad += bad
            print(f"{label:58} {unit:34} {n:6d} {bad:8d} {departs:7d} {t_fp:9.3f} {t_sim:10.2f} "
                  f"{t_sim / max(t_fp, 1e-9):7.0f}", flush=True)
            if first:
                print(f"    first mismatch: {first}", flush=True)
            table.append((label, unit, data))
    print(f"# total mismatches: {total_bad} in {len(fams)} families")
    if skipped:
        print(f"# not run ({len(skipped)}: MMA-Sim cannot evaluate unpacked e2m1 operands): "
              + ", ".join(f.label for f in skipped))
    if args.table_out:
        write_table(args.table_out, table, args.table_rows, path, argv)
    return 1 if total_bad else 0


def _merged(results, split: int):
    """One row per family from its `split` jobs (in order): counts and times added, the first
    mismatch and the table blocks of its first job."""
    group = []
    for r in results:
        group.append(r)
        if len(group) < split:
            continue
        label, unit = group[0][:2]
        if any(g[3] < 0 for g in group):
            yield next(g for g in group if g[3] < 0)
        else:
            yield (label, unit, sum(g[2] for g in group), sum(g[3] for g in group), sum(g[4] for g in group),
                   sum(g[5] for g in group), next((g[6] for g in group if g[6]), None), group[0][7],
                   sum(g[8] for g in group))
        group = []


def _init_worker(path):
    sys.path.insert(0, path)
    _widen_pairwise()
    np.seterr(all="ignore")
    import warnings

    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)


def write_table(out: str, table, rows: int, path: str, argv):
    """A few blocks per family with MMA-Sim's results, as text (bit patterns of float64)."""
    from fpspec.io import write_atomic

    lines = [f"# MMA-Sim outputs, microsoft/MMA-Sim commit {mmasim_commit(path)}",
             "# fpspec's unit under MMA-Sim's conventions (fpspec.arith.units.mmasim_conventions) must give d",
             "# made by: MMASIM_PATH=... python benchmarks/validate_mmasim.py "
             + " ".join(argv if argv is not None else sys.argv[1:]),
             "# unit | k | a (hex float64 bits) | b | c | scale_a | scale_b | MMA-Sim d"]
    h = lambda v: " ".join(f"{np.float64(x).view(np.uint64):016x}" for x in np.atleast_1d(v))  # noqa: E731
    for label, unit, (a, b, c, sa, sb, want) in table:
        for i in range(min(rows, len(c))):
            lines.append(" | ".join([unit, str(a.shape[1]), h(a[i]), h(b[i]), h(c[i]),
                                     "-" if sa is None else h(sa[i]), "-" if sb is None else h(sb[i]),
                                     h(want[i])]))
    text = "\n".join(lines) + "\n"
    if out.endswith(".gz"):
        import gzip

        write_atomic(out, gzip.compress(text.encode(), mtime=0))
    else:
        write_atomic(out, text)
    print(f"# wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
