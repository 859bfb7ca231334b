"""One spec for every n when the outputs of a GEMM use different orders."""
import numpy as np

from fpspec.infer.positions import infer_positions, output_groups
from fpspec.reveal.synthetic import gemm_target
from fpspec.spec import expand, parse
from fpspec.tree import pairwise, sequential


def _make(n):
    # rows 0-1 sequential, rows 2-3 pairwise: the groups do not move with n
    return gemm_target([sequential(range(n))] * 2 + [pairwise(range(n))] * 2, "fp32", ncols=3)


def test_groups_are_found_at_every_n():
    group = output_groups(_make, [2, 7, 30])
    assert group.tolist() == [[0, 0, 0], [0, 0, 0], [1, 1, 1], [1, 1, 1]]


def test_one_spec_per_group_merged_on_the_row():
    result = infer_positions(_make, (2, 40), progress=False, holdout=3, replica=None, probe=False)
    spec = result.spec
    assert result.ok, result.report()
    assert str(spec.order) == "if i < 2: seq else: pairwise"
    assert parse(str(spec)) == spec
    for n in (2, 17, 40):
        assert expand(spec, n, (1, 2)) == sequential(range(n))
        assert expand(spec, n, (3, 0)) == pairwise(range(n))
    assert all(ok for _, ok, _ in result.checked) and len(result.checked) == 3
    shape = spec.header.provenance.get("shape")
    assert (shape.get("m"), shape.get("ncols")) == (4, 3)
    assert "2 orders across the outputs" in result.report()
