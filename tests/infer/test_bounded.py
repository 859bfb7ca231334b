"""Range inference is bounded: a fit that cannot finish, or a time limit hit,
ends in a fallback spec that holds exactly where it was observed (note
[fallback] in fpspec.infer.engine), never in a guess or an endless run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpspec.errors import RevealRefused
from fpspec.infer import infer_spec
from fpspec.infer.engine import fallback_spec
from fpspec.reveal.synthetic import sum_target
from fpspec.spec import expand, parse
from fpspec.tree import observable, sequential

from orders import einsum_like

ROOT = Path(__file__).resolve().parents[2]


def _provenance(spec) -> dict:
    block = next(b for b in spec.header.sections if b.name == "provenance")
    return {e.key: e.value for e in block.entries}


def test_einsum_like_order_ends_in_a_fallback_exact_at_every_n_it_covers():
    # lanes whose inner order depends on the whole n: the fit search runs out
    # of its (deterministic) budget; what is written holds at 1..H, all revealed
    r = infer_spec(lambda n: sum_target(einsum_like(n), name="synthetic.einsum"), (1, 300), progress=False,
                   replica=None, probe=False, holdout=4, time_limit=None, fit_work=60_000)
    assert r.fallback.startswith("the fit search used its whole budget (60,000 leaves")
    rng = r.spec.header.n
    assert rng.lo == 1 and 48 <= rng.hi < 300
    assert all(n in r.revealed for n in range(1, rng.hi + 1))
    for n in range(1, rng.hi + 1):
        assert observable(expand(r.spec, n)) == observable(einsum_like(n)), n
    prov = _provenance(r.spec)
    assert prov["fallback"] == f"holds only for n in 1..{rng.hi}, where every n was revealed; no spec was found for 1..300"
    first = min(n for n in r.revealed if n > rng.hi)
    assert f"the first at n = {first}: " in prov["unresolved"]
    assert r.ok and "NO spec for n in 1..300" in r.report()
    assert parse(str(r.spec)) == r.spec


def test_fallback_without_n_lo_revealed_is_a_refusal():
    with pytest.raises(RevealRefused, match="n = 5 was not revealed"):
        fallback_spec({6: sequential(range(6))}, 5, "order")


def test_fallback_uses_the_fitted_orders_over_the_revealed_run():
    trees = {n: sequential(range(n)) for n in range(1, 30)}
    trees[40] = observable(einsum_like(40))
    spec = fallback_spec(trees, 1, "order")
    assert (spec.header.n.lo, spec.header.n.hi) == (1, 29) and str(spec.order) == "seq"


def test_time_limit_bounds_a_range_run_from_the_command_line(tmp_path):
    (tmp_path / "hidden_box.py").write_text(
        "import numpy as np\n\ndef einsum_like(x):\n    return np.einsum('i->', x)\n")
    out = tmp_path / "e.fps"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    p = subprocess.run([sys.executable, "-m", "fpspec.cli", "reveal", "hidden_box:einsum_like", "--op", "sum",
                        "-n", "1..3000", "--time-limit", "4", "--no-probe", "-o", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "NO spec for n in 1..3000: the " in p.stderr
    spec = parse(out.read_text())
    prov = _provenance(spec)
    assert prov["fallback"].startswith(f"holds only for n in 1..{spec.header.n.hi}, where every n was revealed")
    for n in range(1, spec.header.n.hi + 1):
        assert observable(expand(spec, n)) == observable(einsum_like(n)), n
