"""Verification: is a replica (and its original) exactly what a spec says?

Three independent kinds of evidence, each collected for every n asked about:

    trees       reveal each live side with the revelation engine and compare its
                tree with the spec's expansion at n (the first differing subtree
                is the message)
    arithmetic  probe each live side and compare the arithmetic it shows with
                the spec's arithmetic section, field by field
    samples     run the sides on the same random and adversarial inputs
                (fpspec.inputs) and compare the outputs bit for bit: replica vs
                the spec's reference evaluation, and replica vs original when
                there is one

The report is `equivalent` only when at least one tree was compared and every
check that ran agreed: a side that raises, returns the wrong shape, is refused
by the revelation engine or gives two answers for one input is a failure, never
a skipped check.

A *side* is anything that has an order: a spec (its trees are expansions, its
outputs the reference evaluation of the arithmetic model) or a live
implementation (its trees are revealed, its arithmetic probed, its outputs
computed by calling it).  `fpspec diff` compares any two sides; `fpspec verify`
compares a replica and optionally an original against a spec.

Note [nan bits]: all NaNs compare equal, whatever their payload and sign.
Payload propagation depends on operand order inside one addition (x86 keeps
the first operand's payload), which no summation tree fixes; every other bit,
the sign of zero included, must match.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from fpspec import inputs as fpinputs
from fpspec.errors import FpspecError
from fpspec.formats import get_format
from fpspec.tree import Tree, diff as tree_diff, format_tree, leaves, size

# how many samples per n are also run a second time, to catch a replica that
# answers the same input two ways
REPEAT_FRACTION = 0.05
MAX_INPUT_VALUES_SHOWN = 16


class SideFailure(Exception):
    """A side could not give an answer: it raised, was refused or answered nonsense."""


# ---------------------------------------------------------------- sides

@dataclass(frozen=True)
class Side:
    """One thing with an order: a spec or a live implementation.

    tree_at(n)            its summation tree at reduction length n
    arithmetic_at(n, t)   its arithmetic (written or probed) as an object with
                          dataclass fields, or None when it has none to show
    outputs(n, samples)   its outputs on each sample (float64 arrays of the
                          op's output shape), or None when it cannot run
    """

    name: str
    role: str                      # "spec", "replica", "original" or "target"
    op: str
    fmt: str                       # input format
    tree_at: Callable[[int], Tree]
    arithmetic_at: Callable[[int, Tree], object | None] | None = None
    outputs: Callable[[int, Sequence[fpinputs.Sample]], list] | None = None
    out_fmt: str | None = None     # output format, for hex in messages
    m: int | None = None
    ncols: int | None = None

    @property
    def live(self) -> bool:
        return self.role != "spec"


def normalize_output(value, expected_shape: tuple[int, ...], who: str) -> np.ndarray:
    """A callable's result as a float64 array of `expected_shape`, or SideFailure."""
    if hasattr(value, "detach"):            # a torch tensor: leave torch to torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise SideFailure(f"{who} returned {type(value).__name__}, not numbers ({e})") from None
    if arr.shape != tuple(expected_shape):
        if arr.size == 1 and expected_shape == ():
            return arr.reshape(())
        raise SideFailure(f"{who} returned shape {arr.shape}, expected {tuple(expected_shape)}")
    return arr


def live_outputs(call: Callable, op: str, m: int | None, ncols: int | None, who: str):
    """An `outputs` function that calls `call(*sample.args)` once per sample."""
    shape = fpinputs.output_shape(op, m, ncols)

    def outputs(n: int, samples: Sequence[fpinputs.Sample]) -> list:
        out = []
        for s in samples:
            try:
                with np.errstate(all="ignore"):
                    value = call(*s.args)
            except Exception as e:  # the target's own failure is a finding, not a crash
                raise SideFailure(f"{who} raised {type(e).__name__}: {_one_line(e)} on n={n} {s.describe()}") from None
            out.append(normalize_output(value, shape, f"{who} on n={n} {s.describe()}"))
        return out

    return outputs


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


# ---------------------------------------------------------------- report

@dataclass(frozen=True)
class TreeCheck:
    n: int
    side: str                      # name of the live side compared with the reference
    equal: bool
    difference: str | None = None  # tree.Difference text, reference on the left
    seconds: float = 0.0


@dataclass(frozen=True)
class ArithmeticCheck:
    side: str
    n: int
    equal: bool
    differences: tuple[tuple[str, str, str], ...] = ()   # (field, reference, side)
    lines: tuple[str, ...] = ()                         # the probe's own account


@dataclass(frozen=True)
class Mismatch:
    """The first input on which two sides disagree."""

    n: int
    sample: str                    # Sample.describe()
    reproduce: str                 # a Python expression rebuilding the input
    element: tuple[int, ...]       # output element that differs
    left: str                      # name of each side
    right: str
    left_value: str                # hex bits and decimal value
    right_value: str
    inputs: tuple[str, ...]        # the arguments, hex, truncated


@dataclass(frozen=True)
class SampleCheck:
    left: str
    right: str
    n: int
    samples: int
    mismatch: Mismatch | None = None

    @property
    def equal(self) -> bool:
        return self.mismatch is None


@dataclass(frozen=True)
class Problem:
    stage: str                     # "tree", "arithmetic", "samples", "repeat"
    side: str
    n: int | None
    message: str


@dataclass(frozen=True)
class Report:
    """What was checked and what was found; `equivalent` is the verdict."""

    command: str                   # "verify" or "diff"
    reference: str                 # the spec or left side
    sides: tuple[str, ...]         # the sides compared with it
    op: str
    fmt: str
    n_values: tuple[int, ...]
    trees: tuple[TreeCheck, ...] = ()
    arithmetic: tuple[ArithmeticCheck, ...] = ()
    samples: tuple[SampleCheck, ...] = ()
    problems: tuple[Problem, ...] = ()
    seed: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def equivalent(self) -> bool:
        return (bool(self.trees)
                and not self.problems
                and all(t.equal for t in self.trees)
                and all(a.equal for a in self.arithmetic)
                and all(s.equal for s in self.samples))

    @property
    def samples_run(self) -> int:
        return sum(s.samples for s in self.samples)

    # ------------------------------------------------------------ rendering

    def text(self) -> str:
        lines = [f"fpspec {self.command}: {self.reference} vs {', '.join(self.sides)}  (op {self.op}, input {self.fmt})"]
        ns = self.n_values
        shown = " ".join(map(str, ns[:40])) + (f" ... ({len(ns)} in all)" if len(ns) > 40 else "")
        lines.append(f"n values ({len(ns)}): {shown}")
        bad_trees = [t for t in self.trees if not t.equal]
        lines.append(f"trees:      {len(self.trees)} compared, "
                     + ("all equal" if not bad_trees else f"{len(bad_trees)} differ"))
        if bad_trees:
            t = bad_trees[0]
            lines.append(f"  first: {t.side} at n={t.n} differs from {self.reference}:")
            lines.extend("    " + s for s in (t.difference or "").splitlines())
        bad_arith = [a for a in self.arithmetic if not a.equal]
        if self.arithmetic:
            lines.append(f"arithmetic: {len(self.arithmetic)} compared, "
                         + ("all equal" if not bad_arith else f"{len(bad_arith)} differ"))
            for a in bad_arith:
                lines.append(f"  {a.side} (probed at n={a.n}):")
                for name, ref, got in a.differences:
                    lines.append(f"    {name}: {self.reference} says {ref}, {a.side} shows {got}")
        else:
            lines.append("arithmetic: not compared")
        if self.samples:
            pairs = sorted({f"{s.left} vs {s.right}" for s in self.samples})
            bad = [s for s in self.samples if not s.equal]
            lines.append(f"samples:    {self.samples_run} compared ({'; '.join(pairs)}; seed {self.seed}), "
                         + ("all bits equal" if not bad else f"differ at {len(bad)} n"))
            if bad:
                lines.extend("  " + s for s in _mismatch_text(bad[0].mismatch))
        else:
            lines.append("samples:    none")
        for p in self.problems:
            where = f" at n={p.n}" if p.n is not None else ""
            lines.append(f"problem:    {p.stage}, {p.side}{where}: {p.message}")
        lines.extend(f"note:       {note}" for note in self.notes)
        lines.append(f"time:       {self.seconds:.2f} s")
        lines.append(self.verdict)
        return "\n".join(lines)

    @property
    def verdict(self) -> str:
        if self.command == "diff":
            return "SAME" if self.equivalent else "DIFFERENT"
        return "EQUIVALENT" if self.equivalent else "NOT EQUIVALENT"

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["equivalent"] = self.equivalent
        d["verdict"] = self.verdict
        d["samples_run"] = self.samples_run
        return d


def _mismatch_text(m: Mismatch) -> list[str]:
    where = f" output element {m.element}" if m.element else ""
    width = max(len(m.left), len(m.right)) + 1
    return [f"first differing input: n={m.n} {m.sample}{where}",
            f"  {m.left + ':':<{width}} {m.left_value}",
            f"  {m.right + ':':<{width}} {m.right_value}",
            f"  rebuild: {m.reproduce}",
            *(f"  {line}" for line in m.inputs)]


# ---------------------------------------------------------------- the engine

def compare(reference: Side, others: Sequence[Side], n_values: Sequence[int], *,
            samples: int = 0, seed: int = 0, sample_pairs: Sequence[tuple[Side, Side]] = (),
            command: str = "verify", probe: bool = True, notes: Sequence[str] = ()) -> Report:
    """Compare `others` with `reference` at every n; run `samples` inputs spread over
    the n values through each pair in `sample_pairs` (left, right)."""
    start = time.perf_counter()
    n_values = tuple(sorted(set(int(n) for n in n_values)))
    trees: list[TreeCheck] = []
    ariths: list[ArithmeticCheck] = []
    sample_checks: list[SampleCheck] = []
    problems: list[Problem] = []
    ref_trees: dict[int, Tree] = {}
    probed: set[str] = set()

    for n in n_values:
        try:
            ref_trees[n] = reference.tree_at(n)
        except Exception as e:
            problems.append(Problem("tree", reference.name, n, _failure_text(e)))
            continue
        for side in others:
            t0 = time.perf_counter()
            try:
                got = side.tree_at(n)
            except Exception as e:
                problems.append(Problem("tree", side.name, n, _failure_text(e)))
                continue
            d = tree_diff(ref_trees[n], got)
            text = None if d is None else _difference_text(d, reference.name, side.name)
            trees.append(TreeCheck(n, side.name, d is None, text, time.perf_counter() - t0))
            # the arithmetic is probed once per side, at the first n revealed, with
            # the side's own tree (a probe needs the real order, not the spec's)
            if probe and side.name not in probed:
                probed.add(side.name)
                check = _compare_arithmetic(reference, side, n, ref_trees[n], got, problems)
                if check is not None:
                    ariths.append(check)

    if samples > 0 and sample_pairs:
        counts = _spread(samples, len(n_values))
        for n, count in zip(n_values, counts):
            if count == 0:
                continue
            batch = list(fpinputs.samples(reference.op, n, reference.fmt, count, seed=seed,
                                          m=reference.m, ncols=reference.ncols))
            cache: dict[str, list] = {}
            for left, right in sample_pairs:
                outs = []
                for side in (left, right):
                    if side.name not in cache:
                        try:
                            cache[side.name] = side.outputs(n, batch)
                        except Exception as e:
                            cache[side.name] = None
                            problems.append(Problem("samples", side.name, n, _failure_text(e)))
                    outs.append(cache[side.name])
                if outs[0] is None or outs[1] is None:
                    continue
                mismatch = _first_mismatch(n, batch, left, right, outs[0], outs[1])
                sample_checks.append(SampleCheck(left.name, right.name, n, len(batch), mismatch))
            _repeat_check(n, batch, others, cache, problems)

    return Report(command=command, reference=reference.name, sides=tuple(s.name for s in others),
                  op=reference.op, fmt=reference.fmt, n_values=n_values, trees=tuple(trees),
                  arithmetic=tuple(ariths), samples=tuple(sample_checks), problems=tuple(problems),
                  seed=seed, seconds=time.perf_counter() - start, notes=tuple(notes))


def _failure_text(e: BaseException) -> str:
    if isinstance(e, (SideFailure, FpspecError)):
        return _one_line(e)
    return f"{type(e).__name__}: {_one_line(e)}"


def _difference_text(d, left_name: str, right_name: str) -> str:
    """tree.Difference with the sides named, each subtree shortened for a terminal."""
    where = "root" if not d.path else "child " + ".".join(map(str, d.path))
    ls = leaves(d.left)
    width = max(len(left_name), len(right_name)) + 1
    return (f"first difference at {where} (leaves {min(ls)}..{max(ls)}):\n"
            f"  {left_name + ':':<{width}} {_short(d.left)}\n"
            f"  {right_name + ':':<{width}} {_short(d.right)}")


def _short(t: Tree, limit: int = 400) -> str:
    s = format_tree(t)
    return s if len(s) <= limit else s[:limit] + f" ... ({size(t)} leaves)"


def _spread(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, max(parts, 1))
    return [base + (i < extra) for i in range(parts)]


def _compare_arithmetic(reference: Side, side: Side, n: int, ref_tree: Tree, tree: Tree,
                        problems: list) -> ArithmeticCheck | None:
    if reference.arithmetic_at is None or side.arithmetic_at is None:
        return None
    try:
        want = reference.arithmetic_at(n, ref_tree)
        got = side.arithmetic_at(n, tree)
    except Exception as e:
        problems.append(Problem("arithmetic", side.name, n, _failure_text(e)))
        return None
    if want is None or got is None:
        return None
    lines = tuple(getattr(got, "lines", ()) or ())
    got = getattr(got, "arithmetic", got)
    want = getattr(want, "arithmetic", want)
    return ArithmeticCheck(side.name, n, want == got, arithmetic_differences(want, got), lines)


def arithmetic_differences(want, got) -> tuple[tuple[str, str, str], ...]:
    """(field, want, got) for every field that differs; nested dataclasses flattened."""
    def flat(obj, prefix=""):
        if obj is None or not dataclasses.is_dataclass(obj):
            return {prefix.rstrip(".") or "value": str(obj)}
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                out.update(flat(value, f"{prefix}{f.name}."))
            else:
                out[prefix + f.name] = str(value)
        return out

    a, b = flat(want), flat(got)
    return tuple((k, a.get(k, "(absent)"), b.get(k, "(absent)"))
                 for k in list(a) + [k for k in b if k not in a] if a.get(k) != b.get(k))


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal float64 bits, or both NaN (see note [nan bits])."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))


def _first_mismatch(n: int, batch, left: Side, right: Side, louts, routs) -> Mismatch | None:
    for s, lo, ro in zip(batch, louts, routs):
        ok = same_bits(lo, ro)
        if ok.all():
            continue
        element = tuple(int(i) for i in np.argwhere(~ok)[0]) if ok.ndim else ()
        out_fmt = left.out_fmt or right.out_fmt or left.fmt
        return Mismatch(
            n=n, sample=s.describe(),
            reproduce=(f"fpspec.inputs.generate({left.op!r}, {n}, {left.fmt!r}, seed={s.seed}, "
                       f"index={s.index}, kind={s.kind!r}"
                       + (f", m={left.m}" if left.m else "") + (f", ncols={left.ncols}" if left.ncols else "")
                       + ")"),
            element=element, left=left.name, right=right.name,
            left_value=_value_text(lo[element] if element else lo, out_fmt),
            right_value=_value_text(ro[element] if element else ro, out_fmt),
            inputs=_inputs_text(s, left.fmt))
    return None


def _value_text(v, fmt: str) -> str:
    v = float(np.asarray(v, np.float64))
    try:
        bits = fpinputs.hex_bits(v, fmt)[0]
    except ValueError:
        bits = "?"
    exact = bits == "?" or get_format(fmt).round(v) == v or np.isnan(v)
    return f"{bits} ({v!r}{'' if exact else ', not a value of ' + fmt})"


def _inputs_text(s: fpinputs.Sample, fmt: str) -> tuple[str, ...]:
    names = {1: ("x",), 2: ("a", "b")}[len(s.args)] if len(s.args) <= 2 else tuple(f"arg{i}" for i in range(len(s.args)))
    out = []
    for name, a in zip(names, s.args):
        flat = np.asarray(a, np.float64).ravel()
        shown = fpinputs.hex_bits(flat[:MAX_INPUT_VALUES_SHOWN], fmt)
        more = f" ... ({flat.size} values)" if flat.size > MAX_INPUT_VALUES_SHOWN else ""
        out.append(f"{name}{tuple(np.shape(a))}: {' '.join(shown)}{more}")
    return tuple(out)


def _repeat_check(n: int, batch, sides: Sequence[Side], cache: dict, problems: list) -> None:
    """Run a few samples again on each live side: one input must give one answer."""
    k = max(1, int(len(batch) * REPEAT_FRACTION))
    for side in sides:
        first = cache.get(side.name)
        if not side.live or side.outputs is None or first is None:
            continue
        try:
            again = side.outputs(n, batch[:k])
        except Exception as e:
            problems.append(Problem("repeat", side.name, n, _failure_text(e)))
            continue
        for s, a, b in zip(batch, first, again):
            ok = same_bits(a, b)
            if not ok.all():
                element = tuple(int(i) for i in np.argwhere(~ok)[0]) if ok.ndim else ()
                fmt = side.out_fmt or side.fmt
                problems.append(Problem(
                    "repeat", side.name, n,
                    f"nondeterministic: {s.describe()} gave {_value_text(a[element] if element else a, fmt)} "
                    f"then {_value_text(b[element] if element else b, fmt)}"))
                break


# ---------------------------------------------------------------- n values

def default_n_values(lo: int, hi: int, boundaries: Sequence[int] = (), *, random_count: int = 4,
                     max_n: int = 4096, seed: int = 0) -> tuple[int, ...]:
    """n values that cross every branch: each guard boundary and its neighbours,
    the ends of the range, powers of two and their neighbours, plus random n.

    Everything is clipped to [lo, min(hi, max_n)]: revealing a tree costs time
    roughly linear in n, so huge n are only checked when asked for with -n.
    """
    top = min(hi, max_n)
    if top < lo:
        top = lo
    want: set[int] = {lo, lo + 1, top, top - 1}
    for b in boundaries:
        want.update((b - 1, b, b + 1))
    p = 1
    while p <= top:
        want.update((p - 1, p, p + 1))
        p *= 2
    rng = np.random.default_rng(seed)
    if top > lo:
        want.update(int(v) for v in rng.integers(lo, top + 1, size=random_count))
    return tuple(sorted(v for v in want if lo <= v <= top))
