"""No compiled function of a Numba replica calls itself, directly or through
others (fpspec.compile.backends.numba note [plans]): recursive orders become
loops over explicit stacks or plans recorded per n.  Checked on the source of
replicas of hand-written recursive orders and of random specs (every
combinator, guards, `let` recursion, sections, fused nodes, pad, chunks)."""
from __future__ import annotations

import ast

import numpy as np
import pytest

from fpspec.compile import CompileError, compile_spec
from fpspec.errors import FpspecError
from fpspec.spec import parse
from fpspec.spec.generate import random_spec

COMPILED = {"_jit", "_inline", "_parallel"}
ARITH = "arithmetic { input = fp32 product = %s accumulator = fp32 init = none output = fp32 }\n"

RECURSIVE = [
    ("sum", "4..200", "none", "order pairwise"),
    ("sum", "37", "none", "order lanes(4, tail(8, pairwise, seq), pairwise)"),
    ("gemm", "4..16", "fma_first", "order pairwise"),
    ("dot", "1..", "fma", "order pairwise(n // 3 + 1)"),
    ("sum", "1..", "none", "let f = if n <= 8: seq else: split(n // 2, g, g)\n"
                           "let g = if n <= 8: rev else: split(n // 2 + 1, f, f)\norder f"),
    ("gemv", "1..", "rounded", "let f = if n <= 4: seq else: lanes(2, f, f)\norder f"),
    ("sum", "1..", "none", "let f = if n <= 3: seq else: tail(3, blocks(4, f, pairwise), f)\norder f"),
    ("dot", "1..", "fma", "let f = if n <= 8: seq else: split(n // 2, f, f)\norder f"),
    ("sum", "1..", "none", "let f = if n <= 2: seq else: split(1, seq, f)\norder f"),
]


def compiled_cycles(source: str) -> list[str]:
    """Names of compiled functions of `source` that reach themselves through calls."""
    calls = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Name) and d.id in COMPILED for d in node.decorator_list):
            calls[node.name] = {c.func.id for c in ast.walk(node)
                                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    cyclic = []
    for start in calls:
        seen, todo = set(), [c for c in calls[start] if c in calls]
        while todo:
            f = todo.pop()
            if f not in seen:
                seen.add(f)
                todo += [c for c in calls[f] if c in calls]
        if start in seen:
            cyclic.append(start)
    return cyclic


def test_the_check_sees_recursion():
    source = "@_jit\ndef f(m):\n    return g(m)\n\n@_jit\ndef g(m):\n    return f(m - 1) if m else 0\n"
    assert compiled_cycles(source) == ["f", "g"]


@pytest.mark.parametrize("op, n, product, order", RECURSIVE)
def test_recursive_orders_compile_without_recursion(op, n, product, order):
    source = compile_spec(parse(f"op {op}\nn in {n}\n" + ARITH % product + order + "\n"), target="numba")
    assert compiled_cycles(source) == []
    assert "_jit" in source


def test_random_specs_compile_without_recursion():
    compiled = recursive = planned = 0
    for i in range(100):
        spec = random_spec(np.random.default_rng([7, i]))
        try:
            source = compile_spec(spec, target="numba")
        except (CompileError, FpspecError):
            continue
        compiled += 1
        planned += "_PLAN_ENTRY = _reduce" in source
        recursive += "_PLAN_ENTRY = _reduce" in source or "tasks: a start" in source
        assert compiled_cycles(source) == [], i
    assert compiled >= 60 and recursive >= 30 and planned >= 5, (compiled, recursive, planned)
