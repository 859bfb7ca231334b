"""Binned replicas (fpspec.arith.binned): the order-independent sum, compiled for numpy and numba.

A spec whose arithmetic says `accumulator = binned(fold = K)` holds for every tree, so its replica
ignores the order: each backend's render module hands such a kernel here, and the replica is its
usual template filled with the binned runtime instead of loops (Triton: fpspec.compile.triton_binned).
Every replica gives ReproBLAS's bits, whatever the order of the terms, the split, the thread count or
the machine: they all deposit exact slices (fpspec.arith.binned note [exact slices]) and convert the
same fields with the same operations.
"""
from __future__ import annotations

from fpspec.arith import binned as model
from fpspec.arith.binned import binned_format
from fpspec.compile import binned_numba, binned_rt
from fpspec.compile.ir import CompileError, Kernel
from fpspec.compile.runtime import embed

PUBLIC = {"sum": ("sum", "sums"), "dot": ("dot",), "gemv": ("gemv",), "gemm": ("gemm",)}
_DTYPE = {"fp64": "np.float64", "fp32": "np.float32"}
# fpspec.arith.binned's NumPy kernel, embedded in NumPy replicas
_MODEL_NAMES = ["BinnedFormat", "_or1", "special_sum", "convert", "row_index", "sum_rows", "row_slice_counts"]
_NUMBA_JIT = ["_term", "_index_of_bits", "_float_of_bits", "_block_flags", "_carry_in", "_shift_state", "_partial", "_merge_into", "_finish"]
_NUMBA_PARALLEL = ["_sum_parallel", "_rows", "_gemm_rows"]


def is_binned(kernel: Kernel) -> bool:
    return getattr(kernel.arithmetic, "binned", None) is not None


def check(kernel: Kernel) -> None:
    if kernel.arithmetics:
        raise CompileError("a binned accumulator holds for the whole accumulation; expected no "
                           "using(NAME, ...) parts")
    if kernel.op not in PUBLIC:
        raise CompileError(f"binned: op {kernel.op} cannot be compiled; expected one of {', '.join(PUBLIC)}")


def _common(kernel: Kernel) -> list[str]:
    a = kernel.arithmetic
    return [f"_DT = {_DTYPE[a.input]}", f"_FOLD = {a.binned}", f"_NAME = {kernel.name!r}"]


def render_numpy(backend, kernel: Kernel) -> str:
    from fpspec.compile.backends import header, render_template

    check(kernel)
    public = PUBLIC[kernel.op]
    return render_template(
        backend.template,
        header=header(kernel, backend.name),
        name=kernel.name,
        op=f"{kernel.op} with a binned(fold = {kernel.arithmetic.binned}) accumulator (any order: the same bits)",
        public=", ".join(public),
        spec_literal=repr(kernel.source),
        settings=_common(kernel),
        runtime="import math\n\n" + embed(model, _MODEL_NAMES) + "\n\n" + embed(binned_rt, ["_checked"]),
        constants=[f"_FMT = BinnedFormat({kernel.arithmetic.input!r})"],
        functions=[],
        api=embed(binned_rt, [f"api_{n}" for n in public], {f"api_{n}": n for n in public}),
    )


def numba_settings(kernel: Kernel) -> list[str]:
    """The constants binned_numba's functions read, as literals (numba freezes globals)."""
    a = kernel.arithmetic
    fmt = binned_format(a.input)
    floats = ", ".join(repr(float(b)) for b in fmt.bins)
    ulps = ", ".join(repr(float(u)) for u in fmt.ulps)
    bits = 64 if a.input == "fp64" else 32
    return _common(kernel) + [
        f"_BINS64 = np.array([{floats}])",
        "_BINS = _BINS64.astype(_DT)",
        f"_ULPS = np.array([{ulps}])",
        f"_P, _W, _EMAX, _MAXI, _Q = {fmt.p}, {fmt.width}, {fmt.emax}, {fmt.max_index}, {fmt.quarter_bits}",
        f"_EXP_SHIFT, _INF_BITS = {fmt.p - 1}, {((1 << (bits - fmt.p)) - 1) << (fmt.p - 1)}",
        f"_COMPRESSION, _HALF_EXPANSION, _EXPANSION = {fmt.compression!r}, {fmt.expansion * 0.5!r}, "
        f"{fmt.expansion!r}",
        f"_SINGLE = {a.input == 'fp32'}",
        f"_PRODUCT = {kernel.op != 'sum'}",
        f"_LANES = {binned_numba._LANES}",
        f"_BLOCK = {binned_numba._BLOCK}",
    ]


def render_numba(backend, kernel: Kernel) -> str:
    from fpspec.compile.backends import header, render_template

    check(kernel)
    public = PUBLIC[kernel.op]
    runtime = "\n\n".join([
        "from llvmlite import ir\nfrom numba import get_num_threads, types",
        embed(binned_numba, ["_or1", "_abs_bits"]),
        embed(model, ["convert"], decorator="@_jit"),
        embed(binned_numba, _NUMBA_JIT, decorator="@_jit"),
        block_loops(kernel.arithmetic.binned, binned_numba._LANES, kernel.op != "sum"),
    ])
    return render_template(
        backend.template,
        header=header(kernel, backend.name),
        name=kernel.name,
        op=f"{kernel.op} with a binned(fold = {kernel.arithmetic.binned}) accumulator (any order: the same bits)",
        public=", ".join(public),
        spec_literal=repr(kernel.source),
        settings=numba_settings(kernel),
        cache=True,
        runtime=runtime,
        constants=[],
        functions=[],
        kernels=embed(binned_numba, _NUMBA_PARALLEL, decorator="@_parallel"),
        api="\n\n".join([embed(binned_rt, ["_checked"]), embed(binned_numba, ["_parts"]),
                         embed(binned_numba, [f"api_{n}" for n in public], {f"api_{n}": n for n in public})]),
    )


def block_loops(fold: int, lanes: int, product: bool) -> str:
    """binned_numba's block loops for `fold` slots and `lanes` lanes, written out: each lane's sums are
    local variables (fold * lanes of them), the term inline (x[k] * y[k] rounded when `product`).
    _deposit_top is index 0 (note [index 0]: slot 0 scaled)."""
    def term(at: str) -> str:
        return f"X[{at}] * Y[{at}]" if product else f"X[{at}]"

    def deposit(name: str, top: bool) -> str:
        args = "X, Y, b0, b1, acc" if top else "X, Y, b0, b1, index, acc"
        base = "0" if top else "index"
        lines = [f"@_jit\ndef {name}({args}):",
                 '    """Add the slices of terms b0..b1-1 into acc[slot, lane] (generated for this fold)."""']
        lines += [f"    m{j} = _BINS[{base} + {j}]" for j in range(fold)]
        lines += [f"    a{j}_{lane} = _DT(0.0)" for j in range(fold) for lane in range(lanes)]
        lines += ["    i = b0", f"    while i + {lanes} <= b1:"]
        for lane in range(lanes):
            lines += _slices(term(f"i + {lane}"), fold, lane, top, "        ")
        lines += [f"        i += {lanes}", "    while i < b1:"]
        lines += _slices(term("i"), fold, 0, top, "        ")
        lines += ["        i += 1"]
        lines += [f"    acc[{j}, {lane}] = a{j}_{lane}" for j in range(fold) for lane in range(lanes)]
        return "\n".join(lines)

    amax = [f"@_jit\ndef _block_amax(X, Y, b0, b1):",
            '    """The largest bit pattern of |term| over b0..b1-1 (generated: one maximum a lane)."""']
    amax += [f"    h{lane} = 0" for lane in range(lanes)]
    amax += ["    i = b0", f"    while i + {lanes} <= b1:"]
    for lane in range(lanes):
        amax += [f"        b = _abs_bits({term(f'i + {lane}')})", f"        h{lane} = b if b > h{lane} else h{lane}"]
    amax += [f"        i += {lanes}", "    while i < b1:", f"        b = _abs_bits({term('i')})",
             "        h0 = b if b > h0 else h0", "        i += 1"]
    amax += ["    return max(" + ", ".join(f"h{lane}" for lane in range(lanes)) + ")"]
    return "\n\n\n".join([deposit("_deposit", False), deposit("_deposit_top", True), "\n".join(amax)]) + "\n"


def _slices(term: str, fold: int, lane: int, top: bool, pad: str) -> list[str]:
    """One term's slices added to lane `lane`'s sums (fpspec.arith.binned note [exact slices])."""
    lines = [f"{pad}r = {term}"]
    first = 0
    if top:
        lines += [f"{pad}s = m0 + _or1(r * _DT(_COMPRESSION))", f"{pad}a0_{lane} += s - m0",
                  f"{pad}q = (m0 - s) * _DT(_HALF_EXPANSION)", f"{pad}r = (r + q) + q"]
        first = 1
    for j in range(first, fold):
        lines += [f"{pad}s = m{j} + _or1(r)", f"{pad}a{j}_{lane} += s - m{j}"]
        if j < fold - 1:
            lines.append(f"{pad}r = r + (m{j} - s)")
    return lines
