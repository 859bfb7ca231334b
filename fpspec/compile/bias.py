"""A gemm replica that takes a bias vector, added where the spec's `bias = after | inside` says.

The kernel itself is compiled without the bias (every backend renders it as
any other gemm); `gemm(A, B, bias)` around it adds the bias:

- after (the cuBLAS epilogue): the kernel is compiled to return the
  accumulator format; the wrapper adds the bias of each output column in
  the accumulator (one rounding to nearest even) and casts to the output
  format, as fpspec.arith.evaluate note [bias] defines it.
- inside: the bias is operand 0 of K + 1: the kernel runs on [1 | A] and
  [bias ; B], its order applied to the K + 1 terms.

NumPy and Numba replicas take NumPy arrays (the accumulator sum in NumPy's
own dtype: fp16, fp32 and fp64 round to nearest even), Triton replicas take
torch tensors (the same with torch's dtypes, bf16 included).
"""
from __future__ import annotations

import dataclasses

from fpspec.compile.ir import CompileError, Kernel, Positional

_NUMPY_SUMS = {"fp16": "np.float16", "fp32": "np.float32", "fp64": "np.float64"}
_TORCH_DTYPES = {"fp16": "torch.float16", "bf16": "torch.bfloat16", "fp32": "torch.float32",
                 "fp64": "torch.float64"}


def kernel_bias(kernel: Kernel | Positional) -> str:
    """The bias clause of a kernel (every kernel of a positional replica shares the main arithmetic's)."""
    kernels = kernel.kernels if isinstance(kernel, Positional) else (kernel,)
    biases = {k.arithmetic.bias for k in kernels}
    if len(biases) > 1:
        raise CompileError(f"the orders of one spec add their bias in different places ({', '.join(sorted(biases))})")
    return biases.pop()


def unbiased(kernel: Kernel | Positional) -> Kernel | Positional:
    """The kernel the wrapper calls: no bias; with bias = after, returning the accumulator format."""
    def strip(k: Kernel) -> Kernel:
        a = k.arithmetic
        if k.op != "gemm":
            raise CompileError(f"bias = {a.bias} is defined for a gemm (torch.nn.functional.linear), not {k.op}")
        changes = {"bias": "none"}
        if a.bias == "after":
            changes["output"] = a.accumulator
        return dataclasses.replace(k, arithmetic=dataclasses.replace(a, **changes))

    if isinstance(kernel, Positional):
        return dataclasses.replace(kernel, cases=tuple((c, strip(k)) for c, k in kernel.cases),
                                   otherwise=strip(kernel.otherwise))
    return strip(kernel)


def wrapper(kernel: Kernel | Positional, target: str) -> str:
    """Source appended to the replica: `gemm(A, B, bias)` over the kernel's gemm."""
    k = kernel.kernels[0] if isinstance(kernel, Positional) else kernel
    a = k.arithmetic
    where = a.bias
    tensors = target == "triton"
    if where == "after":
        table = _TORCH_DTYPES if tensors else _NUMPY_SUMS
        if a.accumulator not in table:
            raise CompileError(f"bias = after in a {a.accumulator} accumulator has no exact {target} sum "
                               f"(the {target} replica takes {', '.join(table)})")
    head = ("_gemm_unbiased = gemm\n\n\n"
            "def gemm(A, B, bias=None, **options):\n"
            f'    """A @ B with the bias of each output column added {where} the accumulation (the spec\'s\n'
            f'    `bias = {where}`); no bias: a bias of +0.0."""\n')
    if tensors:
        body = ("    import torch\n"
                "    if bias is None:\n"
                "        bias = torch.zeros(B.shape[1], dtype=B.dtype, device=B.device)\n"
                "    if tuple(bias.shape) != (B.shape[1],):\n"
                "        raise ValueError(f'bias has shape {tuple(bias.shape)}, expected ({B.shape[1]},)')\n")
        if where == "inside":
            body += ("    A1 = torch.cat([torch.ones((A.shape[0], 1), dtype=A.dtype, device=A.device), A], dim=1)\n"
                     "    B1 = torch.cat([bias.to(device=B.device, dtype=B.dtype)[None, :], B], dim=0)\n"
                     "    return _gemm_unbiased(A1, B1, **options)\n")
        else:
            acc, out = _TORCH_DTYPES[a.accumulator], _TORCH_DTYPES.get(a.output, "torch.float32")
            body += ("    acc = _gemm_unbiased(A, B, **options)\n"
                     f"    total = acc.to({acc}) + bias.to(device=acc.device, dtype={acc})[None, :]\n"
                     f"    return total.to({out})\n")
    else:
        body = ("    A = np.asarray(A)\n"
                "    B = np.asarray(B)\n"
                "    bias = np.zeros(B.shape[1], B.dtype) if bias is None else np.asarray(bias)\n"
                "    if bias.shape != (B.shape[1],):\n"
                "        raise ValueError(f'bias has shape {bias.shape}, expected ({B.shape[1]},)')\n")
        if where == "inside":
            body += ("    A1 = np.concatenate([np.ones((A.shape[0], 1), A.dtype), A], axis=1)\n"
                     "    B1 = np.concatenate([bias.astype(B.dtype)[None, :], B], axis=0)\n"
                     "    return _gemm_unbiased(A1, B1, **options)\n")
        else:
            acc = _NUMPY_SUMS[a.accumulator]
            body += ("    acc = np.asarray(_gemm_unbiased(A, B, **options))\n"
                     f"    total = acc.astype({acc}) + bias.astype({acc})[None, :]\n"
                     f"    return {_numpy_cast(a.output, 'total')}\n")
    return "\n\n" + head + body


def _numpy_cast(fmt: str, value: str) -> str:
    """NumPy code casting `value` to `fmt`, nearest even (bf16: its values in float32, as the replicas return)."""
    if fmt in ("fp16", "fp32", "fp64"):
        return f"{value}.astype({_NUMPY_SUMS[fmt]})"
    if fmt == "bf16":
        return (f"_bf16_rne({value})\n\n\n"
                "def _bf16_rne(v):\n"
                "    bits = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)\n"
                "    up = ((bits >> 16) & 1) + 0x7FFF\n"
                "    keep = np.isnan(np.asarray(v, np.float32))\n"
                "    out = (((bits + up) >> 16) << 16).astype(np.uint32).view(np.float32)\n"
                "    return np.where(keep, np.float32('nan'), out)")
    raise CompileError(f"bias = after with output = {fmt}: the replica casts to fp16, bf16, fp32 or fp64")
