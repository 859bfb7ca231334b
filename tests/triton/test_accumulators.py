"""Triton replicas of fp64, fp16 and bf16 accumulators, of every product mode and of `using`
parts of their own arithmetic (triton_kernels Note [accumulators], triton_host Note [regions
in plans]): bits equal to the spec's reference evaluation on the CPU interpreter.  The replicas
are compiled as `fpspec compile` does, written to files and run in one fresh interpreter
(tests/fresh_replicas.py), as a user runs them."""
import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import CompileError, compile_spec
from fpspec.inputs import generate
from fpspec.spec import parse

pytest.importorskip("triton")
pytest.importorskip("torch")

TORCH = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
FP64 = "input = fp64 product = {p} accumulator = fp64 init = {i} output = fp64"
NARROW = "input = {f} product = {p} accumulator = {f} init = {i} output = {f}"
U30 = 1 + 2.0 ** -30
U12 = 1 + 2.0 ** -12


def text(op, arithmetic, order, parts=""):
    return f"op {op}\nn in 1..64\narithmetic {{ {arithmetic} }}\n{parts}\norder {order}\n"


def generated(op, fmt, n, kind, m=3, ncols=2):
    return generate(op, n, fmt, seed=n, index=0, kind=kind, m=m, ncols=ncols).args


def _cases():
    """label -> (spec text, public function, arguments, input format, the value it must be or None)."""
    cases = {}

    def add(label, spec, op, fmt, args, value=None):
        cases[label] = (spec, op, tuple(np.asarray(a) for a in args), fmt, value)

    # fp64: the orders the fp32 kernels take (pairwise steps, leaf blocks of lanes, a guard of a
    # reverse fold and blocks), every input family that moves the bits
    for k, order in enumerate(["pairwise", "lanes(4, seq, pairwise)", "if n < 8: rev else: blocks(3, seq, seq)"]):
        for kind in ("wide_exponent", "specials")[k % 2:][:1]:
            add(f"fp64 sum {order} {kind}", text("sum", FP64.format(p="none", i="none"), order), "sum", "fp64",
                generated("sum", "fp64", 13, kind))
    for op, product, order in [("dot", "fma", "pairwise"), ("dot", "rounded", "lanes(4, seq, pairwise)"),
                               ("gemv", "fma", "blocks(6, seq, seq)"),
                               ("gemm", "fma", "if n < 8: rev else: lanes(3, seq, seq)")]:
        kind = "cancellation" if product == "fma" else "wide_exponent"
        add(f"fp64 {op} {product} {order}", text(op, FP64.format(p=product, i="+0.0"), order), op, "fp64",
            generated(op, "fp64", 13, kind))
    # (1 + 2^-30)^2 - (1 + 2^-29) is 2^-60 with the square fused, 0 with it rounded first: in a
    # fold, and fused by an addition as a term alone (blocks of one; a block of one after two)
    for order, x, y in (("seq", [-(1 + 2.0 ** -29), U30], [1.0, U30]),
                        ("blocks(1, seq, seq)", [-(1 + 2.0 ** -29), U30], [1.0, U30]),
                        ("blocks(2, seq, seq)", [-(1 + 2.0 ** -29), 0.0, U30], [1.0, 0.0, U30])):
        add(f"fp64 fma one rounding {order}", text("dot", FP64.format(p="fma", i="none"), order), "dot", "fp64",
            (x, y), 2.0 ** -60)
    # product = exact into fp64: two terms' exact sum rounded once, to odd as the reference holds
    # it (fpspec.arith.evaluate note [exact products]; to nearest it is 1 + 2^-22 + 2^-46)
    v = np.float32(1 + 2.0 ** -23)
    add("fp32 exact pair into fp64", text("dot", "input = fp32 product = exact accumulator = fp64 init = none "
                                                 "output = fp64", "pairwise"), "dot", "fp32",
        (np.array([v, 2.0 ** -60], np.float32), np.array([v, v], np.float32)), 1 + 2.0 ** -22 + 2.0 ** -46 + 2.0 ** -52)
    add("fp16 exact into fp64, reverse", text("gemv", "input = fp16 product = exact accumulator = fp64 init = none "
                                                    "output = fp16", "tail(2, rev, rev)"), "gemv", "fp16",
        generated("gemv", "fp16", 9, "cancellation"))
    add("fp32 into fp64 gemm", text("gemm", "input = fp32 product = rounded product_format = fp32 accumulator = fp64 "
                                            "init = none output = fp32", "lanes(4, seq, pairwise)"), "gemm", "fp32",
        generated("gemm", "fp32", 9, "wide_exponent"))
    add("fp32 into fp64 sum", text("sum", "input = fp32 product = none accumulator = fp64 init = +0.0 output = fp32",
                                   "blocks(8, seq, pairwise)"), "sum", "fp32", generated("sum", "fp32", 21, "signed_zeros"))
    # fp16 and bf16 accumulators: every addition rounds to them
    for fmt, order, kinds in (("fp16", "lanes(4, seq, pairwise)", ("uniform_bits",)),
                              ("bf16", "blocks(5, rev, pairwise)", ("uniform_bits", "subnormals"))):
        for kind in kinds:
            add(f"{fmt} sum {order} {kind}", text("sum", NARROW.format(f=fmt, p="none", i="+0.0"), order), "sum", fmt,
                generated("sum", fmt, 11, kind))
    for fmt, product, op, kind in (("fp16", "fma", "gemv", "finite_bits"), ("bf16", "rounded", "dot", "subnormals")):
        add(f"{fmt} {op} {product}", text(op, NARROW.format(f=fmt, p=product, i="none"), "lanes(3, seq, pairwise)"),
            op, fmt, generated(op, fmt, 7, kind))
    # two large terms overflow to inf in the accumulator, sums of subnormals stay exact in it
    # (an fp32 accumulator would give other bits for both)
    for fmt, big, tiny in (("fp16", 60000.0, 2.0 ** -24), ("bf16", 2.0 ** 127 * 1.5, 2.0 ** -133)):
        seq = text("sum", NARROW.format(f=fmt, p="none", i="none"), "seq")
        add(f"{fmt} overflow", seq, "sum", fmt, (np.array([big, big, -big], np.float32),), np.inf)
        add(f"{fmt} subnormals", seq, "sum", fmt, (np.array([tiny, 3 * tiny, -tiny, tiny], np.float32),), 4 * tiny)
    # using(part, ...) narrowing the accumulator of a region: its additions round to bf16 (fp16
    # for bf16 terms in the second), its result enters the fp32 fold exactly
    ar = "input = bf16 product = none accumulator = fp32 init = none output = fp32"
    for acc, kind in (("bf16", "uniform_bits"), ("fp16", "subnormals")):
        add(f"{acc} part", text("sum", ar, "blocks(5, using(part0, pairwise), seq)",
                                f"arithmetic part0 {{ accumulator = {acc} }}"), "sum", "bf16", generated("sum", "bf16", 8, kind))
    # parts of their own products: fp64 products in an fp32 part (terms alone fused), FMA inside
    # a part, rounded products outside
    add("fp32 part of fp64", text("dot", FP64.format(p="fma", i="none"), "blocks(6, using(part0, pairwise), seq)",
                                  "arithmetic part0 { accumulator = fp32 product = fma }"), "dot", "fp64",
        generated("dot", "fp64", 13, "cancellation"))
    add("fma part", text("gemv", "input = fp32 product = rounded accumulator = fp32 init = none output = fp32",
                         "lanes(3, using(part0, seq), using(part0, pairwise))", "arithmetic part0 { product = fma }"),
        "gemv", "fp32", generated("gemv", "fp32", 13, "cancellation"))
    # u*u - (1 + 2^-11), u = 1 + 2^-12: 2^-24 with the earlier product fused (fma_first), 0 with
    # the later (fma: u*u rounds to 1 + 2^-11 first)
    x, y = np.array([U12, -(1 + 2.0 ** -11)], np.float32), np.array([U12, 1.0], np.float32)
    for product, value in (("fma_first", 2.0 ** -24), ("fma", 0.0)):
        for order in ("seq", "pairwise"):
            add(f"{product} {order}", text("dot", f"input = fp32 product = {product} accumulator = fp32 init = none "
                                                  "output = fp32", order), "dot", "fp32", (x, y), value)
    # pad and vlanes make terms their own operands: an addition fuses them, except a term that
    # met only phantoms (rounded in its zero lane)
    # (n = 5: term 0 meets three phantoms)
    for op, ar, order, n in (("dot", FP64.format(p="fma", i="none"), "pad(4, pairwise)", 5),
                             ("gemv", "input = fp32 product = fma_first accumulator = fp32 init = none output = fp32",
                              "vlanes(2, 3, lanes(2, seq, pairwise), pairwise)", 11)):
        add(f"{op} {order} n={n}", text(op, ar, order), op, ar.split()[2],
            generated(op, ar.split()[2], n, "cancellation"))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """label -> (the replica's outputs, the reference), from one fresh interpreter."""
    sources = {spec: compile_spec(parse(spec), "triton") for spec, *_ in CASES.values()}
    calls = [(sources[spec], op, args, TORCH[fmt]) for spec, op, args, fmt, _ in CASES.values()]
    outputs = run_fresh(calls, tmp_path_factory.mktemp("accumulators"))
    return {label: (got, reference_outputs(parse(spec), op, args))
            for got, (label, (spec, op, args, _, _)) in zip(outputs, CASES.items())}


@pytest.mark.parametrize("label", list(CASES))
def test_triton_bits_equal_the_reference(fresh, label):
    got, want = fresh[label]
    value = CASES[label][4]
    if value is not None:   # the case shows what it is about: the reference gives that value
        assert want.tolist() == [value], (label, want)
    assert_fresh_bits(got, want, label)


@pytest.mark.parametrize("ar,why", [
    ("input = fp16 product = exact accumulator = fp16 init = none output = fp16", "product = exact into an fp16"),
    ("input = fp64 product = rounded accumulator = fp32 init = none output = fp32", "fp64 inputs are supported"),
])
def test_refusals_are_one_line(ar, why):
    with pytest.raises(CompileError, match=why) as e:
        compile_spec(parse(text("dot", ar, "seq")), "triton")
    assert "\n" not in str(e.value)
