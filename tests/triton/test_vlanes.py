"""vlanes(V, K, INNER, OUTER) in Triton replicas: bits equal to the NumPy replica's
(CPU interpreter), at n below V*K and with n % V leftovers; refused in one line
where its terms would have to enter as fused products."""
import numpy as np
import pytest

from fpspec.compile import CompileError, compile_spec, load_replica
from fpspec.spec import parse

pytest.importorskip("triton")
pytest.importorskip("torch")

HEAD = "op {op}\nn in 1..80\narithmetic {{ input = {fmt} product = {product} accumulator = fp32 init = +0.0 " \
       "output = fp32 }}\n"


def _replicas(text):
    spec = parse(text)
    return [load_replica(compile_spec(spec, target), f"vlanes {target}") for target in ("numpy", "triton")]


def _bits(v):
    v = np.asarray(v, dtype=np.float32)
    return v.view(np.uint32).tolist()


# n = 3, 11 below V * K (12, or 8 where K = 2), 11, 13, 47 with n % 4 leftovers (two in lane 0 at n = 11, K = 2)
NS = (3, 11, 13, 47)


@pytest.mark.parametrize("order", ["vlanes(4, 2, lanes(4, seq, seq, seq), gpu_tree)",
                                   "vlanes(4, (if n > 40: 3 else: 2), lanes(4, seq, pairwise), rev)",
                                   "vlanes(3, 5, split(1, rev, seq), vlanes(2, 2, seq, seq))"])
def test_sum_bits_equal_numpy(order):
    numpy_rep, triton_rep = _replicas(HEAD.format(op="sum", fmt="fp32", product="none") + f"order {order}\n")
    rng = np.random.default_rng(7)
    for n in NS:
        # mixed magnitudes: a different order of additions gives different bits
        x = (rng.standard_normal(n) * 2.0 ** rng.integers(-12, 12, n)).astype(np.float32)
        assert _bits(triton_rep.sum(x)) == _bits(numpy_rep.sum(x)), n


def test_gemv_with_rounded_products_bits_equal_numpy():
    text = HEAD.format(op="gemv", fmt="fp16", product="rounded") + "order tail(3, vlanes(1, 4, rev, pairwise), seq)\n"
    numpy_rep, triton_rep = _replicas(text)
    rng = np.random.default_rng(8)
    for n in (9, 30):
        a = (rng.standard_normal((2, n)) * 8).astype(np.float16)
        x = (rng.standard_normal(n) * 8).astype(np.float16)
        assert _bits(triton_rep.gemv(a, x)) == _bits(numpy_rep.gemv(a, x)), n


def test_fma_products_are_refused_in_one_line():
    spec = parse(HEAD.format(op="dot", fmt="fp32", product="fma") + "order vlanes(4, 2, seq, seq)\n")
    with pytest.raises(CompileError, match=r"^triton: vlanes\(\.\.\.\) with product = fma is not supported") as e:
        compile_spec(spec, "triton")
    assert "\n" not in str(e.value)
