"""The emulated fused node (fpspec.compile.triton_kernels) against measured GPU outputs
and against the exact model fpspec.arith.fused, bit for bit."""
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl


from fpspec.arith import fused_node, get_params
from fpspec.compile.triton_kernels import UNSET, fp_fused_rows, fp_node_e_max, fp_store_native, fp_store_slot

VECTORS = Path(os.environ["FPSPEC_TC_VECTORS"])   # located by tests/conftest.py
BITS = {"fp16": (5, 10), "bf16": (8, 7), "fp32": (8, 23)}


def to_bits(values, fmt):
    """Bit patterns (int32) of float32-held values of `fmt` (exact)."""
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.asarray(values, np.float32)
    if fmt == "fp16":
        return v.astype(np.float16).view(np.uint16).astype(np.int32)
    if fmt == "bf16":
        return (v.view(np.uint32) >> 16).astype(np.int32)
    return v.view(np.int32)


def from_bits(bits, fmt):
    b = np.asarray(bits, np.int64)
    if fmt == "fp16":
        return b.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "bf16":
        return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def run_rows(a, b, c, params):
    """The Triton kernel on rows a[r, :], b[r, :], c[r]; returns output-format bits."""
    rows, k = a.shape
    width = triton.next_power_of_2(k)
    pad = np.zeros((rows, width - k))
    a_bits = to_bits(np.hstack([a, pad]), params.input)
    b_bits = to_bits(np.hstack([b, pad]), params.input)
    c_bits = to_bits(c, params.output)
    out = torch.zeros(rows, dtype=torch.int32)
    block = 256
    fp_fused_rows[(triton.cdiv(rows, block),)](
        torch.from_numpy(a_bits.copy()), torch.from_numpy(b_bits.copy()), torch.from_numpy(c_bits.copy()),
        out, rows, width, block, *BITS[params.input], *BITS[params.output],
        23 + params.extra_bits, -100000 if params.exponent_floor is None else params.exponent_floor,
        params.result == "rz", UNSET if params.zero_exponent is None else params.zero_exponent,
        UNSET if params.c_emin is None else params.c_emin, params.combine == "amd")
    return out.numpy()


def same(bits, ref_bits, fmt):
    """Equal bits, NaN equal to NaN."""
    got, want = from_bits(bits, fmt), from_bits(ref_bits, fmt)
    return (bits == ref_bits) | (np.isnan(got) & np.isnan(want))


def load_vectors(fmt, out):
    def hexrows(name):
        rows = [line.split() for line in (VECTORS / name).read_text().splitlines() if line.strip()]
        return np.array([[int(t, 16) for t in r] for r in rows], np.uint32).view(np.float32)

    def binrows(name):
        return np.array([int(line, 2) for line in (VECTORS / name).read_text().split()], np.uint32).view(np.float32)

    a = hexrows(f"H100__{fmt}__a_H100_{fmt}.txt")
    b = hexrows(f"H100__{fmt}__b_H100_{fmt}.txt")
    c = binrows(f"H100__{fmt}__c_H100_fp32.txt")
    d = binrows(f"H100__{fmt}__d_H100_{out}.txt")
    return a, b, c, d


@pytest.mark.skipif(not VECTORS.is_dir(), reason="tensor-core vectors not present")
@pytest.mark.parametrize("fmt,out,name", [("fp16", "fp32", "h100-fp16"), ("bf16", "fp32", "h100-bf16"),
                                          ("fp16", "fp16", "h100-fp16-to-fp16")])
def test_every_h100_vector_row(fmt, out, name):
    """All 5000 measured rows of each file (about a second each on the interpreter)."""
    a, b, c, d = load_vectors(fmt, out)
    params = get_params(name)
    if out == "fp16":
        c = c.astype(np.float16).astype(np.float32)   # the GPU read c as fp16 (README)
    got = run_rows(a, b, c, params)
    want = to_bits(d, out)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} rows differ, first {bad[0]}: got {got[bad[0]]:#x}, want {want[bad[0]]:#x}"


def random_values(rng, fmt, shape):
    """Values of `fmt` from uniformly random bit patterns: specials and subnormals included."""
    if fmt == "fp16":
        return rng.integers(0, 1 << 16, shape).astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "bf16":
        with np.errstate(invalid="ignore"):
            return (rng.integers(0, 1 << 16, shape).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)


def narrow_values(rng, fmt, shape, span):
    """Finite values with exponents within `span` of each other: alignment and cancellation matter."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-span, span + 1, shape))
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float64)
    if fmt == "bf16":
        return (x.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
    return x.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("name", ["h100-fp16", "h100-bf16", "a100-fp16", "a100-bf16", "h100-fp16-to-fp16"])
@pytest.mark.parametrize("kind", ["bits", "narrow", "tiny"])
def test_matches_fused_model(name, kind):
    # "tiny" with an fp16 output: sums that round to zero from below come out +0.0, as in the model
    params = get_params(name)
    rng = np.random.default_rng([7, len(name), len(kind)])
    rows, k = 2000, params.w
    if kind == "bits":
        a, b = random_values(rng, params.input, (rows, k)), random_values(rng, params.input, (rows, k))
        c = random_values(rng, params.output, rows)
    elif kind == "narrow":
        a, b = narrow_values(rng, params.input, (rows, k), 6), narrow_values(rng, params.input, (rows, k), 6)
        c = narrow_values(rng, params.output, rows, 12)
        c[::3] = -np.sum(a[::3] * b[::3], axis=1)   # near-total cancellation
        c = c.astype(np.float32).astype(np.float64)
        if params.output == "fp16":
            c = c.astype(np.float16).astype(np.float64)
    else:   # around the exponent floor and the subnormal range
        scale = 2.0 ** -70 if params.input == "bf16" else 2.0 ** -10
        a = narrow_values(rng, params.input, (rows, k), 4) * scale
        b = narrow_values(rng, params.input, (rows, k), 4) * scale
        a = from_bits(to_bits(a.astype(np.float32), params.input), params.input)
        b = from_bits(to_bits(b.astype(np.float32), params.input), params.input)
        c = from_bits(to_bits((rng.standard_normal(rows) * 2.0 ** -130).astype(np.float32), "fp32"), "fp32")
        if params.output == "fp16":
            c = c.astype(np.float16).astype(np.float64)
    with np.errstate(all="ignore"):
        want = to_bits(fused_node(a, b, c, params).astype(np.float32), params.output)
    got = run_rows(a, b, c, params)
    ok = same(got, want, params.output)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (f"{bad.size} rows differ; first: a={a[bad[0]]}, b={b[bad[0]]}, c={c[bad[0]]}: "
                           f"got {got[bad[0]]:#x}, want {want[bad[0]]:#x}")


def test_chain_shorter_than_width_pads_with_zeros():
    """A node of fewer products than w (a chain's tail) is padded: zeros never set the alignment."""
    params = get_params("h100-fp16")
    rng = np.random.default_rng(3)
    a = narrow_values(rng, "fp16", (500, 5), 8)
    b = narrow_values(rng, "fp16", (500, 5), 8)
    c = narrow_values(rng, "fp32", 500, 8)
    want = to_bits(fused_node(a, b, c, params).astype(np.float32), "fp32")
    assert np.array_equal(run_rows(a, b, c, params), want)


@triton.jit
def _store_both(x_ptr, emu_ptr, hw_ptr, R, BLOCK: tl.constexpr, INIT: tl.constexpr,
                OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    live = offs < R
    acc = tl.load(x_ptr + offs, mask=live, other=0.0)
    fp_store_slot(emu_ptr, offs, live, acc, True, INIT, OUT_EXP, OUT_MAN)
    fp_store_native(hw_ptr, offs, live, acc, True, INIT, OUT_EXP, OUT_MAN)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
def test_native_store_equals_the_integer_rounding(fmt):
    """The native path's epilogue (the GPU's conversion) gives fp_narrow's bits: ties, overflow,
    subnormals, signed zeros, infs and NaNs of both signs."""
    if fmt == "bf16" and not torch.cuda.is_available():
        pytest.skip("the interpreter has no bfloat16 conversion of its own")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    e, mbits = BITS[fmt]
    rng = np.random.default_rng(3)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 65504.0, 65520.0, 65519.99, 1e-8, -3e-8,
                        2.0 ** -25, 2.0 ** -24 * 1.5, 3.4e38, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11], np.float32)
    x = np.concatenate([special, (rng.standard_normal(240) * np.exp2(rng.integers(-30, 30, 240))).astype(np.float32)])
    xt = torch.from_numpy(x).to(dev)
    it = torch.int32 if fmt == "fp32" else torch.int16
    emu, hw = torch.zeros(x.size, dtype=it, device=dev), torch.ones(x.size, dtype=it, device=dev)
    for init in (False, True):
        _store_both[(1,)](xt, emu, hw, x.size, BLOCK=256, INIT=init, OUT_EXP=e, OUT_MAN=mbits)
        assert torch.equal(emu, hw), fmt


@triton.jit
def _e_max_forms(ea_ptr, eb_ptr, out_ptr, W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 IN_EXP: tl.constexpr, ARITH: tl.constexpr):
    ea = tl.load(ea_ptr + tl.arange(0, W)[:, None] * BM + tl.arange(0, BM)[None, :])
    eb = tl.load(eb_ptr + tl.arange(0, W)[:, None] * BN + tl.arange(0, BN)[None, :])
    e = fp_node_e_max(ea, eb, IN_EXP, ARITH)
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], e)


@pytest.mark.parametrize("arith", [4, 5])
@pytest.mark.parametrize("kind", ["random", "apart", "zeros"])
def test_node_exponent_max_forms(arith, kind):
    """fp_node_e_max's fp32 forms (ARITH 4: the largest exact 2^ea * 2^eb; 5: one fma a product,
    Note [exponent sum], with its integer fallback) give the integer max_k (ea + eb) for fp16
    exponents, -1000 for zeros: wherever some product is nonzero (else below every exponent floor)."""
    rng = np.random.default_rng(arith * 10 + len(kind))
    W, BM, BN = 16, 16, 16
    ea = rng.integers(-14, 16, (W, BM))
    eb = rng.integers(-14, 16, (W, BN))
    if kind == "apart":   # the row's and the column's largest exponents at different k: r down to -58
        ea[:] = -14
        ea[rng.integers(0, W, BM), np.arange(BM)] = 15
        eb[:] = 15
        eb[rng.integers(0, W, BN), np.arange(BN)] = -14
        ea[:, :4] = rng.integers(-14, 16, (W, 4))   # and some rows mixed
    elif kind == "zeros":   # zero products: a zero row, a zero column, disjoint zeros
        ea[rng.random((W, BM)) < 0.5] = -1000
        eb[rng.random((W, BN)) < 0.5] = -1000
        ea[:, 0] = -1000
        eb[:, 1] = -1000
        ea[::2, 2] = -1000
        eb[1::2, 3] = -1000
    out = torch.zeros((BM, BN), dtype=torch.int32)
    _e_max_forms[(1,)](torch.from_numpy(ea.astype(np.int32)), torch.from_numpy(eb.astype(np.int32)), out,
                       W, BM, BN, 5, arith)
    nonzero = (ea[:, :, None] > -1000) & (eb[:, None, :] > -1000)
    want = np.where(nonzero, ea[:, :, None] + eb[:, None, :], -3000).max(axis=0)
    got = out.numpy()
    live = nonzero.any(axis=0)
    np.testing.assert_array_equal(got[live], want[live])
    assert (got[~live] < -900).all()   # below every exponent floor, like the integer max
    if kind == "apart":   # the fallback did run: some products only 2^-58 of the bound
        assert (want[4:, 4:] - ea.max(axis=0)[4:, None] - eb.max(axis=0)[None, 4:] <= -26).any()


@pytest.mark.parametrize("fmt,arith", [("fp16", 1), ("bf16", 2)])
def test_tile_specials_from_row_and_column_flags(load_replica, fmt, arith):
    """emulated_specials="tile": with no inf or nan the fp16 kernel is the finite one
    (SPECIALS=3, Note [finite fp16 node]); then the host flags A's rows and B's columns with
    an inf or nan and only the tiles that meet one take the inf/nan pass (SPECIALS=2, Note
    [tile specials]; 16 x 16 tiles, the interpreter's: of the 2 x 2 tiles one has none).
    fp32 output, so that every bit of a node's result shows; zero rows, subnormals, and
    exponents spread over 2^-10..2^10."""
    from test_replica import CHAIN16, bits_equal, reference_matmul, values

    from fpspec.arith import Arithmetic
    from fpspec.compile.ir import Kernel

    ar = Arithmetic(input=fmt, product="exact", accumulator="fp32", init="none", output="fp32",
                    fused=get_params(f"h100-{fmt}"))
    kernel = Kernel("gemm", ar, CHAIN16)
    rep = load_replica(kernel)
    rep.REPLICA.emulated_kernel, rep.REPLICA.emulated_arith = "tile", arith
    rep.REPLICA.emulated_specials = "tile"
    rng = np.random.default_rng(5)
    A, B = values(rng, fmt, (20, 40), 10), values(rng, fmt, (40, 18), 10)
    A[2, :] = 0.0
    A[3, :] = A[3, :] * 2.0 ** -20   # fp16 subnormals
    B[:, 4] = -B[:, 4] * 0
    assert bits_equal(rep.gemm(A, B), reference_matmul(kernel, A, B))
    A[1, 7], A[6, 30], B[3, 5] = float("inf"), float("-inf"), float("nan")
    B[17, 0] = float("inf")   # inf * inf and inf - inf in the same tile
    assert bits_equal(rep.gemm(A, B), reference_matmul(kernel, A, B))


@pytest.mark.parametrize("name", ["h100-fp16-to-fp16", "a100-bf16"])
def test_mmasim_conventions_match_the_model(name):
    """MMA-Sim's conventions where they differ from FTTN's: an fp16 c below fp16's normals
    aligns at 2^-14 (c_emin); bf16 zeros against large operands align at 2^(-126 + e)."""
    from fpspec.arith.units import get_unit, mmasim_conventions

    params = mmasim_conventions(get_unit(name)).node
    rng = np.random.default_rng([11, len(name)])
    rows, k = 2000, params.w
    a = narrow_values(rng, params.input, (rows, k), 6)
    b = narrow_values(rng, params.input, (rows, k), 6)
    if params.input == "fp16":
        # c an even multiple of fp16's 2^-24 (subnormal), one product of half that step (a tie)
        # and products near 2^-40: FTTN keeps them (grid 2^(-20 - 25)) and rounds up, MMA-Sim's
        # grid from c at 2^-14 drops them and the tie goes to even
        a, b = np.abs(a) * 2.0 ** -20, np.abs(b) * 2.0 ** -20
        a[:, 0], b[:, 0] = 2.0 ** -13, 2.0 ** -12
        c = 2.0 * rng.integers(8, 200, rows) * 2.0 ** -24
    else:                         # products near 2^-40, zeros of a against b near 2^100
        a, b = a * 2.0 ** -20, b * 2.0 ** -20
        zero = rng.random((rows, k)) < 0.25
        a[zero] = 0.0
        b[zero] = narrow_values(rng, params.input, int(zero.sum()), 2) * 2.0 ** 100
        c = narrow_values(rng, "fp32", rows, 6) * 2.0 ** -40
    c[::4] = 0.0
    a = from_bits(to_bits(a.astype(np.float32), params.input), params.input)
    b = from_bits(to_bits(b.astype(np.float32), params.input), params.input)
    c = from_bits(to_bits(c.astype(np.float32), params.output), params.output)
    with np.errstate(all="ignore"):
        want = to_bits(fused_node(a, b, c, params).astype(np.float32), params.output)
        fttn = to_bits(fused_node(a, b, c, get_params(name)).astype(np.float32), params.output)
    got = run_rows(a, b, c, params)
    assert np.flatnonzero(~same(got, want, params.output)).size == 0
    assert not np.array_equal(fttn, want)        # the inputs tell the conventions apart


@pytest.mark.parametrize("name", ["mi300x-fp16", "mi300x-bf16"])
@pytest.mark.parametrize("kind", ["bits", "narrow", "tiny"])
def test_amd_combine_matches_the_model(name, kind):
    """AMD CDNA3's combine (fpspec.arith.fused note [amd combine]): products aligned among
    themselves, the sum and c floored onto their grids, one rounding to nearest; random bit
    patterns (infs, nans, bf16 products past 2^128), cancellations, and tiny blocks."""
    params = get_params(name)
    rng = np.random.default_rng([13, len(name), len(kind)])
    rows, k = 2000, params.w
    if kind == "bits":
        a, b = random_values(rng, params.input, (rows, k)), random_values(rng, params.input, (rows, k))
        c = random_values(rng, params.output, rows)
    elif kind == "narrow":
        a, b = narrow_values(rng, params.input, (rows, k), 6), narrow_values(rng, params.input, (rows, k), 6)
        c = narrow_values(rng, params.output, rows, 12)
        c[::3] = -np.sum(a[::3] * b[::3], axis=1)
        c = c.astype(np.float32).astype(np.float64)
    else:
        scale = 2.0 ** -70 if params.input == "bf16" else 2.0 ** -10
        a = narrow_values(rng, params.input, (rows, k), 4) * scale
        b = narrow_values(rng, params.input, (rows, k), 4) * scale
        a[rng.random((rows, k)) < 0.2] = 0.0
        c = (rng.standard_normal(rows) * 2.0 ** -130).astype(np.float32).astype(np.float64)
    a = from_bits(to_bits(a.astype(np.float32), params.input), params.input)
    b = from_bits(to_bits(b.astype(np.float32), params.input), params.input)
    c = from_bits(to_bits(c.astype(np.float32), params.output), params.output)
    with np.errstate(all="ignore"):
        want = to_bits(fused_node(a, b, c, params).astype(np.float32), params.output)
    got = run_rows(a, b, c, params)
    bad = np.flatnonzero(~same(got, want, params.output))
    assert bad.size == 0, (f"{bad.size} rows differ; first: a={a[bad[0]]}, b={b[bad[0]]}, c={c[bad[0]]}: "
                           f"got {got[bad[0]]:#x}, want {want[bad[0]]:#x}")
