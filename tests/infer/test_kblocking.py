"""OpenBLAS sgemm's order along K (numpy.matmul, float32): K in chunks of
GEMM_Q = 320 (halved, rounded up to 8, between 320 and 640), each chunk two
accumulators unrolled by 8 with the tail in accumulator 0.  From synthetic
black boxes with that order (tests/infer/orders.py) to one spec."""
from __future__ import annotations

import numpy as np

from fpspec.infer import infer_spec, spec_l_many
from fpspec.infer.fit import Fitter
from fpspec.infer.shapes import Obs, chunk_parts, lane_parts_left
from fpspec.reveal.synthetic import sum_target
from fpspec.spec import expand, parse
from fpspec.tree import LcaIndex, format_tree

from orders import openblas_sgemm_k, openblas_sgemv_t

SGEMM = "chunks((if n >= 640: 320 elif n > 320: (n // 2 + 7) // 8 * 8 else: n), lanes(2, seq, seq, seq, 8), seq)"


def test_parts_of_one_observation():
    o = Obs(700, openblas_sgemm_k(700))
    sizes, inner, outer = chunk_parts(o)
    assert sizes == [(700, 320), (380, 192), (188, 188)]   # (operands left, chunk size)
    assert [x.n for x in inner] == [320, 192, 188] and inner[2].tree == openblas_sgemm_k(188)
    assert format_tree(outer.tree) == "((0 1) 2)"
    lanes, outer, left = lane_parts_left(Obs(15, openblas_sgemm_k(15)), 2, 8)
    assert [format_tree(x.tree) for x in lanes] == ["(((0 1) 2) 3)"] * 2
    assert format_tree(outer.tree) == "(0 1)" and format_tree(left.tree) == "(((((((0 1) 2) 3) 4) 5) 6) 7)"


def test_fit_recovers_the_order_from_designed_n():
    ns = sorted({*range(2, 49), 63, 64, 65, 127, 128, 129, 255, 256, 257, 320, 321, 511, 512, 513, 639, 640,
                 641, 700, 1000, 1024})
    obs = [Obs(n, openblas_sgemm_k(n)) for n in ns]
    order = Fitter(name="sgemm", pool={o.n: o.tree for o in obs}).fit_root(obs)
    assert str(order) == SGEMM


def test_infer_from_a_black_box_with_held_out_n():
    r = infer_spec(lambda n: sum_target(openblas_sgemm_k(n), name="synthetic.sgemm_k"), (1, 800),
                   progress=False, holdout=4, replica=None, probe=False, seed=1, full_limit=800)
    assert str(r.spec.order) == SGEMM
    assert r.ok and len(r.held_out) == 4
    for n in (1, 15, 320, 321, 639, 640, 641, 800, 1300, 5000):
        assert expand(parse(f"n in 1..\norder {SGEMM}\n"), n) == openblas_sgemm_k(n)


def test_l_of_pairs_without_building_the_tree():
    spec = parse(f"n in 1..\norder {SGEMM}\n")
    rng = np.random.default_rng(0)
    for n in (15, 700, 1300):
        index = LcaIndex(openblas_sgemm_k(n))
        pairs = np.sort(np.array([rng.choice(n, 2, replace=False) for _ in range(400)]), axis=1)
        assert spec_l_many(spec, n, pairs).tolist() == [index.l(int(i), int(j)) for i, j in pairs]


SGEMV = "if n <= 3: seq else: tail(4, pad(8, lanes(8, seq, lanes(4, seq, pairwise))), split(1, seq, seq))"


def test_gemv_order_with_a_padded_partial_vector():
    ns = sorted({*range(1, 33), 63, 64, 65, 100, 127, 128, 129, 300})
    obs = [Obs(n, openblas_sgemv_t(n)) for n in ns]
    order = Fitter(name="sgemv", pool={o.n: o.tree for o in obs}).fit_root(obs)
    assert str(order) == SGEMV
    spec = parse(f"n in 1..\norder blocks(4096, {SGEMV}, seq)\n")
    for n in (*range(1, 40), 4095, 4096, 4100, 9000):
        assert expand(spec, n) == openblas_sgemv_t(n), n
    rng = np.random.default_rng(1)
    for n in (12, 20, 4100):   # l(i, j) through the phantoms
        index = LcaIndex(openblas_sgemv_t(n))
        pairs = np.sort(np.array([rng.choice(n, 2, replace=False) for _ in range(300)]), axis=1)
        assert spec_l_many(spec, n, pairs).tolist() == [index.l(int(i), int(j)) for i, j in pairs]
