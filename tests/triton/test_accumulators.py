"""Triton replicas of fp64, fp16 and bf16 accumulators and of `using` regions of their own
arithmetic (triton_kernels Note [accumulators], triton_host Note [regions in plans]), bit for
bit against the reference (fpspec.arith.evaluate on the spec's expansion) on the interpreter."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fpspec.arith import evaluate
from fpspec.cli import main
from fpspec.compile.build import build_kernel
from fpspec.compile.ir import CompileError
from fpspec.inputs import KINDS, generate
from fpspec.spec import parse
from fpspec.spec.expand import expand_arith

def spec(op, arithmetic, order, n="1..64", parts=""):
    return parse(f"op {op}\nn in {n}\narithmetic {{ {arithmetic} }}\n{parts}\norder {order}\n")


def reference(sp, op, args):
    """The spec's bits for one call: evaluate on the expansion at every output element."""
    a = [np.asarray(x, np.float64) for x in args]
    n = a[0].shape[-1] if op != "sum" else a[0].shape[0]
    tree, main, regions = expand_arith(sp, n)
    with np.errstate(all="ignore"):
        if op == "sum":
            return evaluate(tree, a[0], None, main, regions)
        if op == "dot":
            return evaluate(tree, a[0], a[1], main, regions)
        A, B = a[0], (a[1][:, None] if op == "gemv" else a[1])
        X = np.repeat(A.T[:, :, None], B.shape[1], axis=2).reshape(n, -1)
        Y = np.repeat(B[:, None, :], A.shape[0], axis=1).reshape(n, -1)
        out = evaluate(tree, X, Y, main, regions).reshape(A.shape[0], B.shape[1])
        return out[:, 0] if op == "gemv" else out


def same_bits(got, want):
    g = np.asarray(got, np.float64)
    return (g.shape == np.shape(want) and np.array_equal(g, want, equal_nan=True)
            and np.array_equal(np.signbit(g), np.signbit(want)))


def check(load_replica, sp, op, fmt, ns, kinds=KINDS, m=3, ncols=2):
    """Every n of ns and every input family: the replica's bits are the reference's."""
    replica = load_replica(build_kernel(sp, name="t.fps", source=str(sp)))
    for n in ns:
        for i, kind in enumerate(kinds):
            args = generate(op, n, fmt, seed=n, index=i, kind=kind, m=m, ncols=ncols).args
            got = getattr(replica, op)(*args)
            want = reference(sp, op, args)
            assert same_bits(got, want), (n, kind, got, want)
    return replica


FP64 = "input = fp64 product = {p} accumulator = fp64 init = {i} output = fp64"
# orders the fp32 kernels take: folds, pairwise steps, lanes, blocks (a term alone at n % 6 == 1:
# a lone term fused into the outer fold), a guard
ORDERS = ["pairwise", "lanes(4, seq, pairwise)", "if n < 8: rev else: blocks(3, seq, seq)"]


@pytest.mark.parametrize("order", ORDERS)
def test_fp64_sum(load_replica, order):
    check(load_replica, spec("sum", FP64.format(p="none", i="none"), order), "sum", "fp64", (13,),
          kinds=("wide_exponent", "specials")[ORDERS.index(order) % 2:][:1 + (order == ORDERS[0])])


@pytest.mark.parametrize("op,product,order", [
    ("dot", "fma", "pairwise"), ("dot", "rounded", "lanes(4, seq, pairwise)"), ("gemv", "fma", "blocks(6, seq, seq)"),
    ("gemm", "fma", "if n < 8: rev else: lanes(3, seq, seq)")])
def test_fp64_products(load_replica, op, product, order):
    check(load_replica, spec(op, FP64.format(p=product, i="+0.0"), order), op, "fp64", (13,),
          kinds=("cancellation",) if product == "fma" else ("wide_exponent",))


def test_fp64_fma_is_one_rounding(load_replica):
    """(1 + 2^-30)^2 - (1 + 2^-29) is 2^-60 with the square fused (one rounding), 0 with it
    rounded first: in a fold, and fused by a combine step as a term alone (blocks of one; a
    block of one after a block of two)."""
    u = 1 + 2.0 ** -30
    for order, x, y in (("seq", [-(1 + 2.0 ** -29), u], [1.0, u]),
                        ("blocks(1, seq, seq)", [-(1 + 2.0 ** -29), u], [1.0, u]),
                        ("blocks(2, seq, seq)", [-(1 + 2.0 ** -29), 0.0, u], [1.0, 0.0, u])):
        sp = spec("dot", FP64.format(p="fma", i="none"), order)
        x, y = np.array(x), np.array(y)
        assert reference(sp, "dot", (x, y)) == 2.0 ** -60
        assert load_replica(build_kernel(sp, name="t.fps", source=str(sp))).dot(x, y) == 2.0 ** -60, order


def test_two_exact_products_in_fp64_round_to_odd(load_replica):
    """product = exact into fp64: a node of two terms rounds their exact sum once, to odd as the
    reference holds it (fpspec.arith.evaluate note [exact products]), not to nearest."""
    v = np.float32(1 + 2.0 ** -23)
    x, y = np.array([v, 2.0 ** -60], np.float32), np.array([v, v], np.float32)
    sp = spec("dot", "input = fp32 product = exact accumulator = fp64 init = none output = fp64", "pairwise")
    want = reference(sp, "dot", (x, y))
    assert want == 1 + 2.0 ** -22 + 2.0 ** -46 + 2.0 ** -52   # to nearest: 1 + 2^-22 + 2^-46
    assert load_replica(build_kernel(sp, name="t.fps", source=str(sp))).dot(x, y) == want


def test_fp32_into_fp64(load_replica):
    ar = "input = fp32 product = rounded product_format = fp32 accumulator = fp64 init = none output = fp32"
    check(load_replica, spec("gemm", ar, "lanes(4, seq, pairwise)"), "gemm", "fp32", (9,),
          kinds=("wide_exponent", "cancellation"))
    ar = "input = fp32 product = none accumulator = fp64 init = +0.0 output = fp32"
    check(load_replica, spec("sum", ar, "blocks(8, seq, pairwise)"), "sum", "fp32", (21,),
          kinds=("wide_exponent", "signed_zeros"))


NARROW = "input = {f} product = {p} accumulator = {f} init = {i} output = {f}"


@pytest.mark.parametrize("fmt,order", [("fp16", "lanes(4, seq, pairwise)"), ("bf16", "blocks(5, rev, pairwise)")])
def test_narrow_accumulator_sum(load_replica, fmt, order):
    check(load_replica, spec("sum", NARROW.format(f=fmt, p="none", i="+0.0"), order), "sum", fmt, (11,),
          kinds=("uniform_bits", "subnormals") if fmt == "bf16" else ("uniform_bits",))


@pytest.mark.parametrize("fmt,product,op", [("fp16", "fma", "gemv"), ("bf16", "rounded", "dot")])
def test_narrow_accumulator_products(load_replica, fmt, product, op):
    check(load_replica, spec(op, NARROW.format(f=fmt, p=product, i="none"), "lanes(3, seq, pairwise)"), op, fmt,
          (7,), kinds=("finite_bits",) if fmt == "fp16" else ("subnormals",))


@pytest.mark.parametrize("fmt,big,tiny", [("fp16", 60000.0, 2.0 ** -24), ("bf16", 2.0 ** 127 * 1.5, 2.0 ** -133)])
def test_narrow_accumulator_overflow_and_subnormals(load_replica, fmt, big, tiny):
    """Every addition rounds to the accumulator: two large terms overflow to inf, and sums of
    subnormals stay exact in it; a fp32 accumulator would give other bits for both."""
    sp = spec("sum", NARROW.format(f=fmt, p="none", i="none"), "seq")
    replica = load_replica(build_kernel(sp, name="t.fps", source=str(sp)))
    dtype = np.float16 if fmt == "fp16" else np.float32   # (bf16 values travel in float32)
    over = np.array([big, big, -big], dtype)
    assert np.isinf(reference(sp, "sum", (over,)))
    assert same_bits(replica.sum(over), reference(sp, "sum", (over,)))
    sub = np.array([tiny, 3 * tiny, -tiny, tiny], dtype)
    want = reference(sp, "sum", (sub,))
    assert 0 < want < 2.0 ** (-14 if fmt == "fp16" else -126)
    assert same_bits(replica.sum(sub), want)


def test_narrowing_region(load_replica):
    """using(part, ...) narrowing the accumulator for a region: its additions round to bf16
    (fp16 for bf16 terms in the second), its result enters the fp32 fold exactly."""
    ar = "input = bf16 product = none accumulator = fp32 init = none output = fp32"
    for acc in ("bf16", "fp16"):
        sp = spec("sum", ar, "blocks(5, using(part0, pairwise), seq)",
                  parts=f"arithmetic part0 {{ accumulator = {acc} }}")
        check(load_replica, sp, "sum", "bf16", (8,), kinds=("uniform_bits",) if acc == "bf16" else ("subnormals",))


def test_fma_first_fuses_the_earlier_term(load_replica):
    """u*u - (1 + 2^-11) with u = 1 + 2^-12: 2^-24 with the first product fused (fma_first),
    0 with the second fused (fma: u*u rounds to 1 + 2^-11 first)."""
    u = np.float32(1 + 2.0 ** -12)
    x, y = np.array([u, -(1 + 2.0 ** -11)], np.float32), np.array([u, 1.0], np.float32)
    ar = "input = fp32 product = {} accumulator = fp32 init = none output = fp32"
    for product, want in (("fma_first", 2.0 ** -24), ("fma", 0.0)):
        for order in ("seq", "pairwise"):
            sp = spec("dot", ar.format(product), order)
            assert reference(sp, "dot", (x, y)) == want
            assert load_replica(build_kernel(sp, name="t.fps", source=str(sp))).dot(x, y) == want, (product, order)


@pytest.mark.parametrize("op,ar,order", [
    ("dot", FP64.format(p="fma", i="none"), "pad(4, pairwise)"),
    ("gemv", "input = fp32 product = fma_first accumulator = fp32 init = none output = fp32",
     "vlanes(2, 3, lanes(2, seq, pairwise), pairwise)"),
])
def test_terms_of_their_own_with_fma(load_replica, op, ar, order):
    """pad and vlanes make terms their own operands: an addition fuses them, except a term that
    met only phantoms (rounded in its zero lane)."""
    check(load_replica, spec(op, ar, order), op, ar.split()[2], (5, 11), kinds=("cancellation",))


@pytest.mark.parametrize("op,ar,parts,order", [
    # fp64 products with an fp32 region (terms rounded from their fp64 product, lone ones fused)
    ("dot", FP64.format(p="fma", i="none"), "arithmetic part0 { accumulator = fp32 product = fma }",
     "blocks(6, using(part0, pairwise), seq)"),
    # the products of a region FMA, outside they are rounded
    ("gemv", "input = fp32 product = rounded accumulator = fp32 init = none output = fp32",
     "arithmetic part0 { product = fma }", "lanes(3, using(part0, seq), using(part0, pairwise))"),
])
def test_regions_with_products(load_replica, op, ar, parts, order):
    fmt = ar.split()[2]
    check(load_replica, spec(op, ar, order, parts=parts), op, fmt, (13,), kinds=("cancellation",))


@pytest.mark.parametrize("ar,why", [
    ("input = fp16 product = exact accumulator = fp16 init = none output = fp16", "product = exact into an fp16"),
    ("input = fp64 product = rounded accumulator = fp32 init = none output = fp32", "fp64 inputs are supported"),
])
def test_refusals_are_one_line(ar, why):
    from fpspec.compile import compile_kernel

    sp = spec("dot", ar, "seq")
    with pytest.raises(CompileError, match=why) as e:
        compile_kernel(build_kernel(sp, name="t.fps", source=str(sp)), "triton")
    assert "\n" not in str(e.value)


def test_fp64_gemm_from_the_command_line_in_a_fresh_interpreter(tmp_path):
    """`fpspec compile --target triton` of an fp64 GEMM, imported by path in a fresh interpreter:
    float64 arrays in, float64 out, the reference's bits."""
    src = tmp_path / "dgemm.fps"
    src.write_text("op gemm\nn in 1..64\narithmetic { input = fp64 product = fma accumulator = fp64 init = none "
                   "output = fp64 }\norder lanes(4, seq, pairwise)\n")
    out = tmp_path / "dgemm.py"
    assert main(["compile", str(src), "--target", "triton", "-o", str(out)]) == 0
    rng = np.random.default_rng(5)
    A = rng.standard_normal((3, 10)) * np.exp2(rng.integers(-40, 40, (3, 10)))
    B = rng.standard_normal((10, 2))
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "B.npy", B)
    script = textwrap.dedent(f"""
        import importlib.util, sys
        import numpy as np
        spec = importlib.util.spec_from_file_location("dgemm", {str(out)!r})
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        C = mod.gemm(np.load({str(tmp_path / 'A.npy')!r}), np.load({str(tmp_path / 'B.npy')!r}))
        assert "fpspec" not in sys.modules and C.dtype == np.float64
        np.save({str(tmp_path / 'C.npy')!r}, C)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=dict(env, TRITON_INTERPRET="1"), check=True,
                   capture_output=True)
    sp = parse(src.read_text())
    assert same_bits(np.load(tmp_path / "C.npy"), reference(sp, "gemm", (A, B)))
