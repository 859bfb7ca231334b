"""One spec for every n of a GEMV or GEMM whose outputs do not all sum in one
order (fpspec.reveal.positions): the outputs are grouped by order at a few
n, each group's order is inferred along n on its own (infer_spec on the
target read only at that group's outputs), and the specs are merged under an
`if` on the output row i and column j (fpspec.spec.positions).

The groups must not move with n: they are found at CLASS_NS sample n (the
coarsest partition every one of them refines), and after inference the
merged spec is checked at CHECK_NS fresh n by revealing every order across
the outputs again; a group map or a tree that disagrees is reported as an
unresolved counterexample.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from fpspec.errors import FpspecError
from fpspec.infer.engine import Inference, infer_spec
from fpspec.spec import ast as A

CLASS_NS = 4        # n at which the output groups are found
CHECK_NS = 3        # fresh n at which the merged spec is checked across every output


@dataclasses.dataclass(frozen=True)
class PositionalInference:
    """Per group of outputs (its first output `at`, its mask) one Inference; the merged spec."""

    spec: A.Spec
    groups: tuple            # ((at, mask, Inference), ...)
    checked: tuple           # (n, agrees, detail)
    seconds: float
    n_range: tuple

    @property
    def ok(self) -> bool:
        return all(inf.ok for _, _, inf in self.groups) and all(ok for _, ok, _ in self.checked)

    def report(self) -> str:
        lines = [f"{len(self.groups)} orders across the outputs; one spec per group of outputs, "
                 f"merged under an `if` on the output row i and column j"]
        for at, mask, inf in self.groups:
            lines.append(f"outputs like ({at[0]}, {at[1]}) ({int(mask.sum())} of {mask.size}):")
            lines += ["  " + line for line in inf.report().splitlines()]
        for n, ok, detail in self.checked:
            lines.append(f"every output revealed again at n = {n}: " + ("agrees with the spec" if ok
                                                                        else f"DISAGREES: {detail}"))
        lines.append(f"total {self.seconds:.2f} s")
        return "\n".join(lines)

    def __str__(self) -> str:
        return str(self.spec)

    def to_json(self) -> dict:
        return {"spec": str(self.spec), "n_range": list(self.n_range), "ok": self.ok,
                "seconds": round(self.seconds, 3),
                "groups": [{"at": list(at), "outputs": int(mask.sum()), **inf.to_json()}
                           for at, mask, inf in self.groups],
                "checked": [{"n": n, "agrees": ok, "detail": d} for n, ok, d in self.checked]}


def output_groups(make, ns) -> np.ndarray:
    """Labels (output shape) of the outputs' orders: two outputs share a label when
    they shared an order at every n in ns."""
    from fpspec.reveal.positions import labels, reveal_positions

    keys = None
    for n in ns:
        t = make(n)
        lab = labels(reveal_positions(t), t.output_shape).reshape(t.m, -1)
        keys = lab[..., None] if keys is None else np.concatenate([keys, lab[..., None]], -1)
    _, group = np.unique(keys.reshape(-1, keys.shape[-1]), axis=0, return_inverse=True)
    group = np.asarray(group).reshape(keys.shape[:2])
    # number the groups in the order of their first output (row-major): (0, 0) first
    first = {}
    for g in group.reshape(-1).tolist():
        first.setdefault(g, len(first))
    return np.vectorize(first.get)(group)


def _sample_ns(lo: int, hi: int, rng) -> list[int]:
    pick = {max(lo, 2), hi, (lo + hi) // 2}
    while len(pick) < min(CLASS_NS, hi - max(lo, 2) + 1):
        pick.add(int(rng.integers(max(lo, 2), hi + 1)))
    return sorted(pick)


def infer_positions(make_target, n_range, *, seed: int = 0, progress: bool = True, command: str | None = None,
                    **options) -> Inference | PositionalInference:
    """infer_spec for a gemv/gemm target name or maker; one spec per group of outputs
    when its outputs do not share one order, merged."""
    from fpspec.errors import RevealRefused
    from fpspec.infer.engine import RunClock, _target_maker, reserve, resolve_time_limit
    from fpspec.infer.fit import Budget, Stopped
    from fpspec.reveal.positions import restricted
    from fpspec.spec.positions import merge

    start = time.perf_counter()
    keys = ("dtype", "op", "m", "ncols", "device")
    make = _target_maker(make_target, {k: options.pop(k) for k in keys if k in options})
    lo, hi = int(n_range[0]), int(n_range[1])
    rng = np.random.default_rng(seed)
    # one time limit for the grouping, every group and the merged check (engine note [time limit])
    began = options.pop("started", None) or time.monotonic()
    full = hi if options.get("exact") else min(hi, options.get("full_limit", 8192))
    limit, note = resolve_time_limit(options.pop("time_limit", None), make, full)
    clock = RunClock(Budget(deadline=None if limit is None else began + limit - reserve(limit), limit=limit),
                   began, None if limit is None else began + limit)
    bounded = clock.maker(make)

    def left():
        return None if limit is None else limit - (time.monotonic() - began)

    def timed(inf):     # the limit as the caller set it, the grouping's calls counted too
        return dataclasses.replace(inf, time_limit=limit, limit_note=note, calls=inf.calls + clock.calls)
    try:
        with clock.phase("output groups", doing="grouping the outputs by order"):
            group = output_groups(bounded, _sample_ns(lo, hi, rng))
    except Stopped as e:
        raise RevealRefused(f"no spec: {e}, before the outputs were grouped by their orders") from None
    if group.max() == 0:
        return timed(infer_spec(make, n_range, seed=seed, progress=progress, command=command, time_limit=_positive(left()),
                                **options))
    shape = group.shape
    groups = []
    for g in range(int(group.max()) + 1):
        mask = group == g
        at = tuple(int(v) for v in np.argwhere(mask)[0])

        def view(n, mask=mask, at=at):
            return restricted(make(n), mask, at)
        if left() is not None and left() <= 0:
            raise RevealRefused(f"the time limit ({limit:g} s) was reached before the outputs at {at} were inferred")
        inf = timed(infer_spec(view, n_range, seed=seed, progress=progress, command=command, time_limit=_positive(left()),
                               **options))
        if inf.fallback:   # the groups' specs are merged over one range: a partial one cannot be
            raise RevealRefused(f"no spec for the outputs computing like {at}: {inf.fallback}")
        groups.append((at, mask, inf))
    specs = _distinct_lets([inf.spec for _, _, inf in groups])
    spec = merge(specs, group)
    spec = _with_shape(spec, make(lo if lo >= 2 else 2))
    # the merged spec's own check stops at the limit's work deadline (each group was checked at its held-out n)
    with clock.phase("held-out check", doing="checking every output's order"):
        checked = _check(spec, bounded, group, lo, hi, rng,
                         set().union(*(set(inf.revealed) for _, _, inf in groups)))
    return PositionalInference(spec, tuple(groups), tuple(checked), time.perf_counter() - start, (lo, hi))


def _positive(seconds):
    """The time left for infer_spec: past the limit, a run that stops at once (None: unbounded)."""
    return None if seconds is None else max(seconds, 1e-3)


def _distinct_lets(specs: list) -> list:
    """Specs whose named orders do not clash: a name another spec defines differently is suffixed."""
    from fpspec.spec.lower import rename_refs

    seen: dict = {}
    out = []
    for k, spec in enumerate(specs):
        mapping = {}
        for d in spec.lets:
            if d.name in seen and seen[d.name] != d.order:
                mapping[d.name] = f"{d.name}_o{k}"
        lets = tuple(A.Let(mapping.get(d.name, d.name), rename_refs(d.order, mapping)) for d in spec.lets)
        for d in lets:
            seen.setdefault(d.name, d.order)
        out.append(dataclasses.replace(spec, lets=lets, order=rename_refs(spec.order, mapping)))
    return out


def _with_shape(spec: A.Spec, target) -> A.Spec:
    """The merged spec's provenance names the whole output's shape (each group's was its view's)."""
    from fpspec.spec.header import block

    prov = spec.header.provenance
    shape = A.Entry("shape", block("shape", {"m": target.m, "ncols": target.ncols} if target.op == "gemm"
                                   else {"m": target.m}))
    entries = tuple(e for e in (prov.entries if prov else ()) if e.key not in ("shape", "m", "ncols"))
    new = A.Block("provenance", (shape,) + entries)
    sections = tuple(new if b.name == "provenance" else b for b in spec.header.sections)
    if prov is None:
        sections += (new,)
    return dataclasses.replace(spec, header=dataclasses.replace(spec.header, sections=sections))


def _check(spec, make, group, lo, hi, rng, used) -> list:
    """Every output's order revealed again at CHECK_NS fresh n against the merged spec
    (those revealed before make's targets stop at the time limit: engine note [time limit])."""
    from fpspec.infer.fit import Stopped
    from fpspec.reveal.positions import labels, reveal_positions
    from fpspec.spec.expand import expand
    from fpspec.tree import diff, observable

    # fresh n where there are any (each group's inference revealed only its own outputs there)
    fresh = [n for n in range(max(lo, 2), hi + 1) if n not in used] or list(range(max(lo, 2), hi + 1))
    ns = sorted(rng.choice(fresh, size=min(CHECK_NS, len(fresh)), replace=False).tolist()) if fresh else []
    out = []
    for n in ns:
        try:
            t = make(n)
            orders = reveal_positions(t)
        except Stopped:
            break
        lab = labels(orders, t.output_shape).reshape(group.shape)
        # the groups must refine the revealed orders' map, and each tree must be the spec's there
        same = all(len(set(lab[group == g].tolist())) == 1 for g in range(int(group.max()) + 1))
        bad = None
        for p in orders:
            d = diff(observable(expand(spec, n, p.at)), observable(p.revelation.tree))
            if d is not None:
                bad = f"output {p.at}: {d}"
                break
        if not same:
            bad = "the outputs group differently at this n"
        out.append((n, bad is None, bad or ""))
    return out
