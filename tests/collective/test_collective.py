"""Collectives: per-element revelation, the spec with an `if` on the element index,
replicas of the [W, L] stack, verify and diff; gloo ranks on the CPU, NCCL on GPUs."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.collective import collective_spec, diff_collective, element_labels, spec_orders, verify_collective
from fpspec.errors import FpspecError, RevealRefused
from fpspec.reveal.collective import Collective, evaluate_columns, reveal_columns, ring_all_reduce
from fpspec.spec import parse
from fpspec.tree import format_tree

# the ring over W ranks: chunk c summed from rank c - 1 downwards (trees in canonical form)
RING3 = ["(0 (1 2))", "((0 2) 1)", "((0 1) 2)"]
RING4 = ["(0 (1 (2 3)))", "(((0 3) 2) 1)", "(((0 1) 3) 2)", "((0 (1 2)) 3)"]


class Simulated:
    """What collective_spec reads from a running session."""

    def __init__(self, world, fmt="fp32"):
        self.world, self.fmt, self.op, self.backend, self.start_seconds = world, fmt, "all_reduce", "gloo", 0.0
        self.environment = {"backend": "gloo", "world": world, "torch": "2.13.0", "devices": f"{world} simulated"}


def ring_spec(world, numel, start=-1, fmt="fp32"):
    rv = reveal_columns(ring_all_reduce(world, numel, fmt, start), world=world, numel=numel, fmt=fmt)
    return rv, collective_spec(rv, Simulated(world, fmt), target="torch.distributed.all_reduce", command="test")


def trees(rv):
    return [format_tree(t) for t in rv.trees]


# ---------------------------------------------------------------- without processes

def test_every_element_gets_its_ring_order():
    rv = reveal_columns(ring_all_reduce(4, 10), world=4, numel=10)
    assert trees(rv) == RING4
    assert rv.labels.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert (rv.calls, rv.queries) == (2 + 6 + 2, 60)      # determinism, one call per pair, bit checks


def test_spec_round_trips_and_sends_each_element_to_its_order():
    rv, spec = ring_spec(5, 23)
    assert parse(str(spec)) == spec
    assert str(spec.order).startswith("if i < 5:")
    got_trees, labels = spec_orders(spec)
    assert [format_tree(t) for t in got_trees] == trees(rv)
    assert labels.tolist() == rv.labels.tolist()
    assert element_labels(spec, 23).tolist() != [0] * 23


def test_large_buffer_conditions_are_intervals():
    _, spec = ring_spec(3, 300_000)
    text = str(spec.order)
    assert "i < 100000" in text and "i >= 200000" in text


def test_refuses_a_reduction_in_wider_arithmetic():
    def wide(X):        # adds in float64, rounds once: not one rounding per addition in fp32
        return np.asarray(X, np.float64).sum(0).astype(np.float32).astype(np.float64)
    with pytest.raises(RevealRefused, match="does not round once per addition in fp32"):
        reveal_columns(wide, world=3, numel=64)


def test_refuses_a_nondeterministic_reduction():
    rng = np.random.default_rng(1)
    with pytest.raises(RevealRefused, match="nondeterministic"):
        reveal_columns(lambda X: X.sum(0) + rng.integers(0, 2, X.shape[1]), world=3, numel=8)


def test_numpy_replica_and_triton_replica_give_the_spec_bits():
    rv, spec = ring_spec(3, 40)
    report = verify_collective(spec, backend="numpy", samples=40)
    assert report.equivalent, report.text()
    assert len(report.trees) == 3 and report.samples_run == 40
    from fpspec.collective import replica_columns, sample_stack

    X = sample_stack(3, 40, "fp32", 40, seed=3)
    want = evaluate_columns(rv.trees, rv.labels, X, "fp32")
    got = replica_columns(spec, "triton", "fp32")(X)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)].view(np.uint64), want[~np.isnan(want)].view(np.uint64))


def test_numba_replica_of_one_order():
    _, spec = ring_spec(3, 1)
    assert verify_collective(spec, backend="numba", samples=1).equivalent


def test_diff_finds_the_first_element_in_another_order():
    _, a = ring_spec(4, 16)
    _, b = ring_spec(4, 16, start=0)
    _, again = ring_spec(4, 16)
    _, longer = ring_spec(4, 32)
    same = diff_collective("a", "again", {"a": a, "again": again})
    assert same.equivalent, same.text()
    other = diff_collective("a", "b", {"a": a, "b": b})
    assert not other.equivalent
    first = next(t for t in other.trees if not t.equal)
    assert first.difference.startswith("at element 0 (4 elements like it)")
    assert "16 of 16 elements take another order in b" in other.notes
    # chunks of 4 against chunks of 8: elements 4..7, 8..11, 12..15 change order with L
    grown = diff_collective("a", "longer", {"a": a, "longer": longer})
    assert "12 of 16 elements take another order in longer" in grown.notes
    assert "buffers of 16 and 32 elements: compared at elements 0..15" in grown.notes


def test_cli_verify_and_diff_of_collective_specs(tmp_path, capsys):
    from fpspec.cli import main

    _, a = ring_spec(3, 12)
    _, b = ring_spec(3, 12, start=0)
    (tmp_path / "a.fps").write_text(str(a))
    (tmp_path / "b.fps").write_text(str(b))
    assert main(["verify", str(tmp_path / "a.fps"), "--samples", "12"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("EQUIVALENT")
    assert main(["diff", str(tmp_path / "a.fps"), str(tmp_path / "b.fps")]) == 1
    assert capsys.readouterr().out.rstrip().endswith("DIFFERENT")
    assert main(["reveal", "torch.distributed.all_reduce", "--numel", "8"]) == 2
    assert capsys.readouterr().err.strip().endswith("needs the world size: --world W (or -n W)")
    assert main(["reveal", "numpy.sum", "-n", "8", "--world", "2"]) == 2
    assert "are for collectives" in capsys.readouterr().err
    assert main(["reveal", "torch.distributed.all_reduce", "-n", "2", "--numel", "8", "--numel", "16",
                 "-o", str(tmp_path / "x.fps")]) == 2
    assert "name the files with {numel}" in capsys.readouterr().err


# ---------------------------------------------------------------- gloo ranks on the CPU

@pytest.fixture(scope="module")
def gloo3():
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    with Collective("all_reduce", world=3, backend="gloo", fmt="fp32") as session:
        yield session


def test_gloo_all_reduce_trees(gloo3):
    rv = reveal_columns(gloo3.run, world=3, numel=12)
    assert trees(rv) == RING3
    assert rv.labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    # 999 elements: chunks of 334 (ceil(999 / 3) = 333, rounded up to an even count)
    rv = reveal_columns(gloo3.run, world=3, numel=999)
    assert trees(rv) == RING3 and rv.counts() == [334, 334, 331]
    assert gloo3.environment["backend"] == "gloo" and gloo3.environment["world"] == 3


def test_gloo_reduce_scatter_trees(gloo3):
    rv = reveal_columns(lambda X: gloo3.run(X, "reduce_scatter_tensor"), world=3, numel=12)
    assert trees(rv) == RING3
    assert rv.labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_gloo_replica_bits_equal_the_collective(gloo3):
    rv = reveal_columns(gloo3.run, world=3, numel=60)
    spec = collective_spec(rv, gloo3, target="torch.distributed.all_reduce", command="test")
    report = verify_collective(spec, backend="numpy", against="torch.distributed.all_reduce", samples=60,
                               session=gloo3)
    assert report.equivalent, report.text()
    assert report.sides == ("replica (numpy)", "torch.distributed.all_reduce (gloo, live)")
    assert all(s.samples == 60 for s in report.samples)


def test_gloo_reduce_scatter_needs_equal_parts(gloo3):
    with pytest.raises(FpspecError, match="not a multiple of 3"):
        gloo3.run(np.zeros((3, 10)), "reduce_scatter_tensor")


# ---------------------------------------------------------------- NCCL on GPUs

def _gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.skipif(_gpus() < 2, reason="needs 2 CUDA GPUs")
def test_nccl_all_reduce_replica_bits():
    W = min(_gpus(), 4)
    with Collective("all_reduce", world=W, backend="nccl", fmt="fp32") as session:
        rv = reveal_columns(session.run, world=W, numel=65536)
        spec = collective_spec(rv, session, target="torch.distributed.all_reduce", command="test")
        report = verify_collective(spec, backend="numpy", against="torch.distributed.all_reduce",
                                   samples=4096, session=session)
    assert report.equivalent, report.text()
    assert "nccl" in session.environment and session.environment["settings"]["NCCL_NVLS_ENABLE"] == "0"
