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

_LANE_STEPS = 4      # k steps a pass of gemm's lanes (block_loops)
# The deposit loop's shape (block_loops) for terms x (sum) and x * y (every other op): pieces of a
# block walked side by side, terms ahead each piece's lines are asked for (0: no prefetch), terms
# between prefetches, terms a block.  The fastest on two cores of an H200 host's CPU
# (benchmarks/results/bench_binned_h200_2026-11-27.txt): a sum is bound by its operations (two
# chains interleaved), a dot by the loads in flight.  The bits do not depend on them.
DEPOSIT = {"sum": (2, 0, 64, 4096), "product": (1, 1024, 128, 16384)}
# The deposit in vector registers (binned_numba._deposit_regs) per kind of term: (bits a vector,
# vectors side by side); 0 bits: the CPU's widest registers (binned_numba._vector_bits: 512 with
# AVX-512, else 256), chosen when the replica is imported, so one replica file serves every CPU;
# 0 vectors: DEPOSIT's loop alone; then the cache level its prefetches fill (llvm.prefetch's
# locality: 3 the first level, 2 the second, 1 the third).  Its prefetch distance is DEPOSIT's.
REGS = {"sum": (0, 0, 3), "product": (0, 4, 3)}
# gemm's lanes in vector registers over packed panels of B (binned_numba._lane_regs): (bits a
# vector, 0: the widest, vectors side by side); 0 vectors: _lane_steps alone
GEMM_REGS = (0, 2)
PUBLIC = {"sum": ("sum", "sums"), "dot": ("dot",), "gemv": ("gemv",), "gemm": ("gemm",)}
_DTYPE = {"fp64": "np.float64", "fp32": "np.float32"}
# fpspec.arith.binned's NumPy kernel, embedded in NumPy replicas
_MODEL_NAMES = ["BinnedFormat", "_or1", "special_sum", "convert", "row_index", "sum_rows", "row_slice_counts"]
_NUMBA_JIT = ["_index_of_bits", "_carry_in", "_shift_state", "_merge_into", "_finish", "_finish_plain"]
# run on threads of their own
_NUMBA_NOGIL = ["_partial", "_rows_range", "_row_stats", "_column_stats", "_gemm_range"]
_NUMBA_HOST = ["_pool", "_run", "_split", "_parts", "_merged", "_sum_threads", "_rows_threads"]


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


def _state(kernel: Kernel) -> str:
    return f"_STATE = {2 + 3 * kernel.arithmetic.binned}"


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
        _state(kernel),
        f"_BINS64 = np.array([{floats}])",
        "_BINS = _BINS64.astype(_DT)",
        "_SIXTHS = _BINS64 / 6.0",
        f"_PLAIN = {1 if a.input == 'fp32' else (3 * fmt.p) // fmt.width + 1}",
        f"_ULPS = np.array([{ulps}])",
        f"_P, _W, _EMAX, _MAXI, _Q = {fmt.p}, {fmt.width}, {fmt.emax}, {fmt.max_index}, {fmt.quarter_bits}",
        f"_EXP_SHIFT, _INF_BITS = {fmt.p - 1}, {((1 << (bits - fmt.p)) - 1) << (fmt.p - 1)}",
        f"_COMPRESSION, _HALF_EXPANSION, _EXPANSION = {fmt.compression!r}, {fmt.expansion * 0.5!r}, "
        f"{fmt.expansion!r}",
        f"_SINGLE = {a.input == 'fp32'}",
        f"_PRODUCT = {kernel.op != 'sum'}",
        f"_ABS_MASK = {(1 << (bits - 1)) - 1:#x}",
        f"_BLOCK = {DEPOSIT['sum' if kernel.op == 'sum' else 'product'][3]}",
        f"_GEMM_TILE, _ENDURANCE = {binned_numba._GEMM_TILE}, {fmt.endurance}",
        embed(binned_numba, ["_vector_bits"]),
        f"_REGS = {_regs(kernel.op != 'sum', bits)}",
        f"_GEMM_REGS = ({_lanes(GEMM_REGS[0], bits)}, {GEMM_REGS[1]})",
    ]


def _lanes(width: int, bits: int) -> str:
    """The lanes of a vector of `width` bits (0: the CPU's widest) for terms of `bits` bits, as a
    replica's expression."""
    return f"_vector_bits() // {bits}" if width == 0 else str(width // bits)


def _regs(product: bool, bits: int) -> str:
    """binned_numba._REGS for terms of `bits` bits: (lanes a vector, vectors, prefetch distance)."""
    kind = "product" if product else "sum"
    width, group, locality = (REGS[kind] + (3,))[:3]
    return f"({_lanes(width, bits)}, {group}, {DEPOSIT[kind][1]}, {locality})" if group else "(0, 0, 0, 3)"


def render_numba(backend, kernel: Kernel) -> str:
    from fpspec.compile.backends import header, render_template

    check(kernel)
    public = PUBLIC[kernel.op]
    runtime = "\n\n".join([
        "from concurrent.futures import ThreadPoolExecutor\n\nfrom llvmlite import ir\n"
        "from numba import get_num_threads, types\nfrom numba.core import cgutils",
        embed(binned_numba, ["_or1", "_bits", "_prefetch", "_deposit_regs", "_lane_regs"]),
        _convert_for_format(),
        embed(binned_numba, _NUMBA_JIT, decorator="@_jit"),
        block_loops(kernel.arithmetic.binned, kernel.op != "sum", 8 if kernel.arithmetic.input == "fp64" else 16),
    ])
    return render_template(
        backend.template,
        header=header(kernel, backend.name),
        name=kernel.name,
        op=f"{kernel.op} with a binned(fold = {kernel.arithmetic.binned}) accumulator (any order: the same bits)",
        public=", ".join(public),
        spec_literal=repr(kernel.source),
        settings=numba_settings(kernel),
        runtime=runtime,
        constants=[],
        functions=[],
        # no cache directory (note [compile time] in fpspec.compile.backends.numba)
        kernels="_nogil = _parallel\n\n\n" +
                embed(binned_numba, _NUMBA_NOGIL, decorator="@_nogil"),
        api="\n\n".join([embed(binned_rt, ["_checked"]), embed(binned_numba, _NUMBA_HOST),
                         embed(binned_numba, [f"api_{n}" for n in public], {f"api_{n}": n for n in public})]),
    )


def _convert_for_format() -> str:
    """fpspec.arith.binned's convert, its test of the format on the replica's constant _SINGLE (every
    caller passes _SINGLE as `single`): numba drops the other format's branch before it types and
    compiles it."""
    from fpspec.compile.runtime import embed

    source = embed(model, ["convert"], decorator="@_jit")
    if "    if single:\n" not in source:
        raise CompileError("binned: fpspec.arith.binned.convert no longer tests `single` at its top")
    return source.replace("    if single:\n", "    if _SINGLE:\n", 1)


def block_loops(fold: int, product: bool, per_line: int = 8) -> str:
    """binned_numba's block loops for `fold` slots, written out, the term inline (x[k] * y[k] rounded
    when `product`): one pass over a block view from index 0, every slot's count an integer sum, so
    that LLVM vectorizes the loop.  _deposit_top is index 0 (note [index 0]: slot 0 scaled).

    The deposit walks DEPOSIT's pieces of the block side by side, each with its own counts and
    largest pattern: their chains of dependent operations interleave, and the sum does not depend on
    the split.  A count adds the primary's pattern after each deposit and takes the bin's pattern
    off once per block (int64 sums wrap, so the difference is exact: the slices total far below
    2^63, fpspec.arith.binned's slice_counts bounds each by 2^(W-1))."""
    term = "X[i] * Y[i]" if product else "X[i]"
    regs = bool(REGS["product" if product else "sum"][1])
    hot = DEPOSIT["product" if product else "sum"][:3]

    def deposit(name: str, top: bool, streams: int, prefetch: int, chunk: int) -> str:
        args = "X, Y, counts" if top else "X, Y, index, counts"
        base = "0" if top else "index"
        lines = [f"@_jit\ndef {name}({args}):",
                 '    """Count the slices of the block\'s terms in each slot\'s ulps; the largest |term| pattern."""']
        if name == "_deposit":
            # the entry _partial calls: index 0 (slot 0 scaled) goes to _deposit_top
            lines += ["    if index == 0:", "        return _deposit_top(X, Y, counts)"]
        lines += [f"    m{j} = _BINS[{base} + {j}]" for j in range(fold)]
        lines += ["    n = X.shape[0]"]
        if streams > 1:
            lines += [f"    piece = n // {streams}"]
            lines += [f"    X{t}, Y{t} = X[{t} * piece:], Y[{t} * piece:]" for t in range(streams)]
        else:                           # one piece: the block itself, no tail loop
            lines += ["    piece = n", "    X0, Y0 = X, Y"]
        lines += [f"    k{t}_{j} = 0" for t in range(streams) for j in range(fold)]
        lines += [f"    h{t} = 0" for t in range(streams)]

        def body(t: int, x: str, y: str) -> list[str]:
            out = [f"        r = {x}[i] * {y}[i]" if product else f"        r = {x}[i]",
                   "        b = _bits(r) & _ABS_MASK", f"        h{t} = b if b > h{t} else h{t}"]
            first = 0
            if top:
                out += ["        s = m0 + _or1(r * _DT(_COMPRESSION))", f"        k{t}_0 += _bits(s)",
                        "        q = (m0 - s) * _DT(_HALF_EXPANSION)", "        r = (r + q) + q"]
                first = 1
            for j in range(first, fold):
                out += [f"        s = m{j} + _or1(r)", f"        k{t}_{j} += _bits(s)"]
                if j < fold - 1:
                    out.append(f"        r = r + (m{j} - s)")
            return out

        if prefetch:
            # chunks of `chunk` terms, each piece's lines `prefetch` terms ahead asked for first:
            # more loads in flight than the out-of-order window holds
            lines.append(f"    c = 0\n    while c + {chunk} <= piece:")
            for t in range(streams):
                for v in ("X", "Y") if product else ("X",):
                    lines += [f"        _prefetch({v}{t}, c + {prefetch + o})" for o in range(0, chunk, per_line)]
            lines.append(f"        for i in range(c, c + {chunk}):")
            for t in range(streams):
                lines += ["    " + ln for ln in body(t, f"X{t}", f"Y{t}")]
            lines.append(f"        c += {chunk}")
            lines.append("    for i in range(c, piece):")
        else:
            lines.append("    for i in range(piece):")
        for t in range(streams):
            lines += body(t, f"X{t}", f"Y{t}")
        if streams > 1:
            lines.append(f"    for i in range({streams} * piece, n):")
            lines += body(0, "X", "Y")
        lines += [f"    counts[{j}] = " + " + ".join(f"k{t}_{j}" for t in range(streams)) + f" - n * _bits(m{j})"
                  for j in range(fold)]
        lines.append("    return max(" + ", ".join(f"h{t}" for t in range(streams)) + ")" if streams > 1 else "    return h0")
        return "\n".join(lines)

    lanes = ["@_jit\ndef _lane_steps(A, Bf, N, k0, k1, j0, g, w, P):",
             '    """Products A[k] * B[k, j0 + t] for k0 <= k < k1 (B[k, j] = Bf[k * N + j]) into the',
             '    primaries P[:, t] of lanes g <= t < w, _LANE_STEPS k steps a pass (the indices unsigned:',
             '    no wraparound test, so that LLVM vectorizes over t)."""']
    lanes += [f"    P{j} = P[{j}]" for j in range(fold)]

    def steps(ks: list[str], indent: str) -> list[str]:
        out = [f"{indent}for t in range(g, w):", f"{indent}    q = np.uint64(t)"]
        out += [f"{indent}    p{j} = P{j}[q]" for j in range(fold)]
        for u in range(len(ks)):
            out.append(f"{indent}    r = a{u} * Bf[np.uint64(b{u} + t)]")
            for j in range(fold):
                if j < fold - 1:
                    out += [f"{indent}    s = p{j} + _or1(r)", f"{indent}    r = r + (p{j} - s)",
                            f"{indent}    p{j} = s"]
                else:
                    out.append(f"{indent}    p{j} = p{j} + _or1(r)")
        return out + [f"{indent}    P{j}[q] = p{j}" for j in range(fold)]

    u_all = [f"k + {u}" for u in range(_LANE_STEPS)]
    lanes.append(f"    k = k0\n    while k + {_LANE_STEPS} <= k1:")
    for u, k in enumerate(u_all):
        lanes += [f"        a{u} = A[{k}]", f"        b{u} = ({k}) * N + j0"]
    lanes += steps(u_all, "        ") + [f"        k += {_LANE_STEPS}"]
    lanes += ["    while k < k1:", "        a0 = A[k]", "        b0 = k * N + j0"] + steps(["k"], "        ")
    lanes.append("        k += 1")
    amax = ["@_jit\ndef _block_amax(X, Y):",
            '    """The largest bit pattern of |term| in the block (inf and nan the largest)."""',
            "    h = 0", "    for i in range(X.shape[0]):", f"        b = _bits({term}) & _ABS_MASK",
            "        h = b if b > h else h", "    return h"]
    # Only the deposit every block takes gets DEPOSIT's streams and prefetches; index 0 (terms near
    # the format's overflow) and the loop behind the deposit in registers (a block with an inf or a
    # nan) are rare, so they are one plain loop each: a third of the code to compile at the first
    # call, and the same counts (integer sums, in any order).
    cold = (1, 0, 0)
    blocks = [deposit("_deposit_loop", False, *cold) if regs else deposit("_deposit", False, *hot),
              deposit("_deposit_top", True, *cold), "\n".join(amax), "\n".join(lanes)]
    if regs:
        blocks.append(deposit_regs(fold, product))
    return "\n\n\n".join(blocks) + "\n"


def deposit_regs(fold: int, product: bool) -> str:
    """binned_numba's _deposit over _deposit_regs: the block's terms in whole groups of lanes, at
    most _ENDURANCE a lane a call; the rest one by one (counted as _deposit_loop counts).  A block
    where a primary left its binade (an inf, a nan, a term far above the bin) goes through
    _deposit_loop again: its counts and largest pattern are the ones the caller needs."""
    term = "X[i] * Y[i]" if product else "X[i]"
    lines = ["@_jit\ndef _deposit(X, Y, index, counts):",
             '    """Count the slices of the block\'s terms in each slot\'s ulps; the largest |term| pattern."""',
             "    if index == 0:", "        return _deposit_top(X, Y, counts)",
             "    n = X.shape[0]", "    step = _REGS[0] * _REGS[1]", "    whole = n - n % step",
             "    bins = _BINS[index:index + _FOLD]"]
    lines += [f"    counts[{j}] = 0" for j in range(fold)]
    lines += ["    h = 0", "    c = 0", "    while c < whole:", "        e = min(c + _ENDURANCE * step, whole)",
              "        g = _deposit_regs(X[c:e], Y[c:e], bins, counts)",
              "        if g < 0:", "            return _deposit_loop(X, Y, index, counts)",
              "        h = g if g > h else h", "        c = e"]
    lines += [f"    m{j} = _BINS[index + {j}]" for j in range(fold)]
    lines += [f"    k{j} = 0" for j in range(fold)]
    lines += ["    for i in range(whole, n):", f"        r = {term}", "        b = _bits(r) & _ABS_MASK",
              "        h = b if b > h else h"]
    for j in range(fold):
        lines += [f"        s = m{j} + _or1(r)", f"        k{j} += _bits(s) - _bits(m{j})"]
        if j < fold - 1:
            lines.append(f"        r = r + (m{j} - s)")
    lines += [f"    counts[{j}] += k{j}" for j in range(fold)]
    lines.append("    return h")
    return "\n".join(lines)
