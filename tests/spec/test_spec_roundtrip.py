"""parse(str(spec)) == spec over generated ASTs, and text -> AST -> text."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fpspec.spec import ast as A
from fpspec.spec import parse
from fpspec.tree import random_tree

NAMES = st.sampled_from(["f", "halves", "lane_order", "x1", "pairwise_sum", "seq_", "N"])
KEYS = st.sampled_from(["input", "product", "w", "n", "order", "fused", "if", "true", "exponent_floor", "numpy"])

exprs = st.recursive(
    st.one_of(st.integers(0, 10**6).map(A.Num), st.just(A.Var())),
    lambda inner: st.one_of(
        st.builds(A.BinOp, st.sampled_from(A.BINARY_OPS), inner, inner),
        st.builds(A.Call, st.sampled_from(A.FUNCTIONS), st.lists(inner, min_size=1, max_size=3).map(tuple)),
    ),
    max_leaves=3,
)
compares = st.builds(A.Compare, st.sampled_from(A.COMPARE_OPS), exprs, exprs)


@st.composite
def conds(draw):
    # the grammar has no parentheses in conditions: `and` under `or`, both left-nested
    def chain(op, items):
        acc = items[0]
        for x in items[1:]:
            acc = A.BoolOp(op, acc, x)
        return acc

    ors = draw(st.lists(st.lists(compares, min_size=1, max_size=2), min_size=1, max_size=2))
    return chain("or", [chain("and", ands) for ands in ors])


@st.composite
def literal_trees(draw):
    n = draw(st.integers(2, 12))
    seed = draw(st.integers(0, 2**32 - 1))
    return A.Literal(random_tree(n, np.random.default_rng(seed), fused_prob=0.4))


simple_orders = st.one_of(
    st.builds(A.Seq), st.builds(A.Rev), st.builds(A.GpuTree), st.builds(A.Fused),
    st.builds(A.Pairwise, st.one_of(st.none(), exprs)), st.builds(A.Chain, exprs, st.one_of(st.none(), exprs)),
    NAMES.map(A.Ref), literal_trees(),
)
orders = st.recursive(
    simple_orders,
    lambda inner: st.one_of(
        st.builds(A.Lanes, exprs, inner, inner, st.one_of(st.none(), inner)),
        st.builds(A.Blocks, exprs, inner, inner),
        st.builds(A.Split, exprs, inner, inner),
        st.builds(A.Tail, exprs, inner, inner),
        st.builds(A.Using, NAMES, inner),
        st.builds(A.Guard, st.lists(st.builds(A.Case, conds(), inner), min_size=1, max_size=2).map(tuple), inner),
    ),
    max_leaves=4,
)

values = st.one_of(
    KEYS.filter(lambda k: k != "true").map(A.Ident), st.integers(-2**40, 2**40), st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False).map(A.Float.of),
    st.text(max_size=12).filter(lambda s: "\x00" not in s),
)


def blocks_(depth):
    entry_values = values if depth == 0 else st.one_of(values, blocks_(depth - 1))

    def entry(kv):
        k, v = kv
        return A.Entry(v.name, v) if isinstance(v, A.Block) else A.Entry(k, v)

    names = KEYS if depth == 0 else KEYS.filter(lambda k: k not in A.HEADER_WORDS)
    return st.builds(A.Block, names, st.lists(st.tuples(KEYS, entry_values).map(entry), max_size=4).map(tuple))


@st.composite
def ranges(draw):
    lo = draw(st.integers(1, 10**6))
    hi = draw(st.one_of(st.none(), st.just(lo), st.integers(lo, 10**7)))
    return A.Range(lo, hi)


headers = st.builds(
    A.Header,
    st.one_of(st.none(), st.text(max_size=20)),
    st.one_of(st.none(), st.sampled_from(["sum", "dot", "gemv", "gemm"])),
    st.one_of(st.none(), ranges()),
    st.lists(blocks_(1), max_size=3, unique_by=lambda b: b.name).map(tuple),
    arithmetics=st.lists(blocks_(1).map(lambda b: b.entries), max_size=2).flatmap(
        lambda bodies: st.lists(NAMES, min_size=len(bodies), max_size=len(bodies), unique=True).map(
            lambda names: tuple(A.NamedArithmetic(k, e) for k, e in zip(names, bodies)))),
)
specs = st.builds(
    A.Spec, headers,
    st.lists(st.builds(A.Let, NAMES, orders), max_size=3, unique_by=lambda d: d.name).map(tuple),
    orders,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs)
def test_print_then_parse_gives_the_same_ast(spec):
    text = str(spec)
    back = parse(text)
    assert back == spec
    assert str(back) == text            # text -> AST -> text is a fixed point


def _random_spec(rng) -> A.Spec:
    """The same shapes as the hypothesis strategies, drawn fast from a seeded
    generator: hypothesis itself costs ~0.2 s an example on this machine."""
    names = ["f", "halves", "lane_order", "x1", "N"]
    keys = ["input", "w", "n", "order", "fused", "if", "exponent_floor"]

    def expr(d=0):
        r = rng.integers(0, 5 if d < 2 else 2)
        if r == 0:
            return A.Num(int(rng.integers(0, 10**6)))
        if r == 1:
            return A.Var()
        if r == 4:
            return A.Call(str(rng.choice(A.FUNCTIONS)), tuple(expr(d + 1) for _ in range(rng.integers(1, 4))))
        return A.BinOp(str(rng.choice(A.BINARY_OPS)), expr(d + 1), expr(d + 1))

    def cond():
        def chain(op, items):
            acc = items[0]
            for x in items[1:]:
                acc = A.BoolOp(op, acc, x)
            return acc

        groups = [[A.Compare(str(rng.choice(A.COMPARE_OPS)), expr(), expr()) for _ in range(rng.integers(1, 3))]
                  for _ in range(rng.integers(1, 3))]
        return chain("or", [chain("and", g) for g in groups])

    def order(d=0):
        r = int(rng.integers(0, 14 if d < 3 else 8))
        simple = [A.Seq(), A.Rev(), A.GpuTree(), A.Fused(), A.Pairwise(), A.Pairwise(expr()), A.Chain(expr()),
                  A.Ref(str(rng.choice(names)))]
        if r < 8:
            if rng.random() < 0.1:
                return A.Literal(random_tree(int(rng.integers(2, 12)), rng, fused_prob=0.4))
            return simple[r]
        if r == 13:
            return A.Using(str(rng.choice(names)), order(d + 1))
        if r == 12:
            return A.Guard(tuple(A.Case(cond(), order(d + 1)) for _ in range(rng.integers(1, 3))), order(d + 1))
        cls = (A.Lanes, A.Blocks, A.Split, A.Tail)[r - 8]
        return cls(expr(), order(d + 1), order(d + 1))

    def value(d):
        r = rng.integers(0, 7 if d < 1 else 6)
        if r == 0:
            return A.Ident(str(rng.choice(keys)))
        if r == 1:
            return int(rng.integers(-2**40, 2**40))
        if r == 2:
            return bool(rng.integers(0, 2))
        if r == 3:
            return A.Float.of(float(rng.choice([0.0, -0.0, 1.5, -2.5e-8, 1e300, 3.0])))
        if r in (4, 5):
            return "".join(rng.choice(list('ab "\\\n\té€'), size=int(rng.integers(0, 8))))
        return block(d + 1)

    def block(d, top=False):
        name = str(rng.choice([k for k in keys if not (top and k in A.HEADER_WORDS)]))
        entries = []
        for _ in range(rng.integers(0, 4)):
            v = value(d)
            entries.append(A.Entry(v.name if isinstance(v, A.Block) else str(rng.choice(keys)), v))
        return A.Block(name, tuple(entries))

    lo = int(rng.integers(1, 10**6))
    header = A.Header(
        "numpy.sum" if rng.random() < 0.5 else None, "sum" if rng.random() < 0.5 else None,
        A.Range(lo, [None, lo, lo + 7][int(rng.integers(0, 3))]) if rng.random() < 0.8 else None,
        tuple({b.name: b for b in (block(0, top=True) for _ in range(rng.integers(0, 3)))}.values()),
        arithmetics=tuple({k: A.NamedArithmetic(k, block(0).entries)
                           for k in (str(rng.choice(names)) for _ in range(rng.integers(0, 3)))}.values()))
    lets = tuple({d.name: d for d in (A.Let(str(rng.choice(names)), order()) for _ in range(rng.integers(0, 3)))}.values())
    return A.Spec(header, lets, order())


def test_print_then_parse_thousands_of_random_specs():
    rng = np.random.default_rng(2026)
    for _ in range(600):
        spec = _random_spec(rng)
        text = str(spec)
        back = parse(text)
        assert back == spec, text
        assert str(back) == text


def test_signed_zero_survives():
    spec = parse("arithmetic { init = -0.0 }\norder seq")
    assert spec.header.arithmetic.get("init").text == "-0.0"
    assert "init = -0.0" in str(spec)
    assert parse("arithmetic { init = 0.0 }\norder seq").header.arithmetic.get("init").text == "+0.0"
