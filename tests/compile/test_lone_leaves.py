"""Lone leaves among partial sums (fpspec.compile.loops note [lone leaves]): a lane, block,
chunk or part of one operand hands its leaf up untouched, and the node that takes it forms
it in that node's own arithmetic (an FMA, a product rounded to a part's accumulator), as
the reference evaluation does.  Every replica here is written to a file and run in one
fresh interpreter (tests/fresh_replicas.py), compared bit for bit with fpspec.arith.evaluate.

Most inputs put t_a = -(1 + 2^-11) and t_b = (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 among
zeros: a node that fuses t_b into t_a gives 2^-24, one that adds t_b rounded to fp32 gives 0.
"""
from __future__ import annotations

import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import check, parse
from fpspec.spec.expand import expand_arith

FP32 = "arithmetic { input = fp32 product = %s accumulator = fp32 init = none output = fp32 }\n"
U = 1.0 + 2.0 ** -12


def spec_of(text: str):
    spec = parse(text)
    check(spec)
    return spec


def fused_pair(n: int, a: int, b: int, rows: int = 0, dtype=np.float32):
    """x, y of length n with t_a = -(1 + 2^-11), t_b = U^2 and zeros elsewhere; `rows`: x as
    that many identical rows (gemv, gemm)."""
    x, y = np.zeros(n), np.zeros(n)
    x[a], y[a] = -(1.0 + 2.0 ** -11), 1.0
    x[b], y[b] = U, U
    x, y = x.astype(dtype), y.astype(dtype)
    return (np.tile(x, (rows, 1)) if rows else x), y


# (name, spec text, call, args): each a spec whose replica formed a lone leaf in the wrong
# arithmetic (or refused it) before
CASES = [
    # a part over [body, leaf]: the fp32 body and the leaf's fp16 product rounded once together,
    # the leaf rounded to fp16 (not fp32) first (the soak's seed 100 spec 316, as a dot)
    ("tail_part_fp16", "op dot\nn in 5..22\n"
     "arithmetic { input = bf16 product = rounded accumulator = fp32 init = none output = fp32 }\n"
     "arithmetic part0 { accumulator = fp16 product = rounded }\norder tail(4, seq, using(part0, seq))\n",
     "dot", (np.array([41, -0.00118255615234375, 418, -0.11279296875, 16064], np.float32),
             np.array([33536, -3424, -0.11962890625, -14.5625, -15.0625], np.float32))),
    # the lone leaf left by tail(2, ...) fused by the FMA part the blocks put it in (seed 11 spec 253)
    ("tail_blocks_fma_part", "op gemv\nn in 11\n"
     "arithmetic { input = fp16 product = rounded accumulator = fp32 init = none output = fp32 }\n"
     "arithmetic part0 { accumulator = bf16 product = fma }\narithmetic part1 { accumulator = bf16 product = rounded }\n"
     "order using(part1, tail(2, seq, blocks(3, using(part0, seq), seq)))\n",
     "gemv", (np.array([[-1.0] + [0.0] * 9 + [1.0 + 2.0 ** -5]] * 2, np.float16),
              np.array([1.0] + [0.0] * 9 + [1.0 + 2.0 ** -5], np.float16))),
    # lanes of one leaf joined by an FMA part (seed 12 spec 876)
    ("lanes_fma_outer", "op gemv\nn in 8\n" + FP32 % "rounded" + "arithmetic part0 { product = fma }\n"
     "order lanes(6, seq, using(part0, seq))\n", "gemv", fused_pair(8, 0, 2, rows=2)),
    # chunks(1, ...), blocks(1, ...): every operand a lone leaf (seed 13)
    ("chunks_one_fma", "op gemm\nn in 27\n" + FP32 % "fma" + "order chunks(1, seq, seq)\n",
     "gemm", (fused_pair(27, 0, 1, rows=2)[0], np.tile(fused_pair(27, 0, 1)[1][:, None], (1, 3)))),
    ("blocks_one_fma_part", "op gemv\nn in 4\n" + FP32 % "rounded" + "arithmetic part0 { product = fma }\n"
     "order blocks(1, using(part0, seq), using(part0, seq))\n", "gemv", fused_pair(4, 0, 1, rows=2)),
    # refused before (a lone leaf among partial sums with FMA): lanes, gpu_tree, split leftovers
    ("lanes_pairwise_fma", "op gemv\nn in 2..12\n" + FP32 % "fma" + "order lanes(4, seq, pairwise)\n",
     "gemv", fused_pair(5, 0, 1, rows=2)),
    ("gpu_tree_fma", "op dot\nn in 5\n" + FP32 % "fma" + "order gpu_tree\n", "dot", fused_pair(5, 0, 3)),
    ("rev_over_tail_fma", "op dot\nn in 6\n" + FP32 % "fma" + "order tail(4, pairwise, rev)\n",
     "dot", fused_pair(6, 4, 5)),
    # a pad over one operand returns it (no phantom meets it): its exact bf16 product, beyond fp32,
    # is left to the node that takes it (the soak's seed 13 spec 629): 2^130 - 2^130 + 1, not inf - inf
    ("pad_of_one_operand", "op gemv\nn in 8\nprovenance { shape { m = 2 } }\n"
     "arithmetic { input = bf16 product = exact accumulator = fp32 init = none output = bf16 }\n"
     "order blocks(1, pad(2, seq), seq)\n",
     "gemv", (np.array([[2.0 ** 100, -2.0 ** 100, 1, 0, 0, 0, 0, 0]] * 2, np.float32),
              np.array([2.0 ** 30, 2.0 ** 30, 1, 0, 0, 0, 0, 0], np.float32))),
    # a pad inside lanes inside a part, at n = 9 (the soak's seed 2027 spec 213: its expansion crashed)
    ("pad_in_lanes_in_part", "op gemm\nn in 5..18\nprovenance { shape { m = 4 ncols = 3 } }\n"
     "arithmetic { input = fp64 product = fma accumulator = fp64 init = none output = fp64 }\n"
     "arithmetic part0 { accumulator = fp64 product = fma }\n"
     "let r0 = if n <= 4: pad(6, pairwise(n // 2)) else: lanes(2, r0, pairwise(1))\n"
     "let h1 = lanes(3, using(part0, r0), chunks(min(13, n), rev, pairwise))\n"
     "order if i < 2 and j < 2: pairwise\n"
     "    else: pad(7, chunks((if n > 13: 13 else: n), split(n - n // 2, h1, seq), using(part0, pairwise)))\n",
     "gemm", (np.random.default_rng(7).standard_normal((4, 9)) * 1e8, np.random.default_rng(8).standard_normal((9, 3)))),
]


# numba compiles each replica at its first call (seconds): these cover its own paths (tagged lists
# in a part, a reverse fold over tagged values); test_numba_lone_leaves its pairwise walk over them
NUMBA = ("tail_blocks_fma_part", "rev_over_tail_fma")


def _calls(target: str):
    calls, wants = [], []
    for name, text, function, args in CASES:
        if target == "numba" and name not in NUMBA:
            continue
        spec = spec_of(text)
        calls.append((compile_spec(spec, target=target), function, args))
        wants.append((name, reference_outputs(spec, function, args)))
    return calls, wants


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_lone_leaves_are_formed_by_the_node_that_takes_them(target, tmp_path):
    calls, wants = _calls(target)
    for got, (name, want) in zip(run_fresh(calls, tmp_path), wants):
        assert_fresh_bits(got, want, f"{name} ({target})")
    # the inputs tell the arithmetics apart: an FMA or a part's rounding is what makes these bits
    fma_cases = {name: want for name, want in wants if name not in
                 ("tail_part_fp16", "tail_blocks_fma_part", "pad_of_one_operand", "pad_in_lanes_in_part")}
    assert all(np.all(w == 2.0 ** -24) for w in fma_cases.values()), fma_cases
    assert dict(wants)["tail_blocks_fma_part"].tolist() == [0.0634765625] * 2
    if target == "numpy":
        assert dict(wants)["pad_of_one_operand"].tolist() == [1.0] * 2
    assert len(wants) == (len(CASES) if target == "numpy" else len(NUMBA))


PAD_IN_PART = ("op sum\nn in 4\narithmetic { input = fp64 product = none accumulator = fp64 init = none output = fp64 }\n"
               "arithmetic part0 { accumulator = fp32 }\norder using(part0, pad(3, pairwise))\n")


def test_a_pad_inside_a_part_rounds_its_lone_leaf_in_the_part(tmp_path):
    # pad(3, ...) at n = 4 leaves leaf 0 alone with two phantoms: the part's node rounds it to fp32
    # (fpspec.spec.expand note [lone products]); left in fp64, 1e194 beside -inf gave -inf, not nan
    spec = spec_of(PAD_IN_PART)
    regions = expand_arith(spec, 4)[2]
    assert regions[(0, 0)].accumulator == "fp32"
    x = np.array([1.1200366402526923e+194, -5.429020154801925e-252, 1.034484674965086e+62, -1.6644634502105805e+141])
    want = reference_outputs(spec, "sum", (x,))
    assert np.isnan(want).all()
    (got,) = run_fresh([(compile_spec(spec, target="numpy"), "sum", (x,))], tmp_path)
    assert_fresh_bits(got, want, "sum")
