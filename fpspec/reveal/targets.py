"""Targets: a library function seen as a black-box accumulation.

A `Target` is a callable plus what the engine must know to feed it: the op kind
(sum, dot, gemv, gemm), the reduction length n, the output shape, the input
format and the device.  Every value fpspec hands a target is float64-held and
exact in the input format; the target converts it to the library's dtype,
calls the function and gives the outputs back as float64.

    t = resolve_target("numpy.sum", n=32, dtype="float32")
    t.run_sum(x)            # x: (n,) or (b, n) float64 -> float64 () or (b,)
    t.run(a, b)             # dot: (n,), (n,); gemv: (m, n), (n,); gemm: (m, n), (n, ncols)

The engine uses the lower-level trio `native` / `call` / `to_float64` with
preallocated buffers, and `call_rows` (one library call summing many rows) where
the library has one; it checks on a sample that batched rows give the same
answers as single calls before trusting them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fpspec.errors import FpspecError
from fpspec.formats import Format, get_format

OPS = ("sum", "dot", "gemv", "gemm")

# The widest accumulator a library plausibly uses for each input format.  The
# masks must swamp partial sums in *that* precision, so guessing wide is safe
# (numpy and torch sum fp16 in fp32; a user callable may sum fp32 in fp64).
WIDEST_ACCUMULATOR = {
    "fp64": "fp64", "fp32": "fp64", "tf32": "fp32",
    "fp16": "fp32", "bf16": "fp32", "fp8e4m3": "fp32", "fp8e5m2": "fp32",
}


@dataclass(frozen=True)
class Target:
    """A black-box accumulation: `fn` applied to operands of the op's shapes."""

    name: str                   # as the user wrote it, e.g. "numpy.sum"
    op: str                     # sum | dot | gemv | gemm
    n: int                      # reduction length (K for matrix products)
    fmt: str                    # input format name (fpspec.formats)
    device: str = "cpu"
    m: int = 1                  # output rows (gemv, gemm)
    ncols: int = 1              # output columns (gemm)
    library: str = "python"     # numpy | torch | jax | python
    out_fmt: str = ""           # output format; "" means the input format
    fn: Callable = field(default=None, compare=False, repr=False)
    native: Callable = field(default=None, compare=False, repr=False)      # float64 ndarray -> library array
    to_float64: Callable = field(default=None, compare=False, repr=False)  # library output -> float64 ndarray
    call_rows: Callable | None = field(default=None, compare=False, repr=False)  # (b, n) -> (b,) in one call
    count_bits: int = 0         # counts read back exactly below 2^count_bits (0: the output format's precision)
    out_shift: int = 0          # the output is the sum / 2^out_shift (a mean at n = 2^out_shift)
    takes_bias: bool = False    # gemm only: fn(A, B, bias) adds a bias per output column (F.linear)
    fmt_b: str = ""             # B's format where it is not `fmt` (torch._scaled_mm e4m3 x e5m2)
    versions: tuple = field(default=(), compare=False)  # ((package, version), ...)

    def __post_init__(self):
        if self.op not in OPS:
            raise FpspecError(f"unknown op {self.op!r}; expected one of {', '.join(OPS)}")
        if not isinstance(self.n, (int, np.integer)) or self.n < 2:
            raise FpspecError(f"n must be an integer >= 2, got {self.n!r}")
        if self.m < 1 or self.ncols < 1:
            raise FpspecError(f"output shape must be positive, got m={self.m}, ncols={self.ncols}")
        if not self.out_fmt:   # tf32 inputs are read from, and results written to, fp32
            object.__setattr__(self, "out_fmt", "fp32" if self.fmt == "tf32" else self.fmt)

    # ------------------------------------------------------------ formats
    @property
    def format(self) -> Format:
        return get_format(self.fmt)

    @property
    def output_format(self) -> Format:
        return get_format(self.out_fmt)

    @property
    def accumulator(self) -> Format:
        """The widest accumulator assumed when choosing masks (see WIDEST_ACCUMULATOR)."""
        return get_format(WIDEST_ACCUMULATOR.get(self.fmt, "fp64"))

    @property
    def output_shape(self) -> tuple[int, ...]:
        return {"sum": (), "dot": (), "gemv": (self.m,), "gemm": (self.m, self.ncols)}[self.op]

    @property
    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        n = self.n
        return {
            "sum": ((n,),),
            "dot": ((n,), (n,)),
            "gemv": ((self.m, n), (n,)),
            "gemm": ((self.m, n), (n, self.ncols)),
        }[self.op]

    # ------------------------------------------------------------ evaluation
    def call(self, *native_operands):
        with np.errstate(all="ignore"):     # masks overflow on purpose (fp16 dot): no warning on stderr
            return self.fn(*native_operands)

    def run(self, *operands) -> np.ndarray:
        """Evaluate on float64-held operands (exact in `fmt`); float64 output of the op's shape."""
        shapes = self.operand_shapes
        if len(operands) != len(shapes):
            raise FpspecError(f"{self.op} takes {len(shapes)} operand(s), got {len(operands)}")
        conv = []
        for x, shape in zip(operands, shapes):
            x = np.asarray(x, dtype=np.float64)
            if x.shape != shape:
                raise FpspecError(f"{self.name} ({self.op}) expects an operand of shape {shape}, got {x.shape}")
            conv.append(self.native(x))
        with np.errstate(all="ignore"):     # probes overflow on purpose: inf and nan are results
            out = self.to_float64(self.fn(*conv))
        return out.reshape(self.output_shape)

    def run_sum(self, x) -> np.ndarray:
        """Sum each row of x ((n,) or (b, n)) with one library call per row, as the library sees it."""
        x = np.asarray(x, dtype=np.float64)
        if self.op == "sum":
            rows = x.reshape(-1, self.n)
            out = np.array([float(self.to_float64(self.fn(self.native(r)))) for r in rows])
        elif self.op == "dot":
            ones = self.native(np.ones(self.n))
            rows = x.reshape(-1, self.n)
            out = np.array([float(self.to_float64(self.fn(self.native(r), ones))) for r in rows])
        else:
            raise FpspecError(f"run_sum needs a sum or dot target, {self.name} is {self.op}")
        return out.reshape(x.shape[:-1])

    def run_dot(self, x, y) -> np.ndarray:
        """dot(x, y) per row of x, y ((n,) or (b, n)); for sum targets, the sum of x*y is not defined."""
        if self.op != "dot":
            raise FpspecError(f"run_dot needs a dot target, {self.name} is {self.op}")
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        xs, ys = np.broadcast_arrays(x.reshape(-1, self.n), y.reshape(-1, self.n))
        out = np.array([float(self.to_float64(self.fn(self.native(a), self.native(b)))) for a, b in zip(xs, ys)])
        return out.reshape(np.broadcast_shapes(x.shape, y.shape)[:-1])

    def describe(self) -> str:
        shape = {"sum": f"n={self.n}", "dot": f"n={self.n}", "gemv": f"m={self.m} k={self.n}",
                 "gemm": f"m={self.m} n={self.ncols} k={self.n}"}[self.op]
        fmt = self.fmt if not self.fmt_b else f"{self.fmt} x {self.fmt_b}"
        return f"{self.name} ({self.op}, {shape}, {fmt}, {self.device})"


# ================================================================ adapters

def _numpy_dtype(fmt: str, what: str):
    # tf32 values travel in fp32 arrays (a TF32 unit reads the top 19 bits of an fp32)
    table = {"fp64": np.float64, "fp32": np.float32, "tf32": np.float32, "fp16": np.float16}
    if fmt not in table:
        raise FpspecError(f"{what} has no {fmt} dtype (numpy offers fp64, fp32, fp16)")
    return table[fmt]


def _numpy_adapters(fmt: str, what: str):
    dt = _numpy_dtype(fmt, what)

    def native(x):
        return np.asarray(x, dtype=np.float64).astype(dt)

    def to_float64(out):
        return np.asarray(out, dtype=np.float64)

    return native, to_float64


def _torch():
    try:
        import torch
    except ImportError:
        raise FpspecError("torch is not installed (pip install 'fpspec[torch]')") from None
    return torch


def _torch_adapters(fmt: str, device: str):
    torch = _torch()
    table = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
             "bf16": torch.bfloat16}
    for name, attr in (("fp8e4m3", "float8_e4m3fn"), ("fp8e5m2", "float8_e5m2")):
        if hasattr(torch, attr):
            table[name] = getattr(torch, attr)
    if fmt not in table:
        raise FpspecError(f"torch has no {fmt} dtype")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FpspecError("--device cuda asked for, but torch sees no CUDA device")
    dt = table[fmt]

    def native(x):
        # float64 -> target dtype on the host rounds to nearest (exact for values already in the format)
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)).to(dt).to(device)

    def to_float64(out):
        return out.detach().to("cpu", torch.float64).numpy()

    return native, to_float64


def _versions(*packages: str) -> tuple:
    out = []
    for p in packages:
        try:
            mod = importlib.import_module(p)
            out.append((p, str(getattr(mod, "__version__", "?"))))
        except ImportError:
            pass
    return tuple(out)


def _check_op(name: str, op: str, allowed: tuple[str, ...]) -> None:
    if op is None:
        raise FpspecError(f"{name} computes {' or '.join(allowed)}: give its op kind (--op {' or '.join(allowed)})")
    if op not in allowed:
        raise FpspecError(f"{name} computes {' or '.join(allowed)}, not {op}")


def _shape_args(op: str, m, ncols) -> tuple[int, int]:
    # gemv/gemm default to a square output of 4 rows/cols: enough for a sample check
    if op == "gemv":
        return int(m or 4), 1
    if op == "gemm":
        return int(m or 4), int(ncols or 4)
    return 1, 1


def _numpy_target(name, func, op, n, fmt, m, ncols) -> Target:
    native, to64 = _numpy_adapters(fmt, name)
    call_rows = None
    if func == "sum":
        _check_op(name, op, ("sum",))
        fn = np.sum
        call_rows = lambda X: np.sum(X, axis=-1)  # noqa: E731  (verified against single calls by the engine)
    elif func == "dot":
        _check_op(name, op, ("dot",))
        fn = np.dot
    elif func in ("matmul", "dot_matrix"):
        _check_op(name, op, ("gemv", "gemm"))
        fn = np.matmul
    else:
        raise FpspecError(f"unknown numpy target {name!r}; expected numpy.sum, numpy.dot or numpy.matmul")
    m, ncols = _shape_args(op, m, ncols)
    return Target(name, op, n, fmt, "cpu", m, ncols, "numpy", fn=fn, native=native, to_float64=to64,
                  call_rows=call_rows, versions=_versions("numpy"))


def _fp8_dtype(torch, fmt: str):
    return {"fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2}[fmt]


def _torch_target(name, func, op, n, fmt, m, ncols, device, fmt_b: str = "") -> Target:
    torch = _torch()
    native, to64 = _torch_adapters(fmt, device)
    call_rows = None
    extra = {}
    if func in ("sum", "mean"):
        _check_op(name, op, ("sum",))
        fn = getattr(torch, func)
        if device.startswith("cuda"):
            # torch picks a CUDA reduction's launch (threads per row, vector loads) from the number
            # of rows too: a (b, n) call sums each row in another order than one (n,) call, so the
            # rows of a batch are summed by one call each (the same kernel as a user's call)
            call_rows = lambda X, _f=fn: torch.stack([_f(x) for x in X])  # noqa: E731
        else:
            call_rows = lambda X, _f=fn: _f(X, dim=-1)  # noqa: E731
        if func == "mean":
            extra = _mean_readback(fmt, n, to64)
            to64 = extra.pop("to_float64")
    elif func == "dot":
        _check_op(name, op, ("dot",))
        fn = torch.dot
    elif func == "mv":
        _check_op(name, op, ("gemv",))
        fn = torch.mv
    elif func == "matmul":
        _check_op(name, op, ("gemv", "gemm"))
        fn = torch.matmul
        if fmt == "tf32":   # tf32 inputs: fp32 tensors through TF32 Tensor Cores
            torch.backends.cuda.matmul.allow_tf32 = True
    elif func == "linear":
        # F.linear(x, W, b) = x @ W.T + b, W as a layer holds it ((ncols, K), row-major): a gemm of
        # A = x and B = W.T.  Without a bias operand (the revelation's calls) the bias is +0.0, so that
        # the kernel is the one a layer with a bias runs (cuBLASLt's bias epilogue, not plain cuBLAS)
        _check_op(name, op, ("gemm",))
        functional = torch.nn.functional

        def fn(A, B, bias=None, _f=functional.linear):
            W = B.t().contiguous()
            return _f(A, W, torch.zeros(W.shape[0], dtype=W.dtype, device=W.device) if bias is None else bias)
        extra = {"takes_bias": True}
    elif func == "bmm":
        _check_op(name, op, ("gemm",))
        fn = lambda A, B: torch.bmm(A[None], B[None])[0]  # noqa: E731
    elif func == "_scaled_mm":
        # fp8 GEMM with per-tensor scales (1.0: exact) and fp32 output; B column-major as cuBLASLt wants
        _check_op(name, op, ("gemm",))
        if not fmt.startswith("fp8"):
            raise FpspecError(f"{name} takes fp8 inputs (--dtype float8_e4m3fn or float8_e5m2), not {fmt}")
        if fmt == "fp8e5m2" and fmt_b in ("", fmt) and device.startswith("cuda"):   # measured on an H200, torch 2.11: "Multiplication of two Float8_e5m2 matrices"
            raise FpspecError(f"{name} has no e5m2 x e5m2 kernel (cuBLASLt pairs e5m2 with e4m3 only); "
                              "reveal it with --dtype float8_e4m3fn")
        one = torch.ones((), device=device)
        if fmt_b and fmt_b != fmt:
            # two fp8 formats (e4m3 x e5m2): operands travel as fp32 tensors (exact for both) and
            # become each one's format in the call, so that one `native` serves both
            if not fmt_b.startswith("fp8"):
                raise FpspecError(f"{name} takes fp8 inputs: --dtype-b float8_e4m3fn or float8_e5m2, not {fmt_b}")
            dt_a, dt_b = (_fp8_dtype(torch, f) for f in (fmt, fmt_b))
            native, to64 = _torch_adapters("fp32", device)
            fn = lambda A, B: torch._scaled_mm(A.to(dt_a), B.to(dt_b).t().contiguous().t(),  # noqa: E731
                                               scale_a=one, scale_b=one, out_dtype=torch.float32)
            extra = {"fmt_b": fmt_b}
        else:
            fn = lambda A, B: torch._scaled_mm(A, B.t().contiguous().t(), scale_a=one, scale_b=one,  # noqa: E731
                                               out_dtype=torch.float32)
    else:
        raise FpspecError(f"unknown torch target {name!r}; expected torch.sum, torch.mean, torch.dot, torch.mv, "
                          "torch.matmul, torch.bmm, torch._scaled_mm or torch.nn.functional.linear")
    if device.startswith("cuda"):
        inner = fn

        def fn(*args, _inner=inner):
            out = _inner(*args)
            torch.cuda.synchronize()
            return out
    m, ncols = _shape_args(op, m, ncols)
    return Target(name, op, n, fmt, device, m, ncols, "torch", fn=fn, native=native, to_float64=to64,
                  call_rows=call_rows, versions=_versions("numpy", "torch"),
                  **({"out_fmt": "fp32"} if func == "_scaled_mm" else {}), **extra)


def _mean_readback(fmt: str, n: int, to64) -> dict:
    """torch.mean = torch.sum's reduction, then S * fl(1/n) (CUDA) or S / n (CPU), rounded to the
    output format: read the sum S back from the mean.

    n a power of two: mean * n is S exactly (out_shift makes the masks keep S/n on the output
    format's grid).  Other n (fp32 only): mean * n is within 2^-23 of S relative (two roundings),
    so rounded to 21 significant bits it is S whenever S has at most 21 of them: every count of
    fewer than 2^21 units of one power of two (count_bits = 21 caps the window there).  fp16 /
    bf16 means at other n lose the count in the final rounding to 11 / 8 bits: refused."""
    if n & (n - 1) == 0:
        return {"to_float64": lambda out, _t=to64, _n=n: _t(out) * _n, "out_shift": n.bit_length() - 1}
    if fmt != "fp32":
        raise FpspecError(f"torch.mean on {fmt} at n = {n}: the mean rounds the sum to the output format "
                          "after dividing by n, which reads no count back unless n is a power of two; "
                          "reveal torch.sum (the same reduction) or torch.mean at a power-of-two n")

    def to_float64(out, _t=to64):
        m, e = np.frexp(np.asarray(_t(out), np.float64) * n)
        return np.ldexp(np.round(m * 2.0 ** 21), e - 21)
    return {"to_float64": to_float64, "count_bits": 21}


def _jax_target(name, func, op, n, fmt, m, ncols, device) -> Target:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        raise FpspecError("jax is not installed") from None
    table = {"fp64": jnp.float64, "fp32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}
    if fmt not in table:
        raise FpspecError(f"jax has no {fmt} dtype here")
    if fmt == "fp64":
        jax.config.update("jax_enable_x64", True)
    dt = table[fmt]
    funcs = {"sum": ("sum",), "dot": ("dot",), "matmul": ("gemv", "gemm")}
    if func not in funcs:
        raise FpspecError(f"unknown jax target {name!r}; expected jax.numpy.sum, dot or matmul")
    _check_op(name, op, funcs[func])
    raw = getattr(jnp, func)

    def fn(*args):
        return raw(*args).block_until_ready()

    def native(x):
        return jnp.asarray(np.asarray(x, np.float64)).astype(dt)

    def to64(out):
        return np.asarray(out.astype(jnp.float32 if fmt != "fp64" else jnp.float64), dtype=np.float64)

    m, ncols = _shape_args(op, m, ncols)
    return Target(name, op, n, fmt, device, m, ncols, "jax", fn=fn, native=native, to_float64=to64,
                  versions=_versions("numpy", "jax"))


def _import_callable(spec: str) -> tuple[Callable, str]:
    """The callable a target name means: `module:attr.path`, `path/to/file.py:function`, a dotted
    `package.module.function` whose function may be an attribute of an attribute (numpy.add.reduce),
    or a builtin (`sum`).  Modules in the current directory import as `python -m` would import them,
    also when fpspec runs as an installed script (whose sys.path starts at its own folder)."""
    if spec.endswith(".py") or "/" in spec.split(":")[0] and not spec.split(":")[0].endswith(".py"):
        raise FpspecError(f"cannot use {spec!r} as a target: name a function in a Python file as "
                          "path/to/file.py:function")
    if spec.lstrip().startswith("lambda"):
        raise FpspecError(f"cannot use {spec!r} as a target: write the function in a file and name it as "
                          "path/to/file.py:function")
    if ":" in spec:
        path, function = spec.rsplit(":", 1)
        if path.endswith(".py"):        # a path may hold a colon itself (a drive letter)
            return _file_callable(spec, path, function)
        mod, attr = spec.split(":", 1)
        obj = _import_module(mod, spec)
    elif "." in spec:
        parts = spec.split(".")
        # the longest prefix that is a module: numpy.add.reduce is numpy's `add`, then its `reduce`
        for k in range(len(parts) - 1, 0, -1):
            mod, attr = ".".join(parts[:k]), ".".join(parts[k:])
            try:
                obj = _import_module(mod, spec)
                break
            except _NoModule:
                if k == 1:
                    raise
    else:
        import builtins

        if not callable(getattr(builtins, spec, None)):
            raise FpspecError(f"cannot find {spec!r}: name a callable as package.module:function "
                              "or path/to/file.py:function")
        return getattr(builtins, spec), "builtins"
    return _attribute(obj, mod, attr, spec), mod.split(".")[0]


class _NoModule(FpspecError):
    """The module itself (not one it imports) does not exist."""


def _import_module(mod: str, spec: str):
    import os
    import sys

    for attempt in range(2):
        try:
            return importlib.import_module(mod)
        except ModuleNotFoundError as e:
            missing = e.name is not None and (mod == e.name or mod.startswith(e.name + "."))
            cwd = os.getcwd()
            if missing and attempt == 0 and not {"", ".", cwd} & set(sys.path):
                sys.path.append(cwd)      # the user's module next to them, found last (it shadows nothing)
                continue
            if missing:
                raise _NoModule(f"cannot import {mod!r} for target {spec!r}: {e}") from None
            raise FpspecError(f"cannot import {mod!r} for target {spec!r}: {e}") from None
        except ImportError as e:
            raise FpspecError(f"cannot import {mod!r} for target {spec!r}: {e}") from None
        except Exception as e:      # the user's module failed while it ran its own top level
            raise FpspecError(f"cannot import {mod!r} for target {spec!r}: {type(e).__name__}: {e}") from None


def _file_callable(spec: str, path: str, attr: str) -> tuple[Callable, str]:
    """`path/to/file.py:function`: the file run as a module named after it (registered in
    sys.modules, so that its dataclasses and pickles work as in an import)."""
    import importlib.util
    import os
    import sys

    if not os.path.isfile(path):
        raise FpspecError(f"cannot find {path!r} for target {spec!r}: no such file")
    name = os.path.splitext(os.path.basename(path))[0]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise FpspecError(f"cannot import {path!r} for target {spec!r}: {type(e).__name__}: {e}") from None
    return _attribute(module, path, attr, spec), name


def _attribute(obj: Any, mod: str, attr: str, spec: str) -> Callable:
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise FpspecError(f"{mod!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise FpspecError(f"{spec!r} is not callable")
    return obj


_ALIASES = {
    "np.sum": "numpy.sum", "np.dot": "numpy.dot", "np.matmul": "numpy.matmul",
    "jnp.sum": "jax.numpy.sum", "jnp.dot": "jax.numpy.dot", "jnp.matmul": "jax.numpy.matmul",
    "F.linear": "torch.nn.functional.linear",
}
_PREFIXES = {"np.": "numpy.", "jnp.": "jax.numpy."}


def _alias(name: str) -> str:
    """The full name of a target written with the usual import abbreviations (np.add.reduce)."""
    if name in _ALIASES:
        return _ALIASES[name]
    for short, full in _PREFIXES.items():
        if name.startswith(short):
            return full + name[len(short):]
    return name


_DEFAULT_OPS = {"sum": "sum", "mean": "sum", "dot": "dot", "mv": "gemv", "matmul": "gemm", "bmm": "gemm", "_scaled_mm": "gemm",
                "linear": "gemm"}
# library functions with their own adapters (named in messages); any other numpy.X / torch.X is a
# user callable.  numpy.dot_matrix: numpy.matmul under another name, adapted too
_KNOWN = {"numpy": ("sum", "dot", "matmul"), "torch": ("sum", "mean", "dot", "mv", "matmul", "bmm", "_scaled_mm"),
          "jax": ("sum", "dot", "matmul")}
_ADAPTED = {**_KNOWN, "numpy": _KNOWN["numpy"] + ("dot_matrix",)}
_LIBRARIES = (("numpy.", "numpy"), ("torch.", "torch"), ("jax.numpy.", "jax"))


def _library_function(key: str):
    """(library, module, function) of a `numpy.X` / `torch.X` / `jax.numpy.X` name, else None."""
    for prefix, lib in _LIBRARIES:
        if key.startswith(prefix) and ":" not in key and key[len(prefix):].isidentifier():
            return lib, prefix[:-1], key[len(prefix):]
    return None


def resolve_target(name: str, *, op: str | None = None, n: int, dtype: str = "float32",
                   m: int | None = None, ncols: int | None = None, device: str = "cpu",
                   dtype_b: str | None = None) -> Target:
    """Build a Target from a name: numpy.*, torch.*, jax.numpy.*, or any `pkg.mod:func` with `op`;
    `dtype_b`: B's format where it differs (torch._scaled_mm only)."""
    try:
        fmt = get_format(dtype).name
        fmt_b = "" if dtype_b is None else get_format(dtype_b).name
    except ValueError as e:
        raise FpspecError(str(e)) from None
    if fmt_b and fmt_b != fmt and _alias(name) != "torch._scaled_mm":
        raise FpspecError(f"a second input format (B as {fmt_b}) is for torch._scaled_mm, not {name}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise FpspecError(f"n must be an integer >= 2, got {n!r}")
    n = int(n)
    if op is not None and op not in OPS:
        raise FpspecError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")
    key = _alias(name)
    if op is None and ncols is None and key.endswith("matmul") and m is not None:
        op = "gemv"
    if key == "torch.nn.functional.linear":   # a layer's op, adapted like torch's own (a bias operand)
        return _torch_target(name, "linear", op or "gemm", n, fmt, m, ncols, device)
    library = _library_function(key)
    if library is not None and library[2] in _ADAPTED[library[0]]:
        lib, _, func = library
        op = op or _DEFAULT_OPS.get(func)
        if lib == "numpy":
            if device != "cpu":
                raise FpspecError("numpy runs on the cpu only")
            return _numpy_target(name, func, op, n, fmt, m, ncols)
        if lib == "torch":
            return _torch_target(name, func, op, n, fmt, m, ncols, device, fmt_b)
        return _jax_target(name, func, op, n, fmt, m, ncols, device)
    if library is not None:     # another function of the library (numpy.vdot, torch.inner): a user callable
        lib, module, func = library
        try:
            found = callable(getattr(importlib.import_module(module), func, None))
        except ImportError:
            found = True    # _import_callable below says it cannot be imported
        if not found:
            raise FpspecError(f"unknown {lib} target {name!r}: {module} has no function {func!r}")
    # a user callable: imported first, so that a typo reads as one (before the
    # complaint that its op kind is missing)
    fn, package = _import_callable(key)
    if op is None:
        known = ("" if library is None else
                 f" (fpspec knows {', '.join(f'{library[0]}.{f}' for f in _KNOWN[library[0]])} by name)")
        raise FpspecError(f"target {name!r} is a user callable{known}: give its op kind (--op sum|dot|gemv|gemm)")
    if fmt == "bf16" or fmt.startswith("fp8") or key.startswith("torch."):   # torch functions take tensors
        native, to64 = _torch_adapters(fmt, device)
        versions = _versions("numpy", "torch", package)
    else:
        native, to64 = _numpy_adapters(fmt, name)
        versions = _versions("numpy", package)
    m, ncols = _shape_args(op, m, ncols)
    if _isolate is not None:
        probe_in_subprocess(name, op=op, n=n, dtype=dtype, m=m, ncols=ncols, device=device)
    return checked_target(Target(name, op, n, fmt, device, m, ncols, package, fn=fn, native=native,
                                 to_float64=to64, versions=versions,
                                 takes_bias=op == "gemm" and _has_bias_parameter(fn)))


def _has_bias_parameter(fn: Callable) -> bool:
    """A user gemm that takes a bias per output column: a parameter named `bias` (F.linear's)."""
    import inspect

    try:
        return "bias" in inspect.signature(fn).parameters
    except (TypeError, ValueError):   # a builtin without a signature
        return False


# Note [crashing targets]: a user callable runs in fpspec's process (millions of
# calls: a process per call would cost more than the revelation).  One that
# crashes the interpreter (a segfault in its C code, os._exit) would take
# fpspec with it and say nothing.  So the command line first calls it once in
# a child process, on the operands checked_target uses, and reports a death
# there as a TargetError; the revelation then runs in process.  Once per
# callable and op kind per command.
_isolate: set | None = None
_PROBED_OK = "fpspec: target probe done"


@contextlib.contextmanager
def isolated_first_calls():
    """While active, resolve_target calls each user callable once in a child
    process before trusting it in this one (note [crashing targets])."""
    global _isolate
    previous, _isolate = _isolate, set()
    try:
        yield
    finally:
        _isolate = previous


def probe_in_subprocess(name: str, *, op: str, n: int, dtype: str, m: int, ncols: int, device: str) -> None:
    key = (name, op, dtype, device)
    if _isolate is None or key in _isolate:
        return
    import json
    import os
    import signal
    import subprocess
    import sys

    args = json.dumps({"name": name, "op": op, "n": n, "dtype": dtype, "m": m, "ncols": ncols, "device": device})
    env = dict(os.environ)
    # the child imports what this process can: the same fpspec, the user's modules from the cwd
    env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    code = "import sys; from fpspec.reveal.targets import _child_probe; _child_probe(sys.argv[1])"
    proc = subprocess.run([sys.executable, "-c", code, args], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if proc.returncode < 0:
        try:
            sig = f"signal {-proc.returncode}, {signal.Signals(-proc.returncode).name}"
        except ValueError:
            sig = f"signal {-proc.returncode}"
        raise TargetError(f"target {name} crashed ({sig}) when called on {op} operands of length {n}; "
                          "fpspec calls it in its own process, so it cannot be revealed")
    if _PROBED_OK.encode() not in proc.stdout:
        raise TargetError(f"target {name} ended the process (exit status {proc.returncode}) when called on "
                          f"{op} operands of length {n}; expected it to return its result")
    _isolate.add(key)


def _child_probe(args: str) -> None:
    """The child of probe_in_subprocess: one checked call; a TargetError is the parent's to report."""
    import json
    import os
    import sys

    kw = json.loads(args)
    try:
        resolve_target(kw.pop("name"), **kw)
    except (FpspecError, KeyboardInterrupt):     # the parent's call says so again, as itself
        pass
    sys.stdout.flush()
    os.write(1, f"\n{_PROBED_OK}\n".encode())


class TargetError(FpspecError):
    """A user callable failed or answered nonsense; the message names the target."""


def checked_target(tgt: Target) -> Target:
    """`tgt` with its function guarded, after one call on operands of its op's
    shapes: a callable that raises, returns nothing, or returns the wrong shape
    or a non-float result is a TargetError naming it, instead of a failure deep
    inside a revelation.  (resolve_target does this for user callables; the
    numpy, torch and jax adapters are trusted.)"""
    fn = tgt.fn
    name = tgt.name

    @functools.wraps(fn)        # inspect.unwrap(tgt.fn) is the user's function
    def guarded(*operands):
        try:
            return fn(*operands)
        except KeyboardInterrupt:   # Ctrl-C stays an interrupt
            raise
        except BaseException as e:  # SystemExit too: a target does not decide fpspec's exit status
            text = " ".join(str(e).split())
            raise TargetError(f"target {name} raised {type(e).__name__}: {text}") from None

    tgt = dataclasses.replace(tgt, fn=guarded)
    operands = [tgt.native(np.ones(shape)) for shape in tgt.operand_shapes]
    out = tgt.fn(*operands)
    what = f"target {name} ({tgt.op}"
    what += f", n={tgt.n})" if tgt.op in ("sum", "dot") else f", {' x '.join(map(str, tgt.output_shape))} outputs)"
    if out is None:
        raise TargetError(f"{what} returned None, expected a number")
    dtype = getattr(out, "dtype", None)
    if dtype is not None and not _floating(dtype):
        raise TargetError(f"{what} returned {dtype} values, expected floating point ({tgt.fmt})")
    if dtype is None and isinstance(out, (list, tuple)):
        kinds = sorted({type(v).__name__ for v in np.ravel(np.asarray(out, dtype=object))})
        raise TargetError(f"{what} returned a Python {type(out).__name__} of {len(out)} "
                          f"({', '.join(kinds) or 'nothing'}); expected a floating-point number, or a numpy array "
                          f"or torch tensor of shape {tgt.output_shape}")
    if dtype is None and not isinstance(out, float):
        raise TargetError(f"{what} returned {type(out).__name__}, expected a floating-point number or array")
    try:
        size = int(np.size(tgt.to_float64(out)))
    except (TypeError, ValueError) as e:
        raise TargetError(f"{what} returned {type(out).__name__} that is not numeric: {e}") from None
    expected = int(np.prod(tgt.output_shape))
    if size != expected:
        shape = getattr(out, "shape", (size,))
        raise TargetError(f"{what} returned shape {tuple(shape)}, expected {tgt.output_shape or 'a scalar'}")
    _check_depends_on_inputs(tgt, what, tgt.to_float64(out))
    return tgt


def _check_depends_on_inputs(tgt: Target, what: str, at_ones) -> None:
    """A function whose result ignores its inputs reveals as one fused node of
    everything (every query gives the same answer): refuse it instead."""
    at_twos = tgt.to_float64(tgt.fn(*[tgt.native(np.full(shape, 2.0)) for shape in tgt.operand_shapes]))
    a, b = np.asarray(at_ones, np.float64).ravel(), np.asarray(at_twos, np.float64).ravel()
    if np.all(np.isfinite(a)) and np.array_equal(a, b):
        raise TargetError(f"{what} returned {float(a[0])!r} for all-ones and for all-twos inputs: its result does not "
                          "depend on its inputs, so it has no accumulation order to reveal")


def _floating(dtype) -> bool:
    if hasattr(dtype, "is_floating_point"):          # a torch.dtype
        return bool(dtype.is_floating_point)
    return getattr(dtype, "kind", "f") in ("f", "V")   # numpy; ml_dtypes' bfloat16 and fp8 are kind V


def from_callable(fn: Callable, *, op: str, n: int, dtype: str = "float64", m: int = 1, ncols: int = 1,
                  name: str | None = None, call_rows: Callable | None = None, out_fmt: str | None = None) -> Target:
    """A Target around a Python callable taking numpy arrays (synthetic black boxes, replicas);
    out_fmt: the output's format where it is not the input's (an fp8 GEMM's fp32)."""
    fmt = get_format(dtype).name
    if fmt in ("fp64", "fp32", "fp16"):
        native, to64 = _numpy_adapters(fmt, name or "callable")
    else:
        # narrow formats without a numpy dtype travel as float64-held values
        native = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
        to64 = lambda out: np.asarray(out, dtype=np.float64)  # noqa: E731
    return Target(name or getattr(fn, "__name__", "callable"), op, n, fmt, "cpu", m, ncols, "python",
                  fn=fn, native=native, to_float64=to64, call_rows=call_rows,
                  **({"out_fmt": out_fmt} if out_fmt is not None else {}))
