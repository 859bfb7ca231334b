"""vlanes(V, K, INNER, OUTER) in Triton replicas: bits equal to the NumPy replica's and to the
spec's reference evaluation (CPU interpreter), at n below V*K and with n % V leftovers (FMA
products too: a term of its own is fused by the addition that takes it); refused in one line
with fused nodes.  The replicas are written
to files and run in one fresh interpreter (tests/fresh_replicas.py), as a user runs them."""
import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import CompileError, compile_spec
from fpspec.spec import parse

pytest.importorskip("triton")
pytest.importorskip("torch")

HEAD = "op {op}\nn in 1..80\narithmetic {{ input = {fmt} product = {product} accumulator = fp32 init = +0.0 " \
       "output = fp32 }}\n"

# n = 3, 11 below V * K (12, or 8 where K = 2), 11, 13, 47 with n % 4 leftovers (two in lane 0 at n = 11, K = 2)
NS = (3, 11, 13, 47)
SUM_ORDERS = ["vlanes(4, 2, lanes(4, seq, seq, seq), gpu_tree)",
              "vlanes(4, (if n > 40: 3 else: 2), lanes(4, seq, pairwise), rev)",
              "vlanes(3, 5, split(1, rev, seq), vlanes(2, 2, seq, seq))"]
GEMV = HEAD.format(op="gemv", fmt="fp16", product="rounded") + "order tail(3, vlanes(1, 4, rev, pairwise), seq)\n"
DOT_FMA = HEAD.format(op="dot", fmt="fp32", product="fma") + "order vlanes(4, 2, seq, seq)\n"


def _cases():
    """(label, spec text, public function, arguments, torch dtype) of every call."""
    cases = []
    rng = np.random.default_rng(7)
    for k, order in enumerate(SUM_ORDERS):
        text = HEAD.format(op="sum", fmt="fp32", product="none") + f"order {order}\n"
        for n in NS:
            # mixed magnitudes: a different order of additions gives different bits
            x = (rng.standard_normal(n) * 2.0 ** rng.integers(-12, 12, n)).astype(np.float32)
            cases.append((f"sum{k} n={n}", text, "sum", (x,), "float32"))
    rng = np.random.default_rng(8)
    for n in (9, 30):
        a = (rng.standard_normal((2, n)) * 8).astype(np.float16)
        x = (rng.standard_normal(n) * 8).astype(np.float16)
        cases.append((f"gemv n={n}", GEMV, "gemv", (a, x), "float16"))
    for n in (11, 13):
        x, y = (rng.standard_normal((2, n)) * 2.0 ** rng.integers(-12, 12, (2, n))).astype(np.float32)
        cases.append((f"dot fma n={n}", DOT_FMA, "dot", (x, y), "float32"))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """label -> (triton outputs, numpy outputs, the reference), from one fresh interpreter."""
    sources = {(text, target): compile_spec(parse(text), target) for _, text, *_ in CASES
               for target in ("numpy", "triton")}
    calls = []
    for _, text, function, args, dtype in CASES:
        calls.append((sources[(text, "triton")], function, args, dtype))
        calls.append((sources[(text, "numpy")], function, args))
    outputs = run_fresh(calls, tmp_path_factory.mktemp("vlanes"))
    return {label: (outputs[2 * c], outputs[2 * c + 1], reference_outputs(parse(text), function, args))
            for c, (label, text, function, args, _) in enumerate(CASES)}


@pytest.mark.parametrize("label", [c[0] for c in CASES])
def test_triton_bits_equal_numpy_and_the_reference(fresh, label):
    got_triton, got_numpy, want = fresh[label]
    assert_fresh_bits(got_numpy, want, f"numpy {label}")
    assert_fresh_bits(got_triton, want, f"triton {label}")


def test_fused_nodes_are_refused_in_one_line():
    fused = ("fused { w = 16 extra_bits = 2 aligned = truncate result = rz c_aligned = true exponent_floor = none "
             "subnormal_inputs = true subnormal_outputs = true }")
    spec = parse("op gemm\nn in 1..80\narithmetic { input = fp16 product = exact accumulator = fp32 init = none "
                 f"output = fp16 {fused} }}\norder vlanes(4, 2, chain(2), seq)\n")
    with pytest.raises(CompileError, match=r"^triton: vlanes\(\.\.\.\) with fused nodes is not supported") as e:
        compile_spec(spec, "triton")
    assert "\n" not in str(e.value)
