"""Numba replicas neither reassociate nor contract: inspect the LLVM IR.

fastmath is off, so no instruction may carry the `fast`, `reassoc` or
`contract` flags, and an FMA may appear only where the spec says product = fma
(then as the explicit llvm.fma call).
"""
from __future__ import annotations

import re

import numpy as np

from conftest import load_replica
from fpspec.compile import compile_spec
from fpspec.spec import parse

SPEC = """op {op}
n in 1..

arithmetic {{
    input = fp32
    product = {product}
    accumulator = fp32
    init = none
    output = fp32
}}

order tail(8, lanes(8, seq, pairwise), seq)
"""
FLAGS = re.compile(r"\b(fadd|fmul|fsub)\s+(fast|reassoc|contract|nnan|ninf|nsz|arcp|afn)\b")


def llvm_of(op: str, product: str) -> str:
    mod = load_replica(compile_spec(parse(SPEC.format(op=op, product=product)), "numba"), f"llvm_{op}_{product}")
    x = np.arange(1, 20, dtype=np.float32)
    (mod.sum(x) if op == "sum" else mod.dot(x, x))
    return "\n".join(mod._one_kernel.inspect_llvm().values())


def test_sum_and_rounded_dot_have_no_fma_and_no_fast_math_flags():
    for op, product in (("sum", "none"), ("dot", "rounded")):
        ir = llvm_of(op, product)
        assert "fadd float" in ir, "the kernel's additions are not in the inspected IR"
        assert "fma" not in ir.lower(), f"{op}: an FMA the spec does not ask for"
        assert not FLAGS.search(ir), f"{op}: fast-math flags: {FLAGS.search(ir).group(0)}"


def test_fma_dot_calls_llvm_fma_and_nothing_else_is_contracted():
    ir = llvm_of("dot", "fma")
    assert "@llvm.fma.f32" in ir
    assert not FLAGS.search(ir)
