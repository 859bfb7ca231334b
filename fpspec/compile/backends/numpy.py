"""NumPy backend: the executable reference every other backend is checked against.

Partial sums are arrays over all output elements (whole arrays per step of
every loop); the loops come from fpspec.compile.loops, the functions from
fpspec.compile.runtime.numpy_rt (embedded, so the replica imports only numpy).
"""
from __future__ import annotations

from fpspec.compile.backends import Backend, header, render_template
from fpspec.compile.ir import CompileError, Kernel
from fpspec.compile.loops import LONE_LEAF, emit_program
from fpspec.compile.numerics import (runtime_names, in_region, plan, region_runtime_names, region_plans,
                                     region_settings, settings)
from fpspec import formats
from fpspec.compile import binned
from fpspec.compile.runtime import embed
from fpspec.compile.runtime import numpy_rt

# public names per op: the op's function, plus a batched form for sum and dot
PUBLIC = {"sum": ("sum", "sums"), "dot": ("dot",), "gemv": ("gemv",), "gemm": ("gemm",)}


def spec_literal(kernel: Kernel) -> str:
    return repr(kernel.source)


class NumpyBackend(Backend):
    name = "numpy"
    template = "numpy.py.j2"
    requires = ("numpy",)

    def check(self, kernel: Kernel) -> None:
        if binned.is_binned(kernel):
            return binned.check(kernel)
        plan(kernel)

    def render(self, kernel: Kernel) -> str:
        if binned.is_binned(kernel):   # order-independent: no loops (fpspec.compile.binned)
            return binned.render_numpy(self, kernel)
        p = plan(kernel)
        program = emit_program(kernel)
        # fp64 inputs (and so, plan() says, an fp64 accumulator) FMA through fpspec.formats' exact fp64 fma
        fma = "_add_leaf_fma64" if kernel.arithmetic.input == "fp64" else "_add_leaf_fma"
        names, rename = runtime_names(p, program, fma=fma, exact=True)
        regions = region_plans(kernel, program)
        plans = [p] + [rp for _, rp in regions]
        if any(q.fma or q.exact_sum or q.exact_products for q in plans):
            names.insert(names.index("_vals"), "_round_odd_sum")
        fma64 = fma == "_add_leaf_fma64" and any(q.fma for q in plans)
        fused_src = fused_model(kernel) if program.uses_fused else ""
        if program.uses_fused:
            names.insert(names.index("_fused_range"), "_fused")
            names.insert(names.index("_fused_range"), "_fused_finite")
        public = PUBLIC[kernel.op]
        api_names = [f"api_{name}" for name in public]
        runtime = "\n\n".join(filter(None, [
            embed(numpy_rt, ["round_value"]) if fused_src == "" else "",
            embed(formats, ["two_sum", "round_to_odd_sum", "_two_prod_err", "_fma64", "_fma64_exact"]) if fma64 else "",
            fused_src,
            embed(numpy_rt, names, rename),
        ] + [in_region(embed(numpy_rt, *region_runtime_names(rp, fma, "_table_step" if program.uses_tables
                                                              else None, exact=True)), name) for name, rp in regions]))
        source = render_template(
            self.template,
            header=header(kernel, self.name),
            name=kernel.name,
            op=kernel.op,
            public=", ".join(public),
            spec_literal=spec_literal(kernel),
            settings=settings(kernel, p) + [
                f"_ROUND_FIRST = {p.exact_products}  # the result may be an exact product (numerics note [exact leaves])"
            ] + [line for name, rp in regions for line in region_settings(kernel, name, rp)],
            runtime=runtime,
            constants=[c.source() for c in program.constants],
            functions=[f.source() for f in program.functions],
            api=embed(numpy_rt, api_names, {f"api_{n}": n for n in public}),
        )
        refuse_lone_leaves(kernel, source)
        return source


# Note [lone leaves at compile time]: the loops raise LONE_LEAF (fpspec.compile.loops
# note [lone leaves]) at the n where a lane or block of one product leaf meets partial
# sums under FMA or fused products; which n do depends on n alone, not on the data.
# Rather than ship a module that fails at its first call at an n its range promises,
# compiling runs the NumPy program on zeros at the n of a bounded range (every n up to
# LONE_LEAF_ALL above its start, then powers of two with their neighbours and its end)
# and refuses in one line.  A range without an end (`n in 1..`, a spec revealed at a
# few n and written for all) is compiled: its replica raises that ValueError, before
# any arithmetic, at the n it cannot run (H100 bf16 blocks of 8 fused products, at
# K % 8 == 1), and runs every other n.
LONE_LEAF_ALL = 512


def _probe_ns(kernel: Kernel) -> list[int]:
    lo, hi = kernel.n_min, kernel.n_max
    if hi is None:
        return []
    top = hi
    ns = set(range(lo, min(top, lo + LONE_LEAF_ALL) + 1))
    p = 2
    while p <= min(top, 1 << 20):
        ns.update(v for v in (p - 1, p, p + 1, 3 * p // 2) if lo <= v <= top)
        p *= 2
    if hi <= 1 << 20:
        ns.update((hi - 1, hi))
    return sorted(v for v in ns if lo <= v <= top)


def lone_leaf_n(kernel: Kernel, source: str) -> int | None:
    """The first n at which the NumPy program `source` of `kernel` meets a lone
    product leaf among partial sums (note [lone leaves at compile time]), or None."""
    if LONE_LEAF not in source:
        return None
    import numpy as np

    space: dict = {"__name__": "fpspec_lone_leaf_probe"}
    exec(compile(source, f"<{kernel.name}>", "exec"), space)
    reduce = space["_reduce"]
    for n in _probe_ns(kernel):
        zeros = np.zeros((n, 1))
        try:
            with np.errstate(all="ignore"):
                reduce(zeros, zeros, n)
        except ValueError as e:
            if str(e) == LONE_LEAF:
                return n
    return None


def refuse_lone_leaves(kernel: Kernel, source: str) -> None:
    """CompileError in one line where the program `source` (NumPy) would raise LONE_LEAF at some n."""
    n = lone_leaf_n(kernel, source)
    if n is not None:
        raise CompileError(f"at n = {n} this order puts a lone product leaf among partial sums (FMA or fused "
                           "products), which the numpy and numba targets cannot compile yet; compile for the n you need "
                           "(-n N) or narrow `n in`")


def fused_model(kernel: Kernel) -> str:
    """fpspec.arith.fused's node model, embedded, with the spec's parameters as `_FUSED`."""
    from fpspec.arith import fused as model

    params = kernel.arithmetic.fused
    attrs = {name: getattr(params, name) for name in params.__dataclass_fields__}
    attrs["fraction_bits"] = params.fraction_bits
    attrs["result_precision"] = params.result_precision
    lines = ["class _FusedParams:", '    """fpspec.arith.fused.FusedParams of this spec, as constants."""']
    lines += [f"    {k} = {v!r}" for k, v in attrs.items()]
    lines += ["", "", "_FUSED = _FusedParams()", f"_FORMATS = {model._FORMATS!r}", f"_ZERO_EXP = {model._ZERO_EXP!r}"]
    code = embed(model, ["decode", "scale_exponents", "products", "addend", "shift_right", "align",
                         "largest_exponent", "round_value", "specials", "fused_node", "_aligned_combine",
                         "_amd_combine", "_shift_floor", "_sum_round_to_odd"])
    return "\n".join(lines) + "\n\n\n" + code


BACKEND = NumpyBackend()
