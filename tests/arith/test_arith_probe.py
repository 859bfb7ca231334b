"""Probes recover known arithmetics from black boxes, and find out what numpy and torch do."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from arith_trees import chain, reveal_small, synthetic

from fpspec.arith import PARAMS, Arithmetic, FusedParams
from fpspec.arith.probe import _binary_candidates, probe_arithmetic
from fpspec.tree import parse_tree

LANES16 = parse_tree("(((((0 4) 8) 12) (((2 6) 10) 14)) ((((1 5) 9) 13) (((3 7) 11) 15)))")


def _equivalent(found: Arithmetic, true: Arithmetic) -> bool:
    """Equal, or one of the documented indistinguishable cases (products that fit the accumulator)."""
    if found == true:
        return True
    from fpspec.formats import get_format

    fits = 2 * get_format(true.input).precision <= get_format(true.accumulator).precision
    plain = dataclasses.replace(true, product="exact", product_format=None)
    return fits and true.product_format is None and found == plain


def _every_binary_arithmetic(op, dtype, out):
    probe_target = synthetic(LANES16, Arithmetic(dtype, "none" if op == "sum" else "exact", "fp32", output=out), op, 16)
    return _binary_candidates(probe_target)


@pytest.mark.parametrize("ar", _every_binary_arithmetic("dot", "fp32", "fp32"), ids=str)
def test_every_binary_dot_arithmetic_is_recovered(ar):
    rep = probe_arithmetic(synthetic(LANES16, ar, "dot", 16), LANES16, rows=80, checks=16)
    assert rep.consistent, rep.lines
    assert _equivalent(rep.arithmetic, ar), (rep.arithmetic, ar)


@pytest.mark.parametrize("ar", _every_binary_arithmetic("sum", "fp16", "fp16"), ids=str)
def test_every_sum_accumulator_is_recovered(ar):
    rep = probe_arithmetic(synthetic(LANES16, ar, "sum", 16), LANES16, rows=80, checks=16)
    assert rep.consistent and rep.arithmetic == ar, (rep.arithmetic, ar)


FUSED = [
    # (input, w, extra_bits, aligned, result, c_aligned, floor): every value of every parameter at least once
    ("bf16", 8, 2, "truncate", "rz", True, -133),
    ("bf16", 8, 1, "floor", "rne", False, None),
    ("bf16", 4, -3, "rne", "rz", True, -132),
    ("fp16", 4, 0, "truncate", "rne", False, None),
    ("tf32", 8, 3, "truncate", "rz", True, -130),
]


@pytest.mark.parametrize("fmt,w,extra,aligned,result,c_aligned,floor", FUSED)
def test_fused_parameters_are_recovered(fmt, w, extra, aligned, result, c_aligned, floor):
    p = FusedParams(w, extra, aligned, result, c_aligned, floor, True, True, fmt, "fp32")
    ar = Arithmetic(fmt, "exact", "fp32", output="fp32", fused=p)
    tree = chain(3 * w, w)
    rep = probe_arithmetic(synthetic(tree, ar, "dot", 3 * w), tree, rows=100, checks=16)
    got = rep.arithmetic.fused
    assert rep.consistent, rep.lines
    assert (got.w, got.extra_bits, got.aligned, got.result, got.c_aligned) == (w, extra, aligned, result, c_aligned)
    if fmt != "fp16" and aligned == "truncate":
        assert got.exponent_floor == floor      # observable: bf16/tf32 products reach the floor
    if fmt == "fp16":
        assert any("exponent floor: not observable" in line for line in rep.lines)


def test_h100_fp16_matmul_with_fp16_output():
    """torch.matmul fp16 on a GPU: an fp32 chain, cast to fp16 at the end."""
    ar = Arithmetic("fp16", "exact", "fp32", output="fp16", fused=PARAMS["h100-fp16"])
    tree = chain(48, 16)
    rep = probe_arithmetic(synthetic(tree, ar, "gemm", 48), tree, rows=100, checks=16)
    assert rep.consistent
    assert dataclasses.replace(rep.arithmetic.fused, exponent_floor=-133) == PARAMS["h100-fp16"]
    assert rep.arithmetic.output == "fp16" and rep.arithmetic.accumulator == "fp32"
    assert any(line.startswith("T_1_bit") for line in rep.lines)


def test_flushing_hardware_is_recognised():
    p = dataclasses.replace(PARAMS["h100-bf16"], w=8, subnormal_inputs=False, subnormal_outputs=False)
    ar = Arithmetic("bf16", "exact", "fp32", output="fp32", fused=p)
    tree = chain(16, 8)
    rep = probe_arithmetic(synthetic(tree, ar, "gemv", 16), tree, rows=80, checks=16)
    assert rep.consistent
    assert (rep.arithmetic.fused.subnormal_inputs, rep.arithmetic.fused.subnormal_outputs) == (False, False)


def test_arithmetic_outside_the_model_is_reported():
    """Round-toward-zero additions are no candidate: the report says so instead of guessing."""
    from fpspec.reveal.targets import from_callable

    def rz_sum(x):
        acc = np.float32(0)
        for v in np.asarray(x, np.float32):
            s = np.float64(acc) + np.float64(v)
            r = np.float32(s)
            if abs(np.float64(r)) > abs(s):
                r = np.nextafter(r, np.float32(0))
            acc = r
        return acc

    tree = parse_tree("(((((((0 1) 2) 3) 4) 5) 6) 7)")
    rep = probe_arithmetic(from_callable(rz_sum, op="sum", n=8, dtype="fp32"), tree, rows=60)
    assert not rep.consistent
    assert any("no arithmetic in the model's space reproduces" in line for line in rep.lines)
    assert any(line.startswith("first differing probe: nonzero terms at leaves") for line in rep.lines)


@pytest.mark.parametrize("name,dtype,kw,acc", [
    ("numpy.sum", "float32", {}, "fp32"),
    ("numpy.sum", "float16", {}, "fp32"),
    ("numpy.dot", "float32", {}, None),
    ("numpy.matmul", "float32", dict(m=4, ncols=3), "fp32"),
    ("torch.sum", "float16", {}, "fp32"),
    ("torch.sum", "bfloat16", {}, "fp32"),
    ("torch.dot", "float16", {}, "fp32"),
    ("torch.mv", "float32", dict(m=4), "fp32"),
])
def test_real_cpu_targets(name, dtype, kw, acc):
    """Whatever they do (FMA or not, fp64 or fp32 accumulators), the probed model must reproduce them."""
    if name.startswith("torch"):
        pytest.importorskip("torch")
    from fpspec.reveal.targets import resolve_target

    target = resolve_target(name, n=16, dtype=dtype, **kw)
    tree = reveal_small(target)
    rep = probe_arithmetic(target, tree, rows=120, checks=32)
    assert rep.consistent, rep.lines
    if acc:
        assert rep.arithmetic.accumulator == acc


def test_cli_probe(capsys, tmp_path):
    from fpspec.cli import main

    out = tmp_path / "arith.fps"
    rc = main(["probe", "numpy.sum", "-n", "8", "--rows", "60", "-o", str(out),
               "--tree", "(((0 1) (2 3)) ((4 5) (6 7)))"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "accumulator: fp32" in text and "arithmetic {" in text
    assert "accumulator = fp32" in out.read_text()
    assert main(["probe", "numpy.sum", "-n", "8", "--tree", "((0 1) 2"]) == 2
    assert "--tree" in capsys.readouterr().err
    assert main(["probe", "numpy.sum", "-n", "8", "--tree", "((0 1) 2)"]) == 2   # 3 leaves, n = 8


def test_report_names_what_it_could_not_tell():
    """fp16 products cannot reach fp32's exponent floor: the report says which fields to skip."""
    ar = Arithmetic("fp16", "exact", "fp32", output="fp32", fused=dataclasses.replace(PARAMS["h100-fp16"], w=4))
    tree = chain(12, 4)
    rep = probe_arithmetic(synthetic(tree, ar, "dot", 12), tree, rows=80, checks=16)
    assert "fused.exponent_floor" in rep.undetermined
    assert "fused.extra_bits" not in rep.undetermined and "fused.result" not in rep.undetermined
    target = synthetic(LANES16, Arithmetic("fp16", "exact", "fp32", output="fp16"), "dot", 16)
    rep = probe_arithmetic(target, LANES16, rows=60, checks=16)
    assert "product" in rep.undetermined and "accumulator" not in rep.undetermined


def test_a_chain_of_pairs_revealed_with_binary_pairs_gets_its_fused_parameters():
    """chain(2) reveals its first group [0 1] and its last node [prev 8] as binary nodes; the
    result rounding (nearest even) fits every fused probe toward zero too: random inputs decide."""
    from fpspec.arith.probe import chain_pairs_fused
    from fpspec.spec.parse import parse as parse_spec
    from fpspec.spec.expand import expand_arith
    from fpspec.tree import observable

    spec = parse_spec('target "t"\nop sum\nn in 9..9\narithmetic {\n input = fp32\n product = none\n'
                      ' accumulator = fp32\n init = +0.0\n output = fp32\n fused { w = 4\n extra_bits = 0\n'
                      ' aligned = truncate\n result = rne\n c_aligned = true\n exponent_floor = none }\n}\n'
                      'order chain(2)\n')
    tree, ar, _ = expand_arith(spec, 9)
    seen = observable(tree)
    assert seen != tree and chain_pairs_fused(seen) == tree
    rep = probe_arithmetic(synthetic(tree, ar, "sum", 9), seen, rows=100, checks=32)
    assert rep.consistent, rep.lines
    assert rep.arithmetic.fused.result == "rne"
    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 400)) * 2.0 ** rng.integers(-20, 20, (9, 1))
    x = np.asarray(x.astype(np.float32), np.float64)
    from fpspec.arith.evaluate import evaluate
    assert np.array_equal(evaluate(tree, x, None, rep.arithmetic).view(np.uint64),
                          evaluate(tree, x, None, ar).view(np.uint64))
