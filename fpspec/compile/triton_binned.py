"""Triton replicas of binned specs (fpspec.arith.binned): the same bits as every other backend.

The kernels and the host class live in fpspec/compile/triton_binned_kernels.py and are copied into
the replica verbatim; this module renders the replica (templates/triton_binned.py.j2) with the
format's constants.
"""
from __future__ import annotations

import inspect

from fpspec.arith.binned import binned_format
from fpspec.compile.ir import CompileError, Kernel

PUBLIC = {"sum": ("sum",), "dot": ("dot",), "gemv": ("gemv",), "gemm": ("gemm",)}
_DTYPES = {"fp64": ("torch.float64", "tl.float64", "tl.int64"), "fp32": ("torch.float32", "tl.float32", "tl.int32")}


_API = {
    "sum": ('def sum(x):\n    """The binned sum of the 1-D tensor x."""\n'
            '    return REPLICA.reduce(REPLICA.check(x, "x", 1), None)\n'),
    "dot": ('def dot(x, y):\n    """The binned sum of x[k] * y[k], each product rounded to the format."""\n'
            '    x, y = REPLICA.check(x, "x", 1), REPLICA.check(y, "y", 1)\n'
            '    if x.shape != y.shape:\n'
            '        raise ValueError(f"dot: x has {x.shape[0]} elements, y has {y.shape[0]}")\n'
            '    return REPLICA.reduce(x, y)\n'),
    "gemv": ('def gemv(A, x):\n    """A @ x, every output element a binned dot product."""\n'
             '    A, x = REPLICA.check(A, "A", 2), REPLICA.check(x, "x", 1)\n'
             '    if A.shape[1] != x.shape[0]:\n'
             '        raise ValueError(f"gemv: A is {A.shape[0]}x{A.shape[1]} but x has {x.shape[0]} elements")\n'
             '    return REPLICA.matmul(A, x.reshape(-1, 1)).reshape(-1)\n'),
    "gemm": ('def gemm(A, B):\n    """A @ B, every output element a binned dot product."""\n'
             '    A, B = REPLICA.check(A, "A", 2), REPLICA.check(B, "B", 2)\n'
             '    if A.shape[1] != B.shape[0]:\n'
             '        raise ValueError(f"gemm: A is {A.shape[0]}x{A.shape[1]} but B is {B.shape[0]}x{B.shape[1]}")\n'
             '    return REPLICA.matmul(A, B)\n'),
}


def library_source() -> str:
    """fpspec/compile/triton_binned_kernels.py without its imports (the template has them)."""
    from fpspec.compile import triton_binned_kernels

    text = inspect.getsource(triton_binned_kernels)
    text = text.split("import triton.language as tl\n", 1)[1]
    return "# ---- from fpspec/compile/triton_binned_kernels.py\n" + text.strip() + "\n"


def constants(kernel: Kernel) -> dict:
    a = kernel.arithmetic
    fmt = binned_format(a.input)
    bits = 64 if a.input == "fp64" else 32
    torch_dt, dt, it = _DTYPES[a.input]
    f2 = 1
    while f2 < a.binned:
        f2 *= 2
    return dict(DT=dt, IT=it, F2=max(f2, 2), P=fmt.p, EMAX=fmt.emax, W=fmt.width, MAXI=fmt.max_index,
                Q=fmt.quarter_bits, INF_BITS=((1 << (bits - fmt.p)) - 1) << (fmt.p - 1),
                ABS_MASK=(1 << (bits - 1)) - 1, COMP=fmt.compression, HALF=fmt.expansion * 0.5,
                EXPANSION=fmt.expansion, SINGLE=a.input == "fp32")


def render(backend, kernel: Kernel) -> str:
    from fpspec.compile.backends import header, render_template

    if kernel.arithmetics:
        raise CompileError("a binned accumulator holds for the whole accumulation; expected no using(NAME, ...)")
    a = kernel.arithmetic
    fmt = binned_format(a.input)
    c = constants(kernel)
    consts = "{" + ", ".join(f"{k!r}: {v}" if k in ("DT", "IT") else f"{k!r}: {v!r}" for k, v in c.items()) + "}"
    return render_template(
        "triton_binned.py.j2",
        header=header(kernel, backend.name),
        spec=kernel.source.replace('"""', "'''"),
        name=kernel.name,
        op=kernel.op,
        fold=a.binned,
        library=library_source(),
        replica=(f"BinnedReplica({a.input!r}, {a.binned}, {_DTYPES[a.input][0]}, "
                 f"{[float(b) for b in fmt.bins]!r}, {[float(u) for u in fmt.ulps]!r}, {consts})"),
        api=_API[kernel.op],
    )
