"""The order-independent all-reduce of examples/collective/binned_all_reduce.py: binned
accumulators merged across ranks give the same bits for every split and merge order."""
import numpy as np
import pytest

binned = pytest.importorskip("fpspec.arith.binned")


def test_binned_all_reduce_bits_do_not_depend_on_ranks_or_order():
    rng = np.random.default_rng(5)
    P, L = 8, 24
    terms = (rng.standard_normal((P, L)) * 2.0 ** rng.integers(-20, 21, (P, L))).astype(np.float32)
    one = [binned.Binned.empty("fp32", 3).deposit(terms[:, e]).to_float() for e in range(L)]
    plain = set()
    for W in (2, 4, 8):
        parts = np.split(terms, W)
        # what travels: ReproBLAS's fields, rebuilt on the receiving rank
        accs = [[binned.Binned.from_array(binned.Binned.empty("fp32", 3).deposit(p[:, e]).to_array(), "fp32", 3)
                 for e in range(L)] for p in parts]
        for order in (list(range(W)), list(range(W))[::-1], [W // 2, *range(W // 2), *range(W // 2 + 1, W)]):
            got = []
            for e in range(L):
                acc = accs[order[0]][e]
                for r in order[1:]:
                    acc = acc + accs[r][e]
                got.append(acc.to_float())
            assert np.array_equal(np.array(got, np.float32).view(np.uint32), np.array(one, np.float32).view(np.uint32))
        # the plain float32 sums of the same split differ with W: what the recipe removes
        plain.add(np.sum([p.sum(0, dtype=np.float32) for p in parts], 0, dtype=np.float32).tobytes())
    assert len(plain) > 1
