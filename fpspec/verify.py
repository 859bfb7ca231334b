"""Verification: is a replica (and its original) exactly what a spec says?

Three independent kinds of evidence:

    trees       at every n asked about, reveal each live side with the
                revelation engine and compare its tree with the spec's
                expansion at n (the first differing subtree is the message)
    arithmetic  at a few of those n (`probe_points`), probe each live side and
                compare the arithmetic it shows with the spec's arithmetic
                section, field by field
    samples     run the sides on the same random and adversarial inputs
                (fpspec.inputs) and compare the outputs bit for bit: replica vs
                the spec's reference evaluation, and replica vs original when
                there is one; inputs are spread over every n, and a few are run
                twice on each live side (one input must give one answer)

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
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from fpspec import inputs as fpinputs
from fpspec.errors import FpspecError
from fpspec.formats import get_format
from fpspec.reveal.targets import TargetError
from fpspec.tree import Tree, diff as tree_diff, format_tree, leaves, observable, size

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
    # a spec whose order depends on the output position: ((row, column), mask of the outputs in
    # that position's order), one or two per order; trees and arithmetic are compared at each
    positions: tuple = ()
    bias: str = "none"             # a spec's `bias = after | inside`: samples carry a bias vector
    fmt_b: str = ""                # B's format where fused nodes read two (e4m3 x e5m2): samples' B in it

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


def live_outputs(call: Callable | None, op: str, m: int | None, ncols: int | None, who: str,
                 call_at: Callable[[int], Callable] | None = None):
    """An `outputs` function that calls `call(*sample.args)` once per sample
    (or `call_at(n)(*sample.args)` when the callable depends on n)."""
    shape = fpinputs.output_shape(op, m, ncols)

    def outputs(n: int, samples: Sequence[fpinputs.Sample]) -> list:
        try:
            fn = call if call_at is None else call_at(n)
        except TargetError as e:     # resolving the target at n calls it too
            where = f" {samples[0].describe()}" if samples else ""
            raise SideFailure(f"{_one_line(e)} on n={n}{where}") from None
        out = []
        for s in samples:
            try:
                with np.errstate(all="ignore"):
                    value = fn(*s.args)
            except TargetError as e:    # a guarded user callable (resolve_target) names itself
                raise SideFailure(f"{_one_line(e)} on n={n} {s.describe()}") from None
            except Exception as e:  # the target's own failure is a finding, not a crash
                kind = getattr(e, "type_name", type(e).__name__)    # a replica's, raised in its process
                raise SideFailure(f"{who} raised {kind}: {_one_line(e)} on n={n} {s.describe()}") from None
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
    shown: str = ""                                     # what the side showed, key=value


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
    nondeterministic: bool = False   # one input gave two answers: a refusal (exit code 3), not a verdict


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
    stage_seconds: tuple[tuple[str, float], ...] = ()   # (stage, seconds): trees, arithmetic, samples
    inputs: int = 0                # distinct sample inputs (each run through every pair)
    notes: tuple[str, ...] = ()
    sampled_n: tuple[int, ...] = ()   # n checked by samples only (a tree too large to reveal)
    not_covered: str = ""             # the part of the spec's range no check reached, in words

    @property
    def nondeterministic(self) -> bool:
        return any(p.nondeterministic for p in self.problems)

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
        if self.sampled_n:
            lines.append(f"n sampled:  {' '.join(map(str, self.sampled_n))} (inputs compared; trees too large "
                         "to reveal)")
        bad_trees = [t for t in self.trees if not t.equal]
        per_side = ", ".join(f"{name} {sum(t.side == name for t in self.trees)}" for name in self.sides)
        failed = sum(p.stage == "tree" for p in self.problems)
        verdict = ("none could be revealed" if not self.trees else
                   "all equal" if not bad_trees else f"{len(bad_trees)} differ")
        lines.append(f"trees:      {len(self.trees)} compared ({per_side}), {verdict}"
                     + (f"; {failed} not revealed (see problems)" if failed else ""))
        if bad_trees:
            t = bad_trees[0]
            lines.append(f"  first: {t.side} at n={t.n} differs from {self.reference}:")
            lines.extend("    " + s for s in (t.difference or "").splitlines())
        bad_arith = [a for a in self.arithmetic if not a.equal]
        if self.arithmetic:
            lines.append(f"arithmetic: {len(self.arithmetic)} compared, "
                         + (f"all equal ({self.arithmetic[0].shown})" if not bad_arith
                            else f"{len(bad_arith)} differ"))
            for a in bad_arith:
                lines.append(f"  {a.side} (probed at n={a.n}):")
                for name, ref, got in a.differences:
                    lines.append(f"    {name}: {self.reference} says {ref}, {a.side} shows {got}")
        else:
            lines.append("arithmetic: not compared")
        if self.samples:
            pairs = sorted({f"{s.left} vs {s.right}" for s in self.samples})
            bad = [s for s in self.samples if not s.equal]
            where = "; ".join(f"{a} vs {b} at n={', '.join(str(s.n) for s in bad if (s.left, s.right) == (a, b))}"
                              for a, b in dict.fromkeys((s.left, s.right) for s in bad))
            lines.append(f"samples:    {self.inputs} inputs, {self.samples_run} comparisons "
                         f"({'; '.join(pairs)}; seed {self.seed}), "
                         + ("all bits equal" if not bad else f"differ: {where}"))
            if bad:
                lines.extend("  " + s for s in _mismatch_text(bad[0].mismatch))
        else:
            lines.append("samples:    none")
        for p in self.problems:
            where = f" at n={p.n}" if p.n is not None else ""
            lines.append(f"problem:    {p.stage}, {p.side}{where}: {p.message}")
        lines.extend(f"note:       {note}" for note in self.notes)
        stages = "".join(f", {name} {sec:.2f} s" for name, sec in self.stage_seconds)
        lines.append(f"time:       {self.seconds:.2f} s" + (f" ({stages[2:]})" if stages else ""))
        lines.append(self.verdict + (f" (not checked: {self.not_covered})"
                                     if self.not_covered and self.equivalent else ""))
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
            command: str = "verify", probe: bool = True, notes: Sequence[str] = (),
            sampled_n: Sequence[int] = (), not_covered: str = "") -> Report:
    """Compare `others` with `reference` at every n; run `samples` inputs spread over
    the n values through each pair in `sample_pairs` (left, right).  `sampled_n`:
    n checked by samples only (at most SAMPLED_INPUTS each); `not_covered`: what
    the caller left out, for the verdict."""
    start = time.perf_counter()
    n_values = tuple(sorted(set(int(n) for n in n_values)))
    sampled_n = tuple(sorted(set(int(n) for n in sampled_n) - set(n_values)))
    trees: list[TreeCheck] = []
    ariths: list[ArithmeticCheck] = []
    sample_checks: list[SampleCheck] = []
    problems: list[Problem] = []
    ref_trees: dict[int, Tree] = {}
    probe_ns = set(probe_points(n_values))
    clock = {"trees": 0.0, "arithmetic": 0.0, "samples": 0.0}

    points = reference.positions or ((None, None),)
    for n in n_values:
        for pos, mask in points:
            at = {} if pos is None else {"pos": pos}
            where = "" if pos is None else f" at output {pos}"
            try:
                ref_trees[n] = ref_tree = reference.tree_at(n, **at)
            except Exception as e:
                problems.append(Problem("tree", reference.name + where, n, _failure_text(e)))
                continue
            for side in others:
                t0 = time.perf_counter()
                try:
                    got = side.tree_at(n, **at)
                except Exception as e:
                    problems.append(Problem("tree", side.name + where, n, _failure_text(e),
                                            _is_nondeterminism(e)))
                    continue
                d = tree_diff(observable(ref_tree), observable(got))   # fused pairs reveal as binary
                text = None if d is None else where.strip() + _difference_text(d, reference.name, side.name)
                trees.append(TreeCheck(n, side.name, d is None, text, time.perf_counter() - t0))
                clock["trees"] += time.perf_counter() - t0
                # the arithmetic is probed at a few n (a library may switch kernels, and
                # arithmetics, with n), each time with the side's own tree: a probe
                # needs the real order, not the spec's
                if probe and n in probe_ns:
                    t0 = time.perf_counter()
                    check = _compare_arithmetic(reference, side, n, ref_tree, got, problems,
                                                {} if pos is None else {"pos": pos, "mask": mask})
                    if check is not None:
                        ariths.append(check)
                    clock["arithmetic"] += time.perf_counter() - t0

    t_samples = time.perf_counter()
    inputs = 0
    if samples > 0 and sample_pairs:
        counts = _spread(samples, len(n_values)) + [min(SAMPLED_INPUTS, samples)] * len(sampled_n)
        for n, count in zip(n_values + sampled_n, counts):
            if count == 0:
                continue
            batch = list(fpinputs.samples(reference.op, n, reference.fmt, count, seed=seed,
                                          m=reference.m, ncols=reference.ncols))
            if reference.bias != "none":
                batch = with_bias(batch, reference.fmt, seed)
            if reference.fmt_b:
                batch = with_b_format(batch, reference.fmt_b)
            inputs += len(batch)
            cache: dict[int, list | None] = {}     # id(side) -> its outputs on the batch
            for left, right in sample_pairs:
                outs = []
                for side in (left, right):
                    if id(side) not in cache:
                        try:
                            cache[id(side)] = side.outputs(n, batch)
                        except Exception as e:
                            cache[id(side)] = None
                            problems.append(Problem("samples", side.name, n, _failure_text(e)))
                    outs.append(cache[id(side)])
                if outs[0] is None or outs[1] is None:
                    continue
                mismatch = _first_mismatch(n, batch, left, right, outs[0], outs[1])
                sample_checks.append(SampleCheck(left.name, right.name, n, len(batch), mismatch))
            _repeat_check(n, batch, others, cache, problems)
    clock["samples"] = time.perf_counter() - t_samples

    return Report(command=command, reference=reference.name, sides=tuple(s.name for s in others),
                  op=reference.op, fmt=reference.fmt, n_values=n_values, trees=tuple(trees),
                  arithmetic=tuple(ariths), samples=tuple(sample_checks), problems=tuple(problems),
                  seed=seed, seconds=time.perf_counter() - start,
                  stage_seconds=tuple((k, v) for k, v in clock.items() if v >= 0.005), inputs=inputs,
                  notes=tuple(notes), sampled_n=sampled_n if samples > 0 and sample_pairs else (),
                  not_covered=not_covered)


# inputs per n that is checked by samples only (its reference is evaluated on the whole tree)
SAMPLED_INPUTS = 8


def with_b_format(batch, fmt_b: str) -> list:
    """Each gemm sample with B rounded to nearest in `fmt_b` (B of another format than A's)."""
    from fpspec.formats import get_format, round_to

    f = get_format(fmt_b)
    return [dataclasses.replace(s, args=(s.args[0], round_to(f, np.clip(np.asarray(s.args[1], np.float64),
                                                                        -f.largest, f.largest))) + s.args[2:])
            for s in batch]


def with_bias(batch, fmt: str, seed: int) -> list:
    """Each gemm sample with a third argument, a bias per output column exact in `fmt`: its
    magnitudes spread around the outputs' (so that where it enters shows in the bits), some
    zeros and signed zeros."""
    from fpspec.formats import get_format, round_to

    out = []
    for s in batch:
        A, B = (np.asarray(v, np.float64) for v in s.args[:2])
        rng = np.random.default_rng([seed, s.index, A.shape[1], 7])
        with np.errstate(all="ignore"):
            scale = np.abs(A) @ np.abs(B)
        scale = np.where(np.isfinite(scale), scale, 1.0).max(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        b = rng.standard_normal(B.shape[1]) * scale * np.exp2(rng.integers(-12, 3, B.shape[1]))
        b = round_to(get_format(fmt), np.clip(b, -get_format(fmt).largest, get_format(fmt).largest))
        b[rng.random(B.shape[1]) < 0.1] = 0.0
        b[rng.random(B.shape[1]) < 0.05] = -0.0
        out.append(dataclasses.replace(s, args=s.args[:2] + (b,)))
    return out


def _is_nondeterminism(e: BaseException) -> bool:
    from fpspec.errors import RevealRefused

    return isinstance(e, RevealRefused) and "nondeterministic" in str(e)


PROBE_POINTS = 3


def probe_points(n_values: Sequence[int], count: int = PROBE_POINTS) -> tuple[int, ...]:
    """The n at which arithmetic is probed: the smallest, the largest and evenly
    spaced ones between (probes cost ~100 calls each; samples cover every n)."""
    ns = sorted(set(n_values))
    if len(ns) <= count:
        return tuple(ns)
    picks = {ns[round(i * (len(ns) - 1) / (count - 1))] for i in range(count)}
    return tuple(sorted(picks))


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
                        problems: list, at: dict | None = None) -> ArithmeticCheck | None:
    if reference.arithmetic_at is None or side.arithmetic_at is None:
        return None

    def ask(who: Side, t: Tree):
        try:
            return who.arithmetic_at(n, t, **(at or {}))
        except Exception as e:   # a probe that cannot run is a finding, as a crash would be
            problems.append(Problem("arithmetic", who.name, n, _failure_text(e)))
            return None

    want = ask(reference, ref_tree)
    if want is None:       # no arithmetic section (or no answer): nothing to hold the side to
        return None
    if isinstance(want, RegionalArithmetic):
        return _compare_regional(reference, side, n, want, problems)
    got = ask(side, tree)
    if got is None:
        return None
    if isinstance(got, RegionalArithmetic):      # the spec is the side: held the other way round
        return _compare_regional(side, reference, n, got, problems)
    lines = tuple(getattr(got, "lines", ()) or ())
    # a probe whose best arithmetic does not reproduce the side's own outputs means
    # the side has no single arithmetic (a kernel and a tail loop that differ): it
    # cannot follow a spec that states one
    consistent = bool(getattr(got, "consistent", True))
    misses = getattr(got, "mismatches", "some")
    got = getattr(got, "arithmetic", got)
    want = getattr(want, "arithmetic", want)
    shown = " ".join(f"{k}={v}" for k, v in _flat_fields(got).items() if v != "None")
    differences = arithmetic_differences(want, got)
    if (n <= 2 and differences and {d[0] for d in differences} <= INDISTINGUISHABLE_AT_2 and consistent
            and _same_as_model(reference, side, n)):
        # note [indistinguishable arithmetics]
        lines += (f"the probe's closest arithmetic differs in {', '.join(d[0] for d in differences)}, which make "
                  f"no difference at n={n}: the outputs equal the spec's model on {REGIONAL_SAMPLES} inputs",)
        shown = " ".join(f"{k}={v}" for k, v in _flat_fields(want).items() if v != "None")
        differences = ()
    if not consistent:
        differences += (("single arithmetic", "yes",
                         f"no: the closest one misses {misses} probe checks"),)
    return ArithmeticCheck(side.name, n, not differences, differences, lines, shown)


# Note [indistinguishable arithmetics]: with one addition (n = 2) two
# accumulators can give the same bits on every input (two bf16 terms added
# in fp32 and rounded to bf16 are one bf16 addition: their fp32 sum is exact
# or far from a bf16 midpoint), and the probe then names either.  So can a
# product format with them: two products rounded to fp32 and added in fp64,
# then rounded to fp32, are one fp32 addition of the rounded products
# (numpy.vdot on fp32).  There an
# accumulator that differs from the spec's is a finding only when the side's
# outputs differ from the spec's model: REGIONAL_SAMPLES inputs of every
# input family decide.


INDISTINGUISHABLE_AT_2 = {"accumulator", "product_format"}


def _same_as_model(reference: Side, side: Side, n: int) -> bool:
    """Whether `side` gives the spec's model bits on REGIONAL_SAMPLES inputs at n."""
    if reference.outputs is None or side.outputs is None:
        return False
    batch = list(fpinputs.samples(reference.op, n, reference.fmt, REGIONAL_SAMPLES, seed=n,
                                  m=reference.m, ncols=reference.ncols))
    try:
        got, ref = side.outputs(n, batch), reference.outputs(n, batch)
    except Exception:      # a side that cannot run is the samples stage's finding
        return False
    return all(np.all(_same_bits(a, b)) for a, b in zip(ref, got))


@dataclass(frozen=True)
class RegionalArithmetic:
    """A spec's arithmetic at n when parts of its tree have their own
    (`using(NAME, ...)`, fpspec.spec.regions): the main arithmetic, node key ->
    Arithmetic, and the section names in use."""

    main: object
    regions: dict
    names: tuple


REGIONAL_SAMPLES = 64     # inputs per probed n on which a side meets a regional spec's model


def _compare_regional(reference: Side, side: Side, n: int, want: RegionalArithmetic,
                      problems: list) -> ArithmeticCheck | None:
    """Note [regional arithmetic check]: one whole-tree probe of a side cannot
    show several arithmetics, so a side is held to a regional spec by bits: its
    outputs against the spec's per-node model on REGIONAL_SAMPLES inputs of
    every input family at n."""
    batch = list(fpinputs.samples(reference.op, n, reference.fmt, REGIONAL_SAMPLES, seed=n,
                                  m=reference.m, ncols=reference.ncols))
    try:
        got = side.outputs(n, batch)
        ref = reference.outputs(n, batch)
    except Exception as e:
        problems.append(Problem("arithmetic", side.name, n, _failure_text(e)))
        return None
    bad = sum(int(not np.all(_same_bits(a, b))) for a, b in zip(ref, got))
    shown = f"{len(batch) - bad} of {len(batch)} inputs equal to the per-node model"
    regions = ", ".join(want.names)
    differences = () if not bad else (("outputs on sample inputs", "the spec's per-node model",
                                       f"{bad} of {len(batch)} differ"),)
    lines = (f"regional arithmetic (main and {regions}): compared by bits on {len(batch)} inputs",)
    return ArithmeticCheck(side.name, n, not bad, differences, lines, shown)


def _same_bits(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def _flat_fields(obj, prefix: str = "") -> dict[str, str]:
    """Fields of a (nested) dataclass as {dotted name: text}."""
    if obj is None or not dataclasses.is_dataclass(obj):
        return {prefix.rstrip(".") or "value": str(obj)}
    out: dict[str, str] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out.update(_flat_fields(value, f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = str(value)
    return out


def arithmetic_differences(want, got) -> tuple[tuple[str, str, str], ...]:
    """(field, want, got) for every field that differs; nested dataclasses flattened."""
    a, b = _flat_fields(want), _flat_fields(got)
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
        first = cache.get(id(side))
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
                    f"then {_value_text(b[element] if element else b, fmt)}", True))
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
    if not boundaries:   # nothing to aim at: powers of two and their neighbours
        p = 1
        while p <= top:
            want.update((p - 1, p, p + 1))
            p *= 2
    rng = np.random.default_rng(seed)
    if top > lo:
        want.update(int(v) for v in rng.integers(lo, top + 1, size=random_count))
    return tuple(sorted(v for v in want if lo <= v <= top))


# ================================================================ sides from specs, targets and replicas
# Everything below talks to the earlier stages (spec, arith, reveal, compile)
# through their published entry points only; the engine above needs none of it.

DEFAULT_TARGET_N = (7, 8, 9, 16, 32, 33, 128, 129, 1000)   # diff of two live targets, no spec to guide


def load_spec(path) -> object:
    """Parse and check a .fps file; FpspecError when it is missing, a
    directory, empty or unreadable, SpecError when it is binary or malformed.

    Imports the spec stage's functions from their own modules: the package's
    lazy wrappers are shadowed by the submodules of the same names once those
    are imported.
    """
    from pathlib import Path

    from fpspec.io import read_text
    from fpspec.spec.check import check
    from fpspec.spec.parse import parse

    if not Path(path).exists():
        raise FpspecError(f"{path}: no such spec file")
    spec = parse(read_text(path, ".fps spec"), str(path))
    check(spec)
    return spec


def spec_arithmetic(spec):
    """The spec's arithmetic section as fpspec.arith.Arithmetic (None when it has none)."""
    block = spec.header.arithmetic
    if block is None:
        return None
    from fpspec.arith import Arithmetic

    return Arithmetic.from_entries(block.entries)


def spec_format(spec) -> tuple[str, str]:
    """(input format, output format) named by the spec: its arithmetic's, or its `formats`
    section's where it has no arithmetic (the formats its replicas take and return); fp32
    when it names none."""
    from fpspec.spec.regions import main_arithmetic

    arith = main_arithmetic(spec)
    return arith.input, arith.output


def spec_boundaries(spec) -> tuple[int, ...]:
    """Every integer constant compared against in a guard, with its small
    multiples: the n at which a branch (or a recursive sub-range's branch) flips."""
    from fpspec.spec import ast as A

    found: set[int] = set()
    for node in _walk(spec):
        if isinstance(node, A.Compare):          # `n < 8` flips at 8; a halving recursion at 16
            for sub in _walk((node.left, node.right)):
                if isinstance(sub, A.Num):
                    found.update((sub.value, 2 * sub.value, 2 * sub.value + 1))
        elif isinstance(node, A.Num) and node.value > 1:   # lanes(8, ...): tails appear at 9
            found.update((node.value, node.value + 1))
    return tuple(sorted(v for v in found if v > 0))


def _walk(node):
    stack = [node]
    while stack:
        x = stack.pop()
        yield x
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
        elif isinstance(x, tuple):
            stack.extend(x)


# Note [cost of an n]: revealing a replica's tree at n costs about n·log2(n) calls of
# length n (n²·log2(n) element operations through a pipe: tens of seconds at 2^12 on
# one core), a sampled check one reference evaluation of a tree of n leaves per input
# (its expansion is n Python objects: seconds per input at 2^16 on a busy core).  Whatever
# --max-n asks, trees are revealed up to REVEAL_MAX_N, outputs sampled up to
# SAMPLED_LIMIT, and the verdict names the rest (never a run that cannot end).
REVEAL_MAX_N = 1 << 12
# n above the revealed ones are checked by samples up to this n by default ...
SAMPLED_MAX_N = 1 << 15
# ... and up to this n at most, however large --max-n is
SAMPLED_LIMIT = 1 << 16


def reveal_cost(n: int) -> int:
    """Element operations of revealing a tree at n (note [cost of an n])."""
    return n * n * max(1, (n - 1).bit_length())


def spec_n_values(spec, *, max_n: int = 4096, random_count: int = 4, seed: int = 0) -> tuple[int, ...]:
    """n whose trees are revealed: guards, range ends, random n, at most min(max_n, REVEAL_MAX_N)."""
    rng_ = spec.header.n
    top = min(max_n, REVEAL_MAX_N)
    lo = max(2, rng_.lo if rng_ is not None else 2)
    hi = rng_.hi if rng_ is not None and rng_.hi is not None else top
    return default_n_values(lo, hi, spec_boundaries(spec), random_count=random_count, max_n=top, seed=seed)


def split_asked_n(spec, n_values, *, max_n: int = 4096) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """n given with -n, as (n to reveal, n to check by samples); an n beyond any
    bounded check is refused in one line before anything runs."""
    revealed = min(max(max_n, 2), REVEAL_MAX_N)
    cap = min(max(SAMPLED_MAX_N, max_n), SAMPLED_LIMIT)
    too_big = [n for n in n_values if n > cap]
    if too_big:
        raise FpspecError(f"-n {too_big[0]}: too large to check (a tree of {too_big[0]} leaves); verify reveals "
                          f"trees up to n = {revealed} and samples outputs up to n = {cap}")
    return (tuple(n for n in n_values if n <= revealed), tuple(n for n in n_values if n > revealed))


def spec_sampled_n(spec, *, max_n: int = 4096) -> tuple[tuple[int, ...], str]:
    """(n above max_n to check by samples, what stays unchecked in words): the
    guard boundaries and the range's end above max_n with their neighbours
    and, for a range without an end, a few n spread up to SAMPLED_MAX_N."""
    rng_ = spec.header.n
    lo = max(2, rng_.lo if rng_ is not None else 2)
    hi = rng_.hi if rng_ is not None else None
    cap = min(max(SAMPLED_MAX_N, max_n), SAMPLED_LIMIT)
    max_n = min(max_n, REVEAL_MAX_N)
    want: set[int] = set()
    boundaries = [b for b in spec_boundaries(spec) if b > max_n]
    for b in boundaries:
        want.update((b - 1, b, b + 1))
    want.update((max_n + 1, 2 * max_n + 1))    # just past the revealed n
    if hi is not None:
        want.update((hi - 1, hi, min(hi, cap) - 1, min(hi, cap)))
    else:
        want.add(cap)
    top = cap if hi is None else min(hi, cap)
    sampled = tuple(sorted(v for v in want if max(lo, max_n + 1) <= v <= top))
    if hi is not None and hi <= cap:
        return sampled, ""
    beyond = [b for b in boundaries if b > cap]
    return sampled, f"n > {cap}" + (f" (guards at {', '.join(map(str, beyond[:4]))})" if beyond else "")


def make_spec_side(spec, name: str, *, m: int | None = None, ncols: int | None = None) -> Side:
    """The spec as a side: trees by expansion, outputs by the arithmetic model
    (per node where the spec has `arithmetic NAME { ... }` sections)."""
    from fpspec.spec.expand import expand, expand_arith

    op = spec.header.op or "sum"
    fmt, out_fmt = spec_format(spec)
    arith = spec_arithmetic(spec)
    m, ncols = _shape(op, m, ncols, spec)
    trees: dict = {}
    regions: dict = {}
    names = tuple(a.name for a in spec.header.arithmetics)
    labels, reps = position_labels(spec, m, ncols)

    inside = arith is not None and arith.bias == "inside"   # the order over the bias and n terms

    def full_tree(n: int, pos: tuple = (0, 0)) -> Tree:
        key = (n, pos)
        if key not in trees:
            if names:
                trees[key], _, regions[key] = expand_arith(spec, n, pos)
            else:
                trees[key] = expand(spec, n, pos)
        return trees[key]

    def tree_at(n: int, pos: tuple = (0, 0)) -> Tree:
        # fpspec.arith.model note [bias]: a bias inside is seen (as +0.0) as no operand at all
        return without_first_leaf(full_tree(n + 1, pos)) if inside else full_tree(n, pos)

    def outputs(n: int, samples) -> list:
        if arith is None:
            raise SideFailure("the spec has no arithmetic section: nothing defines its outputs")
        k_tree = n + 1 if inside else n
        if labels is None:
            return reference_outputs(full_tree(k_tree), arith, op, samples, regions.get((k_tree, (0, 0))))
        # each order on every output, kept where the output is in that order
        out = None
        for k, pos in enumerate(reps):
            part = reference_outputs(full_tree(k_tree, pos), arith, op, samples, regions.get((k_tree, pos)))
            here = labels.reshape(part[0].shape) == k
            out = part if out is None else [np.where(here, p, o) for p, o in zip(part, out)]
        return out

    # the probes call without a bias (+0.0): they see the arithmetic without it; the samples
    # carry a bias and check where it enters by bits
    # (a +0.0 bias inside is an initial +0.0, fpspec.arith.model note [init +0.0]; after, the spec's init is
    # the accumulation's own, as probed)
    probed = arith if arith is None or arith.bias == "none" else dataclasses.replace(
        arith, bias="none", init="+0.0" if arith.bias == "inside" else arith.init)

    def arithmetic_at(n: int, t, pos: tuple = (0, 0), mask=None):
        tree_at(n, pos)
        found = regions.get((n + 1 if inside else n, pos))
        return RegionalArithmetic(probed, found, names) if names and found else probed

    points = () if labels is None else tuple(
        (p, labels == k) for k, first in enumerate(reps)
        for p in dict.fromkeys([first, tuple(int(v) for v in np.argwhere(labels == k)[-1])]))
    return Side(name, "spec", op, fmt, tree_at=tree_at, arithmetic_at=arithmetic_at, outputs=outputs,
                out_fmt=out_fmt, m=m, ncols=ncols, positions=points,
                bias="none" if arith is None else arith.bias,
                fmt_b=(arith.fused.input_b or "") if arith is not None and arith.fused is not None else "")


def without_first_leaf(t: Tree) -> Tree:
    """`t` without leaf 0, the others numbered from 0 (a node left with one child is that child)."""
    from fpspec.tree import Node

    def strip(u):
        if isinstance(u, (int, np.integer)):
            return None if u == 0 else int(u) - 1
        kids = tuple(k for k in (strip(c) for c in u.children) if k is not None)
        return kids[0] if len(kids) == 1 else Node(kids, u.fused)

    return strip(t)


def position_labels(spec, m, ncols):
    """(labels, representatives) for a spec whose root `if` tests the output row i or
    column j: labels (m x ncols, ints) number the arms the outputs take, in order,
    representatives the first output of each; (None, ()) for any other spec."""
    from fpspec.spec.positions import arm_labels, position_guard

    if position_guard(spec) is None or m is None:
        return None, ()
    arms = arm_labels(spec, (m, ncols or 1), spec.header.n.lo if spec.header.n is not None else 1)
    used = sorted(set(arms.reshape(-1).tolist()))
    labels = np.searchsorted(used, arms)
    reps = tuple(tuple(int(v) for v in np.argwhere(labels == k)[0]) for k in range(len(used)))
    return labels, reps


def _shape(op: str, m, ncols, spec=None) -> tuple[int | None, int | None]:
    # the spec's revealed shape (provenance), else the first it covers, else fpspec.reveal's
    # defaults: 4 rows, 4 columns; a shape the spec does not cover is refused (its replica would)
    if spec is not None:
        from fpspec.compile.runtime.inputs_rt import _fits, _said
        from fpspec.spec.shapes import covered_shapes, provenance_shape

        pm, pn = provenance_shape(spec)
        rows, cols = covered_shapes(spec)
        given = {"-m": m, "--ncols": ncols}
        m = m or pm or (rows[0][0] if rows else None)
        ncols = ncols or pn or (cols[0][0] if cols else None)
        for flag, size, sizes, what in (("-m", m, rows, "rows"), ("--ncols", ncols, cols, "columns")):
            if given[flag] is not None and not _fits(size, sizes):
                raise FpspecError(f"{flag} {size}: the spec covers outputs of {_said(sizes)} {what} only "
                                  "(the shape it was revealed at, or its `shapes` section): other shapes may "
                                  "take other orders")
    if op == "gemv":
        return int(m or 4), None
    if op == "gemm":
        return int(m or 4), int(ncols or 4)
    return None, None


def reference_outputs(tree: Tree, arith, op: str, samples, regions: dict | None = None) -> list:
    """The arithmetic model's result for each sample, all samples in one tree walk
    (`regions`: node key -> Arithmetic, fpspec.arith.evaluate note [regions]); a gemm
    sample's third argument is its bias (none: +0.0), where the arithmetic takes one."""
    from fpspec.arith import evaluate

    if not samples:
        return []
    xs, ys, shapes, biases = [], [], [], []
    for s in samples:
        a = np.asarray(s.args[0], np.float64)
        b = np.asarray(s.args[1], np.float64) if len(s.args) > 1 else None
        if op == "sum":
            cols_x, cols_y = a[:, None], None
        elif op == "dot":
            cols_x, cols_y = a[:, None], b[:, None]
        elif op == "gemv":
            cols_x, cols_y = a.T, np.repeat(b[:, None], a.shape[0], axis=1)
        else:   # gemm: output (i, j) is row i of A against column j of B, row-major
            mm, nc = a.shape[0], b.shape[1]
            cols_x = np.repeat(a.T, nc, axis=1)
            cols_y = np.tile(b, (1, mm))
            biases.append(np.tile(np.asarray(s.args[2], np.float64) if len(s.args) > 2 else np.zeros(nc), mm))
        xs.append(cols_x)
        ys.append(cols_y)
        shapes.append(() if op in ("sum", "dot") else (a.shape[0],) if op == "gemv" else (a.shape[0], b.shape[1]))
    x = np.concatenate(xs, axis=1)
    y = None if op == "sum" else np.concatenate(ys, axis=1)
    bias = np.concatenate(biases) if biases and getattr(arith, "bias", "none") != "none" else None
    with np.errstate(all="ignore"):
        flat = np.asarray(evaluate(tree, x, y, arith, regions, **({} if bias is None else {"bias": bias})),
                          np.float64).reshape(-1)
    out, k = [], 0
    for shape in shapes:
        size_ = int(np.prod(shape)) if shape else 1
        out.append(flat[k:k + size_].reshape(shape))
        k += size_
    return out


def make_live_side(name: str, role: str, op: str, fmt: str, target_at: Callable[[int], object], *,
                   out_fmt: str | None = None, m: int | None = None, ncols: int | None = None,
                   reveal_options: dict | None = None) -> Side:
    """A live implementation as a side: trees revealed, arithmetic probed, outputs called.

    target_at(n) builds the fpspec.reveal.Target at reduction length n.
    """
    targets: dict[int, object] = {}

    def target(n: int):
        if n not in targets:
            targets[n] = target_at(n)
        return targets[n]

    def tree_at(n: int, pos: tuple = (0, 0)) -> Tree:
        from fpspec.reveal.positions import moved

        return _reveal()(moved(target(n), *pos), **(reveal_options or {})).tree

    def arithmetic_at(n: int, tree: Tree, pos: tuple = (0, 0), mask=None):
        from fpspec.arith import probe_arithmetic
        from fpspec.reveal.positions import restricted

        t = target(n)
        return probe_arithmetic(t if mask is None else restricted(t, mask, pos), tree)

    def call_at(n: int) -> Callable:
        t = target(n)   # the target's own conversions: library dtype in, float64 out
        return lambda *args: t.to_float64(t.fn(*(t.native(np.asarray(a, np.float64)) for a in args)))

    outputs = live_outputs(None, op, m, ncols, name, call_at=call_at)

    return Side(name, role, op, fmt, tree_at=tree_at, arithmetic_at=arithmetic_at, outputs=outputs,
                out_fmt=out_fmt, m=m, ncols=ncols)


def _reveal():
    try:
        from fpspec.reveal import reveal
    except ImportError:
        from fpspec.reveal.engine import reveal
    return reveal


def _resolve_target():
    try:
        from fpspec.reveal import resolve_target
    except ImportError:
        from fpspec.reveal.targets import resolve_target
    return resolve_target


_TORCH_DTYPES = {"fp64": "float64", "fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def torch_replica(fn: Callable, fmt: str, device: str | None = None) -> Callable:
    """A replica that takes torch tensors (Triton), called with NumPy arrays:
    each array becomes a tensor of the input format on the GPU when there is
    one (else the CPU, for TRITON_INTERPRET=1)."""
    import torch

    if fmt not in _TORCH_DTYPES:
        raise FpspecError(f"no torch dtype for {fmt} inputs")
    dtype = getattr(torch, _TORCH_DTYPES[fmt])
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")

    def call(*arrays):
        tensors = (torch.from_numpy(np.asarray(a, np.float64)).to(device=device, dtype=dtype) for a in arrays)
        out = fn(*tensors).detach().cpu()
        # NumPy out as NumPy in (the revelation engine reads outputs' bits in place); bf16 has no
        # NumPy dtype: its values, exact in float32
        return (out.float() if out.dtype == torch.bfloat16 else out).numpy()

    return call


def make_replica_side(fn: Callable, label: str, op: str, fmt: str, *, out_fmt: str | None = None,
                      m: int | None = None, ncols: int | None = None, role: str = "replica",
                      call_rows: Callable | None = None, fmt_b: str = "") -> Side:
    """fmt_b: B's format where the replica reads B in another (fused input_b): the revelation's
    masks then hold in it."""
    from fpspec.reveal.targets import from_callable

    def target_at(n: int):
        t = from_callable(fn, op=op, n=n, dtype=fmt, m=m or 1, ncols=ncols or 1, name=label,
                          call_rows=call_rows, out_fmt=out_fmt)
        return dataclasses.replace(t, fmt_b=fmt_b) if fmt_b else t

    return make_live_side(label, role, op, fmt, target_at, out_fmt=out_fmt, m=m, ncols=ncols)


def make_target_side(name: str, op: str | None, fmt: str, *, role: str = "original", m: int | None = None,
                     ncols: int | None = None, device: str = "cpu", bias: str = "none", fmt_b: str = "") -> Side:
    """A library function named on the command line (numpy.sum, torch.matmul, pkg.mod:fn);
    `bias`: the spec's bias clause, which the function must take (torch.nn.functional.linear)."""
    resolve_target = _resolve_target()
    base, _, dev = name.partition("@")     # torch.sum@cuda names a device
    device = dev or device
    two = {"dtype_b": fmt_b} if fmt_b else {}
    first = resolve_target(base, op=op, n=8, dtype=fmt, m=m, ncols=ncols, device=device, **two)
    if bias != "none" and not getattr(first, "takes_bias", False):
        raise FpspecError(f"the spec adds a bias (bias = {bias}), but {name} takes none "
                          "(torch.nn.functional.linear does)")
    op = first.op
    m, ncols = (first.m if op in ("gemv", "gemm") else None), (first.ncols if op == "gemm" else None)

    def target_at(n: int):
        return resolve_target(base, op=op, n=n, dtype=fmt, m=m, ncols=ncols, device=device, **two)

    return make_live_side(name, role, op, first.fmt, target_at, out_fmt=first.out_fmt, m=m, ncols=ncols)


# ================================================================ the two commands as functions

def verify_spec(spec, *, spec_name: str = "spec", backend: str = "numpy", replica_source: str | None = None,
                replica_label: str | None = None, against: str | None = None, n_values=None,
                samples: int = 10000, seed: int = 0, max_n: int = 4096, m: int | None = None,
                ncols: int | None = None, device: str = "cpu", replica_fn: Callable | None = None,
                replica_path: str | None = None) -> Report:
    """Compile (or take) a replica of `spec` and check it, and `against`, against the spec.

    The replica is the file a user ships: its source (compiled for `backend`, or
    `replica_source`, the text of the file `replica_path`) is written to a
    private temporary folder, imported in a fresh process (note [replica in a
    process]) and every public function it exposes is called there; the folder
    and the process are gone when this returns.  `replica_fn` instead checks a
    callable of this process (fpspec.testing)."""
    if spec.header.arithmetic is None:
        raise FpspecError(f"{spec_name} has no arithmetic section: nothing defines the bits a replica must "
                          "give (fpspec probe TARGET writes one)")
    ref = make_spec_side(spec, spec_name, m=m, ncols=ncols)
    notes: list[str] = []
    if n_values:
        from fpspec.spec.expand import check_n

        for n in n_values:
            check_n(spec, n)
        n_values, sampled = split_asked_n(spec, n_values, max_n=max_n)
        uncovered = ""
    else:
        n_values = spec_n_values(spec, max_n=max_n, seed=seed)
        sampled, uncovered = spec_sampled_n(spec, max_n=max_n)
        notes.append(f"n values chosen from the spec's guards and range (trees at most {min(max_n, REVEAL_MAX_N)}, "
                     f"samples at most {min(max(SAMPLED_MAX_N, max_n), SAMPLED_LIMIT)}; -n to add more)")
    if replica_fn is not None:
        rep = make_replica_side(replica_fn, replica_label or "replica", ref.op, ref.fmt, out_fmt=ref.out_fmt,
                                m=ref.m, ncols=ref.ncols)
        return _verify_sides(ref, rep, (), against, n_values, sampled, uncovered, samples, seed, device, notes,
                             getattr(spec_arithmetic(spec), "binned", None))

    from fpspec.compile.process import ReplicaProcess, file_sha256, private_folder, remove_folder

    compiled = replica_source is None
    if compiled:
        from fpspec.compile import compile_spec

        replica_source = compile_spec(spec, target=backend)
    label = replica_label or f"replica ({backend})"
    folder = private_folder("fpspec-verify-")
    process = None
    try:
        path = folder / (Path(replica_label).name if replica_label and not compiled else "replica.py")
        path.write_bytes(replica_source.encode() if isinstance(replica_source, str) else replica_source)
        digest = file_sha256(path)
        process = ReplicaProcess.start(path, replica_path or label)
        rep, extra = _process_sides(process, ref, label)
        where = (f"{replica_path or replica_label} (a private copy)" if not compiled else
                 f"{path} (fpspec compile --target {backend}, removed after)")
        notes.insert(0, f"replica file: {where}, sha256 {digest}, fresh process (pid {process.pid}); "
                        f"checked: {', '.join(f + '()' for f in process.functions)}")
        return _verify_sides(ref, rep, extra, against, n_values, sampled, uncovered, samples, seed, device, notes,
                             getattr(spec_arithmetic(spec), "binned", None))
    finally:
        if process is not None:
            process.close()
        remove_folder(folder)


# Note [replica in a process]: verify checks the file a user ships, not a
# module this process happens to hold: the replica is written to a private
# folder (mkdtemp, mode 0700; nothing found on disk is trusted), imported in a
# child interpreter that has not imported fpspec, and called there through a
# pipe.  Trees are revealed through that child (batched queries through
# sums(), which the engine checks against single calls), and every public
# function is compared with the spec on the sample inputs: sum() and sums()
# each (one edited by hand is caught even when the other is right).


def _process_sides(process, ref: Side, label: str) -> tuple[Side, tuple[Side, ...]]:
    """The replica in `process` as a side (its op's function), and the sides of its
    other public functions (sums() of a sum replica), for the samples."""
    from fpspec.compile.process import PUBLIC

    op = ref.op
    if op not in process.functions:
        raise FpspecError(f"replica {label} has no function {op}(); a replica of a {op} spec exposes {op}()")
    wrong = [f for f in process.functions if f not in (op, "sums" if op == "sum" else op)]
    if wrong:
        raise FpspecError(f"replica {label} exposes {', '.join(w + '()' for w in wrong)}, which a {op} spec "
                          f"does not define (a replica exposes only its op: {', '.join(PUBLIC)})")
    torch_dtype = _TORCH_DTYPES.get(ref.fmt) if process.takes_tensors else None

    def call(name: str):
        return lambda *args: process.call(name, *args, torch_dtype=torch_dtype)

    has_sums = "sums" in process.functions
    rows = (lambda X: process.call("sums", np.ascontiguousarray(np.asarray(X).T), torch_dtype=torch_dtype)) \
        if has_sums else None
    rep = make_replica_side(call(op), label, op, ref.fmt, out_fmt=ref.out_fmt, m=ref.m, ncols=ref.ncols,
                            call_rows=rows, fmt_b=ref.fmt_b)
    if not has_sums:
        return rep, ()
    sums = call("sums")

    def sums_outputs(n: int, batch) -> list:
        # every sample of one n as a column of one call: each column is its own sum
        X = np.stack([np.asarray(s.args[0]) for s in batch], axis=1)
        try:
            got = np.asarray(sums(X), np.float64)
        except Exception as e:
            raise SideFailure(f"{label} sums() raised {_one_line(e)} on n={n}") from None
        if got.shape != (len(batch),):
            raise SideFailure(f"{label} sums() returned shape {got.shape} for {len(batch)} columns at n={n}")
        return [got[k].reshape(()) for k in range(len(batch))]

    return rep, (Side(f"{label} sums()", "replica", op, ref.fmt, tree_at=rep.tree_at, outputs=sums_outputs,
                      out_fmt=ref.out_fmt),)


def _verify_sides(ref: Side, rep: Side, extra: Sequence[Side], against: str | None, n_values, sampled,
                  uncovered: str, samples: int, seed: int, device: str, notes: list,
                  fold: int | None = None) -> Report:
    sides = [rep]
    pairs = [(ref, rep)] + [(ref, side) for side in extra]
    if fold is not None:     # order-independent (fpspec.arith.binned): note [binned replicas]
        rep, shuffled, note = binned_sides(ref, rep, fold, seed)
        sides, pairs = [rep, shuffled], [(ref, rep), (ref, shuffled)] + pairs[1:]
        notes.append(note)
    if against:
        orig = make_target_side(against, ref.op, ref.fmt, role="original", m=ref.m, ncols=ref.ncols,
                                device=device, bias=ref.bias, fmt_b=ref.fmt_b)
        sides.append(orig)
        pairs.insert(0, (orig, rep))
    return compare(ref, sides, n_values, samples=samples, seed=seed, sample_pairs=pairs,
                   command="verify", notes=notes, sampled_n=sampled, not_covered=uncovered,
                   # the probes draw both operands from one format: two (e4m3 x e5m2) are held to the
                   # spec by the trees and the bits of the samples
                   probe=fold is None and not ref.fmt_b)


def binned_sides(ref: Side, rep: Side, fold: int, seed: int) -> tuple[Side, Side, str]:
    """Note [binned replicas]: a binned spec holds for every tree, so the replica's tree check is
    FPRev's pair test itself, with masks that a binned accumulator holds exactly but a plain one of
    the format does not (M = 2^(p+2), u = 1; inside the fold's 2^(W(K-1)) window): every pair must
    cancel first, as in math.fsum ("order-independent"); the tree compared is then the spec's own.
    A second side runs the replica on the terms permuted (a fresh permutation per n), compared bit
    for bit with the spec's reference.  The arithmetic is not probed: no plain arithmetic fits."""
    from dataclasses import replace

    from fpspec.arith.binned import binned_format

    fmt = binned_format(ref.fmt)
    big = 2.0 ** min(fmt.p + 2, fmt.width * (fold - 1))
    rng = np.random.default_rng(seed)

    def call(vec):
        n = vec.shape[0]
        ones = np.ones(n)
        args = {"sum": (vec,), "dot": (vec, ones), "gemv": (vec[None, :], ones),
                "gemm": (vec[None, :], ones[:, None])}[ref.op]
        return float(np.asarray(rep.outputs(n, [fpinputs.Sample("masks", 0, 0, args)])[0]).ravel()[0])

    proven: set = set()      # the pair test runs once per n for both sides

    def tree_at(n: int, pos: tuple = (0, 0)) -> Tree:
        pairs = [] if n in proven else [(i, j) for i in range(n) for j in range(i + 1, n)]
        if len(pairs) > 64:
            pairs = [pairs[k] for k in rng.choice(len(pairs), 64, replace=False)] + [(0, n - 1)]
        for i, j in pairs:
            vec = np.ones(n)
            vec[i], vec[j] = big, -big
            got = call(vec)
            if got != n - 2:
                raise SideFailure(f"masks +-2^{int(math.log2(big))} at leaves {i}, {j} give {got!r}, not {n - 2}: "
                                  "the replica's result depends on the order")
        proven.add(n)
        return ref.tree_at(n, **({} if pos == (0, 0) else {"pos": pos}))

    def permuted(n: int, samples) -> list:
        # a fresh permutation, and 1..n zero terms (which add nothing) at random places: the
        # replica's blocks, threads and programs split the terms elsewhere
        perm = rng.permutation(n)
        zeros = int(rng.integers(1, n + 1))
        slots = np.sort(rng.choice(n + zeros, n, replace=False))
        axis = {"sum": (0,), "dot": (0, 0), "gemv": (1, 0), "gemm": (1, 0)}[ref.op]

        def spread(a, k):
            a = np.take(a, perm, axis=k)
            out = np.zeros(a.shape[:k] + (n + zeros,) + a.shape[k + 1:], a.dtype)
            out[(slice(None),) * k + (slots,)] = a
            return out

        moved = [replace(s, args=tuple(spread(a, k) for a, k in zip(s.args, axis))) for s in samples]
        return rep.outputs(n + zeros, moved)

    shuffled = replace(rep, name=f"{rep.name}, terms permuted and split", outputs=permuted, tree_at=tree_at)
    note = (f"binned(fold = {fold}): order-independent; the replica's order checked by FPRev's pair test with "
            f"masks +-2^{int(math.log2(big))} and unit 1 (every pair cancels first, as in math.fsum), its bits on "
            "permuted terms split by zeros too")
    return replace(rep, tree_at=tree_at), shuffled, note


def diff_sides(a: Side, b: Side, n_values, *, samples: int = 0, seed: int = 0, notes=(), sampled_n=(),
               not_covered: str = "") -> Report:
    """`fpspec diff`: the first differing subtree at each n, the arithmetic
    differences, and (with samples) the first input on which they disagree."""
    if a.op != b.op:
        raise FpspecError(f"{a.name} is a {a.op} and {b.name} a {b.op}: nothing to compare")
    pairs = [(a, b)] if samples and a.outputs is not None and b.outputs is not None else []
    return compare(a, [b], n_values, samples=samples, seed=seed, sample_pairs=pairs,
                   command="diff", notes=notes, sampled_n=sampled_n, not_covered=not_covered)


# ================================================================ where a bias enters

BIAS_SAMPLES = 48


def reveal_bias(spec, target, *, samples: int = BIAS_SAMPLES, seed: int = 0):
    """`spec` (revealed from `target`, a gemm that takes a bias: torch.nn.functional.linear, probed
    with a +0.0 bias) with its arithmetic's `bias` clause: after or inside, whichever gives the
    target's bits on `samples` inputs with a bias (note [bias] in fpspec.arith.model).  After:
    the probed init stays (the accumulation's own); inside, the +0.0 bias is what the probe saw
    as init = +0.0, so init is none.  RevealRefused when neither or both fit."""
    from fpspec.errors import RevealRefused
    from fpspec.spec.ast import Block, Spec

    arith = spec_arithmetic(spec)
    if arith is None:
        raise RevealRefused("where the bias enters is told from the bits of the probed arithmetic: probe it "
                            "(no --no-probe)")
    n = target.n
    batch = with_bias(list(fpinputs.samples("gemm", n, target.fmt, samples, seed=seed, m=target.m,
                                            ncols=target.ncols)), target.fmt, seed)
    with np.errstate(all="ignore"):
        got = [np.asarray(target.to_float64(target.fn(*(target.native(np.asarray(a, np.float64)) for a in s.args))),
                          np.float64).reshape(target.m, target.ncols) for s in batch]
    fits, misses = [], {}
    for place in ("after", "inside"):
        candidate = dataclasses.replace(arith, bias=place, init=arith.init if place == "after" else "none")
        blocks = tuple(Block("arithmetic", candidate.to_entries()) if b.name == "arithmetic" else b
                       for b in spec.header.sections)
        trial = Spec(dataclasses.replace(spec.header, sections=blocks, n=_range_with(spec.header.n, n + 1)
                                         if place == "inside" else spec.header.n), spec.lets, spec.order)
        side = make_spec_side(trial, "spec", m=target.m, ncols=target.ncols)
        try:
            want = side.outputs(n, batch)
        except Exception as e:     # an order that does not extend to n + 1 terms cannot hold a bias inside
            misses[place] = f"not defined ({_one_line(e)})"
            continue
        bad = sum(int(not np.all(same_bits(w, g))) for w, g in zip(want, got))
        misses[place] = f"{bad} of {len(batch)} inputs differ"
        if not bad:
            fits.append(trial)
    if len(fits) != 1:
        raise RevealRefused(f"{target.name}: the bias enters neither after nor inside the accumulation as modelled "
                            f"(after: {misses.get('after')}; inside: {misses.get('inside')})" if not fits else
                            f"{target.name}: these inputs do not tell where the bias enters (both fit)")
    return fits[0], tuple(f"bias: {p}: {t}" for p, t in misses.items())


def _range_with(r, n: int):
    """The range `r` widened to hold n (the order of a bias inside is expanded at n + 1)."""
    if r is None or n in r:
        return r
    return dataclasses.replace(r, hi=max(r.hi, n) if r.hi is not None else None, lo=min(r.lo, n))


def with_input_b(spec, fmt_b: str):
    """`spec` whose fused nodes read B as `fmt_b` (fused input_b; a spec without fused nodes is
    refused: its products would be formed from two formats that no arithmetic entry names)."""
    from fpspec.errors import RevealRefused
    from fpspec.spec.ast import Block, Spec

    arith = spec_arithmetic(spec)
    if arith is None or arith.fused is None:
        raise RevealRefused(f"B in {fmt_b}: only fused nodes read two input formats, and the probed "
                            "arithmetic has none")
    new = dataclasses.replace(arith, fused=dataclasses.replace(arith.fused, input_b=fmt_b))
    blocks = tuple(Block("arithmetic", new.to_entries()) if b.name == "arithmetic" else b
                   for b in spec.header.sections)
    return Spec(dataclasses.replace(spec.header, sections=blocks), spec.lets, spec.order)
