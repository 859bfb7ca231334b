"""Parameters as expressions in n: the templates inference tries, and fitting.

A structural order (split, lanes, blocks, tail, chain) has one integer
parameter per observation.  Across observations at many n the parameter is
usually a short expression in n: a constant (8 lanes), n // 2 (pairwise
halving), n // 2 - n // 2 % 8 (numpy's split at a multiple of 8).  `fit_param`
tries the templates below, simplest first, and returns every expression that
is admissible at every observation.
"""
from __future__ import annotations

from typing import Callable, Iterable

from fpspec.errors import SpecError
from fpspec.spec.ast import BinOp, Call, Compare, Expr, IfExpr, Num, Var
from fpspec.spec.expand import eval_expr

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


def fit_param(kind: str, samples: list[tuple[int, Callable[[int], bool]]],
              seen: Iterable[int] = (), limit: int = 3) -> list[Expr]:
    """Expressions e with admissible(e(n)) for every (n, admissible) sample.

    Returns up to `limit` expressions, simplest template first, smallest or
    most "round" constant first within a template.
    """
    cs = constants(seen)
    # try the samples most likely to reject first: the largest n
    samples = sorted(samples, key=lambda s: -s[0])
    found: list[Expr] = []
    for template in TEMPLATES[kind]:
        for c in sorted(cs, key=roundness):
            e = template(c)
            try:
                if all(ok(eval_expr(e, n)) for n, ok in samples):
                    found.append(e)
                    break  # one constant per template: the roundest
            except SpecError:
                continue
        if len(found) >= limit:
            break
    return found


def roundness(c: int) -> tuple:
    """Powers of two first, then multiples of 8, then the rest; small first."""
    return (c & (c - 1) != 0, c % 8 != 0, c)
