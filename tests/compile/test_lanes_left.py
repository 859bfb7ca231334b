"""lanes(k, inner, outer, left) replicas: torch.sum's order (the vector tail
joins lane 0) in NumPy and Numba, bit for bit against torch.sum and the model."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.arith.evaluate import evaluate
from fpspec.arith.model import Arithmetic
from fpspec.compile import compile_spec
from fpspec.inputs import samples
from fpspec.spec import expand, parse

TORCH_SUM = parse('''target "torch.sum"
op sum
arithmetic {
    input = fp32
    product = none
    accumulator = fp32
    init = +0.0
    output = fp32
}
order if n <= 7: lanes(4, seq, seq, seq)
      else: lanes(8, lanes(4, seq, seq, seq), seq, split(1, seq, seq))
''')
NS = [1, 3, 4, 5, 7, 8, 9, 31, 33, 63, 64, 65, 100, 127, 129, 255, 300, 513]


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_replica_equals_the_model(target):
    mod = load_replica(compile_spec(TORCH_SUM, target), f"torch_sum_left_{target}")
    arithmetic = Arithmetic(input="fp32", product="none", accumulator="fp32", init="+0.0", output="fp32")
    for n in NS:
        tree = expand(TORCH_SUM, n)
        for s in samples("sum", n, "fp32", 6, seed=n):
            (x,) = s.args
            want = np.float32(evaluate(tree, x.astype(np.float64), None, arithmetic))
            assert_same_bits(np.float32(mod.sum(x)), want, f"n={n} {s.describe()} ({target})")


def test_replica_equals_torch_sum():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    mod = load_replica(compile_spec(TORCH_SUM, "numba"), "torch_sum_left_numba")
    for n in NS:
        for s in samples("sum", n, "fp32", 6, seed=n + 1):
            (x,) = s.args
            want = torch.sum(torch.from_numpy(np.ascontiguousarray(x))).numpy()
            assert_same_bits(np.float32(mod.sum(x)), want, f"n={n} {s.describe()}")

