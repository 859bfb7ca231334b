"""Replicas of specs with arithmetic per part (using(NAME, order)): OpenBLAS sdot.

examples/cpu/numpy_dot_float32.fps gives numpy.dot float32 on this machine: for
n < 32 one fp64 loop over products rounded to fp32; from 32 on an fp32 kernel
(FMA lanes, plain fp32 adds between lanes) over the first n & -32 terms, its
result and the leftover products joined in fp64.  Both loop backends must give
numpy.dot's bits, and the spec's model (fpspec.arith.evaluate), bit for bit.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.arith.evaluate import evaluate
from fpspec.compile import CompileError, compile_spec
from fpspec.inputs import samples
from fpspec.spec import load, parse
from fpspec.spec.expand import expand_arith

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpu" / "numpy_dot_float32.fps"
NS = list(range(1, 131)) + [1000, 4099]
SAMPLES = 7          # one per input family of fpspec.inputs


@pytest.fixture(scope="module")
def sdot():
    """The example, its range opened past the 1024 it was revealed at (4099 is checked below)."""
    text = EXAMPLE.read_text()
    assert "\nn in 1..1024\n" in text
    return parse(text.replace("\nn in 1..1024\n", "\nn in 1..\n"), str(EXAMPLE))


def _inputs(n):
    rng = np.random.default_rng(n)
    out = [s.args for s in samples("dot", n, "fp32", SAMPLES, seed=n)]
    out += [tuple(rng.uniform(-1, 1, (2, n)).astype(np.float32)) for _ in range(3)]
    return out


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_sdot_replica_equals_numpy_dot(sdot, target):
    mod = load_replica(compile_spec(sdot, target), f"sdot_{target}")
    for n in NS:
        for x, y in _inputs(n):
            with np.errstate(all="ignore"):
                want = np.dot(x, y)
            assert_same_bits(mod.dot(x, y), want, f"{target} replica of numpy.dot, n = {n}")


def test_sdot_model_equals_numpy_dot_and_the_tree_holds_at_4099(sdot):
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    for n in (40, 48, 63, 65, 4099):
        tree, main, regions = expand_arith(sdot, n)
        if n == 4099:
            assert reveal(resolve_target("numpy.dot", n=n, dtype="float32"), check=False).tree == tree
        for x, y in _inputs(n):
            with np.errstate(all="ignore"):
                got = evaluate(tree, x, y, main, regions)
                want = np.dot(x, y)
            assert_same_bits(np.float32(got), want, f"model of numpy.dot, n = {n}")


def test_one_arithmetic_is_not_enough(sdot):
    """Without the per-part sections (everything in the main fp64 arithmetic) the model differs."""
    plain = parse(re.sub(r"using\((\w+), ", "(", str(sdot)).replace("(seq)", "seq").replace("(pairwise)", "pairwise"))
    assert not plain.header.arithmetics or "using" not in str(plain.order)
    differ = 0
    for n in (40, 100):
        tree, main, regions = expand_arith(plain, n)
        assert regions == {}
        for x, y in _inputs(n):
            with np.errstate(all="ignore"):
                differ += int(np.float32(evaluate(tree, x, y, main)).tobytes() != np.dot(x, y).tobytes())
    assert differ >= 3


FLAGS = re.compile(r"\b(fadd|fmul|fsub)\s+(fast|reassoc|contract|nnan|ninf|nsz|arcp|afn)\b")


def test_numba_regions_fma_only_in_the_fma_part(sdot):
    source = compile_spec(sdot, "numba")
    # in the source, only the FMA part's leaf function calls the explicit fma (`_fma_into`)
    callers = {m.group(1) for m in re.finditer(r"^def (\w+)\(.*?(?=^\S)", source, re.M | re.S)
               if "_fma_into(" in m.group(0) and not m.group(1).startswith("_fma")}
    callers = {name for name in callers
               if re.search(rf"^def {name}\(.*?\n\s+return [^\n]*\b_fma_into\(", source, re.M | re.S)}
    assert callers == {"_add_leaf__fma_fp32"}, callers
    mod = load_replica(source, "sdot_numba")
    x = np.arange(1, 70, dtype=np.float32)
    mod.dot(x, x)
    ir = "\n".join(mod._one_kernel.inspect_llvm().values())
    assert not FLAGS.search(ir)
    assert re.search(r"call [^\n]*@llvm\.fma\.f32", ir) and "llvm.fma.f64" not in ir


SPEC = """op dot
n in 1..
arithmetic {{
    input = fp32
    product = rounded
    accumulator = {main}
    init = none
    output = fp32
}}
arithmetic part {{
    accumulator = {part}
}}
order tail(4, using(part, seq), seq)
"""


def test_a_part_wider_than_around_it_is_refused():
    spec = parse(SPEC.format(main="fp32", part="fp64"))
    for target in ("numpy", "numba"):
        with pytest.raises(CompileError) as e:
            compile_spec(spec, target)
        assert str(e.value) == ("using(part, ...): its fp64 accumulator is wider than the fp32 around it; "
                                "one rounding of the exact sum cannot be expressed")


def test_triton_runs_named_arithmetic():
    """fp32 part, fp64 around, on the Triton replica (the interpreter): the model's bits."""
    pytest.importorskip("triton")
    spec = parse(SPEC.format(main="fp64", part="fp32"))
    mod = load_replica(compile_spec(spec, "triton"), "narrow_triton")
    rng = np.random.default_rng(1)
    for n in (1, 5, 9):
        tree, main, regions = expand_arith(spec, n)
        for _ in range(2):
            x, y = rng.uniform(-1, 1, (2, n)).astype(np.float32)
            assert_same_bits(mod.dot(x, y), np.float32(evaluate(tree, x, y, main, regions)), f"n = {n}")


def test_a_narrow_part_in_a_wide_loop_matches_the_model():
    """fp32 part, fp64 around: the part's result widens exactly (numpy and numba, bits of the model)."""
    spec = parse(SPEC.format(main="fp64", part="fp32"))
    rng = np.random.default_rng(0)
    mods = [load_replica(compile_spec(spec, t), f"narrow_{t}") for t in ("numpy", "numba")]
    for n in (1, 2, 4, 5, 9, 33):
        tree, main, regions = expand_arith(spec, n)
        for _ in range(20):
            x, y = rng.uniform(-1, 1, (2, n)).astype(np.float32)
            want = np.float32(evaluate(tree, x, y, main, regions))
            for mod in mods:
                assert_same_bits(mod.dot(x, y), want, f"n = {n}")


MIXED = """op dot
n in 1..
arithmetic {
    input = fp32
    product = rounded
    product_format = fp32
    accumulator = fp64
    init = none
    output = fp32
}
arithmetic f32 {
    product = fma
    accumulator = fp32
}
arithmetic r32 {
    accumulator = fp32
}
order
    if n <= 20: lanes(4, seq, using(r32, pairwise))
    elif n <= 40: blocks(8, using(f32, seq), seq)
    elif n <= 60: split(n // 2, using(f32, lanes(2, seq, seq)), using(r32, rev))
    else: using(r32, lanes(4, using(f32, seq), pairwise))
"""


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_parts_anywhere_give_the_bits_of_the_model(target):
    """using() as a lane join, a block order, both halves of a split, nested: each replica
    equals fpspec.arith.evaluate of the spec bit for bit."""
    spec = parse(MIXED)
    mod = load_replica(compile_spec(spec, target), f"mixed_{target}")
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 5, 8, 19, 20, 21, 24, 33, 41, 42, 59, 61, 64, 67, 100):
        tree, main, regions = expand_arith(spec, n)
        for _ in range(8):
            x, y = rng.uniform(-1, 1, (2, n)).astype(np.float32)
            want = np.float32(evaluate(tree, x, y, main, regions))
            assert_same_bits(mod.dot(x, y), want, f"{target}, n = {n}")
