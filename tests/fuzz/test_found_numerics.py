"""Specs the replica soak (benchmarks/soak_replicas.py) found where the reference evaluation
or a replica's numerics were wrong, each with the inputs that showed it and exact bits."""
import numpy as np

from fpspec.spec.expand import expand_arith
from fpspec.tree import format_tree
from test_exact_leaves import reference, replica, same_bits, spec_of


def test_a_pad_over_only_the_outer_pads_phantoms_expands(tmp_path):
    # the inner pad gets [phantom x 3]: it is a phantom, which the outer pad drops
    spec = spec_of("""op dot
n in 3
arithmetic { input = fp64 product = rounded accumulator = fp64 init = none output = fp64 }
order pad(7, split(4, seq, pad(2, seq)))
""")
    assert format_tree(expand_arith(spec, 3)[0]) == "((0 1) 2)"
    x, y = [1e16, 1.0, -1e16], [1.0, 1.0, 1.0]
    assert reference(spec, x, y) == 0.0
    assert same_bits(replica(spec, tmp_path).dot(np.array(x), np.array(y)), 0.0)
