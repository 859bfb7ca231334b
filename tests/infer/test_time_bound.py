"""A range run's time limit holds (fpspec.infer.engine note [time limit]): no
target call starts after the run's work deadline, so the run ends by the limit
plus the one call in flight plus writing the fallback; the default limit is
derived from the measured cost of a call (fpspec.infer note [default time limit]).

The boxes here record when each of their calls starts; the assertions compare
those instants with the deadline the engine reports, never wall time against a
tight bound (a loaded machine only makes the run reach its deadline sooner)."""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fpspec.errors import FpspecError
from fpspec.infer import AUTO, TIME_LIMIT, TIME_LIMIT_CAP, default_time_limit, infer_spec
from fpspec.infer.engine import fallback_spec, resolve_time_limit
from fpspec.infer.fit import Budget
from fpspec.cli.progress_bar import _time_left_column
from fpspec.progress import limit_seconds, reporting, time_left, time_limit
from fpspec.reveal.synthetic import sum_target
from fpspec.spec import expand, parse
from fpspec.tree import observable, sequential

from orders import einsum_like

ROOT = Path(__file__).resolve().parents[2]


class SlowBox:
    """A sum in `order(n)` that sleeps `seconds` per call and records when each call starts."""

    def __init__(self, order, seconds: float):
        self.order, self.seconds, self.starts = order, seconds, []

    def __call__(self, n: int):
        target = sum_target(self.order(n), batched=False)
        fn = target.fn

        def call(x):
            self.starts.append(time.monotonic())
            time.sleep(self.seconds)
            return fn(x)
        return dataclasses.replace(target, fn=call)


def _provenance(spec) -> dict:
    block = next(b for b in spec.header.sections if b.name == "provenance")
    return {e.key: e.value for e in block.entries}


@pytest.mark.parametrize("seconds, limit", [(0.02, 1.5), (0.3, 1.0)])
def test_no_call_starts_after_the_work_deadline(seconds, limit):
    box = SlowBox(lambda n: sequential(range(n)), seconds)
    began = time.monotonic()
    r = infer_spec(box, (1, 300), progress=False, replica=None, probe=False, holdout=4, time_limit=limit,
                   started=began)
    # the engine's own record: the limit, where it stopped, every call it made
    assert r.time_limit == limit and r.limit_note == "given"
    assert 0 < r.work_deadline < limit
    assert r.fallback.startswith(f"the time limit ({limit:g} s) was reached while revealing n = ")
    assert r.stopped.startswith(r.fallback.split(";")[0])
    assert r.calls == len(box.starts) > 0
    assert max(box.starts) - began <= r.work_deadline      # at most the call in flight runs past it
    assert [p for p, _ in r.phases][0] == "reveal at sample n" and r.phases[-1][0] == "fallback"
    assert r.phases[-1][1] >= r.work_deadline
    assert time.monotonic() - began < 3 * limit + seconds   # generous: the deterministic check is above
    # what is written holds where it was revealed, and says it is a fallback
    hi = r.spec.header.n.hi
    assert all(observable(expand(r.spec, n)) == sequential(range(n)) for n in range(2, hi + 1))
    assert _provenance(r.spec)["fallback"].startswith(f"holds only for n in 1..{hi}")
    assert f"time limit {limit:g} s (given); {r.calls} target calls" in r.report()


def test_an_order_that_does_not_fit_ends_in_a_fallback_within_the_limit():
    box = SlowBox(einsum_like, 0.0)
    began = time.monotonic()
    r = infer_spec(box, (1, 70), progress=False, replica=None, probe=False, holdout=4, time_limit=3,
                   started=began)
    # the limit ends the fit (on a slow machine, the revelations before it); on an idle one the fit's
    # share of it in CPU seconds may end first
    assert re.match(r"the time limit \(3 s\) was reached while (fitting|revealing n = \d+)|"
                    r"the fit search used its share of the time limit \(1\.5 CPU s of 3 s\)", r.fallback), r.fallback
    assert max(box.starts) - began <= r.work_deadline and r.calls == len(box.starts)
    names = [p for p, _ in r.phases]
    assert names[-1] == "fallback" and "reveal at sample n" in names
    hi = r.spec.header.n.hi
    assert all(observable(expand(r.spec, n)) == observable(einsum_like(n)) for n in range(1, hi + 1))
    assert parse(str(r.spec)) == r.spec
    assert time.monotonic() - began < 9


def test_a_limit_reached_while_checking_the_arithmetic_keeps_the_order_and_says_so():
    # the order is established (every tree agrees); only the arithmetic's check at more n is cut
    # short: the spec stays, its arithmetic the probes', the provenance saying where it was checked
    phases = []

    class Sink:
        def start(self, name, total):
            phases.append(name)

        def advance(self, name, steps):
            pass

        def finish(self, name):
            pass

    def make(n):
        target = sum_target(sequential(range(n)), batched=False)
        fn = target.fn

        def call(x):
            if phases[-1] == "arithmetic check":   # slow only there: the limit comes in that phase
                time.sleep(0.25)
            return fn(x)
        return dataclasses.replace(target, fn=call)
    with reporting(Sink()):
        r = infer_spec(make, (1, 12), replica=None, holdout=2, time_limit=7)
    assert not r.fallback and r.ok and str(r.spec.order) == "seq"
    assert r.phases[-1][0] == "arithmetic check"
    assert r.stopped.startswith("the time limit (7 s) was reached while checking the arithmetic per part")
    assert _provenance(r.spec)["arithmetic_checked"] == f"at the probed n only: {r.stopped}"
    assert r.spec.header.arithmetic is not None
    assert f"the arithmetic was checked at the probed n only: {r.stopped}" in r.report()


def test_the_fallback_stops_lowering_at_the_end_of_the_limit():
    # lowering grows faster than n (einsum_like at n = 512: 0.2 s each): past the limit's end the
    # fallback covers what it has lowered, at least its first n
    trees = {n: observable(einsum_like(n)) for n in range(5, 120)}
    spec = fallback_spec(trees, 5, "order", Budget(), end=time.monotonic() - 1)
    assert (spec.header.n.lo, spec.header.n.hi) == (5, 5)
    assert observable(expand(spec, 5)) == trees[5]


def test_each_phase_shows_the_time_left():
    seen = []

    class Sink:
        def start(self, name, total):
            seen.append((name, time_left(), limit_seconds()))

        def advance(self, name, steps):
            pass

        def finish(self, name):
            pass
    with reporting(Sink()):
        r = infer_spec(SlowBox(lambda n: sequential(range(n)), 0.0), (1, 40), replica=None, probe=False,
                       holdout=2, time_limit=30)
    assert not r.fallback and str(r.spec.order) == "seq"
    assert {"reveal at sample n", "fit", "held-out check"} <= {name for name, _, _ in seen}
    assert all(left is not None and 0 < left <= 30 and total == 30 for _, left, total in seen)
    assert time_left() is None      # only while the run is under way
    column = _time_left_column()    # the command line's bar: its countdown
    with time_limit(time.monotonic() + 30.4, 60):
        assert column.render(None).plain == "30 s left of 60 s"
    assert column.render(None).plain == ""


def test_the_default_limit_grows_with_the_cost_of_a_call():
    assert default_time_limit(3e-6) == default_time_limit(10e-6) == TIME_LIMIT == 60
    assert default_time_limit(100e-6) == pytest.approx(600)
    assert default_time_limit(0.5) == TIME_LIMIT_CAP
    assert default_time_limit(3e-6, 8192) == 120 and default_time_limit(3e-6, 100) == 60   # n revealed in full
    box = SlowBox(lambda n: sequential(range(n)), 0.0005)
    seconds, note = resolve_time_limit(AUTO, box, 64)
    assert 3000 <= seconds <= TIME_LIMIT_CAP      # a sleep of 0.5 ms takes at least that
    got = re.fullmatch(r"default for a target of ([\d.]+) (ms|s) a call at n = 64", note)
    assert got and seconds == pytest.approx(default_time_limit(float(got.group(1)) * (1e-3 if got.group(2) == "ms"
                                                                                       else 1.0), 64), rel=0.05)
    assert resolve_time_limit(None, box, 64) == (None, "")
    with pytest.raises(FpspecError, match="positive number of seconds"):
        resolve_time_limit(0, box, 64)


def test_the_command_line_names_the_default_limit(tmp_path):
    (tmp_path / "hidden_box.py").write_text("import numpy as np\n\ndef plain_sum(x):\n    return np.sum(x)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    p = subprocess.run([sys.executable, "-m", "fpspec.cli", "reveal", "hidden_box:plain_sum", "--op", "sum",
                        "-n", "1..12", "--no-probe"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = re.search(r"time limit (\d+) s \(default for a target of [\d.]+ (us|ms|s) a call at n = 12\); "
                    r"([\d,]+) target calls", p.stderr)
    assert got, p.stderr
    assert int(got.group(1)) >= TIME_LIMIT and int(got.group(3).replace(",", "")) > 0


def test_a_user_callable_is_checked_once_then_every_call_is_the_runs(tmp_path, monkeypatch):
    # resolve_target checks a user callable with two calls; the range run reuses the target the
    # command line resolved, so that each later call is one its clock bounds and counts
    from fpspec.infer.engine import _target_maker
    from fpspec.reveal.targets import resolve_target

    (tmp_path / "counted_box.py").write_text(
        "import numpy as np\ncalls = []\n\ndef plain_sum(x):\n    calls.append(len(x))\n    return np.sum(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import counted_box

    first = resolve_target("counted_box:plain_sum", op="sum", n=4)
    assert counted_box.calls == [4, 4]
    make = _target_maker(first, {"op": "sum", "dtype": "float32"})
    eight = make(8)
    assert eight.n == 8 and eight.name == "counted_box:plain_sum" and counted_box.calls == [4, 4]
    r = infer_spec(first, (1, 12), progress=False, replica=None, probe=False, holdout=2, time_limit=60,
                   op="sum", dtype="float32")
    assert r.calls == len(counted_box.calls) - 2 and set(counted_box.calls[2:]) <= set(range(2, 13))
