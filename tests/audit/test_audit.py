"""fpspec audit on black boxes whose order switches at known sizes: every boundary
found exactly, the classes' trees exact, the verdict and exit code right."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpspec.audit import audit, audit_subject, designed_sizes
from fpspec.errors import FpspecError, RevealRefused
from fpspec.reveal.synthetic import blocks, strided_lanes
from fpspec.tree import format_tree, observable, sequential

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

SEQ16 = sequential(range(16))
BLOCKS16 = blocks(16, 4, "sequential")
LANES16 = strided_lanes(16, 4, "sequential")


def _trees(result):
    return [observable(result.classes[k].sample.orders[0].tree) for _, _, k in result.runs]


def test_designed_sizes():
    assert designed_sizes(1, 20) == [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 20]
    assert designed_sizes(30, 40) == [30, 31, 32, 33, 40]


def test_gemm_boundaries_at_37_and_1000():
    s = audit_subject("audit_boxes:switching_gemm", op="gemm", m=(1, 4096), n=16, ncols=4, dtype="float32")
    r = audit(s, probe=False)
    assert r.boundaries == (37, 1000)
    assert [(lo, hi) for lo, hi, _ in r.runs] == [(1, 36), (37, 999), (1000, 4096)]
    assert _trees(r) == [SEQ16, BLOCKS16, LANES16]
    assert not r.invariant and r.verdict() == "NOT batch-invariant: 3 classes"
    # bisection read fingerprints (one call each), revelation only the designed sizes and both sides of a boundary
    assert {36, 37, 999, 1000} <= set(r.revealed) and len(r.revealed) == len(designed_sizes(1, 4096)) + 4


def test_wide_fingerprints_class_designed_sizes_unrevealed():
    # 16 outputs a fingerprint: a designed size with its predecessor's bits takes its orders
    s = audit_subject("audit_boxes:switching_gemm", op="gemm", m=(1, 4096), n=16, ncols=16, dtype="float32")
    r = audit(s, probe=False)
    assert r.boundaries == (37, 1000) and _trees(r) == [SEQ16, BLOCKS16, LANES16]
    # revealed: each class once; every other designed size and both sides of each boundary
    # take the orders of the revealed size whose bits they have
    assert r.revealed == (1, 63, 1023)
    assert set(r.matched) == set(designed_sizes(1, 4096)) - {1, 63, 1023} | {36, 37, 999, 1000}
    assert "3 sizes revealed, 35 matched by fingerprint" in r.report()


def test_a_class_that_comes_back_is_matched_not_revealed():
    # M < 37: one chain, 37..999: blocks of 4, from 1000 the chain again (A B A)
    s = audit_subject("audit_boxes:returning_gemm", op="gemm", m=(1, 4096), n=16, ncols=16, dtype="float32")
    r = audit(s, probe=False)
    assert r.boundaries == (37, 1000) and _trees(r) == [SEQ16, BLOCKS16, SEQ16]
    assert [c.ranges for c in r.classes] == [((1, 36), (1000, 4096)), ((37, 999),)]
    assert r.revealed == (1, 63) and r.verdict() == "NOT batch-invariant: 2 classes"


def _counting_probes(monkeypatch):
    import fpspec.arith.probe as probe

    calls = []
    real = probe.probe_arithmetic
    monkeypatch.setattr(probe, "probe_arithmetic", lambda *a, **k: calls.append(a[0].describe()) or real(*a, **k))
    return calls


def test_a_later_class_takes_a_probed_arithmetic_the_samples_confirm(monkeypatch):
    probes = _counting_probes(monkeypatch)
    s = audit_subject("audit_boxes:switching_gemm", op="gemm", m=(30, 40), n=16, ncols=16, dtype="float32")
    r = audit(s)
    assert r.boundaries == (37,) and _trees(r) == [SEQ16, BLOCKS16]
    # the blocks of 4 at M >= 37: the chain's arithmetic, checked on the sample inputs, no second probe
    assert len(probes) == 1
    first, second = (c.sample.orders[0] for c in r.classes)
    assert first.arithmetic == second.arithmetic and first.arithmetic.accumulator == "fp32"


def test_an_arithmetic_the_samples_refute_is_probed_again(monkeypatch):
    probes = _counting_probes(monkeypatch)
    s = audit_subject("audit_boxes:widening_gemm", op="gemm", m=(30, 40), n=16, ncols=16, dtype="float32")
    r = audit(s)
    # one order, two arithmetics: two classes, the second found by its own probe
    assert r.boundaries == (37,) and _trees(r) == [SEQ16, SEQ16] and len(probes) == 2
    first, second = (c.sample.orders[0] for c in r.classes)
    assert (first.arithmetic.accumulator, second.arithmetic.accumulator) == ("fp32", "fp64")
    assert r.verdict() == "NOT batch-invariant: 2 classes"


def test_row_sums_with_probed_arithmetic():
    s = audit_subject("audit_boxes:switching_sum_rows", op="sum", m=(30, 40), n=16, dtype="float32")
    r = audit(s)
    assert r.boundaries == (37,)
    assert _trees(r) == [SEQ16, BLOCKS16]
    arith = [c.sample.orders[0].spec.header.sections[-1] for c in r.classes]
    assert arith[0] == arith[1] and arith[0].name == "arithmetic"
    assert "accumulator = fp32" in str(r.classes[0].sample.orders[0].spec)


def test_vary_reduction_length_and_width():
    n = audit(audit_subject("audit_boxes:length_switch_gemm", op="gemm", vary="n", m=2, n=(2, 64), ncols=2),
              probe=False)
    assert n.boundaries == (21,)
    assert [format_tree(c.sample.orders[0].tree) for c in n.classes] == ["(0 1)", format_tree(strided_lanes(21, 4, "sequential"))]
    assert n.verdict() == "NOT invariant in K: 2 classes"
    w = audit(audit_subject("audit_boxes:width_switch_gemm", op="gemm", vary="N", m=2, n=16, ncols=(1, 64)),
              probe=False)
    assert w.boundaries == (24,) and _trees(w) == [SEQ16, BLOCKS16]


def test_rows_all_sees_leftover_rows():
    row0 = audit(audit_subject("audit_boxes:tail_rows_gemm", op="gemm", m=(1, 12), n=8, ncols=2), probe=False)
    assert row0.boundaries == (4,)
    assert _trees(row0) == [observable(sequential(range(7, -1, -1))), sequential(range(8))]
    every = audit(audit_subject("audit_boxes:tail_rows_gemm", op="gemm", m=(4, 12), n=8, ncols=2, rows="all"),
                  probe=False)
    # M % 4 == 0: every row in one chain; otherwise the leftover rows sum in reverse
    assert every.boundaries == (5, 8, 9, 12)
    assert [len(every.classes[k].sample.orders) for _, _, k in every.runs] == [1, 2, 1, 2, 1]


def test_refusals():
    with pytest.raises(RevealRefused, match="squares, never negative"):
        audit_subject("torch.nn.functional.rms_norm", op="sum", m=(1, 4), n=8)
    s = audit_subject("torch.mean", op="sum", m=(1, 2), n=12)
    with pytest.raises(RevealRefused, match="power of two"):
        audit(s, probe=False)
    with pytest.raises(FpspecError, match="must be a range"):
        audit_subject("torch.matmul", op="gemm", m=4, n=8)


def test_torch_targets_cpu():
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    for name, kw in (("torch.matmul", {}), ("torch.nn.functional.linear", {}), ("torch.nn.functional.linear", {"bias": True}),
                     ("torch.bmm", {})):
        r = audit(audit_subject(name, op="gemm", m=(1, 3), n=8, ncols=4, **kw), probe=False)
        assert r.runs[0][0] == 1 and r.runs[-1][1] == 3, name
        if name == "torch.matmul":     # the audit's view of M = 1 reveals what a plain reveal does
            plain = reveal(resolve_target("torch.matmul", op="gemm", n=8, m=1, ncols=4)).tree
            assert r.classes[r.runs[0][2]].sample.orders[0].tree == plain
        assert all(c.sample.orders[0].tree.size == 8 for c in r.classes)
    r = audit(audit_subject("torch.mean", op="sum", m=(1, 4), n=16), probe=False)
    plain = reveal(resolve_target("torch.sum", n=16)).tree
    assert r.invariant and r.classes[0].sample.orders[0].tree == plain


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    return subprocess.run([sys.executable, "-m", "fpspec.cli", "audit", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)


def test_cli_json_specs_and_exit_codes(tmp_path):
    p = _cli("audit_boxes:switching_gemm", "--op", "gemm", "--m", "30..40", "-n", "16", "--ncols", "4",
             "--no-probe", "--json", "-o", str(tmp_path))
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["boundaries"] == [37] and out["verdict"] == "NOT batch-invariant: 2 classes"
    assert [c["orders"][0]["order"] for c in out["classes"]] == ["order seq", "order blocks(4, seq, seq)"]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["class0.fps", "class1.fps"]
    assert "order blocks(4, seq, seq)" in (tmp_path / "class1.fps").read_text()



def test_cli_in_process_verdicts(capsys):
    from fpspec.cli import main

    assert main(["audit", "audit_boxes:invariant_gemm", "--op", "gemm", "--m", "1..64", "-n", "16", "--ncols", "4",
                 "--no-probe"]) == 0
    assert capsys.readouterr().out.strip().endswith("\nbatch-invariant")
    assert main(["audit", "torch.nn.functional.rms_norm", "--op", "sum", "--m", "1..4", "-n", "8"]) == 3
    assert capsys.readouterr().err.startswith("fpspec: error: torch.nn.functional.rms_norm's sum of squares")
    assert main(["audit", "torch.matmul", "--m", "4", "-n", "8"]) == 2
    assert "--m must be a range" in capsys.readouterr().err


def test_torch_operands_convert_exactly():
    torch = pytest.importorskip("torch")
    import numpy as np

    for dtype, tdt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        t = audit_subject("torch.matmul", op="gemm", m=(1, 2), n=8, ncols=2, dtype=dtype).target(1)
        x = np.concatenate([np.random.default_rng(0).standard_normal(4000) * 2.0 ** np.arange(-20, 20).repeat(100),
                            [np.inf, -np.inf, -0.0, 0.0, 1e-40, 3.0e38, 65504.0, 65520.0]])
        assert torch.equal(t.native(x).view(torch.int16), torch.from_numpy(x).to(tdt).view(torch.int16)), dtype
