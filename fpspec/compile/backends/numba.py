"""Numba backend: the loops of fpspec.compile.loops, one output element per call.

Partial sums are scalars in the accumulator's carrier (float32, float64, or
float64 holding an emulated narrow format); parallel loops over the output
elements; fastmath off.  Helpers come from fpspec.compile.runtime.numba_rt,
embedded so the replica imports only numpy and numba.
"""
from __future__ import annotations

from fpspec.compile.backends import Backend, header, render_template
from fpspec.compile.backends.numpy import PUBLIC, spec_literal
from fpspec.compile.ir import Kernel
from fpspec.compile.loops import emit_program
from fpspec.compile.numerics import helper_names, plan, settings
from fpspec.compile.runtime import embed
from fpspec.compile.runtime import numba_rt

# the compiled kernel behind each public function
KERNELS = {"sum": "_one_kernel", "sums": "_columns_kernel", "dot": "_one_kernel",
           "gemv": "_rows_kernel", "gemm": "_gemm_kernel"}


class NumbaBackend(Backend):
    name = "numba"
    template = "numba.py.j2"
    requires = ("numpy", "numba")

    def check(self, kernel: Kernel) -> None:
        plan(kernel)

    def render(self, kernel: Kernel) -> str:
        p = plan(kernel)
        program = emit_program(kernel)
        fma = "_add_leaf_fma_native" if p.acc_fmt is None else "_add_leaf_fma_emulated"
        names, rename = helper_names(p, program, fma=fma)
        if "_table_step" in names:
            # without fused nodes the table step must not mention the fused model
            names.insert(names.index("_table_step"), "_table_step_binary")
            if not program.uses_fused:
                names.remove("_table_step")
                rename["_table_step_binary"] = "_table_step"
        jitted = [n for n in names if n not in ("_input", "_length", "_shape")]
        plain = [n for n in names if n in ("_input", "_length", "_shape")]
        base = ["_fma"] if p.fma else []
        base += ["_round_dir"]
        if program.uses_fused:
            base += ["_decode", "_shift", "_leaf_index", "_round_odd_sum", "_fused_core"]
        if p.out_fmt is None:
            jitted.insert(jitted.index("_final"), "_round_out_native")
            rename["_round_out_native"] = "_round_out"
        else:
            jitted.insert(jitted.index("_final"), "_round_out_emulated")
            rename["_round_out_emulated"] = "_round_out"
        extra = [f"_IN_CARRY = np.{p.in_carry}", f"_OUT_CARRY = np.{p.out_carry}"]
        if program.uses_fused:
            extra += fused_constants(kernel)
        public = PUBLIC[kernel.op]
        kernels = sorted({KERNELS[name] for name in public})
        serial = [k for k in kernels if k == "_one_kernel"]
        parallel = [k for k in kernels if k != "_one_kernel"]
        runtime = "\n\n".join(filter(None, [
            embed(numba_rt, ["_fma"]) if p.fma else "",
            embed(numba_rt, [n for n in base if n != "_fma"], decorator="@_jit"),
            embed(numba_rt, jitted, rename, decorator="@_jit"),
            embed(numba_rt, plain),
        ]))
        if program.uses_fused:
            runtime += "\n\n_NO_KS = np.empty(0, np.int64)\n"
        return render_template(
            self.template,
            header=header(kernel, self.name),
            name=kernel.name,
            op=kernel.op,
            public=", ".join(public),
            spec_literal=spec_literal(kernel),
            settings=settings(kernel, p) + extra,
            runtime=runtime,
            constants=[c.source() for c in program.constants],
            functions=[f.source() for f in program.functions],
            kernels="\n\n".join(filter(None, [embed(numba_rt, serial, decorator="@_jit"),
                                                embed(numba_rt, parallel, decorator="@_parallel")])),
            cache=not program.recursive,
            api=embed(numba_rt, [f"api_{n}" for n in public], {f"api_{n}": n for n in public}),
        )


def fused_constants(kernel: Kernel) -> list[str]:
    """The _FP_* constants `_fused_core` reads, from the spec's FusedParams."""
    from fpspec.arith.fused import _FORMATS, _ZERO_EXP

    f = kernel.arithmetic.fused
    _, out_emin, out_emax = _FORMATS[f.output]
    floor = _ZERO_EXP if f.exponent_floor is None else f.exponent_floor
    return [
        f"# fused nodes: {f}",
        f"_ZERO_EXP = {_ZERO_EXP}",
        f"_FP_F = {f.fraction_bits}  # alignment grid: bits below the largest exponent",
        f"_FP_EMIN_IN = {_FORMATS[f.input][1]}",
        f"_FP_FLOOR = {floor}",
        f"_FP_ALIGNED = {('truncate', 'floor', 'rne').index(f.aligned)}  # {f.aligned}",
        f"_FP_C_ALIGNED = {f.c_aligned}",
        f"_FP_RZ = {f.result == 'rz'}",
        f"_FP_RES_P = {f.result_precision}",
        f"_FP_OUT_EMIN, _FP_OUT_EMAX = {out_emin}, {out_emax}",
        f"_FP_SUB_IN, _FP_SUB_OUT = {f.subnormal_inputs}, {f.subnormal_outputs}",
    ]


BACKEND = NumbaBackend()
