"""NumPy backend: the executable reference every other backend is checked against.

Partial sums are arrays over all output elements (whole arrays per step of
every loop); the loops come from fpspec.compile.loops, the functions from
fpspec.compile.runtime.numpy_rt (embedded, so the replica imports only numpy).
"""
from __future__ import annotations

from fpspec.compile.backends import Backend, header, render_template
from fpspec.compile.ir import Kernel
from fpspec.compile.loops import emit_program, tag_settings
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
        program = emit_program(kernel, gather_leaves=True)
        # fp64 inputs (and so, plan() says, an fp64 accumulator) FMA through fpspec.formats' exact fp64 fma
        fma = "_add_leaf_fma64" if kernel.arithmetic.input == "fp64" else "_add_leaf_fma"
        names, rename = runtime_names(p, program, fma=fma, exact=True)
        regions = region_plans(kernel, program)
        plans = [p] + [rp for _, rp in regions]
        if regions or any(q.fma or q.exact_sum or q.exact_products for q in plans):
            # `_add_leaf_fma` (fma, and exact products entering a sum) rounds through the `_near` form:
            # note [round to odd where it matters] in fpspec.compile.runtime.numpy_rt
            names.insert(names.index("_vals"), "_round_odd_sum")
            names.insert(names.index("_vals"), "_round_odd_sum_near")
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
        ] + [in_region(embed(numpy_rt, *exact_adds(rp, region_runtime_names(
                rp, fma, "_table_step" if program.uses_tables else None, exact=True, tags=program.uses_tags))), name)
             for name, rp in regions]))
        source = render_template(
            self.template,
            header=header(kernel, self.name),
            name=kernel.name,
            op=kernel.op,
            public=", ".join(public),
            spec_literal=spec_literal(kernel),
            settings=settings(kernel, p) + [
                f"_ROUND_FIRST = {p.exact_products}  # the result may be an exact product (numerics note [exact leaves])"
            ] + tag_settings(program) + [line for name, rp in regions for line in region_settings(kernel, name, rp)],
            runtime=runtime,
            constants=[c.source() for c in program.constants],
            functions=[f.source() for f in program.functions],
            api=embed(numpy_rt, api_names, {f"api_{n}": n for n in public}),
        )
        return source


def exact_adds(rp, chosen: tuple[list[str], dict[str, str]]) -> tuple[list[str], dict[str, str]]:
    """A part narrower than fp64 adds with `_add_exact`: an operand may be a wider partial sum of the
    code around it, and the node rounds the exact sum once (fpspec.arith.evaluate note [regions])."""
    names, rename = chosen
    if (rp.acc_fmt is None and rp.acc_dtype == "float64") or "_add_plain" not in names:
        return names, rename
    rename["_add_exact"] = rename.pop("_add_plain")
    return [("_add_exact" if n == "_add_plain" else n) for n in names], rename


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
