"""Numerics the replica fuzz found wrong, each with the inputs that showed it:
leaves wider than their node's accumulator (fp64 or bf16 inputs in a narrower
`using` part) and exact products that overflow the accumulator (bf16 with
product = exact).  A node rounds the exact sum of what it takes once
(docs/fps.md, `using`; fpspec.compile.numerics note [exact leaves]); the NumPy
replica, imported fresh from its file, gives the reference's bits, and a
target that cannot yet do so refuses the spec in one line."""
import importlib.util

import numpy as np
import pytest

from fpspec.arith import evaluate
from fpspec.compile import compile_spec
from fpspec.compile.ir import CompileError
from fpspec.spec import check, parse
from fpspec.spec.expand import expand_arith

FP64_PART = """op sum
n in {n}
arithmetic {{ input = fp64 product = none accumulator = fp64 init = none output = fp64 }}
arithmetic part0 {{ accumulator = fp32 }}
order {order}
"""
BF16_EXACT = """op {op}
n in {n}
arithmetic {{ input = bf16 product = exact accumulator = fp32 init = none output = bf16 }}
order seq
"""
BF16_IN_FP16 = """op sum
n in 4
arithmetic { input = bf16 product = none accumulator = fp32 init = none output = bf16 }
arithmetic part0 { accumulator = fp16 }
order using(part0, seq)
"""


def spec_of(text):
    s = parse(text)
    check(s)
    return s


def replica(spec, tmp_path, target="numpy"):
    path = tmp_path / f"r_{target}.py"
    path.write_text(compile_spec(spec, target=target))
    loader = importlib.util.spec_from_file_location("r", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def reference(spec, x, y=None):
    tree, main, regions = expand_arith(spec, len(x))
    with np.errstate(all="ignore"):
        return float(evaluate(tree, np.asarray(x, np.float64), None if y is None else np.asarray(y, np.float64),
                              main, regions))


def same_bits(got, want):
    return np.float64(got).tobytes() == np.float64(want).tobytes()


@pytest.mark.parametrize("order, x, want", [
    # -inf beside a finite value beyond fp32: the node's exact sum is -inf (rounding 1e300 first gave inf - inf)
    ("using(part0, rev)", [1e300, 1.0, 2.0, -np.inf, 5.0], -np.inf),
    # a lone leaf in a part is taken by its parent (fp64): a value below fp32's range survives
    ("split(1, using(part0, using(part0, seq)), seq)", [-1.4741863046782605e-231, 0.0, 0.0, -0.0, 0.0],
     -1.4741863046782605e-231),
    # one rounding of 1 + 2^-24 + 2^-60 to fp32: up (a float64 sum first would tie down to 1.0)
    ("using(part0, seq)", [1 + 2.0 ** -24, 2.0 ** -60, 0.0, 0.0, 0.0], 1 + 2.0 ** -23),
])
def test_fp64_leaves_in_an_fp32_part_round_their_exact_sum_once(order, x, want, tmp_path):
    spec = spec_of(FP64_PART.format(n=5, order=order))
    x = np.array(x)
    assert same_bits(reference(spec, x), want)
    assert same_bits(replica(spec, tmp_path).sum(x), want)
    with pytest.raises(CompileError, match="a sum whose inputs are wider than its accumulator"):
        compile_spec(spec, target="numba")


@pytest.mark.parametrize("op", ["dot", "gemm"])
def test_bf16_exact_products_beyond_fp32_round_their_exact_sum_once(op, tmp_path):
    # products -2^200 and 2^199 overflow fp32 alone; their exact sum rounds to -inf, not inf - inf = nan
    spec = spec_of(BF16_EXACT.format(op=op, n=2))
    x, y = np.array([2.0 ** 100, 2.0 ** 99], np.float32), np.array([-2.0 ** 100, 2.0 ** 100], np.float32)
    assert same_bits(reference(spec, x, y), -np.inf)
    r = replica(spec, tmp_path)
    got = r.dot(x, y) if op == "dot" else r.gemm(x[None, :], y[:, None])[0, 0]
    assert same_bits(got, -np.inf)
    # products below fp32's subnormals: their exact sum is what survives
    tiny_x, tiny_y = np.array([2.0 ** -80, 2.0 ** -80], np.float32), np.array([2.0 ** -80, -2.0 ** -81], np.float32)
    want = reference(spec, tiny_x, tiny_y)
    assert want == 0.0 or same_bits(want, 2.0 ** -161)
    got = r.dot(tiny_x, tiny_y) if op == "dot" else r.gemm(tiny_x[None, :], tiny_y[:, None])[0, 0]
    assert same_bits(got, want)
    with pytest.raises(CompileError, match="product = exact where a product can overflow"):
        compile_spec(spec, target="numba")


def test_bf16_leaves_in_an_fp16_part(tmp_path):
    # bf16 values beyond fp16's range and below its subnormals: only their sums are rounded to fp16
    spec = spec_of(BF16_IN_FP16)
    for x in ([2.0 ** 20, -2.0 ** 20, 1.0, 0.0], [-2.0 ** -30, 2.0 ** -31, 0.0, 0.0]):
        x = np.array(x, np.float32)
        want = reference(spec, x)
        assert same_bits(replica(spec, tmp_path).sum(x), want)
    assert same_bits(reference(spec, np.array([2.0 ** 20, -2.0 ** 20, 1.0, 0.0])), 1.0)


def test_an_fp64_fma_into_a_narrower_part_is_refused_in_one_line():
    spec = spec_of("""op dot
n in 4
arithmetic { input = fp64 product = rounded accumulator = fp64 init = none output = fp64 }
arithmetic part0 { accumulator = fp32 product = fma }
order using(part0, seq)
""")
    for target in ("numpy", "numba"):
        with pytest.raises(CompileError) as e:
            compile_spec(spec, target=target)
        assert str(e.value) == ("product = fma of fp64 inputs in a fp32 accumulator cannot be expressed "
                                "(one rounding of an fp64 fma into a narrower format)")


def test_a_lone_product_leaf_among_partial_sums_is_fused_by_its_node(tmp_path):
    # lanes(4, ...) of FMA products at n = 5..7: a lane holds one leaf beside lanes of partial sums,
    # and the node that takes it fuses it (fpspec.compile.loops note [lone leaves]), at every n
    spec = spec_of("""op dot
n in 2..12
arithmetic { input = fp32 product = fma accumulator = fp32 init = none output = fp32 }
order lanes(4, seq, pairwise)
""")
    r = replica(spec, tmp_path)
    # t0 = -(1 + 2^-11) and t1 = (1 + 2^-12)^2 meet in ((lane0 leaf1) ...): fused, 2^-24 survives
    x = np.array([-(1 + 2.0 ** -11), 1 + 2.0 ** -12, 0, 0, 0], np.float32)
    y = np.array([1, 1 + 2.0 ** -12, 0, 0, 0], np.float32)
    assert same_bits(reference(spec, x, y), 2.0 ** -24)
    assert same_bits(r.dot(x, y), 2.0 ** -24)
    z = np.arange(1, 13, dtype=np.float32) / 3
    for n in range(2, 13):
        assert same_bits(r.dot(z[:n], z[:n]), reference(spec, z[:n], z[:n])), n


@pytest.mark.parametrize("scale", [0, 1000])    # 2^1000: beyond the fast path, exact rationals
def test_an_fp64_fma_compiles_for_numpy_and_rounds_once(scale, tmp_path):
    spec = spec_of("""op dot
n in 2
arithmetic { input = fp64 product = fma accumulator = fp64 init = none output = fp64 }
order seq
""")
    # fma(x1, y1, x0*y0) = (1 - 2^-54) - 1: a product rounded first would tie to 1.0 and give 0
    x = np.array([1.0, (1 + 2.0 ** -27) * 2.0 ** scale])
    y = np.array([-1.0, (1 - 2.0 ** -27) * 2.0 ** -scale])
    assert same_bits(reference(spec, x, y), -2.0 ** -54)
    assert same_bits(replica(spec, tmp_path).dot(x, y), -2.0 ** -54)


def test_a_lone_fp64_leaf_beside_phantoms_is_rounded_to_its_lane(tmp_path):
    # pad(3, ...) at n = 4: leaf 0 meets only phantoms, x + (-0.0) in fp32 rounds it to 2^-24;
    # then 1 + 2^-24 ties to 1.0 (the unrounded leaf would round the sum up to 1 + 2^-23)
    spec = spec_of("""op sum
n in 4
arithmetic { input = fp64 product = none accumulator = fp32 init = none output = fp64 }
order pad(3, pairwise)
""")
    x = np.array([2.0 ** -24 + 2.0 ** -60, 1.0, 0.0, 0.0])
    assert same_bits(reference(spec, x), 1.0)
    assert same_bits(replica(spec, tmp_path).sum(x), 1.0)
