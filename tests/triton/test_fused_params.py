"""Every named fused parameter set (fpspec.arith.params, GPU-INPUT[-to-OUTPUT]) through the
emulated Triton path: a gemm spec `order chain(w)` compiled by fpspec.compile for triton and
for numpy, on random and adversarial blocks; Triton bits == NumPy replica bits == the model."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest
import torch

from fpspec.arith.fused import _FORMATS, fused_chain, round_value
from fpspec.arith.model import Arithmetic
from fpspec.arith.params import PARAMS
from fpspec.compile import compile_spec, load_replica
from fpspec.spec import ast as A
from fpspec.spec import parse

M, N = 16, 16
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8e4m3": torch.float8_e4m3fn,
         "fp8e5m2": torch.float8_e5m2, "fp8e4m3fnuz": torch.float8_e4m3fnuz, "fp8e5m2fnuz": torch.float8_e5m2fnuz}
NUMPY = {"fp16": np.float16}
NO_INF = ("fp8e4m3", "fp8e4m3fnuz", "fp8e5m2fnuz", "fp6e2m3", "fp6e3m2", "fp4e2m1")
NO_NAN = ("fp6e2m3", "fp6e3m2", "fp4e2m1")


def _largest(fmt):
    """The largest finite value of fmt (e4m3: 448, its all-ones pattern is nan)."""
    precision, _, emax = _FORMATS[fmt]
    return 448.0 if fmt == "fp8e4m3" else (2.0 - 2.0 ** (1 - precision)) * 2.0 ** emax


def _spec(params) -> A.Spec:
    arithmetic = Arithmetic(input=params.input, product="exact", accumulator=params.output, output=params.output,
                            fused=params)
    header = A.Header(target=f"gemm ({params.input})", op="gemm", n=A.Range(1, None),
                      sections=(A.Block("arithmetic", arithmetic.to_entries()),))
    return parse(str(A.Spec(header, (), A.Chain(A.Num(params.w)))))


@lru_cache(maxsize=None)
def _replicas(params):
    """(triton module, numpy module) of the spec at n = 2 w: one replica per distinct set."""
    spec = _spec(params)
    label = f"fused_params_{abs(hash(params))}"
    return (load_replica(compile_spec(spec, "triton", n=2 * params.w), label + "_triton"),
            load_replica(compile_spec(spec, "numpy", n=2 * params.w), label + "_numpy"))


def _grid(v, fmt):
    precision, emin, emax = _FORMATS[fmt]
    with np.errstate(all="ignore"):
        return round_value(v, precision, emin, emax, "rne")


def _values(rng, fmt, shape):
    """Values of fmt over its whole exponent range (subnormals included), 20% zeros."""
    precision, emin, emax = _FORMATS[fmt]
    e = rng.integers(max(emin - precision + 1, -60), min(emax, 60) + 1, shape)
    v = rng.choice([-1.0, 1.0], shape) * np.ldexp(1.0 + rng.random(shape), e)
    v = np.minimum(np.abs(_grid(v, fmt)), _largest(fmt)) * np.sign(v)
    v[rng.random(shape) < 0.2] = 0.0
    return v


def _blocks(params, seed):
    """A (M x K) and B (K x N), K = 2 w (two nodes: the second takes the first's result as c):
    random rows; exact cancellation (row 4 against columns 0-3); products near the
    formats' smallest subnormals (row 5, columns 4-5); the largest finite values (row 6,
    column 6); a block of zeros but one product (row 7); inf and nan where the formats
    have them (rows 8-9, columns 8-10)."""
    rng = np.random.default_rng(seed)
    fa, fb = params.input, params.input_b or params.input
    K = 2 * params.w
    a, b = _values(rng, fa, (M, K)), _values(rng, fb, (K, N))
    a[4, 1::2] = a[4, 0::2]
    b[1::2, :4] = -b[0::2, :4]
    for v, fmt, idx in ((a, fa, np.s_[5, :]), (b, fb, np.s_[:, 4:6])):
        precision, emin, emax = _FORMATS[fmt]
        small = np.ldexp(rng.integers(0, 1 << (precision - 1), v[idx].shape), emin - precision + 1)
        v[idx] = small * rng.choice([-1.0, 1.0], v[idx].shape)
    for v, fmt, idx in ((a, fa, np.s_[6, :]), (b, fb, np.s_[:, 6])):
        v[idx] = _largest(fmt) * rng.choice([-1.0, 1.0], v[idx].shape)
    a[7, :] = 0.0
    a[7, 3] = _grid(1.0, fa)
    if fa not in NO_INF:
        a[8, 2] = np.inf
    if fb not in NO_INF:
        b[5, 8] = -np.inf
    if fa not in NO_NAN:
        a[9, 1] = np.nan
    if fb not in NO_NAN:
        b[0, 10] = np.nan
    return a, b


def _torch(v, fmt):
    t = torch.from_numpy(v.astype(np.float32))
    return t.to(TORCH[fmt]) if fmt in TORCH else t


def _bits(v):
    """float32 bit patterns, every NaN as one pattern."""
    v = np.asarray(v, np.float32)
    return np.where(np.isnan(v), np.uint32(0x7FC00000), v.view(np.uint32))


# every named set compiles for triton (a set and its aliases: one compile per distinct set)
DISTINCT = {params: name for name, params in sorted(PARAMS.items(), reverse=True)}


@pytest.mark.parametrize("name", sorted(DISTINCT.values()))
def test_every_named_set_compiles_for_triton(name):
    params = PARAMS[name]
    aliases = sorted(n for n, p in PARAMS.items() if p == params)
    source = compile_spec(_spec(params), "triton", n=2 * params.w)
    assert f"extra_bits={params.extra_bits}," in source, aliases
    assert f"input_b={params.input_b!r}" in source and f"output={params.output!r}" in source, aliases


# the bits of one set of each kind the kernels tell apart (the interpreter runs ~0.3 s a launch,
# so not all 139 distinct sets: each of these reads its formats, conventions and combine
# through another arm of fp_operand / fp_fused_node / fp_amd_node).  Every named set equals
# the model on these blocks: `TRITON_INTERPRET=1 PYTHONPATH=. python tests/triton/test_fused_params.py` runs
# this test's body over every distinct set (139 sets of 199 names, about 2 minutes).
BITS = {
    "h100-fp8e4m3xfp8e5m2-to-fp16": PARAMS["h100-fp8e4m3xfp8e5m2-to-fp16"],   # two fp8 formats, fp16 nodes
    "h100-fp8e5m2xfp8e4m3": PARAMS["h100-fp8e5m2xfp8e4m3"],                   # 13 result bits, e4m3 b
    "rtx-pro-6000-fp4e2m1xfp6e3m2-to-fp16": PARAMS["rtx-pro-6000-fp4e2m1xfp6e3m2-to-fp16"],  # fp4 x fp6, MMA-Sim's
    "rtx-pro-6000-fp6e2m3xfp8e4m3": PARAMS["rtx-pro-6000-fp6e2m3xfp8e4m3"],   # fp6 a in fp32 bits, e4m3 b
    "b200-fp8e5m2xfp4e2m1": PARAMS["b200-fp8e5m2xfp4e2m1"],                   # FTTN's conventions, fp4 b
    "mi300x-fp8e4m3fnuzxfp8e5m2fnuz": PARAMS["mi300x-fp8e4m3fnuzxfp8e5m2fnuz"],  # AMD, even / odd sub-blocks
    "mi300x-xf32": PARAMS["mi300x-xf32"],                                     # AMD, tf32 (a -0.0 block)
    "t4-fp16-to-fp16": PARAMS["t4-fp16-to-fp16"],                             # fp16 nodes, zeros at -126, c_emin
    "a100-tf32": PARAMS["a100-tf32"],
    # parameters of no named set: flushed subnormals, rounded aligned terms, zeros at exponent 0
    "flush-rne-zero0": replace(PARAMS["h100-bf16"], subnormal_inputs=False, subnormal_outputs=False,
                               aligned="rne", zero_exponent=0, c_emin=0),
    "floor-fp16": replace(PARAMS["a100-fp16-to-fp16"], aligned="floor", subnormal_outputs=False),
}


@pytest.mark.parametrize("label", sorted(BITS))
def test_triton_equals_numpy_equals_model(label):
    params = BITS[label]
    rep_triton, rep_numpy = _replicas(params)
    a, b = _blocks(params, [params.w, len(label)])
    rows_a = np.repeat(a, N, axis=0)                     # row i * N + j: a[i, :] with b[:, j]
    rows_b = np.tile(b.T, (M, 1))
    with np.errstate(all="ignore"):
        want = fused_chain(rows_a, rows_b, 0.0, params).reshape(M, N)
    fb = params.input_b or params.input
    got = rep_triton.gemm(_torch(a, params.input), _torch(b, fb), path="emulated")
    got_np = rep_numpy.gemm(a.astype(NUMPY.get(params.input, np.float32)), b.astype(NUMPY.get(fb, np.float32)))
    assert rep_triton.REPLICA.last_path == "emulated"
    assert got.dtype == (torch.float16 if params.output == "fp16" else torch.float32)
    want_bits = _bits(want)
    assert np.array_equal(_bits(got.float().cpu().numpy()), want_bits), label
    assert np.array_equal(_bits(got_np), want_bits), label


@pytest.mark.parametrize("params,says", [
    (replace(PARAMS["h100-fp16"], c_aligned=False), "fused c_aligned = false"),
    (replace(PARAMS["mi300x-fp16"], result="rz"), "AMD's combine rounds to nearest"),
])
def test_what_the_kernels_do_not_compute_is_refused_in_one_line(params, says):
    from fpspec.compile.ir import CompileError

    with pytest.raises(CompileError, match=says) as e:
        compile_spec(_spec(params), "triton", n=2 * params.w)
    assert "\n" not in str(e.value)


def test_fp16_nodes_only_in_chains():
    from fpspec.compile.ir import CompileError

    params = PARAMS["h100-fp16-to-fp16"]
    spec = parse(str(_spec(params)).replace(f"order chain({params.w})", "order blocks(16, chain(16), seq)"))
    with pytest.raises(CompileError, match="fused nodes writing fp16 are supported in chains of fused nodes only"):
        compile_spec(spec, "triton", n=64)


if __name__ == "__main__":
    differ = []
    for every, label in sorted(DISTINCT.items(), key=lambda item: item[1]):
        BITS[label] = every
        try:
            test_triton_equals_numpy_equals_model(label)
        except AssertionError:
            differ.append(label)
    print(f"{len(DISTINCT)} distinct sets of {len(PARAMS)} names; {len(differ)} differ: {', '.join(differ) or '-'}")
