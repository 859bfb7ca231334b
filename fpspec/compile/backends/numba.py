"""Numba backend: the loops of fpspec.compile.loops, one output element per call.

Partial sums are scalars in the accumulator's carrier (float32, float64, or
float64 holding an emulated narrow format); loops over the output elements on
threads; fastmath off.  Functions come from fpspec.compile.runtime.numba_rt,
embedded so the replica imports only numpy and numba.
"""
from __future__ import annotations

import re
import textwrap

from fpspec.compile.backends import Backend, header, render_template
from fpspec.compile.backends.numpy import PUBLIC, exact_adds, spec_literal
from fpspec.compile.ir import Blocks, Call, Const, Fold, Kernel, Lanes
from fpspec.compile.loops import emit_program, tag_settings
from fpspec.compile.numerics import (runtime_names, in_region, plan, region_runtime_names, region_plans,
                                     region_settings, settings)
from fpspec.compile import binned
from fpspec.compile.runtime import embed
from fpspec.compile.runtime import numba_rt

# Note [compile time]: a replica compiles at its first call in each process
# (no cache directory), each compiled function on its own, so the first call
# costs about a second of numba and LLVM per large function.  What keeps it
# short: the small runtime functions below are inlined into their callers
# (numba's inline="always": typed there, no compilation of their own); a
# compiled function is compiled once per argument types, not once more for
# each literal argument a caller passes (`_one_signature` in the template;
# literal arguments of generated functions are np.int64 for the same
# reason, fpspec.compile.loops `typed_ints`); copies between arrays are
# loops (numba compiles a slice assignment for seconds); kernels over
# outputs compile only when their public function is first called, with
# nogil, run on threads (a numba parallel loop compiles for seconds more);
# gemv and gemm run the order from rows recorded per n through one small
# compiled loop (note [schedules] in fpspec.compile.runtime.numba_rt), with
# only the branches for the operations the order's code has; an order with
# cases on n compiles only the case of the length called (note [length
# cases]).  `_join` (six branches) is compiled once, not inlined at every
# node of a tagged walk: typing it at each call site cost more.  Every
# function compiles with error_model="numpy" (the template): no
# ZeroDivisionError test and raise around each integer // and %.
INLINE = ("_round_acc", "_term", "_add", "_add_leaf", "_add_leaves", "_vals", "_final", "_round_out")

# the compiled kernel behind each public function
KERNELS = {"sum": "_one_kernel", "sums": "_columns_kernel", "dot": "_one_kernel",
           "gemv": "_rows_kernel", "gemm": "_gemm_kernel"}


class NumbaBackend(Backend):
    name = "numba"
    template = "numba.py.j2"
    requires = ("numpy", "numba")

    def check(self, kernel: Kernel) -> None:
        if binned.is_binned(kernel):
            return binned.check(kernel)
        plan(kernel)

    def render(self, kernel: Kernel) -> str:
        if binned.is_binned(kernel):   # order-independent: no loops (fpspec.compile.binned)
            return binned.render_numba(self, kernel)
        p = plan(kernel)
        program = step_one_walks(merge_identical(wide_lists(emit_program(kernel, vector_lanes=vector_lanes(kernel, p),
                                                          iterative_splits=True, typed_ints=True))))
        names, rename = runtime_names(p, program, fma=_numba_fma(p))
        if "_table_step" in names:
            # without fused nodes the table step must not mention the fused model
            names.insert(names.index("_table_step"), "_table_step_binary")
            if not program.uses_fused:
                names.remove("_table_step")
                rename["_table_step_binary"] = "_table_step"
        _plain = ("_input", "_length", "_shape", "_fits", "_said", "_outputs", "_operands")
        jitted = [n for n in names if n not in _plain]
        plain = [n for n in names if n in _plain] + ["_carried", "_threads", "_run_parallel"]
        if p.in_grid is not None:      # the input check of a format without a numpy dtype
            plain.insert(0, "round_value")
        regions = region_plans(kernel, program)
        table = "_table_step_binary" if program.uses_tables else None
        fma = p.fma or any(rp.fma for _, rp in regions)
        # (`_round_odd_sum`: emulated FMAs and the nodes of note [wider partial sums] round to odd first)
        odd = fma or bool(regions) or program.uses_fused
        intrinsics = (["_fma"] if fma else []) + (["_f64_bits", "_bits_f64"] if odd or p.out_fmt is not None else [])
        base = ["_round_dir"] + (["_round_odd_sum"] if odd else []) + (["_vals_wide"] if regions else [])
        if program.uses_fused:
            base += ["_decode", "_shift", "_leaf_index", "_product_term", "_shift_floor", "_amd_exact", "_fused_core"]
        if p.out_fmt is None:
            jitted.insert(jitted.index("_final"), "_round_out_native")
            rename["_round_out_native"] = "_round_out"
        extra = [f"_IN_CARRY = np.{p.in_carry}", f"_OUT_CARRY = np.{p.out_carry}"] + tag_settings(program)
        if p.out_fmt is not None:
            extra += out_rounding_constants(p.out_fmt)
        if program.uses_fused:
            extra += fused_constants(kernel)
        public = PUBLIC[kernel.op]
        kernels = sorted({KERNELS[name] for name in public})
        serial = [k for k in kernels if k == "_one_kernel"]
        parallel = [k for k in kernels if k != "_one_kernel"]
        runtime = "\n\n".join(filter(None, [
            embed(numba_rt, intrinsics),
            embed(numba_rt, base, decorator="@_jit"),
            embed(numba_rt, ["_fma_into", "_fma_into_typed"]) if fma else "",
            embed(numba_rt, [n for n in jitted if rename.get(n, n) not in INLINE], rename, decorator="@_jit"),
            embed(numba_rt, [n for n in jitted if rename.get(n, n) in INLINE], rename, decorator="@_inline"),
            embed(numba_rt, plain),
        ] + [in_region(region_runtime(rp, table, program.uses_tags), name) for name, rp in regions]))
        if program.uses_fused:
            runtime += "\n\n_NO_KS = np.empty(0, np.int64)\n"
        if p.out_fmt is not None:    # note [output rounding by the bits]
            runtime += "\n\n" + embed(numba_rt, ["_round_bits"], decorator="@_jit") + "\n\n" + embed(
                numba_rt, ["_round_out_bits"], {"_round_out_bits": "_round_out"}, decorator="@_inline")
        # note [vector lanes] in fpspec.compile.loops
        text = "\n".join(line for f in program.functions for line in f.body)
        if "_lane_folds(" in text:
            runtime += "\n\n" + embed(numba_rt, ["_lane_folds"])
        columns = gemm_by_columns(kernel) if kernel.op == "gemm" else None
        tiles = gemm_tiles(kernel, p) if kernel.op == "gemm" else None
        if kernel.op == "gemm":
            runtime += "\n\n" + embed(numba_rt, ["_gemm_rest"])
            extra.append(f"_GEMM_COLUMNS_MIN = {columns[0] if columns else None}  # note [gemm by columns]")
            extra.append(f"_GEMM_TILE = {tiles[0] if tiles else None}  # note [gemm tiles]")
            extra.append(f"_GEMM_LONE = {lone_block(kernel, p)}  # note [gemm by columns]: a last block of one leaf")
        sched = kernel.op in ("gemv", "gemm") and scheduled(kernel, p, program, text, regions, columns or tiles)
        if kernel.op in ("gemv", "gemm"):
            extra.append(f"_SCHEDULED = {sched}  # note [schedules]")
            extra.append(f"_SCHED_FUSED = {bool(sched and program.uses_fused)}")
        if columns:
            runtime += "\n\n" + xy_leaves(p)
        if columns:
            parallel.append(columns[1])
        if tiles:
            runtime += "\n\n" + embed(numba_rt, ["_gemm_tile"]) + "\n\n" + embed(numba_rt, ["_gemm_tiled"])
            parallel.append(tiles[1])
        entry, planned = plan_lowering(program, runtime)
        if not planned:
            program, entry = length_cases(program, entry)
        if sched:
            entry += "\n\n" + schedule_source(kernel, p, program, runtime + entry, regions)
        kernels_text = "\n\n".join(filter(None, [embed(numba_rt, serial, decorator="@_jit"),
                                                 embed(numba_rt, parallel[:1], decorator="@_parallel")]
                                          + parallel[1:]))
        source = render_template(
            self.template,
            header=header(kernel, self.name),
            name=kernel.name,
            op=kernel.op,
            public=", ".join(public),
            spec_literal=spec_literal(kernel),
            settings=settings(kernel, p) + extra
            + [line for name, rp in regions for line in region_settings(kernel, name, rp)],
            runtime=runtime,
            constants=[c.source() for c in program.constants],
            functions=[f.source() if f.name in planned else
                       ("@_inline\n" if f.body[0].endswith(STEP_ONE.format("(")[-24:]) else "@_jit\n") + f.source()
                       for f in program.functions],
            kernels=entry + "\n\n" + kernels_text,
            api=embed(numba_rt, [f"api_{n}" for n in public], {f"api_{n}": n for n in public}),
        )
        return source


# Note [output rounding by the bits]: an emulated output format (fp16, bf16,
# fp8, ...) rounds the final sum to nearest even with subnormals, as
# `_round_dir(v, precision, emin, emax, False, True)` does, but from the
# float64's bits: integer shifts and one exact product by a power of two,
# where `_round_dir` goes through frexp, ldexp, rint and float powers, about
# three quarters of a second more of numba and LLVM at the first call (a
# fused gemm replica compiled in 4.9 s CPU, 4.1 s with this).  Rounding
# the significand's integer at the format's last place q = max(e, emin) -
# (precision - 1) is exactly what scaling by 2^-q and rint do.
def out_rounding_constants(fmt: tuple) -> list[str]:
    precision, emin, emax = fmt
    over = (2.0 - 2.0 ** (1 - precision)) * 2.0 ** emax
    return [f"_OUT_P = {precision}  # output significand bits",
            f"_OUT_EMIN = {emin}",
            f"_OUT_OVER = {over!r}  # the largest finite output; above it, infinity"]


# Note [plans]: numba compiles a recursive function through a symbol that
# a module imported without a sys.modules entry cannot always resolve, so
# no compiled function of a replica calls itself, directly or through
# others.  `pairwise` and a named order that splits itself in two are loops
# over explicit stacks (fpspec.compile.loops notes [pairwise walk] and
# [iterative splits]).  Any other recursion (mutual recursion, an order
# that calls itself inside lanes, blocks, tail, ...) is lowered to a plan:
# the functions that take part in a cycle of calls, and those that call
# them, stay plain Python; at the first call with length n `_record_plan`
# runs them once with every value replaced by the number of a plan row, so
# each operation they would do on values or leaves appends a row (op code,
# operands) and each call of a compiled function (one that reaches no
# cycle) appends one row.  `_run_plan`, compiled, executes the rows in
# order for every output element: the same operations on the same operands
# in the same order, values held exactly in float64 between them (every
# carrier is float32 or float64).  The plan depends on n only (an order
# that depends on the output position is split into one replica per arm by
# fpspec.compile.positions), so it is recorded once per n.
NO_PLAN = "_NO_PLAN = (np.empty((0, 8), np.int64), np.empty(0, np.int64), 0, 0)\n"


def plan_lowering(program, runtime: str) -> tuple[str, set[str]]:
    """(source of `_order` and, where the order recurses, of `_run_plan` and the
    plan tables; the generated functions that stay plain Python): note [plans]."""
    import re

    names = [f.name for f in program.functions]
    calls = {f.name: {g for g in names if re.search(rf"\b{g}\(", "\n".join(f.body))} for f in program.functions}

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(calls[start])
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo += calls[g]
        return seen
    reached = {f: reach(f) for f in names}
    cyclic = {f for f in names if f in reached[f]}
    if not cyclic:
        return (NO_PLAN + 'def _plan(n):\n    """The order needs no plan (note [plans])."""\n    return _NO_PLAN\n\n\n'
                "@_inline\ndef _order(a, b, n, plan):\n    return _reduce(a, b, n)\n"), set()
    planned = {f for f in names if f in cyclic or reached[f] & cyclic}
    text = runtime + "\n" + "\n".join(line for f in program.functions for line in f.body)

    def defined(name: str) -> bool:
        return re.search(rf"^(def {name}\(|{name} = )", runtime, re.M) is not None

    table: list[tuple[str, str, str]] = []      # (object, op code, kind)
    branches: list[str] = []

    def leafy(expr: str) -> str:
        """`expr` (reading arrays A and B) for the inputs, or the pad buffer where column 1 says."""
        if not program.uses_pad:
            return f"vs[t] = {expr.replace('A, B', 'a, b')}"
        return (f"if ops[t, 1] == 0:\n    vs[t] = {expr.replace('A, B', 'a, b')}\n"
                f"else:\n    vs[t] = {expr.replace('A, B', 'pa, pb')}")

    def add(obj: str, kind: str, body: str | None) -> int:
        code = len(table)
        table.append((obj, str(code), kind))
        if body is not None:
            branches.append(f"elif c == {code}:   # {obj}\n" + textwrap.indent(body, "    "))
        return code

    col = "ops[t, {}]".format
    carriers: list[int] = []     # the op code of each arithmetic's `_vals`: a value list's carrier
    suffixes = [""] + [f"__{r}" for r in program.regions]
    for s in suffixes:
        acc = f"_ACC{s}"
        zero = len(table)   # _ZERO and its negation, -0.0 (`_PlanZero`)
        table.append((f"_ZERO{s}", f"({zero}, {zero + 1})", "zero"))
        branches.append(f"elif c == {zero}:   # _ZERO{s}\n    vs[t] = _ZERO{s}")
        add(f"-_ZERO{s}", "negated_zero", f"vs[t] = -_ZERO{s}")
        term = add(f"_term{s}", "term", leafy(f"_term{s}(A, B, {col(2)})"))
        # operands as they are: a wider one (a value list of an enclosing arithmetic) is added unrounded
        add(f"_add{s}", "add", f"vs[t] = _add{s}(vs[{col(1)}], vs[{col(2)}])")
        # (a part's FMA takes a wider one too: note [wider partial sums] in fpspec.compile.runtime.numba_rt)
        held = f"vs[{col(2)}]" if s else f"{acc}(vs[{col(2)}])"
        leaf = add(f"_add_leaf{s}", "add_leaf", leafy(f"_add_leaf{s}({held}, A, B, {col(3)})"))
        add(f"_add_leaves{s}", "add_leaves", leafy(f"_add_leaves{s}(A, B, {col(2)}, {col(3)})"))
        add(f"_round_acc{s}", "value", f"vs[t] = _round_acc{s}(vs[{col(1)}])")
        add(acc, "value", f"vs[t] = {acc}(vs[{col(1)}])")
        carriers.append(add(f"_vals{s}", "vals", None))
        if not s and "_lane_folds(" in text:
            table.append(("_lane_folds", f"({term}, {leaf})", "lane_folds"))
    allocators = [f"_vals{s}" for s in suffixes]
    if program.regions:     # the float64 lists of a part's own functions (`wide_lists`)
        carriers.append(add("_vals_wide", "vals", None))
        allocators.append("_vals_wide")
    if defined("_fused_range"):
        add("_fused_range", "fused_range",
            leafy(f"_fused_range(A, B, {col(2)}, {col(3)}, {col(4)}, _ACC(vs[{col(5)}]))"))
    if defined("_fused_core"):
        add("_fused_core", "fused_core",
            leafy(f"_fused_core(A, B, side[{col(2)}:{col(2)} + {col(3)}], 0, 1, {col(3)}, vs[{col(4)}])"))
    if program.uses_pad:
        add("_padded", "padded", f"qa, qb = _padded(a if {col(1)} == 0 else pa, b if {col(1)} == 0 else pb, "
                                 f"{col(2)}, {col(3)}, {col(4)}, {col(5)}, {col(6)})\n"
                                 f"pa[{col(7)}:{col(7)} + qa.shape[0]] = qa\n"
                                 f"pb[{col(7)}:{col(7)} + qb.shape[0]] = qb\n"
                                 "vs[t] = 0.0")
    for f in program.functions:
        if f.name in planned:
            continue
        s = "__" + f.name.rsplit("__", 1)[1] if "__" in f.name[1:] else ""
        if "tags" in f.params:
            # a tagged list (fpspec.compile.loops note [lone leaves]): values, then their tags
            call = textwrap.indent(leafy(f"{f.name}(A, B, buf, tags, 0, 1, {col(3)})"), "    ")
            gather = (f"tags = np.empty({col(3)}, np.int64)\nfor i in range({col(3)}):\n"
                      f"    tags[i] = side[{col(2)} + {col(3)} + i]\n")
            gather += "\n".join(f"{'if' if k == 0 else 'elif'} {col(4)} == {code}:\n"
                                 f"    buf = {alloc}({col(3)})\n"
                                 f"    for i in range({col(3)}):\n        buf[i] = vs[side[{col(2)} + i]]\n" + call
                                 for k, (code, alloc) in enumerate(zip(carriers, allocators)))
            add(f.name, "call_T", gather)
        elif f.params[0] == "vals":
            # the list in the carrier it was made in (column 3), as the caller passed it
            gather = "\n".join(f"{'if' if k == 0 else 'elif'} {col(3)} == {code}:\n"
                                f"    buf = {alloc}({col(2)})\n"
                                f"    for i in range({col(2)}):\n        buf[i] = vs[side[{col(1)} + i]]\n"
                                f"    vs[t] = {f.name}(buf, 0, 1, {col(2)})"
                                for k, (code, alloc) in enumerate(zip(carriers, allocators)))
            add(f.name, "call_V", gather)
        elif "step" in f.params:
            add(f.name, "call_L", leafy(f"{f.name}(A, B, {col(2)}, {col(3)}, {col(4)})"))
        else:
            add(f.name, "call_L1", leafy(f"{f.name}(A, B, {col(2)}, {col(3)})"))
    chain = "\n".join(branches)[2:]   # the first `elif` becomes `if`
    pad = ("    pa = np.empty(npad, a.dtype)   # the phantom-padded copies of note [phantoms]\n"
           "    pb = np.empty(npad, b.dtype)\n") if program.uses_pad else ""
    rows = "".join(f"    ({obj}, {code}, {kind!r}),\n" for obj, code, kind in table)
    body = textwrap.indent(chain, " " * 8)
    source = f'''{NO_PLAN}_PLANS = {{}}   # (entry, n) -> its plan
_PLAN_ENTRY = _reduce
_PLAN_OPS = (
{rows})


@_jit
def _run_plan(a, b, plan):
    """The order over the terms (a[k], b[k]) by the rows of `plan` (note [plans])."""
    ops, side, root, npad = plan
    vs = np.empty(ops.shape[0], np.float64)
{pad}    for t in range(ops.shape[0]):
        c = ops[t, 0]
{body}
    return _ACC(vs[root])


@_inline
def _order(a, b, n, plan):
    return _run_plan(a, b, plan)
'''
    return embed(numba_rt, ["_PlanTerms", "_PlanValues", "_PlanZero", "_plan", "_record_plan"]) + "\n\n" + source, planned


# Note [length cases]: an order written as cases on n (`if n <= 3: seq elif ...`, an
# inferred spec has one per range of n it revealed) is one `_reduce` whose branches
# numba would all type and compile at the first call, whatever n it has: seconds per
# case (`_add_leaf` and the others are inlined into each).  Each case is a compiled
# function of its own, `_reduce_c0`, `_reduce_c1`, ...; `_plan(n)`, plain Python,
# picks the one for n and the kernel takes it as its `plan` argument, so a first call
# compiles the kernel with the one case its n needs (the kernel is compiled again,
# small, for each other case met later).  `_reduce` stays, plain Python, for
# note [schedules] (it records the case for n).
def length_cases(program, entry: str):
    """(`program` with `_reduce` split into one function per case of its top-level
    `if` on n, the source of `_plan`, `_order` and `_reduce` that pick the case),
    or (`program`, `entry`) unchanged where `_reduce` is not such an `if`:
    note [length cases]."""
    import dataclasses

    reduce = program.functions[-1]
    body = reduce.body
    if not (len(body) > 2 and body[0].startswith("if ") and body[-1].startswith("return ")):
        return program, entry
    result = body[-1][len("return "):]
    heads = [i for i, line in enumerate(body[:-1]) if line and not line.startswith(" ")]
    if any(not body[i].startswith(("if ", "elif ", "else:")) for i in heads) or not body[heads[-1]] == "else:":
        return program, entry
    cases, tests = [], []
    least = 0       # n fails every earlier case's condition: a case `n <= A` before means n > A
    for c, (lo, hi) in enumerate(zip(heads, heads[1:] + [len(body) - 1])):
        branch = short_lengths_dropped(tuple(line[4:] for line in body[lo + 1:hi]), least)
        if not any(line.startswith(f"{result} = ") for line in branch):
            return program, entry
        branch += (f"return {result}",)
        bound = re.fullmatch(r"(?:el)?if \(n (<=?) (\d+)\):", body[lo])
        if bound:
            least = max(least, int(bound.group(2)) + (bound.group(1) == "<="))
        name = f"_reduce_c{c}"
        cases.append(dataclasses.replace(reduce, name=name, body=branch,
                                         doc=f"{reduce.doc.rstrip('.')}: case {c}, `{body[lo].rstrip(':')}`"))
        tests.append(f"    {body[lo]}\n        return {name}")
    source = (NO_PLAN + "\n\ndef _plan(n):\n"
              '    """The compiled case of the order for length n (note [length cases] in\n'
              '    fpspec.compile.backends.numba)."""\n' + "\n".join(tests) + "\n\n\n"
              "def _reduce(a, b, n):\n    return _plan(n)(a, b, n)\n\n\n"
              "@_inline\ndef _order(a, b, n, plan):\n    return plan(a, b, n)\n")
    return dataclasses.replace(program, functions=program.functions[:-1] + tuple(cases)), source


def short_lengths_dropped(lines: tuple[str, ...], least: int) -> tuple[str, ...]:
    """`lines` (a case's code, note [length cases]) with every top-level `if n < K: ... else:`
    where n >= least >= K replaced by its `else` part: code for lengths the case never has
    (`tail(32, ..., split(1, seq, seq))` under `else` after `n <= 31`) is not compiled."""
    top = [i for i, line in enumerate(lines) if line and not line.startswith(" ")]
    for at, (i, j) in enumerate(zip(top, top[1:])):
        short = re.fullmatch(r"if \(?n < (\d+)\)?:", lines[i])
        after = top[at + 2] if at + 2 < len(top) else len(lines)
        if (short and int(short.group(1)) <= least and lines[j] == "else:"
                and not (after < len(lines) and lines[after].startswith(("elif", "else")))):
            kept = lines[:i] + tuple(line[4:] for line in lines[j + 1:after]) + lines[after:]
            return short_lengths_dropped(kept, least)
    return lines


# Note [identical functions]: the loop code has a function per node of the order, so an
# order with many cases (a spec revealed at every n up to 48 has one per n) repeats the same
# function under many names (`_pairwise1_V` ... `_pairwise18_V`), each compiled on its own
# for about a second.  Functions that are the same up to the names of their numbered locals
# (same parameters, same arithmetic) are one: the first is kept and called for all.
# Comparing functions is text work at every compile of such an order: one regular
# expression pass per function, no tokenizer or parser (the path exists to be short).
_STRING_OR_NUMBERED = re.compile(r"""('[^'\n]*'|"[^"\n]*")|(?<![\w.])([a-z]+\d+)\b""")
_TARGETS = re.compile(r"^\s*(?:for\s+([\w, ]+?)\s+in\b|([\w, ]+?)\s*(?:[-+*/%]|//)?=(?!=))")


def _shape(f):
    """What makes two generated functions one (note [identical functions])."""
    text = "\n".join(f.body)
    # the function's own names: its parameters and what its lines assign
    local = set(f.params)
    for line in f.body:
        m = _TARGETS.match(line)
        if m:
            local.update(w.strip() for w in (m.group(1) or m.group(2)).split(","))
    names: dict[str, str] = {}

    def canonical(m):
        word = m.group(2)
        if word is None or word not in local:
            return m.group(0)
        return names.setdefault(word, f"v{len(names)}")
    region = f.name.rsplit("__", 1)[1] if "__" in f.name[1:] else ""
    return f.params, region, _STRING_OR_NUMBERED.sub(canonical, text)


def merge_identical(program):
    """`program` with every function that repeats an earlier one (note [identical
    functions]) dropped and its calls made to the earlier one."""
    import dataclasses

    functions = list(program.functions)
    shapes: dict = {}      # a function's shape, computed once however many rounds it stays
    while True:
        first: dict = {}
        same: dict[str, str] = {}
        for f in functions[:-1]:           # the entry, `_reduce`, last, is never a repeat
            if f not in shapes:
                shapes[f] = _shape(f)
            same_as = first.setdefault(shapes[f], f.name)
            if same_as != f.name:
                same[f.name] = same_as
        if not same:
            return dataclasses.replace(program, functions=tuple(functions))
        call = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, same)) + r")(?=\()")

        def renamed(f):
            body = tuple(call.sub(lambda m: same[m.group(1)], line) for line in f.body)
            return f if body == f.body else dataclasses.replace(f, body=body)
        functions = [renamed(f) for f in functions if f.name not in same]


# A walk over leaves at step 1 (`_pairwise0_L1`, its first line `step = 1`) that repeats
# a walk at any step (`_pairwise1_L`) is that walk, called with step 1: one compilation
# (note [identical functions]); the step-1 name stays, inlined.
STEP_ONE = "return {}(a, b, lo, np.int64(1), m)"


def step_one_walks(program):
    """`program` with every step-1 walk that repeats a walk at any step made a call to it."""
    import dataclasses

    any_step = {_shape(f): f.name for f in program.functions if f.params == ("a", "b", "lo", "step", "m")}

    def walk(f):
        if f.params != ("a", "b", "lo", "m") or not f.body or f.body[0] != "step = 1":
            return f
        general = any_step.get(_shape(dataclasses.replace(f, params=("a", "b", "lo", "step", "m"),
                                                          body=f.body[1:])))
        return f if general is None else dataclasses.replace(f, body=(STEP_ONE.format(general),))
    return dataclasses.replace(program, functions=tuple(walk(f) for f in program.functions))


def region_runtime(rp, table: str | None, tags: bool) -> str:
    """The runtime functions of a named arithmetic (before `in_region` renames them): its
    small ones inlined as the unnamed arithmetic's are (note [compile time]), each of the
    others compiled on its own."""
    names, rename = region_names(rp, table, tags)
    inline = [n for n in names if rename.get(n, n) in INLINE]
    return "\n\n".join(filter(None, [
        embed(numba_rt, [n for n in names if n not in inline], rename, decorator="@_jit"),
        embed(numba_rt, inline, rename, decorator="@_inline")]))


def _numba_fma(p) -> str:
    """The numba FMA variant of _add_leaf for a plan's accumulator."""
    return "_add_leaf_fma_native" if p.acc_fmt is None else "_add_leaf_fma_emulated"


def region_names(rp, table: str | None, tags: bool) -> tuple[list[str], dict[str, str]]:
    """The runtime functions of a part (`using`) and their renames: those of its plan, additions
    rounding the exact sum once unless its carrier is fp64 (note [wider partial sums] in
    fpspec.compile.runtime.numba_rt)."""
    return exact_adds(rp, region_runtime_names(rp, _numba_fma(rp), table, tags=tags))


def wide_lists(program):
    """The program with every value list that a part's own functions build made by `_vals_wide`
    (float64: a lone partial sum of the code around the part keeps its bits, note [wider partial
    sums] in fpspec.compile.runtime.numba_rt).  Lists of lanes folded in a part from code
    outside it (fpspec.compile.loops `lanes_loop`) hold the part's own sums: they keep its carrier."""
    from dataclasses import replace

    def widened(f):
        part = f.name.rsplit("__", 1)[1] if "__" in f.name[1:] else None
        if part not in program.regions:
            return f
        return replace(f, body=tuple(line.replace(f"_vals__{part}(", "_vals_wide(") for line in f.body))
    return replace(program, functions=tuple(widened(f) for f in program.functions))


# Note [gemm by columns]: the order fixes only each output's additions, so a
# gemm whose order is a forward sequential fold, k lanes of forward folds
# joined by a fixed tree, or blocks of forward folds folded in order, can run with k (the inner index) outer and the
# output columns innermost: acc[lane, j] += A[i, kk] * B[kk, j] for a whole
# contiguous row of B.  Every output sees the same operations in the same
# order as in `_gemm_kernel` (same functions, scalar forms), so the bits are
# the same; only the loop nest differs, and the j loop vectorizes (no
# reassociation: the lanes of a vector are different outputs).  Columns go
# in tiles of COLUMN_TILE so the tile of B stays in cache across rows.
# A pass over a lane's row adds its next UNROLL leaves, in order, to each
# output: one load and store of the row per UNROLL leaves, not per leaf.
COLUMN_TILE = 256
# leaves of one lane added per load and store of its accumulator row (in order)
UNROLL = 4


def gemm_by_columns(kernel: Kernel) -> tuple[int, str] | None:
    """(least n, source of `_gemm_columns_kernel`) when `kernel`'s order allows
    note [gemm by columns], else None."""
    from fpspec.compile.trees import reduce_list
    from fpspec.tree import postorder

    root = kernel.root
    if isinstance(root, Call):
        root = kernel.order(root.name)
    if kernel.arithmetic.fused is not None or kernel.arithmetics:     # one arithmetic, written inline
        return None
    if kernel.arithmetic.product == "fma_first":   # its folds start with _add_leaves (fpspec.compile.loops)
        return None
    block = "n"
    if root == Fold():
        lanes, least, tree = 1, 1, 0
    elif (isinstance(root, Lanes) and isinstance(root.k, Const) and 2 <= root.k.value <= 64
          and root.inner == Fold() and root.left is None):
        lanes = root.k.value
        least = 2 * lanes           # every lane holds at least two leaves (note [lone leaves])
        tree = reduce_list(kernel, root.outer, list(range(lanes)), lanes)
    elif (isinstance(root, Blocks) and isinstance(root.b, Const) and root.b.value >= 2
          and root.inner == Fold() and root.outer == Fold()):
        # blocks of b leaves folded in order, the block sums folded in order
        lanes, least, tree, block = 1, 1, 0, str(root.b.value)
    else:
        return None
    joins, values = [], []
    for t in postorder(tree):
        if isinstance(t, int):
            values.append(f"acc[{t}, j]")
        elif t.fused:
            return None
        else:
            right, left = values.pop(), values.pop()
            joins.append(f"s{len(joins)} = _add({left}, {right})")
            values.append(f"s{len(joins) - 1}")
    body = "".join(" " * 16 + line + "\n" for line in joins)
    loads = "\n".join(" " * 20 + f"x{u}, b{u} = A[i, {at}], B[{at}, j0:j0 + w]"
                      for u, at in ((u, f"kk + {u * lanes} + lane" if u else "kk + lane") for u in range(UNROLL)))
    chain = "row[j]"
    for u in range(UNROLL):
        chain = f"_add_leaf_xy({chain}, x{u}, b{u}[j])"
    src = f'''@_parallel
def _gemm_columns_kernel(A, B, out, part=0, parts=1):
    """out = A @ B by columns (note [gemm by columns]): {lanes} lane(s) per output,
    in blocks of {block} leaves; row {lanes} of acc holds the fold over blocks."""
    m, n = A.shape
    p = B.shape[1]
    tiles = (p + {COLUMN_TILE} - 1) // {COLUMN_TILE}
    for t in prange(part, tiles * m, parts):
        j0 = (t // m) * {COLUMN_TILE}
        i = t % m
        w = min({COLUMN_TILE}, p - j0)
        acc = np.empty(({lanes + 1}, w), _ACC)
        for lo in range(0, n, {block}):
            hi = min(lo + {block}, n)
            for lane in range({lanes}):
                x = A[i, lo + lane]
                row = acc[lane]
                brow = B[lo + lane, j0:j0 + w]
                for j in range(w):
                    row[j] = _term_xy(x, brow[j])
            kk = lo + {lanes}
            while kk + {UNROLL * lanes} <= hi:   # {UNROLL} leaves of each lane per pass over its row
                for lane in range({lanes}):
                    row = acc[lane]
{loads}
                    for j in range(w):
                        row[j] = {chain}
                kk += {UNROLL * lanes}
            for kk in range(kk, hi):
                x = A[i, kk]
                row = acc[(kk - lo) % {lanes}]
                brow = B[kk, j0:j0 + w]
                for j in range(w):
                    row[j] = _add_leaf_xy(row[j], x, brow[j])
            for j in range(w):
{body}                acc[{lanes}, j] = {values[0]} if lo == 0 else _add(acc[{lanes}, j], {values[0]})
        for j in range(w):
            out[i, j0 + j] = _final(acc[{lanes}, j])
'''
    return least, src


def lone_block(kernel: Kernel, p) -> int:
    """b where the order is blocks of b folded in order and a last block of one leaf
    (n % b == 1) is an FMA into the blocks before it, which the columns and tiles forms
    add as a rounded value: `_gemm_kernel` takes those n (fpspec.compile.loops note
    [lone leaves]); 0 where no n needs that."""
    root = kernel.root
    if isinstance(root, Call):
        root = kernel.order(root.name)
    if isinstance(root, Blocks) and isinstance(root.b, Const) and p.fma:
        return root.b.value
    return 0


def vector_lanes(kernel: Kernel, p) -> bool:
    """Whether lanes over leaves may use `_lane_folds` (note [vector lanes] in
    fpspec.compile.loops): a leaf must be its input value unchanged, so op
    sum into a native accumulator of the input's own carrier."""
    return (kernel.op == "sum" and p.term == "sum" and p.acc_fmt is None and p.acc_dtype == p.in_carry
            and kernel.arithmetic.fused is None and not kernel.arithmetics)


# Note [gemm tiles]: the columns form (note [gemm by columns]) keeps each
# partial sum in memory, one load and store per UNROLL leaves.  Where an
# order is k lanes of forward folds joined by a fixed tree (k = 1: one fold),
# alone or as the inner order of blocks of b folded in order (numpy.matmul's
# `blocks(256, lanes(2, seq, seq), seq)` at 512^3), and a leaf is one IEEE
# operation of the carrier (native accumulator = input carrier = output
# carrier; product = fma as llvm.fma, or a product rounded to the
# accumulator then added), `_gemm_tile` (an explicit LLVM IR loop: numba runs
# no SLP vectorizer) keeps a tile of rows x 2 vectors of outputs per lane in
# registers for a whole block: per leaf a row of B is loaded (contiguous),
# A[i, k] broadcast, one vector FMA per vector of outputs.  A vector element
# is an output, so every output gets exactly the scalar operations of
# `_gemm_kernel` in the spec's order; block sums are folded in order into
# `out`, then `_final` runs in place.  Tiles go in parallel (threads;
# consecutive tiles share a panel of B); rows that do not fill a tile go in
# tiles of one row, columns that do not fill one (and lengths whose last
# block has a lane of fewer than two leaves) through `_gemm_rest`.
TILE_ACCUMULATORS = 12  # lanes x rows x vectors: with a row of B and a broadcast, 15 of the 16 ymm
TILE_VECTORS = 2
TILE_MAX_LANES = 4
TILE_GROUP = 16         # tiles of rows per parallel task


def gemm_tiles(kernel: Kernel, p) -> tuple[tuple[int, int, int, int], str] | None:
    """((rows, columns, block or 0, lanes) of a tile, source of
    `_gemm_tiles_kernel`) when note [gemm tiles] applies to `kernel`, else None."""
    from fpspec.compile.trees import reduce_list
    from fpspec.tree import postorder

    root = kernel.root
    if isinstance(root, Call):
        root = kernel.order(root.name)
    a = kernel.arithmetic
    if kernel.arithmetics:   # one arithmetic for the whole tree (note [gemm tiles])
        return None
    if not (p.acc_fmt is None and p.acc_dtype == p.in_carry == p.out_carry and p.term == "product"
            and (p.fma or a.product in ("rounded", "exact")) and not p.fma_first and a.fused is None):
        return None
    block, inner = 0, root
    if (isinstance(root, Blocks) and isinstance(root.b, Const) and root.b.value >= 2
            and root.outer == Fold()):
        block, inner = root.b.value, root.inner
    if inner == Fold():
        lanes, tree = 1, 0
    elif (isinstance(inner, Lanes) and isinstance(inner.k, Const) and 2 <= inner.k.value <= TILE_MAX_LANES
          and inner.inner == Fold() and inner.left is None):
        lanes = inner.k.value
        tree = reduce_list(kernel, inner.outer, list(range(lanes)), lanes)
    else:
        return None
    if block and block < 2 * lanes:     # blocks whose lanes are not all full (note [lone leaves])
        return None
    postfix = ""
    for t in postorder(tree):
        if not isinstance(t, int) and t.fused:
            return None
        postfix += str(t) if isinstance(t, int) else "+"
    rows = TILE_ACCUMULATORS // (lanes * TILE_VECTORS)
    columns = TILE_VECTORS * (32 // {"float32": 4, "float64": 8}[p.acc_dtype])
    size = str(block) if block else "n"

    def tile_loop(first: str, count: str, tile_rows: int, tag: str) -> str:
        # a task: one panel of columns x up to TILE_GROUP tiles of rows; blocks outermost so the
        # block's rows of B stay in cache across the tiles (each output still gets its blocks in order)
        return f'''    groups{tag} = ({count} + {TILE_GROUP - 1}) // {TILE_GROUP}
    for t{tag} in prange(part, groups{tag} * pt, parts):
        j0 = (t{tag} // groups{tag}) * {columns}
        g0 = (t{tag} % groups{tag}) * {TILE_GROUP}
        g1 = min(g0 + {TILE_GROUP}, {count})
        for lo in range(0, n, {size}):
            for g in range(g0, g1):
                _gemm_tile(A, B, out, {first}g * {tile_rows}, j0, lo, min(lo + {size}, n), lo == 0, {tile_rows},
                           {TILE_VECTORS}, {int(p.fma)}, {lanes}, {postfix!r})
        for i in range({first}g0 * {tile_rows}, {first}g1 * {tile_rows}):
            for j in range(j0, j0 + {columns}):
                out[i, j] = _final(out[i, j])
'''
    src = f'''@_parallel
def _gemm_tiles_kernel(A, B, out, part=0, parts=1):
    """out[:, :p - p % {columns}] = A @ B in tiles of {rows} rows (the last rows one by one) x {columns}
    columns (note [gemm tiles]): in blocks of {size} leaves, {lanes} lane(s) per block joined by
    {postfix!r}, the block sums folded in order."""
    m, n = A.shape
    p = B.shape[1]
    mt, pt = m // {rows}, p // {columns}
{tile_loop("", "mt", rows, "")}{tile_loop(f"mt * {rows} + ", f"(m - mt * {rows})", 1, "_rest")}'''
    return (rows, columns, block, lanes), src


def xy_leaves(p, wide: bool | None = None, decorator: str = "@_jit") -> str:
    """`_term_xy` and `_add_leaf_xy`: `_term` and `_add_leaf` for one term x*y.  `wide`: the
    schedule loop's forms (note [schedules]), whose partial sum is float64 (True: a named
    arithmetic's, note [wider partial sums]) or in the carrier (False), typed here rather than
    by `_fma_into` at each call."""
    xy = {"product": "_term_product_xy", "product_twice": "_term_product_twice_xy"}[p.term]
    leaf = ("_add_leaf_plain_xy" if not p.fma else
            "_add_leaf_fma_emulated_xy" if p.acc_fmt is not None else
            "_add_leaf_fma_native_xy" if wide is None else
            "_add_leaf_fma_wide_xy" if wide and p.acc_dtype == "float32" else "_add_leaf_fma_same_xy")
    return embed(numba_rt, [xy, leaf], {xy: "_term_xy", leaf: "_add_leaf_xy"}, decorator=decorator)


def scheduled(kernel: Kernel, p, program, text: str, regions, fast) -> bool:
    """Whether gemv / gemm run by note [schedules] in fpspec.compile.runtime.numba_rt:
    every leaf a product, fused nodes of the Tensor Core kind in a gemm only,
    no vector lanes; a gemm with a form of its own (notes [gemm by columns],
    [gemm tiles]) keeps it."""
    f = kernel.arithmetic.fused
    plans = [p] + [rp for _, rp in regions]
    if fast or "_lane_folds(" in text or any(q.term not in ("product", "product_twice") for q in plans):
        return False
    return not program.uses_fused or (kernel.op == "gemm" and f is not None and f.combine != "amd"
                                      and not kernel.arithmetics)


# Note [one branch per operation]: each branch of the schedule loop costs about a
# tenth of a second of numba and LLVM at the first call, so the loop has one branch
# per operation, not one per name that records it: every arithmetic's zero is +0.0
# in the float64 rows (`_ZERO = _ACC(0.0)`); a carrier and a rounding to a native
# carrier are one cast; a named arithmetic's term is the unnamed one's where the
# carrier, accumulator format and product are the same; a node of two leaves is
# two rows (note [leaf pairs] in fpspec.compile.runtime.numba_rt).  A named
# arithmetic's FMA into a float64 partial sum is typed where it is written
# (`_add_leaf_fma_wide_xy`: `_fma_into`'s overload compiled a branch of its own per
# call), and the scalar forms are inlined (one call site each).  The gemv_m7
# example's first call: 16 branches and 2.9 s of compiling for its first order
# before, 8 branches after.
def schedule_source(kernel: Kernel, p, program, runtime: str, regions) -> str:
    """`_sched_gemm` or `_sched_gemv`, its table of operations for `_record_plan`
    and the runtime they use (note [schedules])."""
    import re

    def defined(name: str) -> bool:
        return re.search(rf"^(def {name}\(|{name} = )", runtime, re.M) is not None

    gemm = kernel.op == "gemm"
    # a leaf k of output j: (x, y) and the lines that read the tile's operands once per row
    # (elements of 2-D arrays, not row views: a view is an array numba types and lowers at each use)
    if gemm:
        def leaf(k: str, tag: str) -> tuple[list[str], str, str]:
            return [f"k{tag} = {k}", f"x{tag} = A[i, k{tag}]"], f"x{tag}", f"B[k{tag}, j0 + j]"
    else:
        def leaf(k: str, tag: str) -> tuple[list[str], str, str]:
            return [f"k{tag} = {k}", f"y{tag} = xv[k{tag}]"], f"AT[k{tag}, j0 + j]", f"y{tag}"

    table: list[tuple[str, str, str]] = []
    branches: list[str] = []
    codes = iter(range(1 << 20))

    # the operations the order's code can record: a kernel without the others compiles faster
    # (`_schedule` takes the compiled order where a row has no branch here)
    called = "\n".join(line for f in program.functions for line in f.body)
    for s in set(re.findall(r"(?<![\w.])_join(\w*)\(", called)):   # `_join` (note [lone leaves]) calls these
        called += f"\n_add{s}(_add_leaf{s}(_add_leaves{s}("
    for s in set(re.findall(r"(?<![\w.])_add_leaves(\w*)\(", called)):   # note [leaf pairs]
        called += f"\n_term{s}(_add_leaf{s}("
    ran: list[int] = []

    def used(obj: str) -> bool:
        return program.uses_tables or re.search(rf"(?<![\w.]){re.escape(obj)}\(", called) is not None

    # note [one branch per operation]: what a branch computes -> its code
    same_rows: dict[tuple, int] = {}

    def add(obj: str, kind: str, lines: list[str] | None, code: int | None = None,
            same: tuple | None = None) -> int:
        merged = same is not None and same in same_rows
        code = same_rows[same] if merged else next(codes) if code is None else code
        if same is not None:
            same_rows[same] = code
        if kind != "negated_zero":      # -_ZERO is recorded through `_PlanZero` (its code: zero's + 1)
            table.append((obj, f"({code}, {code + 1})" if kind == "zero" else str(code), kind))
        # (a carrier is one object under every name it has: `_ACC` and a region's np.float32 record
        # as one code, so with regions value rows always have their branch; without, a value
        # row comes only from a call in the order's code)
        if lines is not None and code not in ran and (kind in ("zero", "negated_zero")
                                                      or (kind == "value" and bool(regions)) or used(obj)):
            branches.append(f"elif c == {code}:   # {obj}\n" + "\n".join("    " + x for x in lines))
            ran.append(code)
        return code

    def each(expr: str) -> list[str]:
        return ["for j in range(w):", f"    sv[t, j] = {expr}"]
    runtime_xy = []
    for s, q in [("", p)] + [(f"__{name}", rp) for name, rp in regions]:
        xy = xy_leaves(q, wide=bool(s), decorator="@_inline")
        runtime_xy.append(in_region(xy, s[2:]).replace("_term_xy", f"_term_xy{s}")
                          .replace("_add_leaf_xy", f"_add_leaf_xy{s}") if s else xy)
        # every arithmetic's zero is +0.0 in the float64 rows (`_ZERO = _ACC(0.0)`): one branch
        negated = ("zero",) not in same_rows
        add(f"_ZERO{s}", "zero", each(f"_ZERO{s}"), same=("zero",))
        if negated:
            add(f"-_ZERO{s}", "negated_zero", each(f"-_ZERO{s}"))
        hold, x, y = leaf("ops[t, 2]", "0")
        term = add(f"_term{s}", "term", hold + each(f"_term_xy{s}({x}, {y})"),
                   same=("term", q.term, q.acc_dtype, q.acc_fmt, q.prod_dtype))
        add(f"_add{s}", "add", ["r0, r1 = ops[t, 1], ops[t, 2]"] + each(f"_add{s}(sv[r0, j], sv[r1, j])"))
        hold, x, y = leaf("ops[t, 3]", "0")
        leaf_code = add(f"_add_leaf{s}", "add_leaf", ["r0 = ops[t, 2]"] + hold
                        + each(f"_add_leaf_xy{s}({'sv[r0, j]' if s else '_ACC(sv[r0, j])'}, {x}, {y})"))
        if defined(f"_add_leaves{s}"):    # note [leaf pairs]: a term row, then an add_leaf row
            table.append((f"_add_leaves{s}", f"({term}, {leaf_code})",
                          "leaf_pair_first" if q.fma_first else "leaf_pair"))
        # a carrier, and a rounding to a native carrier, are one cast (`_round_native`)
        cast = ("cast", q.acc_dtype)
        add(f"_round_acc{s}", "value", ["r0 = ops[t, 1]"] + each(f"_round_acc{s}(sv[r0, j])"),
            same=cast if q.acc_fmt is None else None)
        add(f"_ACC{s}", "value", ["r0 = ops[t, 1]"] + each(f"_ACC{s}(sv[r0, j])"), same=cast)
        add(f"_vals{s}", "vals", None)
    if program.regions:
        add("_vals_wide", "vals", None)
    if program.uses_pad:
        add("_padded", "padded", None)     # resolved away by `_schedule`
    fused = program.uses_fused
    if fused:
        tile = "_fused_tile(ea, ma, eb, mb, i, j0, w, side, ops[t, 2], 0, 1, ops[t, 3], {}, v, emax, total, cexps, csigs)"
        if defined("_fused_range"):
            add("_fused_range", "fused_range", ["r0 = ops[t, 4]", "for j in range(w):", "    cv[j] = _ACC(sv[r0, j])",
                                                "v = sv[t]", tile.format("cv"),
                                                "for j in range(w):", "    v[j] = _ACC(v[j])"])
        if defined("_fused_core"):
            add("_fused_core", "fused_core", ["v = sv[t]", tile.format("sv[ops[t, 4]]")])
    chain = "\n".join(branches)[2:]
    body = textwrap.indent(chain, " " * 12)
    # note [schedule scratch]: each thread's rows and the fused nodes' integers come from the caller
    scratch = ("    cv = sv[ops.shape[0]]     # a fused range's partial sum, one per output\n"
               "    cexps, csigs, emax, total = ints[part, 0], ints[part, 1], ints[part, 2], ints[part, 3]\n"
               ) if fused else ""
    if gemm:
        head = ('def _sched_gemm(A, B, out, ops, side, root, rows, ints, ea, ma, eb, mb, part=0, parts=1):\n'
                '    """out = A @ B by the rows of the recorded order, tasks part, part + parts, ...: a task is\n'
                '    a row i of A and a tile of `width` columns (note [schedules])."""\n'
                '    sv = rows[part]\n    width = sv.shape[1]\n' + scratch +
                '    m, p = A.shape[0], B.shape[1]\n    tiles = (p + width - 1) // width\n'
                '    for task in range(part, m * tiles, parts):\n        i = task // tiles\n'
                '        j0 = (task % tiles) * width\n        w = p - j0 if p - j0 < width else width\n')
        store = "out[i, j0 + j]"
    else:
        head = ('def _sched_gemv(AT, xv, out, ops, side, root, rows, part=0, parts=1):\n'
                '    """out = AT.T @ xv by the rows of the recorded order, tasks part, part + parts, ...: a\n'
                '    task is a tile of `width` rows (note [schedules])."""\n'
                '    sv = rows[part]\n    width = sv.shape[1]\n' + scratch +
                '    m = AT.shape[1]\n'
                '    for task in range(part, (m + width - 1) // width, parts):\n        j0 = task * width\n'
                '        w = m - j0 if m - j0 < width else width\n')
        store = "out[j0 + j]"
    kernel_src = (f"@_parallel\n{head}        for t in range(ops.shape[0]):\n            c = ops[t, 0]\n"
                  f"{body}\n        for j in range(w):\n"
                  f"            {store} = _final(_ACC(sv[root, j]))\n")
    plain = ["_schedule", "_sched_scratch", "_scheduled_gemm" if gemm else "_scheduled_gemv"]
    if not defined("_record_plan"):
        plain += ["_PlanTerms", "_PlanValues", "_PlanZero", "_record_plan"]
    rows = "".join(f"    ({obj}, {code}, {kind!r}),\n" for obj, code, kind in table)
    parts = list(runtime_xy)
    if fused:
        parts += [embed(numba_rt, [f for f in ("_f64_bits", "_bits_f64") if not defined(f)]),
                  embed(numba_rt, [] if defined("_round_bits") else ["_round_bits"], decorator="@_jit"),
                  embed(numba_rt, ["_decode_bits", "_fused_round"], decorator="@_inline"),
                  embed(numba_rt, ["_fused_tile"], decorator="@_jit")]
        plain.insert(0, "_fused_decode")
    parts += [kernel_src,
              "_SCHEDULES = {}   # (entry, n) -> its rows (note [schedules])\n"
              f"_SCHED_OPS = (\n{rows})\n_SCHED_CODES = frozenset({(-1, *ran)})   # the rows `{head[4:15]}` runs\n"
              "_SCHED_VALUES = 1 << 18\n_SCHED_MAX_N = 1 << 18\n"
              "_NO_CODES = np.empty((0, 0), np.int32)\n_NO_INTS = np.empty((0, 4, 0), np.int64)",
              embed(numba_rt, plain)]
    return "\n\n".join(parts)


def fused_constants(kernel: Kernel) -> list[str]:
    """The _FP_* constants `_fused_core` reads, from the spec's FusedParams."""
    from fpspec.arith.fused import _FORMATS, _ZERO_EXP

    f = kernel.arithmetic.fused
    _, out_emin, out_emax = _FORMATS[f.output]
    floor = _ZERO_EXP if f.exponent_floor is None else f.exponent_floor
    return [
        f"# fused nodes: {f}",
        f"_ZERO_EXP = {_ZERO_EXP}",
        f"_FP_W = {f.w}  # products per node",
        f"_FP_F = {f.fraction_bits}  # alignment grid: bits below the largest exponent",
        f"_FP_EMIN_IN = {_FORMATS[f.input][1]}",
        f"_FP_FLOOR = {floor}",
        f"_FP_ALIGNED = {('truncate', 'floor', 'rne').index(f.aligned)}  # {f.aligned}",
        f"_FP_C_ALIGNED = {f.c_aligned}",
        f"_FP_RZ = {f.result == 'rz'}",
        f"_FP_RES_P = {f.result_precision}",
        f"_FP_OUT_EMIN, _FP_OUT_EMAX = {out_emin}, {out_emax}",
        f"_FP_SUB_IN, _FP_SUB_OUT = {f.subnormal_inputs}, {f.subnormal_outputs}",
        f"_FP_EMIN_IN_B = {_FORMATS[f.input_b or f.input][1]}",
        f"_FP_ZEXP_ON, _FP_ZEXP = {f.zero_exponent is not None}, {f.zero_exponent or 0}  # zeros' exponent",
        f"_FP_C_EMIN = {-126 if f.c_emin is None else f.c_emin}",
        f"_FP_AMD, _FP_INTERLEAVE = {f.combine == 'amd'}, {f.interleave}  # {f.combine} combine",
        # the bounds of `_fused_decode` and `_fused_round` (note [fused gemm]), as `_round_dir` computes them
        f"_FP_IN_TINY, _FP_IN_TINY_B = {2.0 ** _FORMATS[f.input][1]!r}, {2.0 ** _FORMATS[f.input_b or f.input][1]!r}",
        f"_FP_OUT_TINY = {2.0 ** out_emin!r}",
        f"_FP_OUT_OVER_RZ = {2.0 ** (out_emax + 1)!r}",
        f"_FP_OUT_OVER_RN = {(2.0 - 2.0 ** (1 - f.result_precision)) * 2.0 ** out_emax!r}",
    ]


BACKEND = NumbaBackend()
