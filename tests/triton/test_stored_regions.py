"""Triton replicas of `using(part, ...)` regions whose section narrows the accumulator
(fp32 -> fp16) around an unused or used fused block (triton_host Note [stored regions]):
every node inside such a region rounds into fp16, so the kernels run it only where its
additions are a fused chain's nodes (results stored into fp16) or it holds one term;
any other region is refused by the compiler in one line, never run in fp32."""
import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import CompileError, compile_spec
from fpspec.spec import check, parse

SPEC = """op {op}
n in {n}
arithmetic {{ input = fp16 product = {product} accumulator = fp32 init = none output = fp32
  fused {{ w = 4 extra_bits = 0 aligned = truncate result = rne c_aligned = true exponent_floor = none }} }}
arithmetic part0 {{ accumulator = fp16 product = {product} }}
order {order}
"""
WHOLE = "if n <= 40: using(part0, seq) else: seq"


def spec(op, n, order):
    s = parse(SPEC.format(op=op, n=n, order=order, product="none" if op == "sum" else "exact"))
    check(s)
    return s


@pytest.mark.parametrize("op, n, order, adds", [
    ("gemv", 4, WHOLE, 4),                                # a random spec's order: fp16 overflowed to a finite sum
    ("dot", 4, WHOLE, 4),
    ("gemv", 8, "lanes(4, using(part0, seq), seq)", 2),    # regions inside lanes, a fold of 2 each
    ("dot", 6, "blocks(3, using(part0, rev), seq)", 3),
    ("sum", 4, "lanes(2, using(part0, seq), seq)", 2),
])
def test_a_region_of_fp16_additions_outside_a_chain_is_refused(op, n, order, adds):
    with pytest.raises(CompileError) as e:
        compile_spec(spec(op, n, order), target="triton")
    assert str(e.value) == (f"triton: a using(...) region of accumulator fp16 must hold one fused chain (or one term) "
                            f"in the Triton kernels; here it adds {adds} terms otherwise (at n = {n}); compile for "
                            "numpy or numba")


def test_a_region_picked_at_one_n_only_is_refused_by_the_compiler():
    # n = 150 is none of the lengths planned for every spec (the first ones, powers of two and
    # their neighbours): the guard's own integers are planned too, so the replica never raises later
    text = SPEC.format(op="dot", n="1..200", order="if n == 150: using(part0, seq) else: seq", product="exact")
    with pytest.raises(CompileError, match=r"here it adds 150 terms otherwise \(at n = 150\)"):
        compile_spec(parse(text), target="triton")


def test_regions_the_kernels_run_round_every_node_into_fp16(tmp_path):
    # products of 2^7 * 2^8 = 32768: two of them overflow fp16 (a finite 65536 in fp32)
    big = np.full(4, 2.0 ** 7, np.float16)
    calls = [
        # a chain stored into fp16 as the whole order: node [p0 p1] is inf, so is the output
        (spec("gemv", 4, "if n <= 40: using(part0, chain(2)) else: seq"), "gemv",
         (np.stack([big, big * -1, big]), np.full(4, 2.0 ** 8, np.float16))),
        (spec("dot", 4, "if n <= 40: using(part0, chain(2)) else: seq"), "dot",
         (big, np.full(4, 2.0 ** 8, np.float16))),
        # one term per region: its product enters the fp32 root exactly (65536 * 2, finite)
        (spec("dot", 4, "lanes(4, using(part0, seq), seq)"), "dot", (big, np.full(4, 2.0 ** 8, np.float16))),
        (spec("sum", 4, "lanes(4, using(part0, seq), seq)"), "sum", (np.full(4, 60000.0, np.float16),)),
    ]
    outs = run_fresh([(compile_spec(s, target="triton"), f, args, "float16") for s, f, args in calls], tmp_path)
    wants = [reference_outputs(s, f, args) for s, f, args in calls]
    assert [w.tolist() for w in wants] == [[np.inf, -np.inf, np.inf], [np.inf], [131072.0], [240000.0]]
    for (s, f, _), got, want in zip(calls, outs, wants):
        assert_fresh_bits(got, want, f)
