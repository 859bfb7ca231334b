"""Kernel IR -> Python loop code shared by the NumPy and Numba backends.

Both backends run the same loops; they differ only in what a value is (an
array over all output elements for NumPy, one scalar per output for Numba)
and in the runtime functions they embed (fpspec.compile.runtime).  So the loop
code is built once, here, and each backend wraps it in its own template.

An operand list at run time is one of
- `Leaves(lo, step, m)`: the leaves lo, lo + step, ... (m of them), read
  through the terms arrays a and b;
- `Values(vals, m, off, step)`: m partial sums vals[off + i*step]; with
  `tags` (note [lone leaves]) an operand may be a leaf its node forms.
Every reducer becomes straight-line code or a loop over one of these; only
named orders and `Pairwise` become functions of their own (they recurse).

The functions the generated code calls (each backend's runtime provides them):
_term(a, b, k), _add(u, v), _add_leaf(acc, a, b, k), _add_leaves(a, b, i, j),
_vals(m), _fused_range(a, b, lo, step, cnt, c), _table_step(...),
_table_step_values(...), _join(a, b, u, tu, v, tv) (tagged lists), _ZERO.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

from fpspec.compile.backends import py_cond, py_int
from fpspec.tree import postorder

# lanes with a constant count up to this many become scalar accumulators
MAX_UNROLLED_LANES = 16
from fpspec.compile.ir import (VLanes, Blocks, Call, Chunks, CompileError, Const, Fold, FusedChain, Guard, Kernel, Lanes, Pad,
                               Pairwise, Reducer, Segments, Table, TreeReduce, WithArithmetic, uses_var, walk)
from fpspec.arith.model import FMA_PRODUCTS
from fpspec.compile.numerics import in_region, keeps_leaves, stores_fused, walk_orders
from fpspec.formats import get_format


@dataclass(frozen=True)
class Leaves:
    lo: str
    step: str
    m: str


@dataclass(frozen=True)
class Values:
    """vals[off], vals[off + step], ... (m of them): no slicing, so a function
    over values always sees the same array type (numba recursion needs that)."""
    vals: str
    m: str
    off: str = "0"
    step: str = "1"
    tags: str | None = None    # tags[off + i*step]: the leaf operand i stands for, or -1 (note [lone leaves]),
    #                            or PHANTOM (note [phantoms])

    def at(self, i: str) -> str:
        return f"{self.vals}[{_plus(self.off, _times(i, self.step))}]"

    def tag(self, i: str) -> str:
        return f"{self.tags}[{_plus(self.off, _times(i, self.step))}]" if self.tags else "-1"


@dataclass(frozen=True)
class Function:
    """One generated function: `def name(params):` + body lines (4-space indented)."""
    name: str
    params: tuple[str, ...]
    body: tuple[str, ...]
    doc: str

    def source(self) -> str:
        lines = [f"def {self.name}({', '.join(self.params)}):", f'    """{self.doc}"""']
        lines += ["    " + b if b else "" for b in self.body]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Constant:
    """A module-level constant: a schedule table as an int64 / bool array."""
    name: str
    values: tuple
    dtype: str

    def source(self, np_name: str = "np") -> str:
        return f"{self.name} = {np_name}.array({list(self.values)!r}, dtype={np_name}.{self.dtype})"


@dataclass(frozen=True)
class LoopProgram:
    """Everything the loop code of a kernel needs: functions (entry `_reduce(a, b, n)`
    last), table constants, and which runtime features it uses."""
    functions: tuple[Function, ...]
    constants: tuple[Constant, ...]
    uses_fused: bool
    uses_tables: bool
    regions: tuple[str, ...] = ()   # named arithmetics the code runs in (note [regions in loops])
    uses_pad: bool = False          # calls _padded (note [phantoms])
    uses_tags: bool = False         # calls _join (note [lone leaves])


class _Code:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def indent(self):
        code = self

        class _Block:
            def __enter__(self):
                code.depth += 1

            def __exit__(self, *exc):
                code.depth -= 1
        return _Block()


class LoopEmitter:
    """Builds the loop program of one kernel (see `emit_program`)."""

    def __init__(self, kernel: Kernel, vector_lanes: bool = False, iterative_splits: bool = False,
                 typed_ints: bool = False, gather_leaves: bool = False):
        self.kernel = kernel
        # the backend indexes term arrays by an index array (emit_vlanes): NumPy
        self.gather_leaves = gather_leaves
        # note [vector lanes]: the backend provides `_lane_folds` and `_term` is the identity
        self.vector_lanes = vector_lanes
        # note [iterative splits]
        self.iterative_splits = iterative_splits
        self.typed_ints = typed_ints
        self.counter = 0
        self.functions: dict[str, Function] = {}
        self.pending: list[tuple[str, Reducer, str]] = []
        self.tables: dict[int, tuple[str, Table]] = {}
        self.ids: dict[int, int] = {}
        self.uses_fused = False
        self.region: str | None = None     # the named arithmetic being emitted (note [regions in loops])
        self.uses_pad = False
        self.regions_used: set = set()
        # note [lone leaves]: value lists carry the leaves they hold where a node may form them otherwise
        self.tagging = keeps_leaves(kernel)
        self.uses_tags = False
        # note [phantoms]: lists may hold phantoms that a part's node must not take
        self.phantom_tags = bool(kernel.arithmetics) and any(isinstance(r, Pad) for r in walk_orders(kernel, kernel.root))

    # ------------------------------------------------------------ functions

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}{self.counter}"

    def node_id(self, r: Reducer) -> int:
        # stable numbering by first visit: deterministic output
        key = id(r)
        if key not in self.ids:
            self.ids[key] = len(self.ids)
        return self.ids[key]

    def let(self, code: _Code, base: str, expr: str) -> str:
        name = self.fresh(base)
        code(f"{name} = {expr}")
        return name

    # ------------------------------------------------------------ functions

    def function_for(self, r: Reducer, kind: str, label: str) -> str:
        """Name of the function applying `r` to a list of `kind`: "L" (leaves),
        "L1" (contiguous leaves: step 1 is a constant, so loads vectorize), "V"
        (values) or "T" (values with tags, note [lone leaves])."""
        name = f"_{label}_{kind}" + (f"__{self.region}" if self.region else "")
        if name not in self.functions:
            self.functions[name] = None  # reserve: recursion refers to itself
            code = _Code()
            if kind == "L1":
                code("step = 1")
            lst = {"L": Leaves("lo", "step", "m"), "L1": Leaves("lo", "1", "m"),
                   "V": Values("vals", "m", "off", "step"), "T": Values("vals", "m", "off", "step", "tags")}[kind]
            split = self.self_split(label, r) if kind in ("L", "L1") else None
            if isinstance(r, Pairwise):
                res = self.pairwise_body(r, lst, code, name, kind)
            elif split is not None:
                res = self.split_driver(r, split, lst, code, label, kind)
            else:
                res = self.emit(r, lst, code)
            code(f"return {res}")
            params = {"L": ("a", "b", "lo", "step", "m"), "L1": ("a", "b", "lo", "m"),
                      "V": ("vals", "off", "step", "m"), "T": ("a", "b", "vals", "tags", "off", "step", "m")}[kind]
            what = "the leaves lo, lo + step, ..." if kind in ("L", "L1") else "vals[off], vals[off + step], ..."
            lines = tuple(in_region(line, self.region) for line in code.lines) if self.region else tuple(code.lines)
            doc = f"{label}: reduce {what} (m of them)" + (f", arithmetic {self.region}." if self.region else ".")
            self.functions[name] = Function(name, params, lines, doc)
        return name

    def call(self, r: Reducer, lst, code: _Code, label: str) -> str:
        t = self.typed
        if isinstance(lst, Values) and lst.tags:
            fn = self.function_for(r, "T", label)
            return self.let(code, "r", f"{fn}(a, b, {lst.vals}, {lst.tags}, {t(lst.off)}, {t(lst.step)}, {t(lst.m)})")
        if isinstance(lst, Values):
            fn = self.function_for(r, "V", label)
            return self.let(code, "r", f"{fn}({lst.vals}, {t(lst.off)}, {t(lst.step)}, {t(lst.m)})")
        if lst.step == "1":
            fn = self.function_for(r, "L1", label)
            return self.let(code, "r", f"{fn}(a, b, {t(lst.lo)}, {t(lst.m)})")
        fn = self.function_for(r, "L", label)
        return self.let(code, "r", f"{fn}(a, b, {t(lst.lo)}, {t(lst.step)}, {t(lst.m)})")

    def typed(self, arg: str) -> str:
        """A call argument; with `typed_ints` a literal as np.int64 (numba compiles
        a function once more for each literal argument it meets)."""
        return f"np.int64({arg})" if self.typed_ints and arg.isdigit() else arg

    # ------------------------------------------------------------ tagged value lists (note [lone leaves])

    def new_tags(self, code: _Code, count: str, source) -> str | None:
        """The tags array of a value list of `count` operands being built from the list
        `source`, or None: without tagging, or from partial sums only."""
        if not self.tagging or (isinstance(source, Values) and not source.tags):
            return None
        self.uses_tags = True
        tags = self.fresh("tg")
        code(f"{tags} = np.full({count}, -1, np.int64)")
        return tags

    def set_tag(self, code: _Code, tags: str | None, at: str, sub) -> None:
        """tags[at] for the result of reducing `sub`: the leaf it is when `sub` holds one operand
        (an order applied to one operand returns it), else -1 (a node made it)."""
        if tags is None:
            return
        if isinstance(sub, Leaves):
            code(f"{tags}[{at}] = {sub.lo}" + ("" if sub.m == "1" else f" if {sub.m} == 1 else -1"))
        elif sub.tags:
            code(f"{tags}[{at}] = {self.sub_tag(code, sub)}")

    def sub_tag(self, code: _Code, sub: Values) -> str:
        """The tag of the result of reducing the tagged list `sub`: its operand's when it holds one,
        PHANTOM when it holds phantoms only (note [phantoms]: no node was made), else -1."""
        one = f"{sub.tag('0')} if {sub.m} == 1 else -1"
        if not self.phantom_tags:
            return one
        t, q = self.fresh("st"), self.fresh("q")
        code(f"{t} = {one}")
        code(f"if {sub.m} > 1:")
        with code.indent():
            code(f"{t} = {PHANTOM}")
            code(f"for {q} in range({sub.m}):")
            with code.indent():
                code(f"if {sub.tag(q)} != {PHANTOM}:")
                with code.indent():
                    code(f"{t} = -1")
                    code("break")
        return t

    def join(self, u: str, tu: str, v: str, tv: str) -> str:
        """One binary node over operands u, v whose tags are tu, tv (`-1`: a value)."""
        return f"_add({u}, {v})" if tu == tv == "-1" else f"_join(a, b, {u}, {tu}, {v}, {tv})"

    # ------------------------------------------------------------ reducers

    def emit(self, r: Reducer, lst, code: _Code) -> str:
        """Append code reducing `lst` by `r`; return the variable holding the result."""
        method = getattr(self, "emit_" + type(r).__name__.lower(), None)
        if method is None:
            raise CompileError(f"the loop backends cannot express {type(r).__name__}")
        return method(r, lst, code)

    def emit_call(self, r: Call, lst, code):
        return self.call(self.kernel.order(r.name), lst, code, f"order_{r.name}")

    def region_fits(self, name: str, reducer=None) -> bool:
        """Raise CompileError for a region the loops cannot run (note [regions in loops])."""
        outer, inner = self.arith(), self.kernel.named_arithmetic(name)
        fused_inside = any(isinstance(x, FusedChain) or (isinstance(x, Table) and any(x.fused))
                           for x in walk_orders(self.kernel, reducer or Fold()))
        if fused_inside and not stores_fused(self.kernel.arithmetic, inner):
            raise CompileError(f"using({name}, ...): fused nodes inside a region compile only where the region "
                               "changes nothing but a narrower accumulator (their results stored into it)")
        if get_format(inner.accumulator).precision > get_format(outer.accumulator).precision:
            raise CompileError(f"using({name}, ...): its {inner.accumulator} accumulator is wider than the "
                               f"{outer.accumulator} around it; one rounding of the exact sum cannot be expressed")
        return True

    def emit_witharithmetic(self, r: WithArithmetic, lst, code):
        """note [regions in loops]"""
        self.region_fits(r.name, r.reducer)
        # a region over one operand makes no node (docs/fps.md, `using`): a leaf is formed by the
        # node that takes it, a value (maybe wider than the region's carrier) goes on as it is
        return self.unless_one(lst, code, lambda: self._region(r, lst, code))

    def unless_one(self, lst, code, body) -> str:
        """`body()` (code emitted in place), or the one operand of `lst` as it is when it holds
        one: an order applied to one operand returns it, making no node."""
        out = self.fresh("r")
        code(f"if {lst.m} == 1:")
        with code.indent():
            code(f"{out} = {self.emit(Fold(), lst, code)}")
        code("else:")
        with code.indent():
            code(f"{out} = {body()}")
        return out

    def _region(self, r: WithArithmetic, lst, code):
        saved, self.region = self.region, r.name
        self.regions_used.add(r.name)
        try:
            res = self.call(r.reducer, lst, code, f"region{self.node_id(r)}")
        finally:
            self.region = saved
        # widened to the enclosing carrier, so its additions round as the enclosing arithmetic says
        return self.let(code, "w", f"_ACC({res})")

    def emit_guard(self, r: Guard, lst, code):
        res = self.fresh("r")
        for i, case in enumerate(r.cases):
            code(f"{'if' if i == 0 else 'elif'} {py_cond(case.cond, m=lst.m)}:")
            with code.indent():
                code(f"{res} = {self.emit(case.reducer, lst, code)}")
        code("else:")
        with code.indent():
            if r.otherwise is None:
                code(f"raise ValueError('no case of the spec applies to this length')")
            else:
                code(f"{res} = {self.emit(r.otherwise, lst, code)}")
        return res

    def emit_fold(self, r: Fold, lst, code):
        acc = self.fresh("acc")
        i = self.fresh("i")
        if isinstance(lst, Values):
            first, rng = (f"{lst.m} - 1", f"range({lst.m} - 2, -1, -1)") if r.reverse else ("0", f"range(1, {lst.m})")
            code(f"{acc} = {lst.at(first)}")
            if lst.tags:
                # the first node may take a leaf (or two); every later one adds to a partial sum
                at = self.fresh("at")
                code(f"{at} = {lst.tag(first)}")
                code(f"for {i} in {rng}:")
                with code.indent():
                    code(f"{acc} = {self.join(acc, at, lst.at(i), lst.tag(i))}")
                    code(f"{at} = {_joined_tag(at, lst.tag(i))}")
                return acc
            code(f"for {i} in {rng}:")
            with code.indent():
                code(f"{acc} = _add({acc}, {lst.at(i)})")
            return acc
        lo, step, m = lst.lo, lst.step, lst.m
        if not r.reverse and self.arith().product == "fma_first":
            # the first node joins two leaves: _add_leaves says which product is fused
            code(f"{acc} = _term(a, b, {lo}) if {m} == 1 else _add_leaves(a, b, {lo}, {_plus(lo, step)})")
            code(f"for {i} in range(2, {m}):")
            with code.indent():
                code(f"{acc} = _add_leaf({acc}, a, b, {_plus(lo, _times(i, step))})")
            return acc
        if not r.reverse:
            code(f"{acc} = _term(a, b, {lo})")
            code(f"for {i} in range(1, {m}):")
            with code.indent():
                code(f"{acc} = _add_leaf({acc}, a, b, {_plus(lo, _times(i, step))})")
            return acc
        # the first node joins the last two leaves; note [leaf products] fixes
        # which of two leaf products is rounded, so it is written out
        code(f"if {m} == 1:")
        with code.indent():
            code(f"{acc} = _term(a, b, {lo})")
        code("else:")
        with code.indent():
            code(f"{acc} = _add_leaves(a, b, {lo} + ({m} - 2) * {step}, {lo} + ({m} - 1) * {step})")
            code(f"for {i} in range({m} - 3, -1, -1):")
            with code.indent():
                code(f"{acc} = _add_leaf({acc}, a, b, {_plus(lo, _times(i, step))})")
        return acc

    def emit_pairwise(self, r: Pairwise, lst, code):
        return self.call(r, lst, code, f"pairwise{self.node_id(r)}")

    def pairwise_body(self, r: Pairwise, lst, code: _Code, name: str, kind: str) -> str:
        if self.iterative_splits:
            return self.pairwise_walk(r, lst, code, kind)
        h = self.fresh("h")
        split = "m // 2" if r.split is None else py_int(r.split, m="m")
        if isinstance(lst, Values):
            code("if m == 1:")
            with code.indent():
                code("return vals[off]")
            code(f"{h} = {split}")
            _check_split(code, h)
            if lst.tags:
                left, right = (f"{name}(a, b, vals, tags, {at}, step, {cnt})"
                               for at, cnt in (("off", h), (f"off + {h} * step", f"m - {h}")))
                if self.phantom_tags:   # a half of phantoms only is still a phantom (note [phantoms])
                    tl = self.sub_tag(code, Values(lst.vals, h, "off", "step", "tags"))
                    tr = self.sub_tag(code, Values(lst.vals, f"m - {h}", f"off + {h} * step", "step", "tags"))
                else:
                    tl, tr = f"(tags[off] if {h} == 1 else -1)", f"(tags[off + {h} * step] if m - {h} == 1 else -1)"
                return self.let(code, "r", self.join(left, tl, right, tr))
            return self.let(code, "r", f"_add({name}(vals, off, step, {h}), {name}(vals, off + {h} * step, step, m - {h}))")
        def rec(lo: str, m: str) -> str:
            return f"{name}(a, b, {lo}, {m})" if kind == "L1" else f"{name}(a, b, {lo}, step, {m})"
        code("if m == 1:")
        with code.indent():
            code("return _term(a, b, lo)")
        code(f"{h} = {split}")
        _check_split(code, h)
        code("if m == 2:")
        with code.indent():
            code("return _add_leaves(a, b, lo, lo + step)")
        code(f"if {h} == 1:")
        with code.indent():
            code(f"return _add_leaf({rec('lo + step', 'm - 1')}, a, b, lo)")
        code(f"if {h} == m - 1:")
        with code.indent():
            code(f"return _add_leaf({rec('lo', h)}, a, b, lo + {h} * step)")
        return self.let(code, "r", f"_add({rec('lo', h)}, {rec(f'lo + {h} * step', f'm - {h}')})")

    def pairwise_walk(self, r: Pairwise, lst, code: _Code, kind: str) -> str:
        """note [pairwise walk]: the halving of `pairwise_body` as a loop over an
        explicit stack of tasks and a stack of finished values."""
        tl, tm, vs, tp, vp = (self.fresh(x) for x in ("tl", "tm", "vs", "tp", "vp"))
        cl, cm, h, i = (self.fresh(x) for x in ("cl", "cm", "h", "i"))
        leaves = kind in ("L", "L1")
        split = f"{cm} // 2" if r.split is None else py_int(r.split, m=cm)
        start = "lo" if leaves else "off"
        code(f"{tl} = np.empty({PAIRWISE_STACK}, np.int64)   # tasks: a start (or a leaf)")
        code(f"{tm} = np.empty({PAIRWISE_STACK}, np.int64)   # and its length, or {ADD_TASK}: add the top two "
             f"values, {LEAF_TASK}: add the leaf")
        # values of the list's own dtype: a wider operand is added unrounded, as by `pairwise_body`
        new_vals = "_vals({})" if leaves else "np.empty({}, vals.dtype)"
        code(f"{vs} = {new_vals.format(PAIRWISE_STACK)}")
        vt = self.fresh("vt") if not leaves and lst.tags else None
        if vt:
            code(f"{vt} = np.full({PAIRWISE_STACK}, -1, np.int64)   # the tag of each finished value")
        code(f"{tl}[0] = {start}")
        code(f"{tm}[0] = m")
        code(f"{tp} = 1")
        code(f"{vp} = 0")
        code(f"while {tp} > 0:")
        with code.indent():
            code(f"{tp} -= 1")
            code(f"{cl} = {tl}[{tp}]")
            code(f"{cm} = {tm}[{tp}]")
            code(f"if {cm} == {ADD_TASK}:")
            with code.indent():
                code(f"{vp} -= 1")
                if vt:
                    code(f"{vs}[{vp} - 1] = {self.join(f'{vs}[{vp} - 1]', f'{vt}[{vp} - 1]', f'{vs}[{vp}]', f'{vt}[{vp}]')}")
                    code(f"{vt}[{vp} - 1] = {_joined_tag(f'{vt}[{vp} - 1]', f'{vt}[{vp}]')}")
                else:
                    code(f"{vs}[{vp} - 1] = _add({vs}[{vp} - 1], {vs}[{vp}])")
                code("continue")
            if leaves:
                code(f"if {cm} == {LEAF_TASK}:")
                with code.indent():
                    code(f"{vs}[{vp} - 1] = _add_leaf({vs}[{vp} - 1], a, b, {cl})")
                    code("continue")
            def grow(stack: str, bigger: str, used: str) -> None:
                # a copy by a loop: numba compiles a slice assignment for seconds
                grown = self.fresh("grown")
                code(f"{grown} = {bigger}")
                code(f"for {i} in range({used}):")
                with code.indent():
                    code(f"{grown}[{i}] = {stack}[{i}]")
                code(f"{stack} = {grown}")
            code(f"if {vp} == {vs}.shape[0]:")
            with code.indent():
                grow(vs, new_vals.format(f"2 * {vp}"), vp)
                if vt:
                    grow(vt, f"np.full(2 * {vp}, -1, np.int64)", vp)
            code(f"if {tp} + 3 > {tl}.shape[0]:")
            with code.indent():
                for stack in (tl, tm):
                    grow(stack, f"np.empty(2 * {tp} + 3, np.int64)", tp)
            code(f"if {cm} == 1:")
            with code.indent():
                code(f"{vs}[{vp}] = " + ("_term(a, b, " if leaves else "vals[") + cl + (")" if leaves else "]"))
                if vt:
                    code(f"{vt}[{vp}] = tags[{cl}]")
                code(f"{vp} += 1")
                code("continue")
            code(f"{h} = {split}")
            code(f"if {h} < 1 or {h} > {cm} - 1:")
            with code.indent():
                code("raise ValueError('a pairwise split falls outside the list')")

            def push(at: str, length: str) -> None:
                code(f"{tl}[{tp}] = {at}")
                code(f"{tm}[{tp}] = {length}")
                code(f"{tp} += 1")
            if leaves:
                code(f"if {cm} == 2:")
                with code.indent():
                    code(f"{vs}[{vp}] = _add_leaves(a, b, {cl}, {cl} + step)")
                    code(f"{vp} += 1")
                    code("continue")
                code(f"if {h} == 1:")          # the first leaf joins the sum of the rest
                with code.indent():
                    push(cl, str(LEAF_TASK))
                    push(f"{cl} + step", f"{cm} - 1")
                    code("continue")
                code(f"if {h} == {cm} - 1:")   # the last leaf joins the sum of the others
                with code.indent():
                    push(f"{cl} + {h} * step", str(LEAF_TASK))
                    push(cl, h)
                    code("continue")
            push("0", str(ADD_TASK))
            push(f"{cl} + {h} * step", f"{cm} - {h}")
            push(cl, h)
        return self.let(code, "r", f"{vs}[0]")

    def materialize(self, lst: Leaves, code: _Code) -> Values:
        """Leaves as values (each term rounded into the accumulator); tagged as the
        leaves they are where a node forms its leaves itself (note [lone leaves])."""
        vals, i = self.fresh("v"), self.fresh("i")
        code(f"{vals} = _vals({lst.m})")
        tags = self.new_tags(code, lst.m, lst) if self.leafy() else None
        code(f"for {i} in range({lst.m}):")
        with code.indent():
            code(f"{vals}[{i}] = _term(a, b, {_plus(lst.lo, _times(i, lst.step))})")
            if tags:
                code(f"{tags}[{i}] = {_plus(lst.lo, _times(i, lst.step))}")
        return Values(vals, lst.m, tags=tags)

    def emit_treereduce(self, r: TreeReduce, lst, code):
        if isinstance(lst, Leaves):
            lst = self.materialize(lst, code)
        else:
            w, i = self.fresh("w"), self.fresh("i")
            code(f"{w} = _vals({lst.m})")
            tags = self.new_tags(code, lst.m, lst)
            code(f"for {i} in range({lst.m}):")
            with code.indent():
                code(f"{w}[{i}] = {lst.at(i)}")
                if tags:
                    code(f"{tags}[{i}] = {lst.tag(i)}")
            lst = Values(w, lst.m, tags=tags)
        cnt, h, i = self.fresh("cnt"), self.fresh("h"), self.fresh("i")
        code(f"{cnt} = {lst.m}")
        code(f"while {cnt} > 1:")
        with code.indent():
            code(f"{h} = ({cnt} + 1) // 2")
            code(f"for {i} in range({cnt} - {h}):")
            with code.indent():
                if lst.tags:
                    t = lst.tags
                    code(f"{lst.vals}[{i}] = {self.join(f'{lst.vals}[{i}]', f'{t}[{i}]', f'{lst.vals}[{i} + {h}]', f'{t}[{i} + {h}]')}")
                    code(f"{t}[{i}] = {_joined_tag(f'{t}[{i}]', f'{t}[{i} + {h}]')}")
                else:
                    code(f"{lst.vals}[{i}] = _add({lst.vals}[{i}], {lst.vals}[{i} + {h}])")
            code(f"{cnt} = {h}")
        return self.let(code, "r", f"{lst.vals}[0]")

    def emit_fusedchain(self, r: FusedChain, lst, code):
        if isinstance(lst, Values):
            raise CompileError("a fused chain over partial sums (not leaves) cannot be expressed: "
                               "a fused node takes at most one partial sum")
        self.require_fused()
        if self.arith().fused.output != self.arith().accumulator:
            return self.let(code, "r", f"_round_acc({self.emit_fusedchain_nodes(r, lst, code, True)})")
        return self.emit_fusedchain_nodes(r, lst, code, False)

    def emit_fusedchain_nodes(self, r: FusedChain, lst, code, stored: bool):
        """A chain's nodes; `stored`: each node's result rounded into the accumulator before the next
        takes it (fpspec.arith.model note [fused output]; the caller rounds the last)."""
        node = (lambda call: f"_round_acc({call})") if stored else (lambda call: call)
        res, w, s = self.fresh("r"), self.fresh("w"), self.fresh("s")
        code(f"if {lst.m} == 1:")
        with code.indent():
            code(f"{res} = _term(a, b, {lst.lo})")
        code("else:")
        with code.indent():
            code(f"{w} = {py_int(r.width, m=lst.m)}")
            if r.at is None:
                code(f"{res} = _fused_range(a, b, {lst.lo}, {lst.step}, min({w}, {lst.m}), _ZERO)")
                code(f"{s} = {w}")
                code(f"while {s} < {lst.m}:")
                with code.indent():
                    code(f"{res} = _fused_range(a, b, {_plus(lst.lo, _times(s, lst.step))}, {lst.step}, "
                         f"min({w}, {lst.m} - {s}), {node(res)})")
                    code(f"{s} += {w}")
                return res
            # the short group (q operands) is group p.  A first group of one shows in the tree as
            # one more leaf of the next node (fpspec.tree.fused_chain), a node of W + 1 products: the
            # fused model takes it as one node where W < the fused w, else (W = w) as a node of the
            # one product alone whose result is the next node's c (fpspec.arith.evaluate note [fused nodes])
            q, p, g, j = self.fresh("q"), self.fresh("p"), self.fresh("g"), self.fresh("j")
            code(f"{q} = {lst.m} % {w}")
            code(f"{p} = min({py_int(r.at, m=lst.m)}, {lst.m} // {w}) if {q} else -1")
            code(f"{g} = {q} if {p} == 0 else min({w}, {lst.m})")
            code(f"{j} = 1")
            code(f"if {g} == 1 and {w} < {self.arith().fused.w}:")
            with code.indent():
                code(f"{g} = {w} + 1")
                code(f"{j} = 2")
            code(f"{res} = _fused_range(a, b, {lst.lo}, {lst.step}, {g}, _ZERO)")
            code(f"{s} = {g}")
            code(f"while {s} < {lst.m}:")
            with code.indent():
                code(f"{g} = {q} if {j} == {p} else {w}")
                code(f"{res} = _fused_range(a, b, {_plus(lst.lo, _times(s, lst.step))}, {lst.step}, {g}, "
                     f"{node(res)})")
                code(f"{s} += {g}")
                code(f"{j} += 1")
        return res

    def emit_table(self, r: Table, lst, code):
        if r.size == 1:
            return self._table(r, lst, code)
        # a literal applied to one operand returns it (docs/fps.md): the outer order of a tail
        # whose body took every operand holds only the body's result
        return self.unless_one(lst, code, lambda: self._table(r, lst, code))

    def _table(self, r: Table, lst, code):
        prefix = self.table_constants(r)
        steps = len(r.fused)
        res = self.fresh("r")
        code(f"if {lst.m} != {r.size}:")
        with code.indent():
            code(f"raise ValueError('a literal tree over {r.size} operands met a different count')")
        if steps == 0:
            code(f"{res} = " + (f"_term(a, b, {lst.lo})" if isinstance(lst, Leaves) else lst.at("0")))
            return res
        slots, s = self.fresh("slots"), self.fresh("s")
        code(f"{slots} = _vals({r.size + steps})")
        if isinstance(lst, Values):
            if any(r.fused):
                raise CompileError("a literal tree with fused nodes over partial sums cannot be expressed")
            i = self.fresh("i")
            tags = self.new_tags(code, str(r.size + steps), lst)
            code(f"for {i} in range({r.size}):")
            with code.indent():
                code(f"{slots}[{i}] = {lst.at(i)}")
                if tags:
                    code(f"{tags}[{i}] = {lst.tag(i)}")
            step_call = f"_table_step_values({slots}, {prefix}_KIDS, {prefix}_OFFS, {s})"
            if tags:
                kids, offs = f"{prefix}_KIDS", f"{prefix}_OFFS"
                u, v = f"{kids}[{offs}[{s}]]", f"{kids}[{offs}[{s}] + 1]"
                step_call = self.join(f"{slots}[{u}]", f"{tags}[{u}]", f"{slots}[{v}]", f"{tags}[{v}]")
        else:
            if any(r.fused):
                self.require_fused()
                _check_fused_table(r)
            step_call = (f"_table_step(a, b, {lst.lo}, {lst.step}, {r.size}, {slots}, "
                         f"{prefix}_KIDS, {prefix}_OFFS, {prefix}_FUSED, {s})")
        code(f"for {s} in range({steps}):")
        with code.indent():
            code(f"{slots}[{r.size} + {s}] = {step_call}")
            if isinstance(lst, Values) and tags and self.phantom_tags:   # a node over phantoms only: one
                code(f"{tags}[{r.size} + {s}] = {_joined_tag(f'{tags}[{u}]', f'{tags}[{v}]')}")
        code(f"{res} = {slots}[{r.size + steps - 1}]")
        return res

    def table_constants(self, r: Table) -> str:
        key = id(r)
        if key not in self.tables:
            self.tables[key] = (f"_T{len(self.tables)}", r)
        return self.tables[key][0]

    def emit_lanes(self, r: Lanes, lst, code):
        k = self.let(code, "k", py_int(r.k, m=lst.m))
        if r.left is not None:
            return self.lanes_left(r, lst, code, k)
        if not (isinstance(lst, Leaves) and self.leafy()):
            return self.lanes_body(r, lst, code, k)
        # every lane one leaf: the outer order over the leaves themselves (note [lone leaves])
        res = self.fresh("r")
        code(f"if {lst.m} <= {k}:")
        with code.indent():
            code(f"{res} = {self.emit(r.outer, lst, code)}")
        code("else:")
        with code.indent():
            code(f"{res} = {self.lanes_body(r, lst, code, k)}")
        return res

    def lanes_body(self, r: Lanes, lst, code, k: str):
        if (isinstance(lst, Leaves) and isinstance(r.k, Const) and 2 <= r.k.value <= MAX_UNROLLED_LANES
                and r.inner == Fold() and not self.leafy()
                and not any(isinstance(x, WithArithmetic) for x in walk_orders(self.kernel, r.outer))):
            # its joins are written inline, in the main arithmetic
            res = self.fresh("r")
            code(f"if {lst.m} >= {r.k.value}:")
            with code.indent():
                code(f"{res} = {self.lanes_unrolled(r, lst, code)}")
            code("else:")
            with code.indent():
                code(f"{res} = {self.lanes_loop(r, lst, code, k)}")
            return res
        return self.lanes_loop(r, lst, code, k)

    def lanes_unrolled(self, r: Lanes, lst: Leaves, code) -> str:
        """k lanes (k a constant, every lane non-empty) as k scalar accumulators:
        the k independent adds of a row vectorize, none is reassociated; the
        outer order over the k lane sums is a fixed tree, written out."""
        k = r.k.value
        lo, step, m = lst.lo, lst.step, lst.m
        lanes = [self.fresh("l") for _ in range(k)]
        rows, row, base = self.fresh("rows"), self.fresh("row"), self.fresh("base")
        if self.vector_lanes and step == "1":
            # note [vector lanes]: the whole rows as k-wide vector adds
            code(f"{rows} = {m} // {k}")
            code(f"{', '.join(lanes)} = _lane_folds(a, {lo}, {rows}, {k})")
        else:
            for j, v in enumerate(lanes):
                code(f"{v} = _term(a, b, {_plus(lo, _times(str(j), step))})")
            code(f"{rows} = {m} // {k}")
            code(f"for {row} in range(1, {rows}):")
            with code.indent():
                code(f"{base} = {_plus(lo, _times(_times(row, str(k)), step))}")
                for j, v in enumerate(lanes):
                    code(f"{v} = _add_leaf({v}, a, b, {_plus(base, _times(str(j), step))})")
        code(f"{base} = {_plus(lo, _times(_times(rows, str(k)), step))}")
        for j, v in enumerate(lanes[:-1]):
            code(f"if {m} % {k} > {j}:")
            with code.indent():
                code(f"{v} = _add_leaf({v}, a, b, {_plus(base, _times(str(j), step))})")
        # the outer order over exactly k operands is one fixed tree
        from fpspec.compile.trees import reduce_list

        tree = reduce_list(self.kernel, r.outer, list(range(k)), k)
        values: list[str] = []
        for t in postorder(tree):
            if isinstance(t, int):
                values.append(lanes[t])
            elif t.fused:
                raise CompileError("fused nodes over lane sums cannot be expressed")
            else:
                right, left = values.pop(), values.pop()
                values.append(self.let(code, "s", f"_add({left}, {right})"))
        return values[0]

    def lanes_loop(self, r: Lanes, lst, code, k: str):
        nl = self.fresh("nl")
        code(f"{nl} = min({k}, {lst.m})")
        lanes, j = self.fresh("lanes"), self.fresh("j")
        # lanes folded in their own arithmetic (using(NAME, seq)) keep the loop below, in NAME's functions
        part = r.inner.name if isinstance(r.inner, WithArithmetic) and r.inner.reducer == Fold() else None
        if part is not None and not self.region_fits(part):
            part = None
        region = (lambda line: in_region(line, part)) if part else (lambda line: line)
        first_fused = (self.kernel.named_arithmetic(part) if part else self.arith()).product == "fma_first"
        if isinstance(lst, Leaves) and (r.inner == Fold() or part is not None) and not first_fused:
            code(region(f"{lanes} = _vals({nl})"))
            # k accumulators side by side: the inner loop runs across lanes,
            # which vectorizes without reassociating any lane
            if part is not None:
                self.regions_used.add(part)
            rows, row, base = self.fresh("rows"), self.fresh("row"), self.fresh("base")
            lo, step, m = lst.lo, lst.step, lst.m
            code(f"for {j} in range({nl}):")
            with code.indent():
                code(region(f"{lanes}[{j}] = _term(a, b, {_plus(lo, _times(j, step))})"))
            code(f"{rows} = {m} // {k}")
            code(f"for {row} in range(1, {rows} + (1 if {m} % {k} > 0 else 0)):")
            with code.indent():
                code(f"{base} = {_plus(lo, _times(_times(row, k), step))}")
                code(f"for {j} in range(min({k}, {m} - {row} * {k})):")
                with code.indent():
                    code(region(f"{lanes}[{j}] = _add_leaf({lanes}[{j}], a, b, {_plus(base, _times(j, step))})"))
            if part is not None:       # the lane sums widened to the enclosing carrier (as emit_witharithmetic)
                wide = self.fresh("lanes")
                code(f"{wide} = _vals({nl})")
                code(f"for {j} in range({nl}):")
                with code.indent():
                    code(f"{wide}[{j}] = _ACC({lanes}[{j}])")
                lanes = wide
            tags = self.new_tags(code, nl, lst)
            if tags:
                code(f"for {j} in range({nl}):")
                with code.indent():
                    self.set_tag(code, tags, j, Leaves(_plus(lo, _times(j, step)), _times(step, k),
                                                       f"(({m} - {j} + {k} - 1) // {k})"))
        else:
            # the lane results are values of this code (a part's widened by emit_witharithmetic)
            code(f"{lanes} = _vals({nl})")
            lm = self.fresh("lm")
            tags = self.new_tags(code, nl, lst)
            code(f"for {j} in range({nl}):")
            with code.indent():
                code(f"{lm} = ({lst.m} - {j} + {k} - 1) // {k}")
                if isinstance(lst, Leaves):
                    sub = Leaves(_plus(lst.lo, _times(j, lst.step)), _times(lst.step, k), lm)
                else:
                    sub = Values(lst.vals, lm, _plus(lst.off, _times(j, lst.step)), _times(lst.step, k), lst.tags)
                code(f"{lanes}[{j}] = {self.emit(r.inner, sub, code)}")
                self.set_tag(code, tags, j, sub)
        return self.emit(r.outer, Values(lanes, nl, tags=tags), code)

    def lanes_left(self, r: Lanes, lst, code, k: str):
        """Lanes over the first m - m % u operands (u = k without `unroll`); the
        leftovers join lane 0 through `left` (ir.Lanes); fewer than u operands:
        `left` alone."""
        # a sequential `left` over leaves adds each leftover leaf to lane 0 as
        # a leaf (an FMA where the arithmetic says so: OpenBLAS's sgemm tail)
        fold_left = isinstance(lst, Leaves) and r.left == Fold()
        if fold_left:
            self.require_fma_last("lanes whose leftover leaves fold into lane 0")
        u = k if r.unroll is None else self.let(code, "u", py_int(r.unroll, m=lst.m))
        res, p, lanes, j, lm = (self.fresh(x) for x in ("r", "p", "lanes", "j", "lm"))
        if r.unroll is not None:
            code(f"if {u} < 1 or {u} % {k} != 0:")
            with code.indent():
                code("raise ValueError('lanes unroll must be a positive multiple of the lane count')")
        code(f"if {lst.m} < {u}:")
        with code.indent():
            code(f"{res} = {self.emit(r.left, lst, code)}")
        code("else:")
        with code.indent():
            code(f"{p} = {lst.m} - {lst.m} % {u}")
            code(f"{lm} = {p} // {k}")
            code(f"{lanes} = _vals({k})")
            tags = self.new_tags(code, k, lst)
            code(f"for {j} in range({k}):")
            with code.indent():
                if isinstance(lst, Leaves):
                    sub = Leaves(_plus(lst.lo, _times(j, lst.step)), _times(lst.step, k), lm)
                else:
                    sub = Values(lst.vals, lm, _plus(lst.off, _times(j, lst.step)), _times(lst.step, k), lst.tags)
                code(f"{lanes}[{j}] = {self.emit(r.inner, sub, code)}")
                self.set_tag(code, tags, j, sub)
            code(f"if {p} < {lst.m}:")
            with code.indent():
                if fold_left:
                    # lane 0 a lone leaf: its first leftover fuses into its rounded product,
                    # as a node of two leaves does (product = fma)
                    i = self.fresh("i")
                    code(f"for {i} in range({p}, {lst.m}):")
                    with code.indent():
                        code(f"{lanes}[0] = _add_leaf({lanes}[0], a, b, {_plus(lst.lo, _times(i, lst.step))})")
                else:
                    ext, i = self.fresh("ext"), self.fresh("i")
                    code(f"{ext} = _vals(1 + {lst.m} - {p})")
                    ext_tags = self.new_tags(code, f"1 + {lst.m} - {p}", lst)
                    code(f"{ext}[0] = {lanes}[0]")
                    if ext_tags:
                        code(f"{ext_tags}[0] = {tags}[0]")
                    code(f"for {i} in range({lst.m} - {p}):")
                    with code.indent():
                        at = _plus(lst.lo, _times(_plus(p, i), lst.step)) if isinstance(lst, Leaves) else None
                        value = f"_term(a, b, {at})" if at else lst.at(_plus(p, i))
                        code(f"{ext}[1 + {i}] = {value}")
                        if ext_tags:
                            code(f"{ext_tags}[1 + {i}] = {at or lst.tag(_plus(p, i))}")
                    code(f"{lanes}[0] = {self.emit(r.left, Values(ext, _plus('1', f'{lst.m} - {p}'), tags=ext_tags), code)}")
                if tags:
                    code(f"{tags}[0] = -1")
            code(f"{res} = {self.emit(r.outer, Values(lanes, k, tags=tags), code)}")
        return res

    def emit_vlanes(self, r: VLanes, lst, code):
        """Each lane's operands (whole vectors, then its leftover) gathered in lane order,
        `inner` over them; `outer` over the lane results.  Leaves are gathered as leaves
        (copies of their terms, `gather_leaves`) or as a values list tagged with the leaves
        they are (note [lone leaves]), so every node still forms its own leaves."""
        v = self.let(code, "vw", py_int(r.v, m=lst.m))
        k = self.let(code, "k", py_int(r.k, m=lst.m))
        code(f"if {v} < 1 or {k} < 1:")
        with code.indent():
            code("raise ValueError('a vector width and a lane count must be >= 1')")
        nv = self.let(code, "nv", f"{lst.m} // {v}")
        rest = self.let(code, "vr", f"{lst.m} % {v}")
        nl = self.let(code, "nl", f"min({k}, max({nv}, {rest}))")
        lanes, j, buf, cnt, i, t, c = (self.fresh(x) for x in ("lanes", "j", "buf", "cnt", "i", "t", "c"))
        gather = isinstance(lst, Leaves) and self.gather_leaves
        # a lane's operand number c is operand `at` of the list; `put` stores it in the lane's buffers
        if gather:
            put = lambda at: [f"{buf}[{c}] = {_plus(lst.lo, _times(at, lst.step))}"]   # noqa: E731
        else:
            btags = self.fresh("bt") if (isinstance(lst, Leaves) and self.tagging) or \
                (isinstance(lst, Values) and lst.tags) else None

            def put(at):
                if isinstance(lst, Leaves):
                    leaf = _plus(lst.lo, _times(at, lst.step))
                    return [f"{buf}[{c}] = _term(a, b, {leaf})"] + ([f"{btags}[{c}] = {leaf}"] if btags else [])
                return [f"{buf}[{c}] = {lst.at(at)}"] + ([f"{btags}[{c}] = {lst.tag(at)}"] if btags else [])
        code(f"{lanes} = _vals({nl})")
        tags = self.new_tags(code, nl, lst)
        code(f"for {j} in range({nl}):")
        with code.indent():
            code(f"{cnt} = {v} * ({nv} // {k} + (1 if {j} < {nv} % {k} else 0)) "
                 f"+ max(0, ({rest} - {j} + {k} - 1) // {k})")
            code(f"{buf} = np.empty({cnt}, np.int64)" if gather else f"{buf} = _vals({cnt})")
            if not gather and btags:
                code(f"{btags} = np.full({cnt}, -1, np.int64)")
            code(f"{c} = 0")
            code(f"for {i} in range({j}, {nv}, {k}):")
            with code.indent():
                code(f"for {t} in range({v}):")
                with code.indent():
                    for line in put(f"({i} * {v} + {t})"):
                        code(line)
                    code(f"{c} += 1")
            code(f"for {t} in range({j}, {rest}, {k}):")
            with code.indent():
                for line in put(f"({nv} * {v} + {t})"):
                    code(line)
                code(f"{c} += 1")
            if gather:
                # the lane's leaves as terms of their own: the inner order forms them as leaves
                fn = self.function_for(r.inner, "L1", f"vlanes{self.node_id(r)}")
                code(f"{lanes}[{j}] = {fn}(a[{buf}], b[{buf}], 0, {cnt})")
                if tags:
                    code(f"{tags}[{j}] = {buf}[0] if {cnt} == 1 else -1")
            else:
                sub = Values(buf, cnt, tags=btags)
                code(f"{lanes}[{j}] = {self.emit(r.inner, sub, code)}")
                self.set_tag(code, tags, j, sub)
        return self.emit(r.outer, Values(lanes, nl, tags=tags), code)

    def emit_blocks(self, r: Blocks, lst, code):
        bs = self.let(code, "bs", py_int(r.b, m=lst.m))
        if not (isinstance(lst, Leaves) and self.leafy()):
            return self.blocks_body(r, lst, code, bs)
        # blocks of one leaf: the outer order over the leaves themselves (note [lone leaves])
        res = self.fresh("r")
        code(f"if {bs} == 1:")
        with code.indent():
            code(f"{res} = {self.emit(r.outer, lst, code)}")
        code("else:")
        with code.indent():
            code(f"{res} = {self.blocks_body(r, lst, code, bs)}")
        return res

    def blocks_body(self, r: Blocks, lst, code, bs: str):
        nb, j, bm = self.fresh("nb"), self.fresh("j"), self.fresh("bm")
        code(f"{nb} = ({lst.m} + {bs} - 1) // {bs}")
        blocks = self.fresh("blocks")
        code(f"{blocks} = _vals({nb})")
        tags = self.new_tags(code, nb, lst)
        code(f"for {j} in range({nb}):")
        with code.indent():
            code(f"{bm} = min({bs}, {lst.m} - {j} * {bs})")
            sub = _sublist(lst, _times(j, bs), bm)
            code(f"{blocks}[{j}] = {self.emit(r.inner, sub, code)}")
            self.set_tag(code, tags, j, sub)
        return self.emit(r.outer, Values(blocks, nb, tags=tags), code)

    def emit_chunks(self, r: Chunks, lst, code):
        """Chunks from the front, each size computed from the operands left;
        the chunk results go to a values list for `outer`."""
        vals, cnt, start, size = (self.fresh(x) for x in ("chunks", "nc", "st", "cs"))
        code(f"{vals} = _vals({lst.m})")
        tags = self.new_tags(code, lst.m, lst)
        code(f"{cnt} = 0")
        code(f"{start} = 0")
        code(f"while {start} < {lst.m}:")
        with code.indent():
            code(f"{size} = {py_int(r.size, m=f'({lst.m} - {start})')}")
            code(f"if {size} < 1 or {size} > {lst.m} - {start}:")
            with code.indent():
                code("raise ValueError('a chunk size is outside 1..(operands left)')")
            sub = _sublist(lst, start, size)
            code(f"{vals}[{cnt}] = {self.emit(r.inner, sub, code)}")
            self.set_tag(code, tags, cnt, sub)
            code(f"{cnt} += 1")
            code(f"{start} += {size}")
        return self.emit(r.outer, Values(vals, cnt, tags=tags), code)

    def emit_pad(self, r: Pad, lst, code):
        """note [phantoms]: the operands copied with c phantoms after the first r,
        then `inner` over the padded list; one operand is returned as it is (no node
        meets a phantom: an order applied to one operand returns it)."""
        return self.unless_one(lst, code, lambda: self.pad_body(r, lst, code))

    def pad_body(self, r: Pad, lst, code):
        mult = self.let(code, "pm", py_int(r.m, m=lst.m))
        code(f"if {mult} < 1:")
        with code.indent():
            code("raise ValueError('a pad multiple must be >= 1')")
        rest = self.let(code, "pr", f"{lst.m} % {mult}")
        cnt = self.let(code, "pc", f"({mult} - {rest}) % {mult}")
        total = self.let(code, "pn", f"{lst.m} + {cnt}")
        # phantoms tagged where a part may meet them (note [phantoms]): leaves become a tagged list
        if isinstance(lst, Values) or (self.tagging and self.kernel.arithmetics):
            if isinstance(lst, Values):
                at, tag = lst.at, lst.tag
            else:
                def tag(j): return _sublist(lst, j, "1").lo
                def at(j): return f"_term(a, b, {tag(j)})"
            vals, i = self.fresh("v"), self.fresh("i")
            code(f"{vals} = _vals({total})")
            tags = self.new_tags(code, total, None if self.kernel.arithmetics else lst)
            code(f"for {i} in range({total}):")
            with code.indent():
                code(f"{vals}[{i}] = {at(i)} if {i} < {rest} else ({at(f'{i} - {cnt}')} "
                     f"if {i} >= {rest} + {cnt} else -_ZERO)")
                if tags:
                    code(f"{tags}[{i}] = {tag(i)} if {i} < {rest} else ({tag(f'{i} - {cnt}')} "
                         f"if {i} >= {rest} + {cnt} else {PHANTOM})")
            return self.emit(r.inner, Values(vals, total, tags=tags), code)
        pa, pb = self.fresh("pa"), self.fresh("pb")
        code(f"{pa}, {pb} = _padded(a, b, {lst.lo}, {lst.step}, {lst.m}, {rest}, {cnt})")
        self.uses_pad = True
        fn = self.function_for(r.inner, "L1", f"pad{self.node_id(r)}")
        return self.let(code, "r", f"{fn}({pa}, {pb}, 0, {total})")

    def emit_segments(self, r: Segments, lst, code):
        starts, lengths = [], []
        start = "0"
        for part in r.parts:
            length = self.let(code, "p", py_int(part.length, m=lst.m))
            starts.append(start)
            lengths.append(length)
            start = self.let(code, "at", _plus(start, length))
        code(f"if {start} != {lst.m}:")
        with code.indent():
            code("raise ValueError('the parts of a split do not add up to its length')")
        if isinstance(lst, Leaves) and isinstance(r.outer, Fold) and not (r.outer.reverse and self.leafy()):
            return self.segments_fold(r, lst, starts, lengths, code)
        # every part becomes values (a lone leaf tagged, note [lone leaves]), then the outer order runs over them
        count = self.fresh("cnt")
        seg = self.fresh("seg")
        total = " + ".join(f"(1 if {ln} > 0 else 0)" if p.reducer is not None else ln
                           for p, ln in zip(r.parts, lengths))
        code(f"{seg} = _vals({total})")
        tags = self.new_tags(code, total, lst)
        code(f"{count} = 0")
        for part, st, ln in zip(r.parts, starts, lengths):
            sub = _sublist(lst, st, ln)
            if part.reducer is None:
                i = self.fresh("i")
                code(f"for {i} in range({ln}):")
                with code.indent():
                    one = _sublist(sub, i, "1")
                    code(f"{seg}[{count}] = " + (f"_term(a, b, {one.lo})" if isinstance(one, Leaves) else one.at("0")))
                    self.set_tag(code, tags, count, one)
                    code(f"{count} += 1")
            else:
                code(f"if {ln} > 0:")
                with code.indent():
                    code(f"{seg}[{count}] = {self.emit(part.reducer, sub, code)}")
                    self.set_tag(code, tags, count, sub)
                    code(f"{count} += 1")
        return self.emit(r.outer, Values(seg, count, tags=tags), code)

    def segments_fold(self, r: Segments, lst: Leaves, starts, lengths, code):
        """A sequential fold over parts and pass-through leaves: one running sum."""
        leafy = self.leafy()
        acc, have = self.fresh("acc"), self.fresh("have")
        code(f"{acc} = _ZERO")
        code(f"{have} = False")
        pend = ""
        if leafy:
            # note [lone leaves]: with FMA, a leaf met before any partial sum waits in `pend`
            # (its index) for the next operand, which fuses it
            pend = self.fresh("pend")
            code(f"{pend} = -1")

        def leaf(k: str) -> None:
            code(f"if {have}:")
            with code.indent():
                code(f"{acc} = _add_leaf({acc}, a, b, {k})")
            if leafy:
                code(f"elif {pend} >= 0:")
                with code.indent():
                    code(f"{acc} = _add_leaves(a, b, {pend}, {k})")
                    code(f"{have} = True")
                    code(f"{pend} = -1")
                code("else:")
                with code.indent():
                    code(f"{pend} = {k}")
            else:
                code("else:")
                with code.indent():
                    code(f"{acc} = _term(a, b, {k})")
                    code(f"{have} = True")

        order = list(zip(r.parts, starts, lengths))
        for part, st, ln in (reversed(order) if r.outer.reverse else order):
            sub = _sublist(lst, st, ln)
            if part.reducer is None:
                i = self.fresh("i")
                rng = f"range({ln} - 1, -1, -1)" if r.outer.reverse else f"range({ln})"
                code(f"for {i} in {rng}:")
                with code.indent():
                    leaf(_plus(sub.lo, _times(i, sub.step)))
                continue
            if leafy:
                # one operand reduces to itself: still a leaf
                code(f"if {ln} == 1:")
                with code.indent():
                    leaf(sub.lo)
            code(f"{'el' if leafy else ''}if {ln} > 0:")
            with code.indent():
                val = self.emit(part.reducer, sub, code)
                if leafy:
                    code(f"if {pend} >= 0:")
                    with code.indent():
                        code(f"{acc} = _add_leaf({val}, a, b, {pend})")
                        code(f"{pend} = -1")
                    code("else:")
                    with code.indent():
                        code(f"{acc} = _add({acc}, {val}) if {have} else {val}")
                else:
                    code(f"{acc} = _add({acc}, {val}) if {have} else {val}")
                code(f"{have} = True")
        if leafy:
            code(f"if {pend} >= 0:")
            with code.indent():
                code(f"{acc} = _term(a, b, {pend})")
        return acc

    # ------------------------------------------------------------ iterative splits

    def self_split(self, label: str, r: Reducer) -> tuple[int, Segments] | None:
        """(branch index, the split) when `r`, the body of the named order of
        `label`, is a guard with one branch split(h, self, self) folded in
        order and no other branch calling itself: note [iterative splits]."""
        if not (self.iterative_splits and label.startswith("order_") and isinstance(r, Guard)) or self.leafy():
            return None
        me = Call(label[len("order_"):])
        branches = [c.reducer for c in r.cases] + [r.otherwise]
        found = [i for i, b in enumerate(branches)
                 if isinstance(b, Segments) and len(b.parts) == 2 and b.outer == Fold()
                 and all(p.reducer == me for p in b.parts)]
        if len(found) != 1:
            return None
        others = [b for i, b in enumerate(branches) if i != found[0] and b is not None]
        if any(me in walk(b) for b in others) or any(uses_var(c.cond, "n") for c in r.cases) \
                or any(uses_var(p.length, "n") for p in branches[found[0]].parts):
            return None
        return found[0], branches[found[0]]

    def split_driver(self, r: Guard, split: tuple[int, Segments], lst: Leaves, code: _Code, label: str,
                     kind: str) -> str:
        """note [iterative splits]: walk the split tree with explicit stacks:
        descend to the leftmost leaf range pushing right siblings, reduce it
        by the guard's other branches, then add finished left siblings."""
        at, seg = split
        cases = r.cases[:at] if at == len(r.cases) else r.cases[:at] + r.cases[at + 1:]
        otherwise = r.otherwise if at < len(r.cases) else None
        rest = Guard(cases, otherwise) if cases else otherwise
        leaf = self.function_for(rest, kind, f"{label}_leaf") if rest is not None else None
        h, res, v, sp = self.fresh("h"), self.fresh("r"), self.fresh("v"), self.fresh("sp")
        los, ms, vals = self.fresh("los"), self.fresh("ms"), self.fresh("vals")
        cap, lo0, m0, full = self.fresh("cap"), self.fresh("lo"), self.fresh("m"), self.fresh("full")
        code(f"{lo0}, {m0} = lo, m")
        code(f"{res} = _ZERO")
        code(f"{cap} = {SPLIT_STACK}")
        code("while True:   # a walk deeper than the stacks starts again with deeper stacks")
        with code.indent():
            code(f"{los} = np.empty({cap}, np.int64)   # start of each pending right part")
            code(f"{ms} = np.empty({cap}, np.int64)    # its length; 0 once its left sibling is done")
            code(f"{vals} = _vals({cap})               # the finished left sibling")
            code(f"{sp} = 0")
            code(f"{full} = False")
            code(f"lo, m = {lo0}, {m0}")
            code("while True:")
            with code.indent():
                code("while True:")
                with code.indent():
                    # h: the left part's length where the split branch applies, else -1
                    split_at, first_case = py_int(seg.parts[0].length, m="m"), r.cases[:at + 1]
                    for i, case in enumerate(first_case):
                        code(f"{'if' if i == 0 else 'elif'} {py_cond(case.cond, m='m')}:")
                        with code.indent():
                            code(f"{h} = {split_at if i == at else '-1'}")
                    if first_case:
                        code("else:")
                    with code.indent() if first_case else nullcontext():
                        code(f"{h} = {split_at if at == len(r.cases) else '-1'}")
                    code(f"if {h} < 0:")
                    with code.indent():
                        code("break")
                    code(f"if {h} < 1 or {h} > m - 1 or {h} + {py_int(seg.parts[1].length, m='m')} != m:")
                    with code.indent():
                        code(f"raise ValueError({SPLIT_PARTS!r})")
                    code(f"if {sp} == {cap}:")
                    with code.indent():
                        code(f"{full} = True")
                        code("break")
                    code(f"{los}[{sp}] = {_plus('lo', _times(h, lst.step))}")
                    code(f"{ms}[{sp}] = m - {h}")
                    code(f"{sp} += 1")
                    code(f"m = {h}")
                code(f"if {full}:")
                with code.indent():
                    code("break")
                args = "a, b, lo, m" if kind == "L1" else "a, b, lo, step, m"
                code(f"{v} = {leaf}({args})" if leaf is not None else
                     "raise ValueError('no case of the spec applies to this length')")
                code(f"while {sp} > 0 and {ms}[{sp} - 1] == 0:")
                with code.indent():
                    code(f"{sp} -= 1")
                    code(f"{v} = _add({vals}[{sp}], {v})")
                code(f"if {sp} == 0:")
                with code.indent():
                    code(f"{res} = {v}")
                    code("break")
                code(f"{vals}[{sp} - 1] = {v}")
                code(f"lo = {los}[{sp} - 1]")
                code(f"m = {ms}[{sp} - 1]")
                code(f"{ms}[{sp} - 1] = 0")
            code(f"if not {full}:")
            with code.indent():
                code("break")
            code(f"{cap} *= 4")
        return res

    # ------------------------------------------------------------ checks

    def arith(self):
        """The arithmetic of the code being emitted: the kernel's, or its region's."""
        return self.kernel.named_arithmetic(self.region) if self.region else self.kernel.arithmetic

    def leafy(self) -> bool:
        """Whether a leaf differs from its rounded value (FMA or fused products)."""
        a = self.arith()
        return a.product in FMA_PRODUCTS or a.fused is not None

    def require_fma_last(self, what: str) -> None:
        """Loops that start a fold with one term, then FMA the next: not product = fma_first."""
        if self.arith().product == "fma_first":
            raise CompileError(f"{what} with product = fma_first cannot be compiled yet")

    def require_fused(self) -> None:
        self.uses_fused = True
        if self.kernel.arithmetic.fused is None:
            raise CompileError("the order has fused nodes but the arithmetic has no `fused` section")


# Note [regions in loops]: `WithArithmetic(NAME, R)` becomes functions of
# their own (suffix __NAME) whose code calls the functions of arithmetic NAME
# (_term__NAME, _add__NAME, ..., bound to its own carrier _ACC__NAME):
# fpspec.compile.numerics.in_region renames them, region_runtime embeds
# them.  The region's result is a value of its carrier that the enclosing
# code adds with its own functions, widening exactly (a narrower region only:
# a wider one would need one rounding of an exact sum).  A region applied
# to one leaf returns that term formed in the region's arithmetic.

# Note [lone leaves]: a lane, block, chunk or part of one operand reduces to
# that operand untouched, so a leaf can end up among partial sums.  The node
# that takes it forms it (fpspec.arith.evaluate note [regions]): an FMA or a
# fused product, or a product rounded in that node's own arithmetic, which
# can differ from the arithmetic of the code that built the list.  So where
# that can matter (numerics.keeps_leaves: FMA or fused products, or named
# arithmetics) every value list has a tags array beside it: tags[i] is the
# leaf operand i stands for (an index into the a, b in scope), or -1 for a
# partial sum; its value slot holds the leaf formed where the list was
# built, used only by code that never forms leaves.  A list's builder sets
# the tag from the shape alone (a sub-list of one operand gives that
# operand), and every node over a tagged list is `_join`, which forms its
# leaf operands itself (`_add_leaf`, `_add_leaves`, each in the node's
# arithmetic inside a part).  When every lane or block is one leaf the outer
# order runs on the leaves themselves; a sequential fold over parts keeps a
# lone leaf in `pend` until the next operand fuses it.
# Note [phantoms]: `Pad` copies its operands into new term arrays with c
# phantoms after the first r (runtime `_padded`), a phantom being the term
# -0.0 * 1.0: x + (-0.0) == x for every x (+0.0 and nan included), an FMA
# into a phantom accumulator rounds the product once, and a phantom times a
# real input never happens (so no inf * 0), as in the vector kernel whose
# zeroed upper lanes these are.  The model (fpspec.spec.expand) removes the
# phantoms from the tree and rounds a product they left alone (note [lone
# products] there): the same bits.  Over partial sums a phantom is the value
# -0.0; in a tagged list (note [lone leaves]) its tag is PHANTOM, and `_join`
# returns the other operand as it is: x + (-0.0) would round a wider x into a
# narrower part's accumulator, where the model, which has no such node, hands x
# on unrounded to the next node.  So where a part can meet them (named
# arithmetics) a pad over leaves builds a tagged value list too, its phantoms
# tagged PHANTOM, and a reduced sub-list of phantoms only (a block or lane of
# them: no node at all) is tagged PHANTOM again: a value that meets only
# phantoms keeps its value and carrier until a real node takes it, in any
# part, wider or narrower.  A leaf that meets only phantoms is formed by the
# node that lost them, in that node's arithmetic (fpspec.spec.expand note
# [lone products]).
PHANTOM = -2

# Note [vector lanes]: k lanes of sequential folds over contiguous leaves are
# k independent accumulators, so a row of k leaves is one k-wide vector add:
# elementwise IEEE adds, the same k roundings as k scalar adds, nothing
# reassociated.  Numba's loop vectorizer does not see this (the k adds are
# straight-line code and numba runs no SLP vectorizer), so the backend
# provides `_lane_folds(a, lo, rows, k)`, an explicit <k x T> loop in LLVM IR
# that returns the k lane sums of rows x k contiguous values.  Only where a
# leaf is its input value (op sum, accumulator = the input's carrier): the
# backend asks for it through `emit_program(vector_lanes=True)`.

# Note [iterative splits]: a named order that splits itself in two
# (numpy.sum's `split(n // 2 - n // 2 % 8, numpy_sum, numpy_sum)` above 128)
# recursed once per node: 2 * 10^5 numba calls for n = 10^7, which cost as
# much as all the additions.  With `iterative_splits` its function walks the
# same tree with explicit stacks instead: it descends to the leftmost range
# that no longer splits (pushing each right part), reduces that range by the
# guard's other branches (a function of its own, not recursive), then adds
# it to every finished left sibling above it and moves to the next pending
# right part.  Same nodes, same operands, same order of operands per node.
# The stacks have a fixed size (growing them made numba keep their arrays in
# loop-carried variables: twice the time); a walk deeper than that starts
# again with stacks four times as deep (no recursion at all).
SPLIT_STACK = 64

# Note [pairwise walk]: with `iterative_splits` a pairwise reduction is a
# loop, not a recursive function: a task is a sublist (start, length) to
# reduce, or "add the top two finished values" (ADD_TASK), or "add leaf
# start to the top value" (LEAF_TASK); a sublist that splits pushes its
# combining task, then its right part, then its left part, so the left part
# is reduced first and every node adds its operands in the order of
# `pairwise_body`.  The stacks start at PAIRWISE_STACK (the halving split
# of any length needs fewer) and double when a split expression goes deeper.
PAIRWISE_STACK = 160
ADD_TASK = -1
LEAF_TASK = -2
SPLIT_PARTS = "a recursive split must cut its list into two non-empty parts that add up to it"



def tag_settings(program: "LoopProgram") -> list[str]:
    """The module constant `_join` reads (runtime tags_rt), where the program joins tagged lists."""
    return [f"_PHANTOM = {PHANTOM}  # the tag of a phantom operand (fpspec.compile.loops note [phantoms])"] \
        if program.uses_tags else []


def _joined_tag(tu: str, tv: str) -> str:
    """The tag of a node's result over operands tagged tu, tv: a phantom where both were
    phantoms (note [phantoms]: no node was made), else a value."""
    return f"({PHANTOM} if {tu} == {PHANTOM} and {tv} == {PHANTOM} else -1)"


def _plus(a: str, b: str) -> str:
    """a + b as source, dropping a literal 0 (keeps generated index code short)."""
    return b if a == "0" else a if b == "0" else f"({a} + {b})"


def _times(a: str, b: str) -> str:
    """a * b as source; a compound operand keeps its parentheses (`(m - 1) * step`)."""
    a, b = (f"({x})" if (" + " in x or " - " in x) and not (x[0] == "(" and x[-1] == ")") else x for x in (a, b))
    return "0" if "0" in (a, b) else b if a == "1" else a if b == "1" else f"{a} * {b}"


def _sublist(lst, start: str, length: str):
    if isinstance(lst, Leaves):
        return Leaves(_plus(lst.lo, _times(start, lst.step)), lst.step, length)
    return Values(lst.vals, length, _plus(lst.off, _times(start, lst.step)), lst.step, lst.tags)


def _check_split(code: _Code, h: str) -> None:
    code(f"if {h} < 1 or {h} > m - 1:")
    with code.indent():
        code("raise ValueError('a pairwise split falls outside the list')")


def _check_fused_table(r: Table) -> None:
    for s, f in enumerate(r.fused):
        if f:
            kids = r.children[r.offsets[s]:r.offsets[s + 1]]
            if sum(k >= r.size for k in kids) > 1:
                raise CompileError("a literal fused node with more than one partial-sum child cannot be expressed")


def emit_program(kernel: Kernel, vector_lanes: bool = False, iterative_splits: bool = False,
                 typed_ints: bool = False, gather_leaves: bool = False) -> LoopProgram:
    """The loop program of `kernel`: runtime functions, then `_reduce(a, b, n)`.
    `vector_lanes`, `iterative_splits`: notes [vector lanes], [iterative splits] (with
    [pairwise walk]); `typed_ints`: literal arguments of generated functions as np.int64;
    `gather_leaves`: lanes of scattered leaves run over copies of their terms (emit_vlanes)."""
    em = LoopEmitter(kernel, vector_lanes, iterative_splits, typed_ints, gather_leaves)
    code = _Code()
    res = em.emit(kernel.root, Leaves("0", "1", "n"), code)
    code(f"return {res}")
    entry = Function("_reduce", ("a", "b", "n"), tuple(code.lines),
                     "The spec's order over the n terms (a[k], b[k]) of each output element.")
    constants = []
    for prefix, table in em.tables.values():
        constants += [Constant(f"{prefix}_KIDS", table.children, "int64"),
                      Constant(f"{prefix}_OFFS", table.offsets, "int64"),
                      Constant(f"{prefix}_FUSED", table.fused, "bool_")]
    uses_fused = em.uses_fused or any(isinstance(r, FusedChain) for r in walk_orders(kernel, kernel.root))
    functions = tuple(em.functions.values()) + (entry,)
    return LoopProgram(functions, tuple(constants), uses_fused, bool(em.tables),
                       tuple(sorted(em.regions_used)), em.uses_pad, em.uses_tags)
