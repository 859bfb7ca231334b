"""Triton replicas of `using(part, ...)` regions that take terms planned outside them
(triton_host Note [terms formed by their taker]) and of a part around the whole order with
init = +0.0 (added in the main accumulator, not the part's), bit for bit against the
reference (fpspec.arith.evaluate) in a fresh interpreter."""
import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import check, parse

FP16 = """op {op}
n in 2..15
arithmetic {{ input = fp16 product = fma_first accumulator = fp32 init = none output = fp32 }}
arithmetic part0 {{ accumulator = fp16 product = rounded }}
order {order}
"""
# the whole order in part1 (fp16), the additions in part0 (bf16): the sum is a finite bf16
# value beyond fp16's range, and init = +0.0 adds it to zero in the fp32 accumulator
WHOLE = """op dot
n in 2..8
arithmetic { input = bf16 product = fma_first accumulator = fp32 init = +0.0 output = fp32 }
arithmetic part0 { accumulator = bf16 product = rounded }
arithmetic part1 { accumulator = fp16 product = rounded }
order using(part1, blocks(1, seq, using(part0, seq)))
"""


def spec(text):
    s = parse(text)
    check(s)
    return s


def test_terms_are_formed_by_the_region_that_takes_them(tmp_path):
    # two blocks of one term, added in part0: each product is rounded to fp16 first (the
    # first, 1.3e-8, to 0), then the sum; one rounding of the exact sum gives one ulp more
    x = np.array([1.98006630e-04, 8.85963440e-04], np.float16)
    y = np.array([6.45518303e-05, 7.60498047e-02], np.float16)
    pair = spec(FP16.format(op="dot", order="blocks(1, seq, using(part0, seq))"))
    # a term beside phantoms in part0 (pad: x0 alone, then pairs): rounded to fp16 there
    rng = np.random.default_rng(3)
    A = (rng.standard_normal((3, 5)) * 2.0 ** rng.integers(-14, -6, (3, 5))).astype(np.float16)
    v = (rng.standard_normal(5) * 2.0 ** -6).astype(np.float16)
    A[:, 0] = x[1]
    v[0] = y[1]
    padded = spec(FP16.format(op="gemv", order="blocks(1, seq, using(part0, pad(4, pairwise)))"))
    calls = [(pair, "dot", (x, y)), (padded, "gemv", (A, v))]
    wants = [reference_outputs(s, f, args) for s, f, args in calls]
    exact = x.astype(np.float64) * y
    assert wants[0].tolist() == [np.float16(exact[1])] != [np.float16(exact[0] + exact[1])]
    outs = run_fresh([(compile_spec(s, target="triton"), f, args, "float16") for s, f, args in calls], tmp_path)
    for (_, f, _), got, want in zip(calls, outs, wants):
        assert_fresh_bits(got, want, f)


def test_init_is_added_in_the_main_accumulator_around_a_whole_order_part(tmp_path):
    s = spec(WHOLE)
    x, y = np.array([2.0 ** 100, 2.0 ** 100, -1.0], np.float32), np.array([1.0, 1.0, 1.0], np.float32)
    want = reference_outputs(s, "dot", (x, y))
    assert want.tolist() == [2.0 ** 101]
    outs = run_fresh([(compile_spec(s, target="triton"), "dot", (x, y), "bfloat16"),
                      (compile_spec(s, target="numpy"), "dot", (x, y))], tmp_path)
    for got, what in zip(outs, ("triton", "numpy")):
        assert_fresh_bits(got, want, what)


def test_a_reversed_fold_of_exact_products_adds_its_first_two_once(tmp_path):
    # product = exact into fp64 (the main arithmetic) and into an fp32 part: rev over two terms
    # is round(p1 + p0) once; the fold counted its first term twice (2 * p0 = 0.025...)
    text = """op dot
n in 1..8
arithmetic {{ input = fp16 product = exact accumulator = fp64 init = none output = fp16 }}
arithmetic part0 {{ accumulator = fp32 product = exact }}
order {order}
"""
    x, y = np.array([-0.05001831, -0.02955627], np.float16), np.array([-0.25, -0.25], np.float16)
    specs = [spec(text.format(order=order)) for order in ("rev", "using(part0, rev)")]
    want = reference_outputs(specs[0], "dot", (x, y))
    assert want.tolist() == [np.float16(np.float64(x[0]) * -0.25 + np.float64(x[1]) * -0.25)]
    outs = run_fresh([(compile_spec(s, target="triton"), "dot", (x, y), "float16") for s in specs], tmp_path)
    for s, got in zip(specs, outs):
        assert_fresh_bits(got, reference_outputs(s, "dot", (x, y)), str(s.order))


@pytest.mark.parametrize("text", [
    # seed 513 spec 478: fp64 values ~1e308 in an fp32 part; the model rounds the term left beside the
    # pad's phantom into fp32 (+inf) and gives nan, the kernels kept it in fp64 and gave -inf
    "op sum\nn in 8\narithmetic { input = fp64 product = none accumulator = fp64 init = +0.0 output = fp64 }\n"
    "arithmetic part0 { accumulator = fp32 }\norder using(part0, pad(3, chunks(max(1, n // 2), rev, seq)))\n",
    "op sum\nn in 8\narithmetic { input = fp32 product = none accumulator = fp16 init = +0.0 output = fp32 }\n"
    "order pad(3, blocks(3, rev, seq))\n"], ids=["fp64_in_fp32_part", "fp32_in_fp16"])
def test_a_reversed_fold_under_pad_into_a_narrower_accumulator_is_refused(text):
    from fpspec.compile.ir import CompileError

    with pytest.raises(CompileError, match=r"^triton: a reversed fold under pad\(\.\.\.\) with accumulator fp(32|16) "
                                           r"narrower than the input fp(64|32) is not supported"):
        compile_spec(parse(text), target="triton")
