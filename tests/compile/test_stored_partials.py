"""Fused nodes stored into a narrower accumulator (fpspec.arith.model note [fused output]).

cuBLAS runs torch.matmul bf16 16x16xK on an H100, for K not a multiple of 8, as split-K
over 8-product chunks: each chunk one Tensor Core node (fp32, toward zero), stored in bf16
(nearest even), the partials added in fp32 in order.  The recorded H100 outputs
(tests/compile/data/h100_bf16_16x16_splitk.npz: bf16 bits of A, B and torch.matmul's C,
4 inputs at each of K = 42, 50, 58, 100) are reproduced bit for bit by the model and by
every backend; the same order without the stored partials is not.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fresh_replicas import run_fresh
from fpspec.arith.evaluate import evaluate
from fpspec.compile import compile_spec
from fpspec.errors import SpecError
from fpspec.spec import parse
from fpspec.spec.expand import expand_arith
from fpspec.tree import format_tree

ROOT = Path(__file__).resolve().parents[2]
RECORD = Path(__file__).resolve().parent / "data" / "h100_bf16_16x16_splitk.npz"

ARITH = """arithmetic {
    input = bf16
    product = exact
    accumulator = fp32
    init = none
    output = bf16
    fused { w = 8  extra_bits = 2  aligned = truncate  result = rz  c_aligned = true  exponent_floor = -133 }
}
"""
STORED = 'target "torch.matmul"\nop gemm\nn in 1..\n' + ARITH + """arithmetic partials {
    accumulator = bf16
}

order blocks(8, using(partials, fused), seq)
"""
PLAIN = 'target "torch.matmul"\nop gemm\nn in 1..\n' + ARITH + "\norder blocks(8, fused, seq)\n"


def _bf16(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _records():
    d = np.load(RECORD)
    for K in (42, 50, 58, 100):
        for s in range(d[f"A{K}"].shape[0]):
            yield K, _bf16(d[f"A{K}"][s]), _bf16(d[f"B{K}"][s]), _bf16(d[f"C{K}"][s])


def _model(text, A, B):
    K = A.shape[1]
    tree, main, regions = expand_arith(parse(text), K)
    x = np.repeat(A.T.astype(np.float64)[:, :, None], B.shape[1], axis=2).reshape(K, -1)
    y = np.repeat(B.astype(np.float64)[:, None, :], A.shape[0], axis=1).reshape(K, -1)
    return np.asarray(evaluate(tree, x, y, main, regions), np.float64).reshape(A.shape[0], B.shape[1])


def _same(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_the_model_reproduces_the_h100_and_the_order_alone_does_not():
    plain_misses = 0
    for K, A, B, C in _records():
        assert _same(_model(STORED, A, B), C), K
        plain_misses += int((np.asarray(_model(PLAIN, A, B), np.float32).view(np.uint32) != C.view(np.uint32)).sum())
    assert plain_misses > 100   # the stored partials are what the records need


def _one_leaf_blocks():
    """Inputs at K = 17 and 25, where the last block of 8 is one leaf: the lone product
    (1 + 2**-7)**2 = 1 + 2**-6 + 2**-14 enters the fp32 sum exactly, and 2**-8 beside it makes
    the bf16 output a tie if it were rounded to bf16 first; then random bf16 values."""
    rng = np.random.default_rng(17)
    for K in (17, 25):
        A = _bf16(rng.integers(0x3C00, 0x4100, (3, K)) ^ (rng.integers(0, 2, (3, K)) << 15))
        B = _bf16(rng.integers(0x3C00, 0x4100, (K, 2)) ^ (rng.integers(0, 2, (K, 2)) << 15))
        A[0], B[:, 0] = 0, 0
        A[0, 0], B[0, 0] = 2.0 ** -8, 1
        A[0, K - 1] = B[K - 1, 0] = 1 + 2.0 ** -7
        yield K, A, B


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Every replica call of this file, run by written replicas in one fresh interpreter:
    {(what, target, case): outputs}."""
    from fpspec.inputs import generate

    calls, keys = [], []
    for target in ("numpy", "numba", "triton"):
        source = compile_spec(parse(STORED), target)
        for K, A, B, C in _records():
            calls.append((source, "gemm", (A, B)) + (("bfloat16",) if target == "triton" else ()))
            keys.append(("h100", target, K, C))
        for K, A, B in _one_leaf_blocks():
            calls.append((source, "gemm", (A, B)) + (("bfloat16",) if target == "triton" else ()))
            keys.append(("one leaf", target, K, _model(STORED, A, B)))
    for fmt in ("fp16", "bf16"):
        text = PLAIN.replace("bf16", fmt).replace("exponent_floor = -133", "exponent_floor = none")
        text = text.replace("w = 8", "w = 16").replace("blocks(8, fused, seq)", "chain(16)")
        for target in ("numpy", "triton"):
            source = compile_spec(parse(text), target)
            for idx, kind in enumerate(("subnormals", "wide_exponent", "signed_zeros")):
                a, b = generate("gemm", 40, fmt, seed=2, index=idx, kind=kind, m=4, ncols=4).args[:2]
                dtype = np.float16 if fmt == "fp16" else np.float32
                A, B = (np.asarray(v, np.float64).astype(dtype) for v in (a, b))
                tensors = (("float16" if fmt == "fp16" else "bfloat16"),) if target == "triton" else ()
                calls.append((source, "gemm", (A, B)) + tensors)
                keys.append(("nofloor", target, fmt, kind))
    return list(zip(keys, run_fresh(calls, tmp_path_factory.mktemp("stored"))))


@pytest.mark.parametrize("target", ["numpy", "numba", "triton"])
def test_replicas_reproduce_the_h100(target, fresh):
    runs = [(key, got) for key, got in fresh if key[:2] == ("h100", target)]
    assert len(runs) == 16
    for (_, _, K, C), got in runs:
        assert not isinstance(got, str), got
        assert _same(got.reshape(C.shape), C), (target, K)


@pytest.mark.parametrize("target", ["numpy", "numba", "triton"])
def test_a_one_leaf_block_adds_its_exact_product(target, fresh):
    """blocks(8, using(stored_bf16, fused), seq) at K % 8 == 1: the last block is one leaf, no
    node, and the outer fp32 node takes its exact product (the H100 bf16 split-K order)."""
    tree = format_tree(expand_arith(parse(STORED), 17)[0])
    assert tree == "(([0 1 2 3 4 5 6 7] [8 9 10 11 12 13 14 15]) 16)"
    runs = [(key, got) for key, got in fresh if key[:2] == ("one leaf", target)]
    assert [key[2] for key, _ in runs] == [17, 25]
    for (_, _, K, want), got in runs:
        assert want[0, 0] == 1 + 2.0 ** -6 + 2.0 ** -7, K    # bf16 of 1 + 2**-6 + 2**-8 + 2**-14
        assert not isinstance(got, str), got
        assert _same(got.reshape(want.shape), want), (target, K)


def test_spec_text_round_trips_and_the_inherited_block_keeps_fp32():
    spec = parse(STORED)
    assert str(parse(str(spec))) == str(spec)
    _, main, regions = expand_arith(spec, 50)
    region = next(iter(regions.values()))
    assert (main.fused.output, region.accumulator, region.fused.output) == ("fp32", "bf16", "fp32")
    explicit = STORED.replace("accumulator = bf16\n}", "accumulator = bf16\n    fused { w = 8  extra_bits = 2  "
                              "exponent_floor = -133  output = fp32 }\n}")
    assert expand_arith(parse(explicit), 50)[2] == regions


def test_a_fused_output_narrower_than_the_accumulator_is_refused_with_its_place():
    text = PLAIN.replace("exponent_floor = -133 }", "exponent_floor = -133  output = bf16 }")
    with pytest.raises(SpecError) as e:
        expand_arith(parse(text, "x.fps"), 50)
    assert str(e.value).startswith("x.fps:") and "narrower than accumulator = fp32" in str(e.value)
    assert "\n" not in str(e.value)


def test_reveal_finds_the_stored_partials(tmp_path, monkeypatch):
    """A black box that is the H100 kernel (its NumPy replica, bf16 tensors in and out):
    `fpspec reveal -o` writes the stored spec, not a refusal."""
    import torch

    from fpspec.cli import main

    (tmp_path / "h100_replica.py").write_text(compile_spec(parse(STORED), "numpy"))
    (tmp_path / "h100_box.py").write_text(
        "import numpy as np, torch\nimport h100_replica\n"
        "def gemm(A, B):\n"
        "    out = h100_replica.gemm(A.float().numpy(), B.float().numpy())\n"
        "    return torch.tensor(np.asarray(out, np.float32)).to(torch.bfloat16)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "rev.fps"
    rc = main(["reveal", "h100_box:gemm", "--op", "gemm", "-n", "50", "--dtype", "bfloat16", "--m", "16",
               "--ncols", "16", "-o", str(out)])
    assert rc in (0, None)
    spec = parse(out.read_text())
    assert str(spec.order) == "blocks(8, using(stored_bf16, fused), seq)"
    assert [(a.name, [str(e) for e in a.entries]) for a in spec.header.arithmetics] == [
        ("stored_bf16", ["accumulator = bf16"])]
    # the partials hide the floor from the probes; the H100's own passes the check and is kept
    assert expand_arith(spec, 50)[1].fused.exponent_floor == -133
    for K, A, B, C in _records():
        if K == 50:
            assert _same(_model(out.read_text(), A, B), C)


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_a_spec_without_exponent_floor_compiles_for_triton(fmt, fresh):
    """`fpspec reveal -o` writes exponent_floor = none where the probes cannot see it (H100 fp16
    64x64x64): the Triton replica compiles and gives the NumPy replica's bits, tiny inputs included."""
    runs = {(key[0], key[1], key[2], key[3]): got for key, got in fresh if key[0] == "nofloor" and key[2] == fmt}
    assert len(runs) == 6
    for kind in ("subnormals", "wide_exponent", "signed_zeros"):
        want, got = runs[("nofloor", "numpy", fmt, kind)], runs[("nofloor", "triton", fmt, kind)]
        assert not isinstance(want, str) and not isinstance(got, str), (want, got)
        assert _same(got, want), kind
