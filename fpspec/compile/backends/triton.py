"""Triton backend: a replica module that runs the spec's order on a GPU (or the interpreter).

The replica is one self-contained module importing only triton and torch:
the kernel library (fpspec/compile/triton_kernels.py), the host planner
(triton_host.py) and the driver (triton_run.py) are copied in verbatim, and
this module writes the spec's reducers as calls of the planner's classes.
Which kernels run is decided at call time, once n is known:

- emulated path: fused nodes computed with integers inside the kernel
  (bit-exact anywhere); binary nodes as IEEE adds in the accumulator (fp32,
  fp64; fp16 and bf16 rounded at every addition; each `using` part in its
  own: triton_kernels Note [accumulators]), FMA where the spec says so, no
  other contraction;
- native path: chains of 16-wide fused nodes on the Tensor Cores (tl.dot),
  chosen only where the GPU's fused node is the spec's (H100/H200, fp16 or
  bf16, 2 extra bits); `path="auto"` picks it when it applies.
"""
from __future__ import annotations

import dataclasses
import inspect
import re

from fpspec.compile.backends import Backend, header, py_cond, py_int, render_template
from fpspec.compile.ir import (Blocks, Call, Chunks, CompileError, Const, Fold, FusedChain, Guard, Kernel, Lanes, Pad,
                               Pairwise, Segments, Table, TreeReduce, VLanes, WithArithmetic, walk)
from fpspec.compile.numerics import holds_every_value, stores_fused
from fpspec.formats import get_format

PATHS = ("auto", "native", "emulated")
# tf32, fp8, fp6, fp4: input formats only
_FORMATS = ("fp16", "bf16", "fp32", "fp64", "tf32", "fp8e4m3", "fp8e5m2", "fp8e4m3fnuz", "fp8e5m2fnuz", "fp6e2m3",
            "fp6e3m2", "fp4e2m1")
_NARROW = ("fp8e4m3", "fp8e5m2", "fp8e4m3fnuz", "fp8e5m2fnuz", "fp6e2m3", "fp6e3m2", "fp4e2m1")
_ENTRY = {"sum": "sum(x) (and sums(X), every column)", "dot": "dot(x, y, path=PATH)", "gemv": "gemv(A, x, path=PATH)",
          "gemm": "gemm(A, B, path=PATH)"}
# the replica's entry point per op: every op is a matrix product of the driver
_API = {
    "sum": ("def sum(x):\n    return REPLICA.api_sum(x)\n\n\n"
            "def sums(X):\n    return REPLICA.api_sums(X)\n"),
    "dot": "def dot(x, y, path=PATH):\n    return REPLICA.api_dot(x, y, path)\n",
    "gemv": "def gemv(A, x, path=PATH):\n    return REPLICA.api_gemv(A, x, path)\n",
    "gemm": "def gemm(A, B, path=PATH):\n    return REPLICA.api_gemm(A, B, path)\n",
}


class TritonBackend(Backend):
    name = "triton"
    template = "triton.py.j2"
    requires = ("triton", "torch")
    options = ("path",)

    def check(self, kernel: Kernel) -> None:
        if getattr(kernel.arithmetic, "binned", None) is not None:
            return                     # fpspec.compile.triton_binned: any order
        ar = kernel.arithmetic
        for key in ("input", "output"):
            if getattr(ar, key) not in _FORMATS:
                raise CompileError(f"triton: {key} format {getattr(ar, key)} is not supported "
                                   f"(expected one of {', '.join(_FORMATS)})")
        for name in _region_names(kernel):
            _check_region(kernel, name)
        _check_accumulator(kernel)
        if ar.output == "tf32" or ar.output in _NARROW:
            raise CompileError(f"triton: output {ar.output} is not supported (its units write fp32)")
        if ar.input in _NARROW and any(isinstance(r, _BINARY) for r in _reducers(kernel)):
            raise CompileError(f"triton: fp8 inputs (and fp6, fp4; here {ar.input}) are supported in chains of "
                               "fused nodes only; compile for numpy")
        if kernel.op == "sum" and ar.product != "none":
            raise CompileError("triton: a sum has no products (product = none)")
        if ar.product == "exact" and ar.input == "fp32" and ar.accumulator == "fp32":
            has_binary = any(isinstance(r, (Fold, Pairwise, TreeReduce, Lanes, VLanes, Blocks, Chunks, Segments,
                                            Table))
                             for r in _reducers(kernel))
            if has_binary:
                raise CompileError("triton: exact fp32 products entering binary additions are not supported "
                                   "(write product = fma or rounded)")
        _check_reversed_pads(kernel)
        f = ar.fused
        if f is not None:
            _check_fused(kernel, f)
        if any(isinstance(r, FusedChain) for r in _reducers(kernel)) and f is None:
            raise CompileError("triton: the order has fused chains but the arithmetic has no fused section")
        if any(isinstance(r, VLanes) for r in _reducers(kernel)) and f is not None:
            raise CompileError("triton: vlanes(...) with fused nodes is not supported (its terms enter additions "
                               "on their own: triton_host note [vector lanes in plans]); compile for numpy or numba")
        if any(isinstance(r, Pad) for r in _reducers(kernel)) and f is not None:
            raise CompileError("triton: pad(...) with fused nodes is not supported (its terms enter additions on "
                               "their own: triton_host note [phantoms in plans]); compile for numpy or numba")
        for r in _reducers(kernel):
            _ReducerPrinter(kernel).print(r)   # raises on anything the printer cannot write
        _check_plans(kernel)

    def render(self, kernel: Kernel, path: str = "auto") -> str:
        if getattr(kernel.arithmetic, "binned", None) is not None:   # order-independent: no plan
            from fpspec.compile import triton_binned

            return triton_binned.render(self, kernel)
        if path not in PATHS:
            raise CompileError(f"triton: path must be one of {', '.join(PATHS)}, got {path!r}")
        self.check(kernel)
        printer = _ReducerPrinter(kernel)
        return render_template(
            self.template,
            header=header(kernel, "triton"),
            spec=kernel.source.replace('"""', "'''"),
            library=library_source(),
            checks=input_checks(kernel),
            op=kernel.op,
            entry=_ENTRY[kernel.op],
            api=_API[kernel.op],
            path=path,
            numerics=_numerics(kernel),
            root=printer.print(kernel.root),
            orders=[(name, printer.print(r)) for name, r in kernel.orders],
            n_min=kernel.n_min,
            n_max=kernel.n_max,
        )


# fused nodes' formats the emulated kernels read: a's (the spec's input) and b's (input_b)
_FUSED_INPUTS = ("fp16", "bf16", "tf32") + _NARROW
_BINARY = (Fold, Pairwise, TreeReduce, Lanes, VLanes, Blocks, Chunks, Segments, Table)


def _check_fused(kernel: Kernel, f) -> None:
    """Refuse, in one line naming the parameter, the fused nodes the emulated kernels cannot compute."""
    if f.combine == "amd" and f.result != "rne":
        raise CompileError("triton: AMD's combine rounds to nearest (result = rne)")
    if not f.c_aligned:
        # the products' truncated sum meets c unaligned, in one float64 round-to-odd addition
        # (fpspec.arith.fused _sum_round_to_odd): no named set has it, the kernels do not
        raise CompileError("triton: fused c_aligned = false (c added after the alignment) is not supported; "
                           "compile for numpy or numba")
    for what, fmt in (("input", f.input), ("input_b", f.input_b or f.input)):
        if fmt not in _FUSED_INPUTS:
            raise CompileError(f"triton: fused {what} {fmt} is not supported "
                               f"(expected one of {', '.join(_FUSED_INPUTS)})")
    if f.output not in ("fp32", "fp16"):
        raise CompileError(f"triton: fused output {f.output} is not supported (fp32 or fp16)")
    if f.output != "fp32" and any(isinstance(r, _BINARY + (WithArithmetic,)) for r in _reducers(kernel)):
        raise CompileError(f"triton: fused nodes writing {f.output} are supported in chains of fused nodes only "
                           "(the kernels add partial results in fp32); compile for numpy")


def _region_names(kernel: Kernel) -> list[str]:
    """The `using` sections the kernels run as regions of their own arithmetic (triton_host
    Note [regions in plans]), in order of appearance: the replica's modes 1, 2, ..."""
    names = []
    for r in _reducers(kernel):
        if isinstance(r, WithArithmetic) and not _stored_format(kernel, r.name) and r.name not in names:
            names.append(r.name)
    return names


def _check_region(kernel: Kernel, name: str) -> None:
    """Refuse, in one line, a `using` section whose arithmetic the kernels do not run."""
    ar, region = kernel.arithmetic, kernel.named_arithmetic(name)
    what = f"triton: using({name}, ...)"
    if region.input != ar.input or region.fused != ar.fused or region.bias != ar.bias:
        raise CompileError(f"{what} changes more than the accumulator and the products; compile for numpy or numba")
    if region.fused is not None and (region.accumulator != ar.accumulator or region.product != ar.product):
        raise CompileError(f"{what} around fused nodes is supported only where it narrows the accumulator to fp16 "
                           "or bf16 (their results stored into it); compile for numpy or numba")
    if region.accumulator not in ("fp32", "fp64", "fp16", "bf16"):
        raise CompileError(f"{what}: accumulator {region.accumulator} is not supported")
    if ar.input == "fp64" and region.accumulator not in ("fp64", "fp32"):
        raise CompileError(f"{what}: fp64 terms into an {region.accumulator} accumulator are not supported")
    if region.accumulator in ("fp16", "bf16") and region.product == "exact":
        raise CompileError(f"{what}: product = exact into an {region.accumulator} accumulator is not supported")
    if region.product_format is not None and not (region.product_format == "fp32" and region.accumulator == "fp64"):
        raise CompileError(f"{what}: product_format = {region.product_format} is not supported")


def _check_accumulator(kernel: Kernel) -> None:
    """Refuse the accumulators the kernels do not carry (triton_kernels Note [accumulators])."""
    ar = kernel.arithmetic
    fp16_nodes = ar.fused is not None and ar.fused.output == "fp16" == ar.accumulator
    if ar.fused is not None and ar.accumulator != "fp32" and not fp16_nodes:
        raise CompileError(f"triton: accumulator {ar.accumulator} with fused nodes is not supported (only fp32, "
                           "or fp16 written by fused nodes)")
    if ar.accumulator not in ("fp32", "fp64", "fp16", "bf16"):
        raise CompileError(f"triton: accumulator {ar.accumulator} is not supported (fp32, fp64, fp16 or bf16)")
    if ar.input == "fp64" and ar.accumulator != "fp64":
        raise CompileError(f"triton: fp64 inputs are supported with an fp64 accumulator only (here "
                           f"{ar.accumulator}); compile for numpy or numba")
    if ar.accumulator != "fp32" and ar.input in _NARROW and not fp16_nodes:
        raise CompileError(f"triton: {ar.input} inputs are supported with an fp32 accumulator only")
    if ar.accumulator in ("fp16", "bf16") and ar.product == "exact" and not fp16_nodes:
        raise CompileError(f"triton: product = exact into an {ar.accumulator} accumulator is not supported; "
                           "compile for numpy or numba")
    if ar.product_format is not None and not (ar.product_format == "fp32" and ar.accumulator == "fp64"):
        raise CompileError(f"triton: product_format = {ar.product_format} is supported only as fp32 products "
                           "in an fp64 accumulator; compile for numpy or numba")


def _numerics(kernel: Kernel) -> str:
    """The replica's Numerics(...) of the spec's arithmetic, as source."""
    ar = kernel.arithmetic
    f = ar.fused
    regions = [f"Mode({a.accumulator!r}, {a.product!r}, {a.product_format!r})"
               for a in map(kernel.named_arithmetic, _region_names(kernel))]
    fused = ("None" if f is None else
             f"Fused(width={f.w}, extra_bits={f.extra_bits}, floor={f.exponent_floor}, "
             f"to_zero={f.result == 'rz'}, zero_exponent={f.zero_exponent}, c_emin={f.c_emin}, "
             f"amd={f.combine == 'amd'}, input_b={f.input_b!r}, output={f.output!r}, "
             f"aligned={('truncate', 'floor', 'rne').index(f.aligned)}, subnormal_inputs={f.subnormal_inputs}, "
             f"subnormal_outputs={f.subnormal_outputs}, interleave={f.interleave})")
    return (f"Numerics(input={ar.input!r}, accumulator={ar.accumulator!r}, output={ar.output!r}, "
            f"product={ar.product!r}, init={ar.init!r}, fused={fused}"
            + ("" if ar.product_format is None else f", product_format={ar.product_format!r}")
            + ("" if not regions else f", regions=[{', '.join(regions)}]") + ")")


# n at which the compiler plans the order the way the replica will (the planner's refusals
# depend on structure, which the first lengths and the powers of two around the guards show)
PLAN_FIRST = 64
PLAN_MAX = 4096


def plan_lengths(lo: int, hi: int | None, marks=()) -> list[int]:
    """The n planned at compile time; marks: the integers of the order's guards (each planned
    with its neighbours: a guard such as `n == 150` may pick a region the kernels refuse)."""
    top = min(PLAN_MAX, hi if hi is not None else PLAN_MAX)
    ns = set(range(lo, min(top, lo + PLAN_FIRST) + 1))
    ns.update(c + d for c in marks for d in (-1, 0, 1))
    k = 1
    while k <= top:
        ns.update((k - 1, k, k + 1))
        k *= 2
    ns.add(top)
    return sorted(x for x in ns if lo <= x <= top)


def _check_plans(kernel: Kernel) -> None:
    """Refuse now what the replica's planner would refuse at its first call: the replica's
    own host code (triton_run.Replica) plans the order at sample lengths.  Only for a kernel
    built from a spec (its `source`): `check` proved that every n of the spec's range gives a
    tree, while a kernel written as IR may hold only at the lengths its author calls it with."""
    from fpspec.compile import triton_host, triton_run

    if not kernel.source:
        return
    printer = _ReducerPrinter(kernel)
    names = {**vars(triton_host), **vars(triton_run)}
    root = eval(printer.print(kernel.root), names)   # noqa: S307  (our own printer's output)
    orders = {name: eval(printer.print(r), names) for name, r in kernel.orders}   # noqa: S307
    replica = triton_run.Replica(kernel.op, eval(_numerics(kernel), names), root, orders,   # noqa: S307
                                 kernel.n_min, kernel.n_max)
    for n in plan_lengths(kernel.n_min, kernel.n_max, _guard_constants(kernel)):
        try:
            replica.plan(n)
        except triton_host.PlanError as e:
            raise CompileError(f"triton: {e} (at n = {n}); compile for numpy or numba") from None
        except RecursionError:
            raise CompileError(f"triton: the order nests too deeply for the replica's planner at n = {n}; "
                               "compile for numpy or numba") from None


def _guard_constants(kernel: Kernel) -> set[int]:
    """Every integer literal in the conditions of the order's guards."""
    found, stack = set(), [c.cond for r in _reducers(kernel) if isinstance(r, Guard) for c in r.cases]
    while stack:
        e = stack.pop()
        if isinstance(e, Const):
            found.add(e.value)
        elif dataclasses.is_dataclass(e):
            stack.extend(getattr(e, f.name) for f in dataclasses.fields(e))
    return found


def _check_reversed_pads(kernel: Kernel) -> None:
    """A reversed fold over a group that holds phantoms (pad) leaves a term alone beside them,
    which the model rounds into the accumulator of the node that lost them (fpspec.spec.expand
    note [lone products]); the kernels keep it unrounded there, so an accumulator narrower than
    the input would give other bits (an fp64 sum in an fp32 part: +inf against the model's nan)."""
    reducers = list(_reducers(kernel))
    if not (any(isinstance(r, Pad) for r in reducers) and any(isinstance(r, Fold) and r.reverse for r in reducers)):
        return
    ar = kernel.arithmetic
    accs = [ar.accumulator] + [kernel.named_arithmetic(r.name).accumulator or ar.accumulator
                               for r in reducers if isinstance(r, WithArithmetic)]
    for acc in accs:
        if not holds_every_value(get_format(ar.input), get_format(acc)):
            raise CompileError(f"triton: a reversed fold under pad(...) with accumulator {acc} narrower than the "
                               f"input {ar.input} is not supported (a term alone beside phantoms is rounded into "
                               "it); compile for numpy or numba")


def _stored_format(kernel: Kernel, name: str) -> str | None:
    """The format a `using(name, ...)` region stores its fused nodes' results in, if the kernels can."""
    region = kernel.named_arithmetic(name)
    if stores_fused(kernel.arithmetic, region) and region.accumulator in ("fp16", "bf16"):
        return region.accumulator
    return None


def _reducers(kernel: Kernel):
    yield from walk(kernel.root)
    for _, r in kernel.orders:
        yield from walk(r)


class _ReducerPrinter:
    """A reducer as a Python expression over the planner's classes (one method per class)."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel   # its named arithmetics (WithArithmetic)

    def print(self, r) -> str:
        method = getattr(self, f"_print_{type(r).__name__}", None)
        if method is None:
            raise CompileError(f"triton: reducer {type(r).__name__} is not supported")
        return method(r)

    @staticmethod
    def _int(e) -> str:
        return f"lambda m, n: {py_int(e)}"

    def _print_VLanes(self, r: VLanes) -> str:
        return f"VLanes({self._int(r.v)}, {self._int(r.k)}, {self.print(r.inner)}, {self.print(r.outer)})"

    def _print_Fold(self, r: Fold) -> str:
        return f"Fold(reverse={r.reverse})"

    def _print_Pairwise(self, r: Pairwise) -> str:
        return "Pairwise()" if r.split is None else f"Pairwise(split={self._int(r.split)})"

    def _print_TreeReduce(self, r: TreeReduce) -> str:
        return "TreeReduce()"

    def _print_FusedChain(self, r: FusedChain) -> str:
        at = "" if r.at is None else f", at={self._int(r.at)}"
        return f"FusedChain(width={self._int(r.width)}{at})"

    def _print_Table(self, r: Table) -> str:
        return f"Table({r.size}, {r.children!r}, {r.offsets!r}, {r.fused!r})"

    def _print_Lanes(self, r: Lanes) -> str:
        left = "" if r.left is None else f", left={self.print(r.left)}"
        left += "" if r.unroll is None else f", unroll={self._int(r.unroll)}"
        return f"Lanes({self._int(r.k)}, {self.print(r.inner)}, {self.print(r.outer)}{left})"

    def _print_Blocks(self, r: Blocks) -> str:
        return f"Blocks({self._int(r.b)}, {self.print(r.inner)}, {self.print(r.outer)})"

    def _print_Chunks(self, r: Chunks) -> str:
        return f"Chunks({self._int(r.size)}, {self.print(r.inner)}, {self.print(r.outer)})"

    def _print_Pad(self, r: Pad) -> str:
        return f"Pad({self._int(r.m)}, {self.print(r.inner)})"

    def _print_Segments(self, r: Segments) -> str:
        parts = ", ".join(f"Part({self._int(p.length)}, {'None' if p.reducer is None else self.print(p.reducer)})"
                          for p in r.parts)
        return f"Segments([{parts}], {self.print(r.outer)})"

    def _print_Guard(self, r: Guard) -> str:
        cases = ", ".join(f"Case(lambda m, n: {py_cond(c.cond)}, {self.print(c.reducer)})" for c in r.cases)
        other = "None" if r.otherwise is None else self.print(r.otherwise)
        return f"Guard([{cases}], {other})"

    def _print_Call(self, r: Call) -> str:
        return f"Call({r.name!r})"

    def _print_WithArithmetic(self, r: WithArithmetic) -> str:
        stored = _stored_format(self.kernel, r.name)
        if stored is not None:
            return f"Stored({stored!r}, {self.print(r.reducer)})"
        return f"Region({1 + _region_names(self.kernel).index(r.name)}, {self.print(r.reducer)})"


_IMPORTS = re.compile(r"^# -- imports: dropped in replicas\n.*?^# -- end imports\n", re.S | re.M)


def input_checks(kernel: Kernel) -> str:
    """The argument checks every backend's replica embeds (fpspec.compile.runtime.inputs_rt),
    with their settings: a Triton replica takes NumPy arrays (and refuses lists, masked arrays,
    other dtypes) exactly as the NumPy and Numba replicas do."""
    from fpspec.compile.numerics import input_grid, input_settings
    from fpspec.compile.runtime import embed, inputs_rt

    names = (["round_value"] if input_grid(kernel.arithmetic.input) is not None else []) + ["_input", "_length",
                                                                                           "_shape", "_fits", "_said", "_outputs", "_operands"]
    return "\n".join(input_settings(kernel)) + "\n\n\n" + embed(inputs_rt, names)


def library_source() -> str:
    """The kernel library, planner and driver, as they go into every replica (imports dropped)."""
    from fpspec.compile import triton_host, triton_kernels, triton_run

    parts = []
    for mod in (triton_kernels, triton_host, triton_run):
        text = inspect.getsource(mod)
        text = _IMPORTS.sub("", text)
        text = re.sub(r"^(import triton|import triton\.language as tl|import torch)\n", "", text, flags=re.M)
        parts.append(f"# ---- from fpspec/compile/{mod.__name__.rsplit('.', 1)[1]}.py\n{text.strip()}\n")
    return "\n\n".join(parts)


BACKEND = TritonBackend()
