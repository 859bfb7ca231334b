"""examples/cpu/numpy_sum_float32.fps against the trees of the numpy installed here
(revealed with fpspec.reveal, FPRev), every n from 2 to 300 and a few large n."""
import pytest

from fpspec.spec import expand
from fpspec.tree import diff


def _revealed(n):
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    return reveal(resolve_target("numpy.sum", n=n, dtype="float32"), check=False).tree


def test_every_n_up_to_300(numpy_sum_spec):
    for n in range(2, 301):
        got = _revealed(n)
        assert diff(expand(numpy_sum_spec, n), got) is None, n


@pytest.mark.parametrize("n", [1000, 4099, 10007])
def test_large_n(numpy_sum_spec, n):
    assert diff(expand(numpy_sum_spec, n), _revealed(n)) is None


def test_n_1_is_the_single_term(numpy_sum_spec):
    assert expand(numpy_sum_spec, 1) == 0
