"""What the NumPy and Numba replicas need to know about a kernel's arithmetic.

Decisions about formats live here, once: which formats run natively (fp32,
fp64: IEEE operations of the machine, nearest even) and which are emulated
on float64 with one rounding after each operation (fp16, bf16, tf32, fp8:
the exact float64 sum of two such values rounds correctly, note [double
rounding] in fpspec.formats), which input dtypes a replica accepts, and
which product/FMA variant applies.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from fpspec.arith.model import FMA_PRODUCTS
from fpspec.compile.ir import Blocks, Call, CompileError, FusedChain, Guard, Kernel, Table, WithArithmetic, walk
from fpspec.formats import get_format

NATIVE = {"fp32": "float32", "fp64": "float64"}
# input format -> dtype of the arrays the replica accepts
INPUT_DTYPES = {"fp32": "float32", "fp64": "float64", "fp16": "float16",
                "bf16": "float32", "tf32": "float32", "fp8e4m3": "float32", "fp8e5m2": "float32",
                "fp8e4m3fnuz": "float32", "fp8e5m2fnuz": "float32", "fp6e2m3": "float32", "fp6e3m2": "float32",
                "fp4e2m1": "float32"}


@dataclass(frozen=True)
class Plan:
    """Per-kernel choices shared by the loop backends."""
    acc_dtype: str                 # carrier of partial sums
    acc_fmt: tuple | None          # (precision, emin, emax) when emulated
    out_dtype: str                 # dtype the replica returns
    out_fmt: tuple | None          # (precision, emin, emax) when the output is emulated
    out_carry: str                 # carrier of the output before the final cast
    in_dtype: str                  # dtype the replica accepts
    in_grid: tuple | None          # inputs held in a wider dtype: their format's grid
    in_carry: str                  # dtype the numba kernels read (float16 is widened)
    term: str                      # "sum" | "product" | "product_twice" (rounded to product_format first)
    prod_dtype: str | None         # product_format's dtype
    fma: bool                      # a leaf joins a partial sum by one FMA
    init_zero: bool
    fma_first: bool = False        # a node of two leaves fuses the first (product = fma_first)
    exact_sum: bool = False        # note [exact leaves]: a sum's leaves wider than the accumulator
    exact_products: bool = False   # note [exact leaves]: exact products that may leave the accumulator's range


# Note [exact leaves]: a node forms the leaves it takes (fpspec.arith.evaluate
# note [regions]) and rounds once.  For a sum a leaf is the input itself: where
# the input is wider than the accumulator (fp64 inputs in an fp32 part, fp32 or
# bf16 in fp16) rounding each leaf first and then their sum gives other bits (a wide
# exponent, inf beside a huge finite value), so such a plan (`exact_sum`) keeps
# leaves as float64 and rounds every node's exact sum once (round to odd, then
# to the accumulator, emulated on a float64 carrier so that the loops' casts of
# a value into the carrier, a lone leaf's included, round nothing).  With product = exact a product of two bf16 (or tf32)
# values can overflow fp32 or fall below its subnormals although its
# significand fits: `exact_products` keeps products in float64 and rounds once
# per node (a leaf and a partial sum: one FMA; two leaves: their exact sum; a
# leaf that the loops hold as a value stays exact until the node that takes it,
# or the end, which rounds it to the accumulator first: the NumPy runtime's
# `_ROUND_FIRST`).
# A backend that lacks these functions refuses such a kernel in one line.


def holds_every_value(inp, acc) -> bool:
    """Every `inp` value is an `acc` value: significand, largest and smallest."""
    return (inp.precision <= acc.precision and inp.emax <= acc.emax
            and inp.emin - inp.precision >= acc.emin - acc.precision)


def _products_fit(inp, acc) -> bool:
    """Every product of two `inp` values is exact in `acc`: significand, largest and smallest."""
    smallest = 2 * (inp.emin - inp.precision + 1)
    return 2 * inp.precision <= acc.precision and 2 * inp.emax + 2 <= acc.emax and smallest >= acc.emin - acc.precision + 1


def _grid(name: str) -> tuple:
    f = get_format(name)
    return (f.precision, f.emin, f.emax)


def input_grid(fmt: str) -> tuple | None:
    """The grid inputs of format `fmt` are checked against: formats without a NumPy dtype
    travel in a wider one (INPUT_DTYPES), and must hold values of the format."""
    return None if INPUT_DTYPES[fmt] == NATIVE.get(fmt, "float16") else _grid(fmt)


def plan(kernel: Kernel) -> Plan:
    a = kernel.arithmetic
    if kernel.op == "sum":
        term = "sum"
    elif a.product == "none":
        raise CompileError(f"op {kernel.op} needs products, but the arithmetic says product = none")
    else:
        term = "product"
    prod_format = getattr(a, "product_format", None)
    if term == "product" and prod_format is not None:
        if prod_format not in NATIVE:
            raise CompileError(f"product_format = {prod_format} cannot be expressed (fp32 or fp64 only)")
        term = "product_twice"
    p_in = get_format(a.input).precision
    p_acc = get_format(a.accumulator).precision
    if term == "product" and p_in > 26:
        if a.product == "exact" or (a.product == "rounded" and a.accumulator != a.input):
            raise CompileError(f"product = {a.product} of {a.input} inputs in a {a.accumulator} accumulator "
                               "cannot be expressed")
    # (in fused kernels products go to fused nodes exactly; a lone leaf is rounded)
    if term == "product" and a.product == "exact" and 2 * p_in > p_acc and a.fused is None:
        raise CompileError(f"product = exact: a product of two {a.input} values is not representable in "
                           f"{a.accumulator}; say product = fma or rounded")
    if term == "product" and p_in > 26 and a.product in FMA_PRODUCTS and a.accumulator != a.input:
        raise CompileError(f"product = {a.product} of {a.input} inputs in a {a.accumulator} accumulator "
                           "cannot be expressed (one rounding of an fp64 fma into a narrower format)")
    if a.fused is not None and get_format(a.fused.output).precision < p_acc:
        raise CompileError(f"fused nodes write {a.fused.output}, narrower than the {a.accumulator} accumulator")
    exact_sum = term == "sum" and not holds_every_value(get_format(a.input), get_format(a.accumulator))
    # (in fused kernels too where a binary node may take a leaf: `order seq`, or a block of one leaf)
    exact_products = (term == "product" and a.product == "exact"
                      and not _products_fit(get_format(a.input), get_format(a.accumulator))
                      and (a.fused is None or not leaves_reach_fused_nodes_only(kernel)))
    # note [exact leaves]: values wait unrounded in a float64 carrier (every cast of one exact)
    native_acc = a.accumulator in NATIVE and not (exact_sum or exact_products)
    native_out = a.output in NATIVE
    out_dtype = {"fp16": "float16", "fp64": "float64"}.get(a.output, "float32")
    return Plan(
        acc_dtype=NATIVE.get(a.accumulator, "float64") if native_acc else "float64",
        acc_fmt=None if native_acc else _grid(a.accumulator),
        out_dtype=out_dtype,
        out_fmt=None if native_out else _grid(a.output),
        out_carry=NATIVE.get(a.output, "float64"),
        in_dtype=INPUT_DTYPES[a.input],
        in_grid=input_grid(a.input),
        in_carry="float64" if a.input == "fp64" else "float32",
        term=term,
        prod_dtype=NATIVE.get(prod_format) if prod_format else None,
        fma=term == "product" and a.product in FMA_PRODUCTS,
        init_zero=a.init == "+0.0",
        fma_first=term == "product" and a.product == "fma_first",
        exact_sum=exact_sum,
        exact_products=exact_products,
    )


def walk_orders(kernel: Kernel, r):
    """Every reducer under `r` (fpspec.compile.ir.walk), the named orders it calls included, each
    order once: what a part of an order holds wherever a `let` puts it."""
    seen, stack = set(), [r]
    while stack:
        for x in walk(stack.pop()):
            yield x
            if isinstance(x, Call) and x.name not in seen:
                seen.add(x.name)
                stack.append(kernel.order(x.name))


def _on_every_path(kernel: Kernel, r, decide, seen: frozenset = frozenset()) -> bool:
    """decide(node, under) for every order `r` may be: each case of a guard, the order a call
    names (a call back into an order being decided holds: its base case decides); `under(x)`
    decides a child x the same way."""
    if isinstance(r, Guard):
        return all(_on_every_path(kernel, x, decide, seen)
                   for x in [c.reducer for c in r.cases] + [r.otherwise] if x is not None)
    if isinstance(r, Call):
        return r.name in seen or _on_every_path(kernel, kernel.order(r.name), decide, seen | {r.name})
    return decide(r, lambda x: _on_every_path(kernel, x, decide, seen))


def fused_only(kernel: Kernel, r) -> bool:
    """Whether every node of the order `r` is a fused node (chains, fused literal trees, guards
    and parts of them): its leaves go to fused nodes exactly, or alone to the result (rounded
    to the accumulator), never to a binary node (note [exact leaves])."""
    def decide(x, under) -> bool:
        if isinstance(x, FusedChain):
            return True
        if isinstance(x, Table):
            return all(x.fused)
        return isinstance(x, WithArithmetic) and under(x.reducer)
    return _on_every_path(kernel, r, decide)


def part_forms_leaves(kernel: Kernel, r) -> bool:
    """Whether every leaf of `r` reaches a fused node or is formed alone by a part (`using`)
    before any binary node takes it: a block of one leaf in `blocks(b, using(P, fused), seq)`
    is the product rounded once into P's format, which its fp32 product, exact for inputs of
    at most 12 significand bits, gives too (one rounding: P no wider than fp32)."""
    fp32 = get_format("fp32")

    def decide(x, under) -> bool:
        if isinstance(x, WithArithmetic):
            part = get_format(kernel.named_arithmetic(x.name).accumulator)
            return (2 * get_format(kernel.arithmetic.input).precision <= fp32.precision
                    and part.precision <= fp32.precision and part.emax <= fp32.emax and part.emin >= fp32.emin
                    and fused_only(kernel, x.reducer))
        return isinstance(x, Blocks) and under(x.inner)
    return _on_every_path(kernel, r, decide)


# the n of a spec of at most this many lengths, none beyond FEW_N_MAX, are expanded one by one
FEW_N, FEW_N_MAX = 64, 4096


def leaves_reach_fused_nodes_only(kernel: Kernel) -> bool:
    """No binary node of the order takes a leaf at any n of the spec: its nodes are all fused
    (fused_only), or, for a spec of few n, no tree it expands to has such a node (a block of
    one leaf, say, only at an n outside the spec)."""
    from fpspec.compile.trees import tree_of
    from fpspec.tree import Node, postorder

    if fused_only(kernel, kernel.root) or part_forms_leaves(kernel, kernel.root):
        return True
    if kernel.n_max is None or kernel.n_max - kernel.n_min >= FEW_N or kernel.n_max > FEW_N_MAX:
        return False
    try:
        trees = [tree_of(kernel, n) for n in range(kernel.n_min, kernel.n_max + 1)]
    except (CompileError, ValueError):
        return False
    return not any(isinstance(t, Node) and not t.fused and any(isinstance(c, int) for c in t.children)
                   for tree in trees for t in postorder(tree))


def stores_fused(main, region) -> bool:
    """The region changes nothing but a narrower accumulator, into which its fused nodes'
    results are stored (fpspec.arith.model note [fused output]): the main fused function
    computes the nodes, a rounding stores them."""
    return (main.fused is not None and region.fused == main.fused
            and replace(region, accumulator=main.accumulator) == main
            and get_format(region.accumulator).precision < get_format(main.accumulator).precision)


def _input_b(a) -> tuple | None:
    """(format, grid) the second operand's values are checked against where fused nodes take two
    input formats (FusedParams.input_b), else None."""
    from fpspec.arith.fused import _FORMATS

    if a.fused is None or a.fused.input_b is None:
        return None
    return (a.fused.input_b, _FORMATS[a.fused.input_b])


def keeps_leaves(kernel: Kernel) -> bool:
    """Whether a leaf among partial sums must stay a leaf until its node forms it
    (fpspec.compile.loops note [lone leaves]): somewhere a node fuses leaves (FMA,
    fused nodes), or a part forms them in an arithmetic of its own."""
    arithmetics = [kernel.arithmetic] + [a for _, a in kernel.arithmetics]
    return bool(kernel.arithmetics) or any(a.product in FMA_PRODUCTS or a.fused is not None for a in arithmetics)


def input_settings(kernel: Kernel) -> list[str]:
    """Module constants of the argument checks (fpspec.compile.runtime.inputs_rt), the same
    in every backend's replica."""
    fmt = kernel.arithmetic.input
    dtype = INPUT_DTYPES[fmt]
    return [
        f"_NAME = {kernel.name!r}",
        f"N_MIN, N_MAX = {kernel.n_min}, {kernel.n_max}",
        f"_IN_DTYPE = np.{dtype}",
        f"_IN_NAME = {fmt!r}",
        f"_IN_GRID = {input_grid(fmt)}",
        f"_IN_B = {_input_b(kernel.arithmetic)}",
        f"_ROWS = {kernel.rows!r}",
        f"_COLS = {kernel.cols!r}",
    ]


def settings(kernel: Kernel, p: Plan) -> list[str]:
    """Module constants both loop backends define (read by the runtime functions)."""
    a = kernel.arithmetic
    return input_settings(kernel) + [
        f"_SUM_FUSED = {kernel.op == 'sum' and a.fused is not None}",
        f"_ACC = np.{p.acc_dtype}  # carrier of partial sums ({a.accumulator})",
        f"_ACC_FMT = {p.acc_fmt}",
        f"_OUT_DTYPE = np.{p.out_dtype}  # output format {a.output}",
        f"_OUT_FMT = {p.out_fmt}",
        f"_INIT_ZERO = {p.init_zero}  # init {a.init}",
        "_ZERO = _ACC(0.0)",
    ] + ([f"_PROD = np.{p.prod_dtype}  # product_format {a.product_format}"] if p.prod_dtype else [])


def _chosen(p: Plan, fma: str, exact: bool) -> dict[str, str]:
    """The function name the loop code calls -> the runtime variant for this plan.
    `exact`: the backend has the variants of note [exact leaves]."""
    if (p.exact_sum or p.exact_products) and not exact:
        what = ("a sum whose inputs are wider than its accumulator" if p.exact_sum else
                "product = exact where a product can overflow the accumulator or fall below its subnormals")
        raise CompileError(f"{what} cannot be compiled for this target yet (use --target numpy)")
    if fma == "_add_leaf_fma" and p.acc_fmt is None and p.acc_dtype == "float64":
        fma = "_add_leaf_fma_fp64"   # round to odd is for a second rounding, and an fp64 carrier has none
    chosen = {
        "_round_acc": "_round_native" if p.acc_fmt is None else "_round_emulated",
        "_term": {"sum": "_term_sum", "product": "_term_product", "product_twice": "_term_product_twice"}[p.term],
        "_add": "_add_plain",
        "_add_leaf": fma if p.fma else "_add_leaf_plain",
        "_add_leaves": "_add_leaves_first" if p.fma_first else "_add_leaves",
    }
    if p.exact_sum:
        chosen.update(_term="_term_exact", _add="_add_exact")
    if p.exact_products:
        chosen.update(_term="_term_exact_product", _add="_add_exact", _add_leaf=fma,
                      _add_leaves="_add_leaves_exact")
    return chosen


def runtime_names(p: Plan, program, fma: str, exact: bool = False) -> tuple[list[str], dict[str, str]]:
    """Runtime functions a replica embeds, in order, and the variant -> name renames.

    `fma` names the backend's FMA variant of _add_leaf; `exact`: whether the
    backend has the variants of note [exact leaves] (else such a plan is refused).
    """
    chosen = _chosen(p, fma, exact)
    names = list(chosen.values()) + ["_vals"]
    if program.uses_tags:
        names.append("_join")
    if program.uses_pad:
        names.append("_padded")
    if program.uses_fused:
        names.append("_fused_range")
    if program.uses_tables:
        names += ["_table_step", "_table_step_values"]
    names += ["_final", "_input", "_length", "_shape", "_fits", "_said", "_outputs", "_operands"]
    return names, {v: k for k, v in chosen.items()}


# ---------------------------------------------------------------- regions (fpspec.compile.loops note [regions in loops])

# the functions and constants a region has its own copy of, suffixed __NAME
REGION_NAMES = ("_round_acc", "_term", "_add", "_add_leaf", "_add_leaves", "_vals", "_ACC", "_ACC_FMT", "_PROD",
                "_ZERO", "_table_step", "_table_step_values", "_join")
_REGION_RE = re.compile(r"\b(" + "|".join(REGION_NAMES) + r")\b")


def in_region(text: str, name: str) -> str:
    """Code with the region functions and constants renamed to arithmetic `name`'s."""
    return _REGION_RE.sub(lambda m: f"{m.group(1)}__{name}", text)


def region_plans(kernel: Kernel, program) -> list[tuple[str, Plan]]:
    """(name, Plan) of every named arithmetic the loop code runs in."""
    return [(name, plan(replace(kernel, arithmetic=kernel.named_arithmetic(name)))) for name in program.regions]


def region_settings(kernel: Kernel, name: str, p: Plan) -> list[str]:
    """The module constants of region `name` (its carrier, grid and product format)."""
    a = kernel.named_arithmetic(name)
    lines = [f"_ACC__{name} = np.{p.acc_dtype}  # carrier of partial sums in arithmetic {name} ({a.accumulator})",
             f"_ACC_FMT__{name} = {p.acc_fmt}",
             f"_ZERO__{name} = _ACC__{name}(0.0)"]
    if p.prod_dtype:
        lines.append(f"_PROD__{name} = np.{p.prod_dtype}  # product_format {a.product_format}")
    return lines


def region_runtime_names(p: Plan, fma: str, table: str | None = None, exact: bool = False,
                         tags: bool = False) -> tuple[list[str], dict[str, str]]:
    """The functions a region embeds (renamed by `in_region` afterwards) and the variant renames;
    `table`: the backend's table step without fused nodes, when the program has literal trees;
    `exact` as for runtime_names; `tags`: the program joins tagged value lists."""
    chosen = _chosen(p, fma, exact)
    if table is not None:
        chosen["_table_step"] = table
        chosen["_table_step_values"] = "_table_step_values"
    return list(chosen.values()) + ["_vals"] + (["_join"] if tags else []), {v: k for k, v in chosen.items()}
