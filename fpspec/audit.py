"""Batch invariance: how an op's accumulation order changes with the batch size.

    subject = audit_subject("torch.matmul", op="gemm", m=(1, 4096), n=4096, ncols=4096, dtype="bf16")
    result = audit(subject)          # -> Audit: classes of sizes with one order + arithmetic each
    result.invariant, result.table()

A library may pick its kernel (tiling, split-K, a GEMV for one row) from the
shape, so the same output row can be summed in another order, with other bits,
when it is computed alone (decode, M = 1) or in a batch (prefill, M = 4096).
The audit reveals the order and probes the arithmetic of a fixed output (row 0,
or every output with rows="all") at a designed set of sizes and groups the
sizes into classes of identical order + arithmetic.

Designed sizes: both ends, every power of two inside the range and its two
neighbours.  Between two neighbouring sizes of different classes the boundary
is found exactly by bisection.  Bisection runs on fingerprints (the output
bits of the op on fixed random inputs, where the row's inputs are the same at
every size): one library call per size instead of a revelation.  A size whose
fingerprint equals a revealed size's over many outputs takes its orders
unrevealed (Note [matched by fingerprint]); the others, both sides of each
boundary included, are revealed.  Where the inputs cannot be the same at two
sizes (--vary n: the row has another length) bisection reveals.

Limits (Note [between designed sizes]): two designed neighbours of one class are
taken to bound one run of that class: an order that leaves and comes back
between them (A B A) is seen only if a fingerprint at a designed size shows it.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fpspec.errors import FpspecError, RevealRefused
from fpspec.formats import get_format, round_to
from fpspec.progress import phase

VARY = ("m", "n", "N")
OPS = ("gemm", "gemv", "sum", "dot")
# columns of B the revelation reads (the library call has all N of them): its queries ride on
# rows and columns, so a narrow view costs calls at small M (K = 1024, M = 1: 406 calls with
# 16 columns, 64 with 128, 28 with 512)
VIEW_COLS = 256
VIEW_ROWS = 64          # rows of A it reads for row 0's order (the call has all M of them)
BMM_ROWS = 16           # rows of each matrix in a torch.bmm batch


# ================================================================ subjects: one op seen at every size

@dataclass(frozen=True)
class Subject:
    """A library op at every size of the varied dimension: `target(size)` is what the
    revelation engine reads at that size, `fingerprint(size)` the compared output
    bits on fixed inputs (None where inputs cannot be the same at two sizes)."""

    name: str
    op: str
    vary: str                   # m | n | N
    lo: int
    hi: int
    shape: dict                 # the fixed dimensions: m, n, ncols
    fmt: str
    device: str
    target: Callable = field(compare=False, repr=False)
    fingerprint: Callable | None = field(default=None, compare=False, repr=False)
    rows: str = "0"             # "0": output row 0's element (0, 0); "all": every output

    def describe(self) -> str:
        dims = {"m": "M", "n": "K" if self.op != "sum" else "n", "N": "N"}
        fixed = ", ".join(f"{dims[k]}={v}" for k, v in (("m", self.shape["m"]), ("N", self.shape["ncols"]),
                                                          ("n", self.shape["n"])) if k != self.vary and v)
        return f"{self.name} ({self.op}, {dims[self.vary]} in {self.lo}..{self.hi}, {fixed}, {self.fmt}, {self.device})"


def _exact_random(fmt: str, shape, seed: int) -> np.ndarray:
    """Random values exact in `fmt`: signs, significands and a few binades, so that
    another order of the same terms almost surely rounds differently."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-3, 4, size=shape))
    return round_to(get_format(fmt), x)


def audit_subject(name: str, *, op: str | None, vary: str = "m", m: int | tuple = 1, n: int | tuple = 64,
                  ncols: int | tuple | None = None, dtype: str = "float32", device: str = "cpu",
                  bias: bool = False, rows: str = "0") -> Subject:
    """The Subject for a library name (numpy.matmul, torch.matmul, torch.nn.functional.linear,
    torch.bmm, torch.sum, torch.mean, torch.nn.functional.rms_norm) or a user callable
    `pkg.mod:function` taking numpy arrays (with `op`).  The varied dimension is given
    as (lo, hi), the others as integers."""
    if vary not in VARY:
        raise FpspecError(f"--vary must be one of {', '.join(VARY)}, got {vary!r}")
    if rows not in ("0", "all"):
        raise FpspecError(f"--rows must be 0 or all, got {rows!r}")
    fmt = get_format(dtype).name
    dims = {"m": m, "n": n, "N": ncols}
    for key, value in dims.items():
        if (key == vary) != isinstance(value, tuple):
            what = "a range LO..HI" if key == vary else "one integer"
            raise FpspecError(f"--vary {vary}: {_option(key)} must be {what}, got {value!r}")
    lo, hi = dims[vary]
    if not 1 <= lo <= hi:
        raise FpspecError(f"{_option(vary)} {lo}..{hi}: a range LO..HI needs 1 <= LO <= HI")
    if name == "torch.nn.functional.rms_norm":
        raise RevealRefused(
            "torch.nn.functional.rms_norm's sum of squares cannot be revealed: its terms are squares, never "
            "negative, so no input cancels a large term (the revelation needs +M and -M terms), and the sum "
            "reaches the output only through rsqrt, which keeps too few of its bits; audit torch.sum of x*x "
            "or torch.mean over the same shape instead")
    op = op or _default_op(name)
    if op not in OPS:
        raise FpspecError(f"--op must be one of {', '.join(OPS)}, got {op!r}")
    if op in ("sum", "dot") and vary == "N":
        raise FpspecError(f"--vary N needs a matrix product (gemm); {op} has one output per row")
    if op in ("gemv", "dot") and vary == "N":
        raise FpspecError("--vary N needs --op gemm")
    if rows == "all" and op not in ("gemm", "gemv"):
        raise FpspecError("--rows all applies to gemv and gemm (each output element revealed); "
                          f"{op} reveals row 0")
    if op == "dot" and name not in ("numpy.dot", "torch.dot") and ":" not in name:
        raise FpspecError(f"{name} computes no dot product; audit --op gemv or gemm")
    if ncols is None:
        ncols = (1, 1) if vary == "N" else 1
    fixed = {"m": m if vary != "m" else None, "n": n if vary != "n" else None,
             "ncols": ncols if vary != "N" else None}
    build = _matrix_subject if op in ("gemm", "gemv") else _row_subject
    target, fingerprint = build(name, op, vary, (lo, hi), fixed, fmt, device, bias, rows)
    return Subject(name + (" (bias)" if bias else ""), op, vary, lo, hi, fixed, fmt, device, target,
                   fingerprint, rows)


def _option(dim: str) -> str:
    return {"m": "--m", "n": "-n", "N": "--ncols"}[dim]


def _default_op(name: str) -> str:
    if name.endswith(("matmul", "linear", "bmm")):
        return "gemm"
    if name.endswith(("sum", "mean")):
        return "sum"
    if name.endswith("dot"):
        return "dot"
    raise FpspecError(f"target {name!r}: give its op kind (--op gemm|gemv|sum|dot)")


def _library_call(name: str, op: str, fmt: str, device: str, bias: bool):
    """(call(A, B) -> output, base target name) of a library matrix op on native operands."""
    if name in ("numpy.matmul", "np.matmul"):
        if device != "cpu":
            raise FpspecError("numpy runs on the cpu only")
        return np.matmul, "numpy.matmul"
    if name == "torch.matmul":
        import torch

        return torch.matmul, "torch.matmul"
    if name == "torch.nn.functional.linear":
        import torch
        import torch.nn.functional as F

        cache = {}

        def linear(A, B):
            # a layer's weight is [N, K], row major: the layout cuBLAS sees in a model
            W = B.t().contiguous() if B.dim() == 2 else B.reshape(1, -1)
            if not bias:
                out = F.linear(A, W)
            else:
                key = (W.shape[0], W.dtype, W.device)
                if key not in cache:
                    cache[key] = torch.zeros(W.shape[0], dtype=W.dtype, device=W.device)
                out = F.linear(A, W, cache[key])
            return out if B.dim() == 2 else out.reshape(-1)
        return linear, "torch.matmul"
    if bias:
        raise FpspecError("--bias applies to torch.nn.functional.linear")
    if name == "torch.bmm":
        import torch

        def bmm(A3, B):
            return torch.bmm(A3, B.expand(A3.shape[0], *B.shape).contiguous())
        return bmm, "torch.matmul"
    if name.endswith(".py"):
        return _replica_call(name, op)
    if ":" in name or name.count(".") >= 1:
        import inspect

        from fpspec.reveal.targets import _import_callable

        fn, _ = _import_callable(name)
        # a function of a module that imports torch takes tensors (batch_invariant_ops.matmul_persistent);
        # others take numpy arrays
        module = inspect.getmodule(inspect.unwrap(fn))
        takes_torch = device != "cpu" or getattr(module, "torch", None) is not None
        return fn, ("torch.matmul" if takes_torch else None)
    raise FpspecError(f"unknown audit target {name!r}")


def _replica_call(path: str, op: str):
    """A replica module written by `fpspec compile` (its gemm / gemv entry point): torch
    tensors for a triton replica, numpy arrays for the others."""
    from fpspec.compile import load_replica
    from fpspec.io import read_text

    source = read_text(path, "replica module")
    module = load_replica(source, path)
    fn = getattr(module, op, None)
    if fn is None:
        raise FpspecError(f"{path} has no {op}(): it replicates another op")
    return fn, ("torch.matmul" if "\nimport torch" in source else "numpy.matmul")


def _fast_native(tgt):
    """The target's float64 -> torch conversion through numpy bit patterns: torch's own
    float64 -> fp16/bf16 conversion runs at a few million values a second on some
    hosts (35 ms for a 64 x 2048 operand), and the revelation converts an operand per call.
    For a GPU target the float64 values travel and the GPU converts them (the values are
    exact in the format, the engine's contract: any correct rounding keeps them)."""
    if tgt.library != "torch" or tgt.fmt not in ("fp16", "bf16", "fp32"):
        return tgt.native
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[tgt.fmt]
    device = tgt.device
    device_is_gpu = torch.device(device).type == "cuda"

    def native(x):
        x = np.ascontiguousarray(x, dtype=np.float64)
        if device_is_gpu:
            # on a GPU the conversion is torch's own (no host arithmetic: a 4096 x 256 operand a call
            # cost the revelation most of its time on the host)
            return torch.from_numpy(x).to(device).to(dtype)
        if tgt.fmt == "fp16":
            with np.errstate(over="ignore"):        # beyond fp16: inf, as torch rounds it
                t = torch.from_numpy(x.astype(np.float16))
        elif tgt.fmt == "fp32":
            t = torch.from_numpy(x.astype(np.float32))
        else:
            # values are exact in bf16 (the engine's contract): the high half of their fp32 bits;
            # round to nearest even all the same, so that an inexact value rounds as torch would
            u = x.astype(np.float32).view(np.uint32)
            u = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)     # wraps only for NaN payloads
            t = torch.from_numpy(u.view(np.int16)).view(dtype)
        return t.to(device)
    return native


def _sync(device: str):
    if device.startswith("cuda"):
        import torch

        return torch.cuda.synchronize
    return lambda: None


_LIBRARY_OPS = ("numpy.matmul", "np.matmul", "torch.matmul", "torch.nn.functional.linear", "torch.bmm")


def _matrix_subject(name, op, vary, span, fixed, fmt, device, bias, rows):
    from fpspec.reveal.targets import checked_target, resolve_target

    call, base = _library_call(name, op, fmt, device, bias)
    bmm = name == "torch.bmm"
    sync = _sync(device)
    buffers: dict = {}

    def sizes(v):
        m, n, N = fixed["m"], fixed["n"], fixed["ncols"]
        if vary == "m":
            m = v
        elif vary == "n":
            n = v
        else:
            N = v
        return m, n, N

    def full_b(native, n, N):
        """A persistent B (or x) of the library call's shape; the engine's columns go in front."""
        key = (n, N)
        if key not in buffers:
            buffers[key] = native(np.zeros((n, N)) if op == "gemm" else np.zeros(n))
        return buffers[key]

    def library(A, B):
        if bmm:     # the batch is the leading dimension; batch item 0 is the engine's
            batch = A.shape[0]
            A = A[:1]
            out = call(A.reshape(1, *A.shape[1:]).expand(batch, *A.shape[1:]).contiguous()
                       if batch > 1 else A.reshape(1, *A.shape[1:]), B)
            return out[0]
        return call(A, B)

    def full_a(native, m, n):
        """The first m rows of one zero A made at the largest M (its first rows take the engine's)."""
        key = ("A", n)
        if key not in buffers or buffers[key].shape[0] < m:
            buffers[key] = native(np.zeros((max(m, span[1] if vary == "m" else m), n)))
        return buffers[key][:m]

    def target(v):
        m, n, N = sizes(v)
        # row 0's order: the engine reads the first VIEW_ROWS rows, the call has all m
        # (zeros below); every output (--rows all): the engine reads them all
        engine_rows = BMM_ROWS if bmm else m if rows == "all" else min(m, VIEW_ROWS)
        if n < 2:
            raise FpspecError(f"K = {n}: a reduction needs at least 2 terms")
        view = min(N, VIEW_COLS) if op == "gemm" else 1
        tgt = resolve_target(base or name, op=op, n=n, dtype=fmt, m=engine_rows,
                             ncols=view if op == "gemm" else None, device=device)

        def fn(A, B, _n=n, _N=N, _m=m):
            r = A.shape[0]
            if bmm:
                A = A.reshape(1, *A.shape).expand(_m, *A.shape)
            elif r < _m:
                Af = full_a(tgt.native, _m, _n)
                Af[:r] = A
                A = Af
            if op == "gemv":
                out = library(A, B)[:r]
            else:
                Bf = full_b(tgt.native, _n, _N)
                Bf[:, :B.shape[1]] = B
                out = library(A, Bf)[:r, :B.shape[1]]
            sync()
            return out
        tgt = dataclasses.replace(tgt, name=name, fn=fn, call_rows=None, native=_fast_native(tgt))
        # a user callable or replica that raises is one line naming it (a library op is trusted)
        return tgt if name in _LIBRARY_OPS else checked_target(tgt)

    inputs: dict = {}

    def fingerprint(v):
        if vary == "n":
            return None
        m, n, N = sizes(v)
        tgt = target(v)
        if "A" not in inputs:       # the same values at every size: row r's inputs do not move
            hi_m = span[1] if vary == "m" else m
            hi_N = span[1] if vary == "N" else N
            inputs["A"] = tgt.native(_exact_random(fmt, (BMM_ROWS if bmm else hi_m, n), 11))
            inputs["B"] = tgt.native(_exact_random(fmt, (n,), 12) if op == "gemv" else
                                     _exact_random(fmt, (n, hi_N), 12))
        A = inputs["A"][:BMM_ROWS if bmm else m]
        B = inputs["B"] if op == "gemv" else inputs["B"][:, :N]
        if bmm:
            out = call(A.reshape(1, *A.shape).expand(m, *A.shape).contiguous(), B)[0]
        else:
            out = call(A, B)
        sync()
        if rows == "0":
            out = out[:1]
        return np.asarray(tgt.to_float64(out), np.float64).reshape(out.shape[0], -1).view(np.uint64)

    return target, fingerprint


def _row_subject(name, op, vary, span, fixed, fmt, device, bias, rows):
    """sum: row 0 of a reduction over the last dim of an [M, n] tensor; dot: numpy/torch.dot or a user callable."""
    from fpspec.reveal.targets import resolve_target

    if bias:
        raise FpspecError("--bias applies to torch.nn.functional.linear")
    sync = _sync(device)
    mean = name == "torch.mean"
    if name in ("torch.sum", "torch.mean"):
        import torch

        if op != "sum":
            raise FpspecError(f"{name} is audited as --op sum (a reduction over the last dim)")
        reduce = torch.mean if mean else torch.sum
    elif name in ("numpy.sum", "np.sum"):
        reduce = np.sum
    elif ":" in name and op == "sum":
        # a user callable for --op sum takes an [M, n] array and returns its M row sums
        from fpspec.reveal.targets import _import_callable

        reduce = _rows_of(_import_callable(name)[0])
    elif op == "dot" or ":" in name:
        reduce = None
    else:
        raise FpspecError(f"unknown audit target {name!r} for --op {op}")

    def sizes(v):
        return (v, fixed["n"]) if vary == "m" else (fixed["m"], v)

    def target(v):
        m, n = sizes(v)
        if mean and n & (n - 1):
            raise RevealRefused(f"torch.mean divides the sum by n and rounds: the sum is read back exactly only "
                                f"when n is a power of two (n = {n}); audit torch.sum")
        # torch.mean is read as torch.sum's target (same adapters); a user row-sum callable as numpy.sum's
        base = {"torch.mean": "torch.sum"}.get(name, "numpy.sum" if ":" in name and op == "sum" else name)
        tgt = resolve_target(base, op=op, n=n, dtype=fmt, device=device)
        if reduce is None:      # a dot product has no batch: the library's own vector call
            if vary == "m" and (span[0], span[1]) != (1, 1):
                raise FpspecError(f"{name} takes vectors: audit it with --vary n")
            return tgt
        X = tgt.native(np.zeros((m, n)))

        def fn(x):
            X[0] = x
            out = reduce(X, -1)
            sync()
            return out[0]

        def rows_call(Q):
            # queries fill the [m, n] call's rows; the engine trusts this only after a sample
            # of batched answers matched single calls (rows that sum in another order fail it)
            out = []
            for start in range(0, Q.shape[0], m):
                chunk = Q[start:start + m]
                X[:chunk.shape[0]] = chunk
                out.append(reduce(X, -1)[:chunk.shape[0]])
            sync()
            if isinstance(out[0], np.ndarray):
                return np.concatenate(out)
            import torch

            return torch.cat(out)
        to64 = tgt.to_float64
        if mean:
            to64 = lambda out, _t=tgt.to_float64, _n=n: _t(out) * _n  # noqa: E731  (exact: n = 2^k)
        return dataclasses.replace(tgt, name=name, fn=fn, call_rows=rows_call, to_float64=to64)

    def fingerprint(v):
        if vary == "n" or reduce is None:
            return None
        m, n = sizes(v)
        tgt = target(v)
        X = tgt.native(_exact_random(fmt, (span[1] if vary == "m" else m, n), 13)[:m])
        out = reduce(X, -1)
        sync()
        return np.asarray(tgt.to_float64(out), np.float64).reshape(-1)[:1].view(np.uint64)

    return target, fingerprint


def _rows_of(fn):
    def reduce(X, axis):
        return np.asarray(fn(X), np.float64).reshape(-1)
    return reduce


# ================================================================ one size: order + arithmetic

@dataclass(frozen=True)
class Order:
    """One order and arithmetic found at a size, with the outputs that use it.

    The spec is lowered on first use: lowering a long reduction's tree costs seconds
    (K = 4096), and sizes are compared by tree and arithmetic, so only the spec of
    each class's first size is ever written."""

    header: object = field(repr=False)      # fpspec.spec.Header: target, op, n, formats, probed arithmetic
    tree: object = field(repr=False)
    outputs: int = 1            # output elements in this order (rows="all")
    arithmetic: object = field(default=None, repr=False, compare=False)    # fpspec.arith.Arithmetic (probed)

    @property
    def n(self) -> int:
        return self.header.n.lo

    @functools.cached_property
    def key(self) -> tuple:
        """What two sizes of one class share: the arithmetic section and the observable tree."""
        from fpspec.tree import observable

        return (arithmetic_line(self), observable(self.tree))

    @functools.cached_property
    def spec(self):
        """fpspec.spec.Spec: the lowered tree with the probed arithmetic (provenance-free)."""
        from fpspec.spec import check, lower

        spec = lower(self.tree, self.header, observed=True)
        check(spec)
        return spec


@dataclass(frozen=True)
class Sample:
    size: int
    orders: tuple               # Order, ...: element (0, 0)'s first
    seconds: float = 0.0
    calls: int = 0

    @property
    def n(self) -> int:
        return self.orders[0].n


def _body(spec) -> str:
    """The spec without its header line: the arithmetic and the order (what a class compares)."""
    text = str(spec)
    return text[text.index("\n\n") + 2:] if "\n\n" in text else text


def short(spec) -> str:
    """The order of a spec in one line (lets and order, whitespace squeezed)."""
    text = str(spec)
    start = min((text.find(k) for k in ("\nlet ", "\norder ") if text.find(k) >= 0), default=0)
    return " ".join(text[start:].split())


def arithmetic_line(spec) -> str:
    """The arithmetic section of a spec (or an Order) in one line, or "(not probed)"."""
    block = next((b for b in spec.header.sections if b.name == "arithmetic"), None)
    if block is None:
        return "(not probed)"
    return " ".join(" ".join(str(e).split()).replace(" = ", "=") for e in block.entries if e.key != "input")


def reveal_size(subject: Subject, size: int, *, probe: bool = True, seed: int = 0, known: tuple = ()) -> Sample:
    """Reveal the order (and probe the arithmetic) of the subject's output(s) at one size;
    `known`: arithmetics found at other sizes, tried first (Note [arithmetic of another size])."""
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.positions import restricted, reveal_positions

    t0 = time.perf_counter()
    tgt = subject.target(size)
    rv = reveal(tgt, seed=seed)
    found = [((0, 0), rv, rv.shared)]
    if subject.rows == "all" and rv.shared is not None and not rv.shared.all():
        found = [(p.at, p.revelation, p.mask) for p in reveal_positions(tgt, first=rv, seed=seed)]
    orders = []
    calls = 0
    for at, r, mask in found:
        calls += r.calls
        view = tgt if mask is None or tgt.op not in ("gemv", "gemm") else restricted(tgt, mask, at)
        header, arith = _header(view, r.tree, probe, seed, known)
        known = known if arith is None or arith in known else (*known, arith)
        orders.append(Order(header, r.tree, 1 if subject.rows == "0" or mask is None else int(np.sum(mask)),
                            arith))
    return Sample(size, tuple(orders), time.perf_counter() - t0, calls)


def _header(tgt, tree, probe: bool, seed: int, known: tuple = ()):
    """(the spec header of a revealed tree: the target and the probed arithmetic, that
    fpspec.arith.Arithmetic or None unprobed)."""
    from fpspec.spec import Block, Header, make_header

    header = make_header(target=tgt.name, op=tgt.op, n=(tgt.n, tgt.n),
                         formats={"input": tgt.fmt, "output": tgt.out_fmt})
    if not probe:
        return header, None
    from fpspec.arith.probe import probe_arithmetic, sample_check

    # the probes read column 0 of each call: one column of B to convert, not the view's
    probed = dataclasses.replace(tgt, ncols=1) if tgt.op == "gemm" else tgt
    # Note [arithmetic of another size]
    arith = next((a for a in known if sample_check(probed, tree, a, seed=seed)[1] == 0), None)
    if arith is None:
        report = probe_arithmetic(probed, tree, seed=seed)
        if not report.consistent:
            why = report.lines[-1] if report.lines else "the probes found none"
            raise RevealRefused(f"{tgt.describe()}: no arithmetic of the model reproduces it ({why}); "
                                "audit the orders alone with --no-probe")
        arith = report.arithmetic
    return Header(header.target, header.op, header.n,
                  header.sections + (Block("arithmetic", arith.to_entries()),)), arith


# Note [arithmetic of another size]: the arithmetic of a kernel's nodes (the Tensor Core's
# fused node, FMA or not, the accumulator) seldom changes with the batch even where the order
# does (cuBLAS at K = 4096: split-K blocks at M <= 48, one chain above, the same fused node).
# A size revealed after another class was probed first tries each arithmetic already found:
# the sample check (fpspec.arith.probe.sample_check: random terms and the input families of
# fpspec.inputs, subnormals, signed zeros, inf and nan among them, about 290 accumulations
# through the new tree) bit for bit.  Only where none agrees everywhere do the probes run:
# they search the whole model space (hundreds of candidate arithmetics evaluated over the
# tree, most of a revelation's time at K = 4096).


def same_orders(a: Sample, b: Sample) -> bool:
    """Two sizes share a class: the same orders (as sets) with the same arithmetic; at two
    reduction lengths, each one's program expands to the other's tree (one direction is not
    enough: lanes(4, seq, seq) at n = 2 is seq)."""
    if a.n == b.n:
        return {o.key for o in a.orders} == {o.key for o in b.orders}
    return _covers(a, b) and _covers(b, a)


def _covers(a: Sample, b: Sample) -> bool:
    from fpspec.spec import Range, expand
    from fpspec.tree import observable

    if len(a.orders) != len(b.orders):
        return False
    for oa, ob in zip(a.orders, b.orders):
        if _arith_body(oa.spec) != _arith_body(ob.spec):
            return False
        wide = dataclasses.replace(oa.spec, header=dataclasses.replace(oa.spec.header, n=Range(1, None)))
        try:
            if observable(expand(wide, b.n)) != observable(ob.tree):
                return False
        except Exception:   # the program has no tree at that length (a literal, a split past the end)
            return False
    return True


def _arith_body(spec) -> str:
    body = _body(spec)
    cut = min((body.find(k) for k in ("let ", "order ") if body.find(k) >= 0), default=len(body))
    return body[:cut]


# ================================================================ the audit

@dataclass(frozen=True)
class OrderClass:
    index: int
    ranges: tuple               # ((lo, hi), ...) of sizes, inclusive
    sample: Sample              # one revealed size of the class (its first)

    @property
    def sizes(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)


@dataclass(frozen=True)
class Audit:
    subject: Subject
    classes: tuple              # OrderClass, ...
    runs: tuple                 # ((lo, hi, class index), ...) in size order
    revealed: tuple             # sizes revealed
    fingerprinted: int          # library calls made for fingerprints
    seconds: float
    notes: tuple = ()
    matched: tuple = ()         # designed sizes classed by their fingerprint (Note [matched by fingerprint])

    @property
    def invariant(self) -> bool:
        return len(self.classes) == 1 and len(self.classes[0].sample.orders) == 1

    @property
    def boundaries(self) -> tuple:
        return tuple(lo for lo, _, _ in self.runs[1:])

    def verdict(self) -> str:
        if self.invariant:
            return "batch-invariant" if self.subject.vary == "m" else f"invariant in {self._dim()}"
        k = len(self.classes)
        if k == 1:
            return (f"NOT batch-invariant: 1 class, but its outputs use {len(self.classes[0].sample.orders)} "
                    "orders (--rows all)")
        what = "batch-invariant" if self.subject.vary == "m" else f"invariant in {self._dim()}"
        return f"NOT {what}: {k} classes"

    def _dim(self) -> str:
        return {"m": "M", "n": "K" if self.subject.op != "sum" else "n", "N": "N"}[self.subject.vary]

    def table(self) -> str:
        dim = self._dim()
        rows = [(f"{dim} range", "class", "orders", "order (short)", "arithmetic")]
        for lo, hi, k in self.runs:
            s = self.classes[k].sample
            first = s.orders[0].spec
            rows.append((f"{lo}..{hi}" if lo != hi else f"{lo}", f"{k}", f"{len(s.orders)}",
                         _clip(short(first), 60), _clip(arithmetic_line(first), 60)))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def report(self) -> str:
        return (f"audit of {self.subject.describe()}\n{self.table()}\n"
                f"{len(self.revealed)} sizes revealed, {len(self.matched)} matched by fingerprint, "
                f"{self.fingerprinted} fingerprint calls, "
                f"{self.seconds:.1f} s\n" + "".join(f"note: {x}\n" for x in self.notes) + self.verdict())

    def to_json(self) -> dict:
        return {
            "subject": self.subject.describe(), "target": self.subject.name, "op": self.subject.op,
            "vary": self.subject.vary, "range": [self.subject.lo, self.subject.hi],
            "shape": {k: v for k, v in self.subject.shape.items() if v is not None},
            "dtype": self.subject.fmt, "device": self.subject.device, "rows": self.subject.rows,
            "invariant": self.invariant, "verdict": self.verdict(),
            "boundaries": list(self.boundaries),
            "runs": [{"lo": lo, "hi": hi, "class": k} for lo, hi, k in self.runs],
            "classes": [{"class": c.index, "ranges": [list(r) for r in c.ranges], "revealed_at": c.sample.size,
                         "orders": [{"outputs": o.outputs, "order": short(o.spec),
                                     "arithmetic": arithmetic_line(o.spec), "spec": str(o.spec)}
                                    for o in c.sample.orders]}
                        for c in self.classes],
            "revealed": list(self.revealed), "matched": list(self.matched), "fingerprint_calls": self.fingerprinted,
            "seconds": round(self.seconds, 3), "notes": list(self.notes),
        }


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def designed_sizes(lo: int, hi: int) -> list[int]:
    """Both ends, and every power of two in [lo, hi] with its two neighbours."""
    out = {lo, hi}
    p = 1
    while p <= hi + 1:
        out.update(v for v in (p - 1, p, p + 1) if lo <= v <= hi)
        p *= 2
    return sorted(out)


def audit(subject: Subject, *, probe: bool = True, seed: int = 0, sizes: list[int] | None = None) -> Audit:
    """Classes of sizes in the subject's range with one order + arithmetic each, every
    boundary between two classes found exactly (see the module note)."""
    t0 = time.perf_counter()
    samples: dict[int, Sample] = {}
    prints: dict[int, np.ndarray | None] = {}
    notes: list[str] = []

    revealed: set[int] = set()
    matched: list[int] = []

    def sample(v: int) -> Sample:
        if v not in samples:
            known = tuple(dict.fromkeys(o.arithmetic for u in sorted(revealed) for o in samples[u].orders
                                        if o.arithmetic is not None))
            samples[v] = reveal_size(subject, v, probe=probe, seed=seed, known=known)
            revealed.add(v)
        return samples[v]

    def fp(v: int):
        if subject.fingerprint is None:
            return None
        if v not in prints:
            prints[v] = subject.fingerprint(v)
        return prints[v]

    def classify(v: int) -> Sample:
        """v's sample: a revealed size's orders where v's fingerprint equals that size's bit
        for bit (Note [matched by fingerprint]), else v revealed."""
        if v in samples:
            return samples[v]
        if subject.rows == "0":
            here = fp(v)
            twin = next((u for u in sorted(revealed) if _same_bits(fp(u), here)), None)
            if twin is not None:
                samples[v] = dataclasses.replace(samples[twin], size=v, seconds=0.0, calls=0)
                matched.append(v)
                return samples[v]
        return sample(v)

    designed = sorted(set(sizes)) if sizes else designed_sizes(subject.lo, subject.hi)
    with phase("audit: reveal at designed sizes", total=len(designed)) as advance:
        for v in designed:
            classify(v)
            advance()
    # bisection between designed neighbours of different classes: every boundary, exactly
    boundaries: set[int] = set()
    with phase("audit: boundaries") as advance:
        pending = [(a, b, True) for a, b in zip(designed, designed[1:])
                   if not same_orders(samples[a], samples[b])]
        # designed neighbours of one class whose fingerprints differ hide a run of another class
        for a, b in zip(designed, designed[1:]):
            fa, fb = fp(a), fp(b)
            if b > a + 1 and fa is not None and fb is not None and same_orders(samples[a], samples[b]) \
                    and _differ(fa, fb):
                notes.append(f"sizes {a} and {b} share a class but their outputs' bits differ (another output's "
                             "order, --rows all, or a run of another class between them): searched between them")
                pending.append((a, b, True))
        while pending:
            while pending:
                a, b, bits = pending.pop()
                # a search on fingerprints classes by them; a search again reveals every size it reads
                _bisect(a, b, bits, classify if bits else sample, fp, pending, boundaries)
                advance()
            # a fingerprint bisection trusted equal bits to mean one class; a run holding two
            # revealed classes is searched again by revelation alone
            for lo, hi, members in _members(subject.lo, subject.hi, sorted(boundaries), samples):
                for a, b in zip(members, members[1:]):
                    if not same_orders(samples[a], samples[b]):
                        pending.append((a, b, False))
    runs = _runs(subject.lo, subject.hi, sorted(boundaries), samples)
    classes: list[list] = []       # [sample, ranges]
    labelled = []
    for lo, hi, s in runs:
        k = next((i for i, c in enumerate(classes) if same_orders(c[0], s)), None)
        if k is None:
            k = len(classes)
            classes.append([s, []])
        classes[k][1].append((lo, hi))
        labelled.append((lo, hi, k))
    return Audit(subject, tuple(OrderClass(i, tuple(r), s) for i, (s, r) in enumerate(classes)),
                 tuple(labelled), tuple(sorted(revealed)), sum(v is not None for v in prints.values()),
                 time.perf_counter() - t0, tuple(notes), tuple(matched))


def _bisect(a, b, bits, sample, fp, pending, boundaries) -> None:
    """One step between sizes a < b of different classes (or bits)."""
    if b == a + 1:
        if not same_orders(sample(a), sample(b)):
            boundaries.add(b)
        return
    mid = (a + b) // 2
    if bits:
        fa, fm, fb = fp(a), fp(mid), fp(b)
        if fa is not None and not _differ(fa, fm) and _differ(fm, fb):
            pending.append((mid, b, True))      # mid in a's run: the same bits
            return
        if fb is not None and not _differ(fm, fb) and _differ(fa, fm):
            pending.append((a, mid, True))
            return
    sm = sample(mid)
    if not same_orders(sample(a), sm):
        pending.append((a, mid, bits))
    if not same_orders(sm, sample(b)):
        pending.append((mid, b, bits))


# Note [matched by fingerprint]: a size whose fingerprint (row 0's outputs on the fixed
# random inputs, where row 0's inputs are the same at every size) equals a revealed size's
# bit for bit, over at least MATCH_OUTPUTS outputs, takes that size's orders without a
# revelation: another order or arithmetic of the same exact random terms rounds differently
# at some of the outputs almost surely.  Every revealed size is a candidate, not only the
# previous designed one: a class that comes back (A B A) and both sides of a boundary found
# by bisection are classed by one library call each, so an audit reveals each class about
# once (at K = 4096 on a GPU a revelation with probes costs tens of seconds, a fingerprint
# milliseconds).  Where two sizes of equal bits turn out to hold two revealed classes in one
# run, the search between them runs again by revelation alone.  Fewer outputs (a sum's one
# value, a gemv, a narrow gemm) or --rows all (the extra rows of the larger size are in no
# fingerprint) reveal every size.
MATCH_OUTPUTS = 16


def _same_bits(a, b) -> bool:
    return a is not None and b is not None and a.shape == b.shape and a.size >= MATCH_OUTPUTS \
        and np.array_equal(a, b)


def _members(lo: int, hi: int, boundaries: list[int], samples: dict) -> list:
    edges = [lo, *boundaries, hi + 1]
    return [(a, b - 1, sorted(v for v in samples if a <= v < b)) for a, b in zip(edges, edges[1:])]


def _differ(a, b) -> bool:
    """Fingerprints differ on the outputs both sizes have (a row's leading columns)."""
    if a is None or b is None:
        return True
    r, c = min(a.shape[0], b.shape[0]), min(a.shape[-1], b.shape[-1])
    a2, b2 = a.reshape(a.shape[0], -1)[:r, :c], b.reshape(b.shape[0], -1)[:r, :c]
    return not np.array_equal(a2, b2)


def _runs(lo: int, hi: int, boundaries: list[int], samples: dict) -> list:
    """(lo, hi, sample) per run between boundaries, each with a revealed size inside it."""
    edges = [lo, *boundaries, hi + 1]
    out = []
    for a, b in zip(edges, edges[1:]):
        inside = [v for v in samples if a <= v < b]
        if not inside:
            raise FpspecError(f"internal error: no revealed size in {a}..{b - 1}")
        out.append((a, b - 1, samples[min(inside)]))
    return out
