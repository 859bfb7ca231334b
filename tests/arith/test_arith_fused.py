"""The fused-node model on hand-computed cases (FTTN's feature tests, computed exactly)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fpspec.arith import PARAMS, FusedParams, fused_chain, fused_node, fused_sum, get_params

ULP = 2.0 ** -23          # of 1.0 in fp32


def node(terms, c=0.0, params="h100-fp16", **change):
    """One fused node over products terms[k] * 1."""
    p = get_params(params) if isinstance(params, str) else params
    p = dataclasses.replace(p, **change)
    a = np.array([terms], dtype=np.float64)
    return float(fused_node(a, np.ones_like(a), np.array([c]), p)[0])


def test_published_sets():
    for name in ("v100-fp16", "a100-fp16", "a100-bf16", "a100-tf32", "ada-fp16", "l40s-bf16", "h100-fp16",
                 "h100-bf16", "h100-tf32", "h200-fp16", "b200-fp16", "b200-tf32", "h100-fp8"):
        assert name in PARAMS
    assert (PARAMS["v100-fp16"].w, PARAMS["v100-fp16"].extra_bits) == (4, 0)
    assert (PARAMS["a100-tf32"].w, PARAMS["a100-tf32"].extra_bits) == (4, 1)
    assert (PARAMS["h100-bf16"].w, PARAMS["h100-bf16"].extra_bits, PARAMS["h100-bf16"].exponent_floor) == (16, 2, -133)
    assert (PARAMS["h100-fp8"].w, PARAMS["h100-fp8"].extra_bits, PARAMS["h100-fp8"].result_precision) == (32, -10, 14)
    fp16_out = get_params("h100-fp16", "fp16")
    assert (fp16_out.result, fp16_out.exponent_floor, fp16_out.output) == ("rne", -21, "fp16")
    with pytest.raises(ValueError, match="unknown fused parameter set"):
        get_params("z80-fp16")


@pytest.mark.parametrize("gpu,extra", [("v100-fp16", 0), ("a100-fp16", 1), ("h100-fp16", 2)])
def test_extra_bits_one_minus_half_ulp(gpu, extra):
    """T_1_bit: 1 - ulp/2 survives only with an extra bit; 1 - ulp/4 needs two."""
    assert node([1.0, -ULP / 2], params=gpu) == (1.0 - ULP / 2 if extra >= 1 else 1.0)
    # 1 - ulp/4 is not an fp32 number: kept bits are truncated by the rz result to 1 - ulp/2
    assert node([1.0, -ULP / 4], params=gpu) == (1.0 - ULP / 2 if extra >= 2 else 1.0)


def test_truncation_is_sign_magnitude():
    """-1 - 3/4 ulp: the aligned term loses its low bits toward zero, not toward -inf."""
    assert node([-1.0, -0.75 * ULP], params="h100-fp16", extra_bits=0) == -1.0
    assert node([-1.0, -0.75 * ULP], params="h100-fp16", extra_bits=0, aligned="floor") == -1.0 - ULP
    assert node([1.0, -1.0, -ULP / 8], params="h100-fp16") == 0.0           # dropped entirely
    assert node([1.0, -1.0, -ULP / 4], params="h100-fp16") == -ULP / 4      # kept: 2 extra bits


def test_extra_bits_preserved_across_the_block():
    """T_pres_extra_acc: 1 + 3 * ulp/2 gives 1 + ulp when the block keeps the bits, 1 without."""
    terms = [1.0, ULP / 2, ULP / 2, ULP / 2]
    assert node(terms, params="a100-fp16") == 1.0 + ULP
    assert node(terms, params="v100-fp16") == 1.0


def test_result_rounding():
    assert node([1.0, ULP / 2, ULP / 4]) == 1.0                         # rz
    assert node([1.0, ULP / 2, ULP / 4], result="rne") == 1.0 + ULP     # above half: up
    assert node([1.0, ULP / 2], result="rne") == 1.0                    # tie: even
    assert node([1.0 + ULP, ULP / 2], result="rne") == 1.0 + 2 * ULP    # tie: even is up


def test_unnormalised_products_keep_the_carry():
    """1.5 * 1.5 = 2.25 aligns with exponent 0, so the grid is 2^(0 - 25), not 2^(1 - 25)."""
    a = np.array([[1.5, 2.0 ** -25]])
    b = np.array([[1.5, 1.0]])
    p = PARAMS["h100-fp16"]
    assert fused_node(a, b, np.array([0.0]), p)[0] == 2.25 + 2.0 ** -25 - 2.0 ** -25   # rz to fp32 drops it
    a = np.array([[1.5, -1.5, 2.0 ** -25]])
    b = np.array([[1.5, 1.5, 1.0]])
    assert fused_node(a, b, np.array([0.0]), p)[0] == 2.0 ** -25      # kept on the 2^-25 grid


def test_c_in_the_alignment():
    assert node([ULP / 4], c=1.0) == 1.0 and node([-ULP / 8, ULP / 8], c=-1.0) == -1.0
    # c_aligned=False: products exact among themselves, then one rounding with c
    assert node([ULP / 2, ULP / 2 - ULP / 8], c=1.0, c_aligned=False, result="rne") == 1.0 + ULP
    assert node([ULP / 2, ULP / 2 - ULP / 8], c=1.0, result="rne") == 1.0 + ULP
    assert node([ULP / 2, -ULP / 8], c=1.0, c_aligned=False, result="rne") == 1.0
    assert node([ULP / 2, -ULP / 8], c=1.0, result="rne") == 1.0


def test_exponent_floor_and_subnormals():
    tiny = 2.0 ** -140
    p = dataclasses.replace(PARAMS["h100-bf16"])
    # grid 2^(-133 - 25) = 2^-158: a product 2^-160 next to 2^-140 is dropped; without the floor it counts
    a = np.array([[2.0 ** -70, -(2.0 ** -80)]])
    b = np.array([[2.0 ** -70, 2.0 ** -80]])
    assert fused_node(a, b, np.array([0.0]), p)[0] == tiny
    no_floor = dataclasses.replace(p, exponent_floor=None)
    assert fused_node(a, b, np.array([0.0]), no_floor)[0] == tiny - 2.0 ** -149
    # subnormal output kept, or flushed
    assert node([2.0 ** -148], params=p) == 2.0 ** -148
    assert node([2.0 ** -148], params=p, subnormal_outputs=False) == 0.0
    # fp16 subnormal input times a normal: product normal, kept unless inputs flush
    a = np.array([[2.0 ** -20]])
    b = np.array([[2.0 ** 10]])
    assert fused_node(a, b, np.array([0.0]), PARAMS["h100-fp16"])[0] == 2.0 ** -10
    flush = dataclasses.replace(PARAMS["h100-fp16"], subnormal_inputs=False)
    assert fused_node(a, b, np.array([0.0]), flush)[0] == 0.0


def test_signed_zeros_and_specials():
    inf, nan = np.inf, np.nan
    assert np.signbit(node([0.0], c=-0.0)) == False          # noqa: E712  (the hardware writes +0.0)
    assert np.signbit(node([1.0, -1.0])) == False            # noqa: E712
    assert node([inf, 1.0]) == inf and node([-inf, 1.0]) == -inf
    assert np.isnan(node([inf, -inf])) and np.isnan(node([nan, 1.0])) and np.isnan(node([1.0], c=nan))
    a = np.array([[inf, 1.0]])
    assert np.isnan(fused_node(a, np.array([[0.0, 1.0]]), np.array([0.0]), PARAMS["h100-fp16"])[0])
    # a finite block can overflow: rz gives inf at 2^128 (as measured), not the largest finite
    assert node([2.0 ** 127, 2.0 ** 127], params="h100-bf16") == inf
    assert node([2.0 ** 127, 2.0 ** 126], params="h100-bf16") == 2.0 ** 127 + 2.0 ** 126


def test_fp8_keeps_13_fraction_bits():
    p = PARAMS["h100-fp8"]
    assert node([1.0, 2.0 ** -13], params=p) == 1.0 + 2.0 ** -13
    assert node([1.0, 2.0 ** -14], params=p) == 1.0
    assert node([1.0, 1.0 - 2.0 ** -13], params=p) == 2.0 - 2.0 ** -13    # result: 14 bits, rz


def test_chain_is_node_after_node():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((50, 40)).astype(np.float16).astype(np.float64)
    b = rng.standard_normal((50, 40)).astype(np.float16).astype(np.float64)
    c = rng.standard_normal(50).astype(np.float32).astype(np.float64)
    p = PARAMS["a100-fp16"]
    d = c
    for s in range(0, 40, 8):
        d = fused_node(a[:, s:s + 8], b[:, s:s + 8], d, p)
    assert np.array_equal(fused_chain(a, b, c, p), d)
    assert np.array_equal(fused_sum(a, b, c, "a100-fp16"), d)
    with pytest.raises(ValueError, match="at most w=8"):
        fused_node(a[:, :9], b[:, :9], c, p)


def test_bad_parameters():
    with pytest.raises(ValueError, match="aligned"):
        FusedParams(16, 2, aligned="nearest")
    with pytest.raises(ValueError, match="result"):
        FusedParams(16, 2, result="ru")
    with pytest.raises(ValueError, match="write fp32, not fp16"):
        fused_sum(np.ones((1, 2)), np.ones((1, 2)), np.zeros(1), PARAMS["h100-fp16"], out_format="fp16")


def test_fused_module_imports_only_numpy():
    """The compiler embeds fused.py's functions in replicas: numpy is its only import."""
    import ast
    import inspect

    from fpspec.arith import fused

    tree = ast.parse(inspect.getsource(fused))
    top = {n.names[0].name.split(".")[0] for n in tree.body if isinstance(n, ast.Import)}
    top |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert top <= {"numpy", "__future__", "dataclasses"}
