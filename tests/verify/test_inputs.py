"""fpspec.inputs: deterministic, shaped, exact in the format, each family doing its job."""
import numpy as np
import pytest

from fpspec import inputs
from fpspec.formats import FORMATS, get_format


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("op", inputs.OPS)
def test_every_value_is_a_value_of_the_format_and_shapes_follow_the_op(fmt, op):
    f = get_format(fmt)
    for n in (1, 2, 33):
        for s in inputs.samples(op, n, fmt, 2 * len(inputs.KINDS), seed=5, m=3, ncols=2):
            assert tuple(a.shape for a in s.args) == inputs.arg_shapes(op, n, 3, 2)
            for a in s.args:
                v = np.asarray(a, np.float64)
                finite = v[np.isfinite(v)]
                assert np.array_equal(f.round(finite), finite), s.describe()


def test_same_seed_and_index_give_the_same_bits_and_different_seeds_do_not():
    a = inputs.generate("gemm", 40, "fp32", seed=7, index=11, m=4, ncols=3)
    b = inputs.generate("gemm", 40, "fp32", seed=7, index=11, m=4, ncols=3)
    c = inputs.generate("gemm", 40, "fp32", seed=8, index=11, m=4, ncols=3)
    for x, y in zip(a.args, b.args):
        assert x.tobytes() == y.tobytes()
    assert a.args[0].tobytes() != c.args[0].tobytes()


def test_native_dtypes():
    assert inputs.generate("sum", 4, "fp32").args[0].dtype == np.float32
    assert inputs.generate("sum", 4, "fp16").args[0].dtype == np.float16
    assert inputs.generate("sum", 4, "fp64").args[0].dtype == np.float64
    assert inputs.generate("sum", 4, "bf16").args[0].dtype == np.float64  # float64-held


def _all(kind, fmt="fp32", op="sum", count=30, n=64):
    return [np.asarray(s.args[0], np.float64) for s in
            inputs.samples(op, n, fmt, count, seed=1, kinds=(kind,))]


def test_families_contain_what_they_promise():
    f = get_format("fp32")
    zeros = np.concatenate(_all("signed_zeros"))
    assert (np.signbit(zeros) & (zeros == 0)).any() and (~np.signbit(zeros) & (zeros == 0)).any()
    assert any((np.signbit(x) & (x == 0)).all() for x in _all("signed_zeros"))  # an all -0.0 vector
    sub = np.concatenate(_all("subnormals"))
    assert ((sub != 0) & (np.abs(sub) < 2.0 ** f.emin)).sum() > 100
    spec = np.concatenate(_all("specials"))
    assert np.isnan(spec).any() and np.isposinf(spec).any() and np.isneginf(spec).any()
    bits = np.concatenate(_all("uniform_bits", fmt="fp16", count=10, n=4096))
    assert np.isnan(bits).any() and np.isinf(bits).any()
    assert np.isfinite(np.concatenate(_all("finite_bits"))).all()
    wide = np.concatenate(_all("wide_exponent", count=60))
    e = np.frexp(wide[wide != 0])[1]
    assert e.max() - e.min() > 100


def test_cancellation_makes_the_exact_sum_small_against_its_terms():
    from fractions import Fraction
    for x in _all("cancellation", count=5):
        exact = abs(sum(Fraction(float(v)) for v in x))
        assert exact < max(abs(x)) * 2.0 ** -12


def test_products_alternate_between_exact_and_rounding_right_operands():
    exact = inputs.generate("dot", 64, "fp32", seed=2, index=2)          # index // 7 even
    rounding = inputs.generate("dot", 64, "fp32", seed=2, index=2 + len(inputs.KINDS))
    y0 = np.asarray(exact.args[1], np.float64)
    assert np.all(np.frexp(np.abs(y0))[0] == 0.5)                      # powers of two
    y1 = np.asarray(rounding.args[1], np.float64)
    assert not np.all(np.frexp(np.abs(y1))[0] == 0.5)


def test_from_bits_agrees_with_numpy_views():
    raw = np.arange(0, 1 << 16, dtype=np.uint64)
    got = inputs.from_bits(get_format("fp16"), raw)
    want = raw.astype(np.uint16).view(np.float16).astype(np.float64)
    assert np.array_equal(got, want, equal_nan=True)
    raw32 = np.random.default_rng(0).integers(0, 1 << 32, 100000, dtype=np.uint64)
    got = inputs.from_bits(get_format("fp32"), raw32)
    with np.errstate(invalid="ignore"):  # signalling nan patterns
        want = raw32.astype(np.uint32).view(np.float32).astype(np.float64)
    assert np.array_equal(got, want, equal_nan=True)
    e4 = inputs.from_bits(get_format("fp8e4m3"), np.arange(256, dtype=np.uint64))
    assert np.nanmax(e4) == 448.0 and np.isnan(e4).sum() == 2 and not np.isinf(e4).any()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        inputs.generate("conv", 4, "fp32")
    with pytest.raises(ValueError):
        inputs.generate("sum", 4, "fp32", kind="gaussian")
    with pytest.raises(ValueError):
        inputs.generate("sum", 0, "fp32")


@pytest.mark.parametrize("op", ["dot", "gemv", "gemm"])
def test_cancellation_survives_the_products_of_every_output(op):
    from fractions import Fraction
    for index in (3, 3 + len(inputs.KINDS)):        # an exact and a rounding right operand
        s = inputs.generate(op, 40, "fp32", seed=4, index=index, m=2, ncols=3)
        assert s.kind == "cancellation"
        a = np.atleast_2d(np.asarray(s.args[0], np.float64))
        b = np.asarray(s.args[1], np.float64).reshape(40, -1)
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                terms = a[i] * b[:, j]
                exact = abs(sum(Fraction(float(t)) for t in terms))
                assert exact < max(abs(terms)) * 2.0 ** -10
