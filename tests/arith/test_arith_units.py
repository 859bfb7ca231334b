"""Matrix units (fpspec.arith.units): every named set, MMA-Sim's outputs, specs that carry them."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from fpspec.arith import Arithmetic
from fpspec.arith.params import PARAMS, describe, get_params
from fpspec.arith.units import ARCHS, UNITS, get_unit, mmasim_conventions, unit_dot

DATA = Path(__file__).parent / "data"


def _same(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return (np.isnan(x) & np.isnan(y)) | ((x == y) & (np.signbit(x) == np.signbit(y)))


def _hex(field: str) -> np.ndarray:
    return np.array([int(v, 16) for v in field.split()], np.uint64).view(np.float64)


def _mmasim_rows():
    lines = gzip.decompress((DATA / "mmasim_outputs.txt.gz").read_bytes()).decode().splitlines()
    rows: dict[tuple, list] = {}
    for line in lines:
        if line.startswith("#"):
            continue
        unit, k, a, b, c, sa, sb, d = (f.strip() for f in line.split("|"))
        rows.setdefault((unit, int(k)), []).append(
            (_hex(a), _hex(b), _hex(c)[0], None if sa == "-" else _hex(sa), None if sb == "-" else _hex(sb),
             _hex(d)[0]))
    return rows


MMASIM = _mmasim_rows()


@pytest.mark.parametrize("unit,k", sorted(MMASIM), ids=lambda v: str(v))
def test_mmasim_outputs_are_reproduced(unit, k):
    """benchmarks/validate_mmasim.py's table: MMA-Sim's own outputs, every family, bit for bit."""
    rows = MMASIM[(unit, k)]
    a = np.stack([r[0] for r in rows])
    b = np.stack([r[1] for r in rows])
    c = np.array([r[2] for r in rows])
    sa = None if rows[0][3] is None else np.stack([r[3] for r in rows]).squeeze(-1) if rows[0][3].size == 1 \
        else np.stack([r[3] for r in rows])
    sb = None if rows[0][4] is None else np.stack([r[4] for r in rows]).squeeze(-1) if rows[0][4].size == 1 \
        else np.stack([r[4] for r in rows])
    want = np.array([r[5] for r in rows])
    got = unit_dot(mmasim_conventions(get_unit(unit)), a, b, c, sa, sb)
    bad = np.flatnonzero(~_same(got, want))
    assert bad.size == 0, f"{unit} k={k}: rows {bad.tolist()} differ: {got[bad]} vs MMA-Sim {want[bad]}"


def test_the_table_covers_every_architecture():
    archs = {name.split("-")[0] for name, _ in MMASIM} | {"rtx" for name, _ in MMASIM if name.startswith("rtx")}
    assert {"v100", "t4", "a100", "ada", "h100", "b200", "rtx", "mi100", "mi250", "mi300x"} <= archs


GPU_FORMATS = {
    "v100": ["fp16", "fp16-to-fp16"],
    "t4": ["fp16", "fp16-to-fp16"],
    "a100": ["fp64", "tf32", "fp16", "bf16"], "a2": ["tf32", "bf16"], "a30": ["tf32", "bf16"],
    "ada": ["fp8e4m3", "fp8e5m2", "fp8e4m3-to-fp16", "tf32"], "l40s": ["fp8e4m3", "bf16"],
    "h100": ["fp64", "tf32", "fp16", "bf16", "fp8e4m3", "fp8e5m2", "fp8e4m3xfp8e5m2"],
    "h200": ["tf32", "bf16", "fp8e4m3"], "gh200": ["tf32", "bf16", "fp8e5m2"],
    "b200": ["tf32", "fp16", "fp8e4m3", "fp6e2m3", "fp6e3m2", "fp4e2m1", "fp8e4m3-mxf8f6f4",
             "fp4e2m1-mxf4nvf4-ue4m3-16"],
    "rtx-pro-6000": ["fp8e4m3", "fp4e2m1", "fp4e2m1-mxf4nvf4-ue8m0-32"],
    "mi100": ["fp32", "fp16", "bf16"], "mi210": ["fp64", "bf16-1k"], "mi250": ["fp64", "fp16"],
    "mi300a": ["xf32", "fp8e4m3fnuz"], "mi300x": ["fp64", "fp32", "xf32", "fp16", "bf16", "fp8e4m3fnuz",
                                                   "fp8e5m2fnuz"],
}


@pytest.mark.parametrize("gpu", sorted(GPU_FORMATS))
def test_every_gpu_has_its_named_units(gpu):
    for suffix in GPU_FORMATS[gpu]:
        assert f"{gpu}-{suffix}" in UNITS
    assert sum(gpu in gpus for gpus in ARCHS.values()) == 1


def test_named_fused_sets_are_the_published_ones():
    """The sets measured data pins down keep their parameters (data/tensor-core-vectors)."""
    h = PARAMS["h100-fp16"]
    assert (h.w, h.extra_bits, h.aligned, h.result, h.c_aligned, h.exponent_floor) == (16, 2, "truncate", "rz",
                                                                                         True, -133)
    assert (PARAMS["a100-tf32"].w, PARAMS["a100-tf32"].extra_bits, PARAMS["a100-tf32"].exponent_floor) == (4, 1, -132)
    assert (PARAMS["h100-fp8e4m3"].w, PARAMS["h100-fp8e4m3"].result_precision) == (32, 14)
    assert PARAMS["ada-fp8e4m3"].w == 16 and PARAMS["ada-fp8e4m3"].extra_bits == -10   # k = 32 split in halves
    assert PARAMS["b200-fp8e4m3"].extra_bits == 2 and PARAMS["b200-fp8e4m3"].w == 32
    assert get_params("h100-fp16", "fp16").result == "rne"
    assert PARAMS["mi300x-fp8e4m3fnuz"].combine == "amd" and PARAMS["mi300x-fp8e4m3fnuz"].interleave == 2
    assert describe(PARAMS["h200-bf16"]) == "h100-bf16 (also h200-bf16, gh200-bf16, b200-bf16)"


def test_unknown_names_say_what_is_expected():
    with pytest.raises(ValueError, match="GPU-INPUT"):
        get_unit("h100-fp7")
    with pytest.raises(ValueError, match="GPU-INPUT"):
        get_params("x100-fp16")


def test_the_two_conventions_differ_only_below_the_alignment():
    """note [two conventions]: a zero against a large operand moves MMA-Sim's alignment, not FTTN's."""
    unit = get_unit("h100-bf16")
    a = np.array([[0.0, 2.0 ** -100] + [0.0] * 14])
    b = np.array([[2.0 ** 120, 1.0 + 2.0 ** -7] + [0.0] * 14])
    fttn = unit_dot(unit, a, b, np.zeros(1))
    mmasim = unit_dot(mmasim_conventions(unit), a, b, np.zeros(1))
    assert fttn[0] == 2.0 ** -100 * (1 + 2.0 ** -7)      # exact: nothing larger takes part
    assert mmasim[0] == 0.0                               # aligned to 2^(-126 + 120): cut to zero


def test_specs_carry_the_extended_parameters():
    for name in ("mi300x-fp8e4m3fnuz", "t4-fp16", "h100-fp16"):
        p = PARAMS[name]
        ar = Arithmetic(p.input, "exact", "fp32", output="fp32", fused=p)
        assert Arithmetic.from_entries(ar.to_entries()) == ar
    keys = [e.key for e in Arithmetic("fp16", "exact", "fp32", output="fp32",
                                      fused=PARAMS["h100-fp16"]).to_entries()[-1].value.entries]
    assert "zero_exponent" not in keys and "combine" not in keys     # defaults are not written


def test_numba_constants_carry_the_conventions_and_the_combine():
    """The numba replica's fused core reads these (tests/compile/test_fused_numba_nodes.py runs it)."""
    from fpspec.compile.backends.numba import fused_constants
    from fpspec.compile.ir import Const, FusedChain, Kernel

    def constants(name, fmt):
        p = PARAMS[name]
        kernel = Kernel("gemm", Arithmetic(fmt, "exact", p.output, output=p.output, fused=p), FusedChain(Const(p.w)))
        lines = fused_constants(kernel)
        first = next(k for k, line in enumerate(lines) if line.startswith("_FP_EMIN_IN_B"))
        return lines[first:first + 4]

    assert constants("mi300x-fp16", "fp16") == [
        "_FP_EMIN_IN_B = -14", "_FP_ZEXP_ON, _FP_ZEXP = True, -126  # zeros' exponent", "_FP_C_EMIN = -126",
        "_FP_AMD, _FP_INTERLEAVE = True, 1  # amd combine"]
    assert constants("t4-fp16-to-fp16", "fp16")[1:3] == [
        "_FP_ZEXP_ON, _FP_ZEXP = True, -126  # zeros' exponent", "_FP_C_EMIN = -14"]
    assert constants("h100-fp8e4m3xfp8e5m2", "fp8e4m3") == [
        "_FP_EMIN_IN_B = -14", "_FP_ZEXP_ON, _FP_ZEXP = False, 0  # zeros' exponent", "_FP_C_EMIN = -126",
        "_FP_AMD, _FP_INTERLEAVE = False, 1  # aligned combine"]


H200 = np.load(DATA / "h200_wgmma_blocks.npz")


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32", "fp8e4m3", "fp8e5m2"])
def test_h200_wgmma_outputs(fmt):
    """Recorded on an H200 (examples/gpu/mma_blocks.py: one tl.dot = wgmma per element, tf32 two chained):
    the named Hopper units give every recorded output; MMA-Sim's conventions miss the rows drawn to tell
    the two apart (fpspec.arith.units note [two conventions])."""
    a, b, c, d = (H200[f"{fmt}_{k}"] for k in "abcd")
    unit = get_unit(f"h200-{fmt}")
    assert _same(unit_dot(unit, a, b, c), d).all()
    mmasim_misses = (~_same(unit_dot(mmasim_conventions(unit), a, b, c), d)).sum()
    assert mmasim_misses == (300 if fmt in ("bf16", "tf32") else 0)
