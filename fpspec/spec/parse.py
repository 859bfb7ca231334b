"""Text -> AST.  The syntax is grammar/fps.lark; this module only maps
each grammar rule to its dataclass (one transformer method per rule) and
turns Lark's errors into `SpecError`s with file:line:col and what was expected.
"""
from __future__ import annotations

import json
from functools import lru_cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from fpspec.errors import Location, SpecError
from fpspec.resources import grammar_file
from fpspec.spec import ast as A
from fpspec.tree import Node


@lru_cache(maxsize=1)
def grammar_text() -> str:
    # never read relative to the cwd: fpspec.resources finds the packaged copy
    return grammar_file().read_text()


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False)


MAX_DEPTH = 20_000       # brackets inside brackets: a literal tree this deep still parses (a few s)


def parse(text: str, filename: str = "<string>") -> A.Spec:
    # old Mac line ends (CR alone) are line ends: a comment stops at them
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    depth, where = _nesting(text)
    if depth > MAX_DEPTH:
        line = text.count("\n", 0, where) + 1
        raise SpecError(f"brackets nest {depth} levels deep; expected at most {MAX_DEPTH} (write deep chains with combinators: seq, rev, ...)",
                        Location(filename, line, where - (text.rfind("\n", 0, where) + 1) + 1))
    if depth > _SHALLOW:
        return _deep(_parse, text, filename)
    return _parse(text, filename)


def _parse(text: str, filename: str) -> A.Spec:
    parser = _parser()
    try:
        tree = parser.parse(text)
    except UnexpectedInput as e:
        at_end = isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END")
        loc = _end_of(text, filename) if at_end or e.line < 1 else Location(filename, e.line, e.column)
        name = _unknown_order(text, e.pos_in_stream) if isinstance(e, UnexpectedToken) and e.token == "(" else None
        if name is not None:
            start = e.pos_in_stream - len(text[:e.pos_in_stream]) + len(text[:e.pos_in_stream].rstrip()) - len(name)
            loc = Location(filename, e.line, e.column - (e.pos_in_stream - start))
            raise SpecError(f"unknown order '{name}'; expected one of {', '.join(_builtin_orders())} "
                            "(or a named order, without arguments)", loc) from None
        raise SpecError(_describe(e, parser), loc) from None
    try:
        return _ToAst(filename).transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, SpecError):
            raise e.orig_exc from None
        raise


# Lark's transformer recurses once per level of the parse tree (a few Python
# frames per bracket); below this depth the default limits hold
_SHALLOW = 150


def _nesting(text: str) -> tuple[int, int]:
    """(deepest bracket nesting, where it is reached), comments and strings skipped."""
    import re

    depth = best = where = 0
    for m in re.finditer(r'#[^\n]*|"(?:[^"\\\n]|\\.)*"|[(\[]|[)\]]', text):
        c = m.group()[0]
        if c in "([":
            depth += 1
            if depth > best:
                best, where = depth, m.start()
        elif c in ")]":
            depth = max(depth - 1, 0)
    return best, where


def _deep(fn, *args):
    """fn(*args) on a thread with a stack and recursion limit for MAX_DEPTH levels
    (the main thread's C stack is fixed at start; a thread's is ours to size)."""
    import sys
    import threading

    result: list = []

    def run():
        try:
            result.append((True, fn(*args)))
        except BaseException as e:    # noqa: BLE001 - handed to the caller's thread as is
            result.append((False, e))

    limit = sys.getrecursionlimit()
    size = threading.stack_size()
    try:
        sys.setrecursionlimit(max(limit, 12 * MAX_DEPTH))
        threading.stack_size(1 << 30)   # virtual: pages are touched only as deep as the parse goes
        t = threading.Thread(target=run, name="fpspec-parse")
        t.start()
    finally:
        threading.stack_size(size)
    t.join()
    sys.setrecursionlimit(limit)
    ok, value = result[0]
    if not ok:
        raise value
    return value


# ---------------------------------------------------------------- error messages

def _end_of(text: str, filename: str) -> Location:
    """Just after the last thing written: where a missing token belongs."""
    body = text.rstrip()
    line = body.count("\n") + 1
    return Location(filename, line, len(body) - (body.rfind("\n") + 1) + 1)


_WORDS = {
    "NAME": "a name", "INT": "an integer", "SIGNED_INT": "an integer", "SIGNED_FLOAT": "a number",
    "STRING": "a string", "COMPARE_OP": "a comparison (< <= > >= == !=)", "$END": "end of file",
    "DOTS": "'..'", "_ELIF": "'elif'",
}


def _expected_words(names, parser: Lark) -> str:
    words = set()
    for name in names:
        if name in _WORDS:
            words.add(_WORDS[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            words.add(name)
            continue
        words.add(repr(pattern.value) if pattern.type == "str" else name)
    words = sorted(words)
    if len(words) > 12:
        words = words[:12] + ["..."]
    return ", ".join(words)


def _describe(e: UnexpectedInput, parser: Lark) -> str:
    if isinstance(e, UnexpectedCharacters):
        got = repr(e.char)
        expected = e.allowed
    elif isinstance(e, UnexpectedEOF):
        got = "end of file"
        expected = e.expected
    elif isinstance(e, UnexpectedToken):
        got = "end of file" if e.token.type == "$END" else repr(str(e.token))
        expected = e.expected
    else:  # pragma: no cover - lark has no other kinds today
        return str(e).splitlines()[0]
    if got == "'/'":  # sizes are integers: there is no true division
        return "unexpected '/'; expected '//' (floor division: sizes are integers)"
    return f"unexpected {got}; expected {_expected_words(expected, parser)}"


# ---------------------------------------------------------------- rules -> dataclasses

def _unknown_order(text: str, pos: int) -> str | None:
    """`foo(3, seq)` where an order belongs: the name before the '(' is what is wrong."""
    import re

    m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", text[:pos])
    if m is None or m.group(1) in _builtin_orders() or m.group(1) in A.FUNCTIONS:
        return None
    return m.group(1)


def _builtin_orders() -> tuple:
    from fpspec.spec.check import BUILTIN_ORDERS

    return BUILTIN_ORDERS


_HEADER_KEYS = ("target", "op", "n")


@v_args(meta=True)
class _ToAst(Transformer):
    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename

    def _loc(self, meta) -> A.Location | None:
        if getattr(meta, "empty", True):
            return None
        return Location(self.filename, meta.line, meta.column)

    def _tok_loc(self, tok: Token) -> Location:
        return Location(self.filename, tok.line, tok.column)

    # -------------------------------------------------- spec and header
    def start(self, meta, items):
        header: dict = {}
        sections, lets, root, named = [], [], None, []
        for item in items:
            if isinstance(item, tuple) and item[0] in _HEADER_KEYS:
                key, value, loc = item
                if key in header:
                    raise SpecError(f"'{key}' given twice; expected it at most once", loc)
                header[key] = value
            elif isinstance(item, A.Block):
                if any(s.name == item.name for s in sections):
                    raise SpecError(f"section '{item.name}' given twice; expected it at most once", item.loc)
                sections.append(item)
            elif isinstance(item, A.NamedArithmetic):
                if any(a.name == item.name for a in named):
                    raise SpecError(f"arithmetic '{item.name}' given twice; expected it at most once", item.loc)
                named.append(item)
            elif isinstance(item, A.Let):
                if any(d.name == item.name for d in lets):
                    raise SpecError(f"order '{item.name}' defined twice; expected one definition", item.loc)
                lets.append(item)
            else:
                root = item
        loc = self._loc(meta)
        return A.Spec(A.Header(header.get("target"), header.get("op"), header.get("n"), tuple(sections), loc=loc,
                               arithmetics=tuple(named)),
                      tuple(lets), root, loc=loc)

    def target(self, meta, items):
        return ("target", json.loads(items[0]), self._loc(meta))

    def op(self, meta, items):
        from fpspec.spec.check import OPS

        if str(items[0]) not in OPS:
            raise SpecError(f"unknown op '{items[0]}'; expected one of {', '.join(OPS)}", self._tok_loc(items[0]))
        return ("op", str(items[0]), self._loc(meta))

    def nrange(self, meta, items):
        loc = self._loc(meta)
        lo = int(items[0])
        # `n in 8` is one n, `n in 8..` is unbounded, `n in 8..64` a range
        hi = lo if len(items) == 1 else (None if len(items) == 2 else int(items[2]))
        if hi is not None and hi < lo:
            raise SpecError(f"empty range of n {lo}..{hi}; expected LO <= HI", loc)
        if lo < 1:
            raise SpecError(f"range of n starts at {lo}; expected n >= 1", loc)
        return ("n", A.Range(lo, hi, loc=loc), loc)

    def section(self, meta, items):
        return A.Block(str(items[0]), tuple(items[1:]), loc=self._loc(meta))

    def named_section(self, meta, items):
        kind, name = items[0], items[1]
        if str(kind) != "arithmetic":
            raise SpecError(f"section '{kind}' has a name ('{name}'); expected a name only on "
                            f"arithmetic sections (`arithmetic {name} {{ ... }}`)", self._tok_loc(kind))
        return A.NamedArithmetic(str(name), tuple(items[2:]), loc=self._loc(meta))

    def entry(self, meta, items):
        return A.Entry(str(items[0]), items[1], loc=self._loc(meta))

    def block_entry(self, meta, items):
        loc = self._loc(meta)
        return A.Entry(str(items[0]), A.Block(str(items[0]), tuple(items[1:]), loc=loc), loc=loc)

    def ident(self, meta, items):
        name = str(items[0])
        if name in ("true", "false"):
            return name == "true"
        return A.Ident(name, loc=self._loc(meta))

    def apply(self, meta, items):
        return A.Apply(str(items[0]), tuple(items[1:]), loc=self._loc(meta))

    def integer(self, meta, items):
        return int(items[0])

    def float(self, meta, items):
        return A.Float(str(items[0]), loc=self._loc(meta))

    def string(self, meta, items):
        return json.loads(items[0])

    # -------------------------------------------------- lets and root
    def let(self, meta, items):
        return A.Let(str(items[0]), items[1], loc=self._loc(meta))

    def root(self, meta, items):
        return items[0]

    # -------------------------------------------------- orders
    def guard(self, meta, items):
        *arms, otherwise = items
        cases = tuple(A.Case(arms[i], arms[i + 1], loc=getattr(arms[i], "loc", None))
                      for i in range(0, len(arms), 2))
        return A.Guard(cases, otherwise, loc=self._loc(meta))

    def seq(self, meta, items):
        return A.Seq(loc=self._loc(meta))

    def rev(self, meta, items):
        return A.Rev(loc=self._loc(meta))

    def pairwise(self, meta, items):
        return A.Pairwise(items[0] if items else None, loc=self._loc(meta))

    def gpu_tree(self, meta, items):
        return A.GpuTree(loc=self._loc(meta))

    def fused(self, meta, items):
        return A.Fused(loc=self._loc(meta))

    def chain(self, meta, items):
        return A.Chain(items[0], items[1] if len(items) > 1 else None, loc=self._loc(meta))

    def lanes(self, meta, items):
        return A.Lanes(*items, loc=self._loc(meta))

    def vlanes(self, meta, items):
        return A.VLanes(*items, loc=self._loc(meta))

    def blocks(self, meta, items):
        return A.Blocks(*items, loc=self._loc(meta))

    def chunks(self, meta, items):
        return A.Chunks(*items, loc=self._loc(meta))

    def pad(self, meta, items):
        return A.Pad(*items, loc=self._loc(meta))

    def split(self, meta, items):
        return A.Split(*items, loc=self._loc(meta))

    def tail(self, meta, items):
        return A.Tail(*items, loc=self._loc(meta))

    def using(self, meta, items):
        return A.Using(str(items[0]), items[1], loc=self._loc(meta))

    def ref(self, meta, items):
        return A.Ref(str(items[0]), loc=self._loc(meta))

    def literal(self, meta, items):
        return A.Literal(items[0], loc=self._loc(meta))

    def binary(self, meta, items):
        if len(items) != 2:
            raise SpecError(f"a binary node (...) has 2 children, got {len(items)}; "
                            "expected (a b), or [a b c ...] for a fused node", self._loc(meta))
        return Node(tuple(items))

    def multi(self, meta, items):
        if len(items) < 2:
            raise SpecError(f"a fused node [...] of {len(items)} child; expected at least 2 children",
                            self._loc(meta))
        return Node(tuple(items), fused=True)

    def leaf(self, meta, items):
        return int(items[0])

    # -------------------------------------------------- conditions and expressions
    def or_(self, meta, items):
        return A.BoolOp("or", items[0], items[1], loc=self._loc(meta))

    def and_(self, meta, items):
        return A.BoolOp("and", items[0], items[1], loc=self._loc(meta))

    def compare(self, meta, items):
        return A.Compare(str(items[1]), items[0], items[2], loc=self._loc(meta))

    def _bin(op):  # noqa: N805 - a rule factory, not a method
        def rule(self, meta, items):
            return A.BinOp(op, items[0], items[1], loc=self._loc(meta))
        return rule

    add, sub, mul, floordiv, mod = _bin("+"), _bin("-"), _bin("*"), _bin("//"), _bin("%")

    def if_expr(self, meta, items):
        *arms, out = items
        for i in range(len(arms) - 2, -1, -2):   # elif arms nest in the else branch
            out = A.IfExpr(arms[i], arms[i + 1], out, loc=getattr(arms[i], "loc", None) if i else self._loc(meta))
        return out

    def num(self, meta, items):
        return A.Num(int(items[0]), loc=self._loc(meta))

    def var(self, meta, items):
        return A.Var(str(items[0]), loc=self._loc(meta))

    def call(self, meta, items):
        name, *args = items
        if str(name) not in A.FUNCTIONS:
            raise SpecError(f"unknown function '{name}'; expected one of {', '.join(A.FUNCTIONS)}",
                            self._tok_loc(name))
        return A.Call(str(name), tuple(args), loc=self._loc(meta))
