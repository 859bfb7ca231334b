"""Parameters as expressions in n: the templates inference tries, and fitting.

A structural order (split, lanes, blocks, tail, chain) has one integer
parameter per observation.  Across observations at many n the parameter is
usually a short expression in n: a constant (8 lanes), n // 2 (pairwise
halving), n // 2 - n // 2 % 8 (numpy's split at a multiple of 8).  `fit_values`
tries the templates below, simplest first, and returns every expression that
is admissible at every observation.
"""
from __future__ import annotations

from typing import Callable, Iterable

from fpspec.spec.ast import BinOp, Call, Compare, Expr, IfExpr, Num, Var

N = Var()


def _b(op: str, a: Expr, b: Expr) -> BinOp:
    return BinOp(op, a, b)


def expr_cost(e: Expr) -> int:
    if isinstance(e, (Num, Var)):
        return 1
    if isinstance(e, BinOp):
        return 1 + expr_cost(e.left) + expr_cost(e.right)
    if isinstance(e, IfExpr):
        return 2 + _cond_cost(e.cond) + expr_cost(e.then) + expr_cost(e.otherwise)
    return 1 + sum(expr_cost(a) for a in e.args)


def _cond_cost(c) -> int:
    if isinstance(c, Compare):
        return expr_cost(c.left) + expr_cost(c.right)
    return 1 + _cond_cost(c.left) + _cond_cost(c.right)


# Templates: (name, function c -> Expr).  Ordered simplest first; the fitted
# constant c ranges over `constants` below.
def _half_down_to(c: int) -> Expr:
    h = _b("//", N, Num(2))
    return _b("-", h, _b("%", h, Num(c)))


TEMPLATES: dict[str, tuple[Callable[[int], Expr], ...]] = {
    # split points: where a contiguous range is cut in two
    "split": (
        lambda c: _b("//", N, Num(c)),
        lambda c: Num(c),
        lambda c: _b("-", N, Num(c)),
        lambda c: _b("//", _b("+", N, Num(c - 1)), Num(c)),  # ceil(n / c)
        lambda c: _b("-", N, _b("%", N, Num(c))),
        _half_down_to,
        lambda c: _b("*", _b("//", _b("+", _b("//", N, Num(2)), Num(c - 1)), Num(c)), Num(c)),
        lambda c: _b("-", N, _b("//", N, Num(c))),
        # the clamped forms a generated spec writes to stay in 1..n-1 at small n
        lambda c: Call("max", (Num(1), _half_down_to(c))),
        lambda c: Call("min", (Num(c), _b("-", N, Num(1)))),
    ),
    # lane / block counts and sizes, tail moduli, fused widths
    "size": (
        lambda c: Num(c),
        lambda c: _b("//", N, Num(c)),
        lambda c: _b("//", _b("+", N, Num(c - 1)), Num(c)),
    ),
    "const": (lambda c: Num(c),),
}


def constants(seen: Iterable[int] = ()) -> list[int]:
    """Constants worth trying: small ones, powers of two, and values seen."""
    cs = set(range(1, 33)) | {2 ** k for k in range(1, 25)} | {3 * 2 ** k for k in range(1, 12)}
    cs |= {int(v) for v in seen if v >= 2}
    return sorted(cs)


def fit_values(kind: str, values: tuple, seen: Iterable[int] = (), limit: int = 3) -> list[Expr]:
    """Expressions e with e(n) == v for every (n, v) in values: up to `limit`,
    simplest template first, the roundest constant within a template.

    The search a fit makes most often (a split point at every observed n), so
    the answer is kept per (kind, values, constants) and the templates are
    evaluated as plain integer functions: building and walking an expression
    per constant tried was most of the fitter's time.
    """
    key = (kind, tuple(sorted(values, key=lambda s: -s[0])), frozenset(v for v in seen if v >= 2), limit)
    hit = _FIT_VALUES.get(key)
    if hit is None:
        if len(_FIT_VALUES) > 50000:
            _FIT_VALUES.clear()
        hit = _FIT_VALUES[key] = tuple(_fit_values(*key))
    return list(hit)


_FIT_VALUES: dict = {}


def _fit_values(kind: str, values: tuple, seen: frozenset, limit: int) -> list[Expr]:
    cs = sorted(constants(seen), key=roundness)
    found: list[Expr] = []
    for t, template in enumerate(TEMPLATES[kind]):
        fast = _FAST[kind][t]
        for c in cs:
            try:
                if all(fast(n, c) == v for n, v in values):
                    found.append(_template_expr(template, c))
                    break
            except ZeroDivisionError:
                continue
        if len(found) >= limit:
            break
    return found


# the templates above as integer functions of (n, c), in the same order
_FAST = {
    "split": (
        lambda n, c: n // c,
        lambda n, c: c,
        lambda n, c: n - c,
        lambda n, c: (n + c - 1) // c,
        lambda n, c: n - n % c,
        lambda n, c: n // 2 - n // 2 % c,
        lambda n, c: (n // 2 + c - 1) // c * c,
        lambda n, c: n - n // c,
        lambda n, c: max(1, n // 2 - n // 2 % c),
        lambda n, c: min(c, n - 1),
    ),
    "size": (lambda n, c: c, lambda n, c: n // c, lambda n, c: (n + c - 1) // c),
    "const": (lambda n, c: c,),
}
_EXPRS: dict = {}


def _template_expr(template, c: int) -> Expr:
    key = (template, c)
    e = _EXPRS.get(key)
    if e is None:
        e = _EXPRS[key] = template(c)
    return e


def roundness(c: int) -> tuple:
    """Powers of two first, then multiples of 8, then the rest; small first."""
    return (c & (c - 1) != 0, c % 8 != 0, c)
