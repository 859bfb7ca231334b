"""Synthetic black boxes with known trees: the revealed tree must be exactly the known one."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fpspec.reveal import synthetic as S
from fpspec.reveal.engine import build_tree, reveal
from fpspec.tree import Node, pairwise, postorder, random_tree, sequential

FORMATS = ["fp64", "fp32", "fp16", "bf16"]
ALGORITHMS = ["fprev", "modified", "basic"]


def binary_fused2(t):
    """A fused node of 2 children cannot be told from an addition by masks: compare as binary."""
    res = []
    for s in postorder(t):
        if isinstance(s, int):
            res.append(s)
            continue
        k = len(s.children)
        kids = tuple(res[-k:])
        del res[-k:]
        res.append(Node(kids, s.fused and k > 2))
    return res[0]


KNOWN = {
    "sequential": sequential(range(37)),
    "reversed": S.reversed_tree(37),
    "pairwise": pairwise(range(37)),
    "lanes4": S.strided_lanes(37, 4),
    "lanes8_seq": S.strided_lanes(40, 8, outer="sequential"),
    "blocks5": S.blocks(37, 5),
    "blocks8_pairwise": S.blocks(64, 8, outer="pairwise"),
    "fused_chain16": S.fused_chain(40, 16),
    "fused_chain5": S.fused_chain(23, 5),
    "random_fused": binary_fused2(random_tree(45, np.random.default_rng(7), fused_prob=0.3)),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_tree_every_format(name, fmt):
    tree = KNOWN[name]
    rev = reveal(S.sum_target(tree, fmt))
    assert rev.tree == tree


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("name", ["reversed", "lanes4", "fused_chain5", "random_fused"])
def test_known_tree_every_algorithm(name, algorithm):
    tree = KNOWN[name]
    rev = reveal(S.sum_target(tree, "fp32"), algorithm=algorithm)
    assert rev.tree == tree
    assert rev.algorithm == algorithm


def test_min_pivot_is_fprev_exactly():
    # the paper's pivot (smallest leaf): a reversed sum needs every l(i, j), i < j
    tree = S.reversed_tree(30)
    rev = reveal(S.sum_target(tree, "fp32"), algorithm="fprev", pivot="min", check=False)
    assert rev.tree == tree
    assert rev.queries >= 30 * 29 // 2


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 60), st.integers(0, 2**32 - 1), st.sampled_from(FORMATS))
def test_random_binary_trees(n, seed, fmt):
    tree = random_tree(n, np.random.default_rng(seed))
    assert reveal(S.sum_target(tree, fmt), seed=seed).tree == tree


@settings(max_examples=15, deadline=None)
@given(st.integers(3, 50), st.integers(0, 2**32 - 1))
def test_random_multiway_trees(n, seed):
    tree = binary_fused2(random_tree(n, np.random.default_rng(seed), fused_prob=0.4, max_fan=6))
    assert reveal(S.sum_target(tree, "fp16"), algorithm="modified", seed=seed).tree == tree


def test_narrow_format_beyond_exact_counts_uses_windows():
    # bf16 counts at most 255 units exactly: n = 300 needs the modified algorithm's windows
    tree = S.strided_lanes(300, 8)
    rev = reveal(S.sum_target(tree, "bf16"))
    assert rev.algorithm == "modified"
    assert rev.tree == tree


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_packed_queries_on_single_call_and_matrix_targets(fmt):
    # modified: several groups share one call, each at its own power-of-two unit
    tree = binary_fused2(random_tree(40, np.random.default_rng(11), fused_prob=0.3))
    for target in (S.dot_target(tree, fmt), S.gemm_target([tree] * 8, fmt, ncols=2)):
        packed = reveal(target, algorithm="modified")
        plain = reveal(target, algorithm="fprev")
        assert packed.tree == plain.tree == tree
    binary = random_tree(60, np.random.default_rng(12))
    packed = reveal(S.dot_target(binary, fmt), algorithm="modified", check=False)
    plain = reveal(S.dot_target(binary, fmt), algorithm="fprev", check=False)
    assert packed.tree == plain.tree == binary
    assert packed.calls < plain.calls          # one call per row, several queries per row


def test_dot_target():
    tree = S.strided_lanes(24, 4)
    assert reveal(S.dot_target(tree, "fp32")).tree == tree
    assert reveal(S.dot_target(tree, "fp16")).tree == tree


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
def test_gemm_rows_that_differ_are_reported(fmt):
    tree, other = S.strided_lanes(16, 4), sequential(range(16))
    target = S.gemm_target([tree, tree, other, tree], fmt, ncols=3)
    rev = reveal(target)
    assert rev.tree == tree
    assert rev.differing == ((2, 0), (2, 1), (2, 2))
    assert rev.checked_outputs == 12


def test_gemm_column_that_differs_is_reported():
    tree, other = S.strided_lanes(16, 4), pairwise(range(16))
    target = S.gemm_target([tree] * 3, "fp32", ncols=4, col_trees={3: other})
    rev = reveal(target)
    assert rev.tree == tree
    assert rev.differing == ((0, 3), (1, 3), (2, 3))


def test_gemm_batches_queries_over_rows():
    tree = S.strided_lanes(32, 8)
    target = S.gemm_target([tree] * 32, "fp32", ncols=2)
    rev = reveal(target)
    assert rev.tree == tree and rev.differing == ()
    bare = reveal(target, check=False)          # construction only: many queries per call
    assert bare.tree == tree and bare.calls * 5 < bare.queries


@pytest.mark.parametrize("make", [
    lambda n: sequential(range(n)), S.reversed_tree, lambda n: pairwise(range(n)),
    lambda n: random_tree(n, np.random.default_rng(1)), lambda n: S.caterpillar(n, np.random.default_rng(2)),
])
def test_at_most_20n_queries(make):
    n = 2048
    tree = make(n)
    oracle = S.TreeOracle(tree)
    assert build_tree(oracle, n) == tree
    assert oracle.queries <= 20 * n


def test_no_recursion_limit_at_large_n():
    # a reversed sum of 2^17 leaves: FPRev's recursive code dies at 1024
    n = 1 << 17
    tree = S.reversed_tree(n)
    oracle = S.TreeOracle(tree)
    assert build_tree(oracle, n) == tree
    assert oracle.queries <= 20 * n


def test_tree_oracle_modified_matches_fprev():
    tree = binary_fused2(random_tree(200, np.random.default_rng(3), fused_prob=0.2))
    assert build_tree(S.TreeOracle(tree), 200, algorithm="modified") == tree


def test_fused_sum_swamps_inside_a_node():
    # masks inside one fused node cancel and the units beside them are truncated away
    got = S.fused_sum(np.array([2.0**30, -2.0**30, 1.0, 1.0])[:, None], "fp32")
    assert got[0] == 0.0
    assert S.fused_sum(np.array([1.0, 2.0, 3.0])[:, None], "fp16")[0] == 6.0


def test_gemm_everywhere_checks_agree_with_counts():
    """The one-compare sharing check says what the counts say, with one pair or a pair per row."""
    from fpspec.reveal.oracle import LcaOracle

    tree, other = sequential(range(12)), pairwise(range(12))
    target = S.gemm_target([tree, other, tree], "fp32", ncols=4, col_trees={2: other})
    oracle = LcaOracle(target)
    varied = 0
    for a, b in [(0, 1), (0, 11), (5, 6), (3, 9)]:
        full = oracle.l_everywhere(a, b)
        varied += not np.all(full == full[0, 0])
        for expect in np.unique(full).tolist() + [2, 12]:
            assert np.array_equal(oracle.agrees_everywhere(a, b, int(expect)), full == expect)
    assert varied >= 2          # the pairs do see the other tree in row 1 and column 2
    I, J = np.array([0, 5, 3]), np.array([1, 6, 9])
    per_row = oracle.l_everywhere(I, J)
    for r in range(3):
        assert np.array_equal(per_row[r], oracle.l_everywhere(I[r], J[r])[r])
    E = per_row[:, 0].astype(np.int64)
    assert np.array_equal(oracle.agrees_everywhere(I, J, E), per_row == E[:, None])
    assert np.array_equal(oracle.agrees_everywhere(I, J, E + 1), per_row == (E + 1)[:, None])


# ---------------------------------------------------------------- guesses (note [hypotheses])

def test_guessed_blocks_are_proven_and_cut_queries():
    # numpy-like: 16 blocks of 8 lanes, pairwise above; the blocks repeat, so guesses pay off
    tree = S.blocks(512, 32, outer="pairwise")
    plain, guessed = S.TreeOracle(tree), S.TreeOracle(tree)
    assert build_tree(plain, 512, guess=False) == tree
    assert build_tree(guessed, 512) == tree
    assert guessed.queries * 3 < plain.queries * 2
    rev = reveal(S.sum_target(tree, "fp32"))
    assert rev.tree == tree


@pytest.mark.parametrize("tree", [
    # same size and gaps as the level below, another shape: the guess fails its proof
    Node((sequential(range(8)), sequential(range(15, 7, -1)))),
    # the group hangs under a fused parent: its guessed top is not a node of the true tree
    Node((sequential(range(4)), Node((4, 5)), Node((6, 7))), fused=True),
    # the same, and every pair inside the group's children right: with units on the group
    # alone its top would read |G| like the guess; only the witness (the pivot) shows the lca
    # left the group (note [witness])
    Node((pairwise(range(4)), Node((4, 5)), Node((6, 7))), fused=True),
    # one leaf of the guessed copy sits elsewhere: 8 leaves in the group, not in guessed places
    Node((Node((sequential(range(4)), sequential([4, 5, 7, 6]))), sequential(range(8, 16)))),
])
def test_a_wrong_guess_is_caught_not_revealed(tree):
    oracle = S.TreeOracle(tree)
    n = tree.size
    assert build_tree(oracle, n) == tree
    assert reveal(S.sum_target(tree, "fp32")).tree == tree
    assert reveal(S.sum_target(tree, "fp16")).tree == tree


@pytest.mark.parametrize("fmt", ["fp32", "fp64"])
def test_packed_proofs_with_one_wrong_block(fmt):
    # 16 blocks of 16 summed pairwise, block 5 reversed and block 11 a fused node: their guesses
    # share rows with right ones (note [witness]) and fail alone or with their row
    from fpspec.tree import relabel

    blocks = [sequential(range(16))] * 16
    blocks[5] = S.reversed_tree(16)
    blocks[11] = Node((sequential(range(8)), Node((8, 9)), sequential(range(10, 16))), fused=True)
    parts = [relabel(b, list(range(16 * c, 16 * c + 16))) for c, b in enumerate(blocks)]
    tree = S._combine(parts, "pairwise")
    target = S.sum_target(tree, fmt)
    rev = reveal(target)
    assert rev.tree == tree
    assert reveal(target, guess=False).tree == tree


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 30), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_repeated_random_blocks(k, copies, seed):
    # copies of one random block (some replaced by other random blocks: those guesses fail)
    from fpspec.tree import relabel

    rng = np.random.default_rng(seed)
    base = random_tree(k, rng)
    parts = []
    for c in range(copies + 1):
        block = base if rng.random() < 0.7 else random_tree(k, rng)
        parts.append(relabel(block, list(range(c * k, (c + 1) * k))))
    tree = S._combine(parts, "pairwise" if rng.random() < 0.5 else "sequential")
    assert build_tree(S.TreeOracle(tree), tree.size) == tree


# ---------------------------------------------------------------- the probe (note [probe])

def _halves_then(n, block, outer):
    """Blocks of `block` leaves summed pairwise inside, combined by `outer`."""
    from fpspec.tree import relabel

    parts = [relabel(pairwise(range(block)), list(range(lo, lo + block))) for lo in range(0, n, block)]
    return S._combine(parts, outer)


@pytest.mark.parametrize("tree,probed", [
    (pairwise(range(1024)), True),                      # the guessed halving holds
    (_halves_then(1024, 128, "sequential"), False),     # [256, 512) joins at 384, not 512
    (_halves_then(1024, 64, "pairwise"), True),
    # the halving holds for the levels, but block [512, 1024) is no copy of [0, 512)
    (Node((pairwise(range(512)), sequential(range(512, 1024)))), False),
    (S.strided_lanes(1024, 8), False),                  # no halving prefix: asked in full
])
def test_probe_guesses_halving_and_rewinds_when_wrong(tree, probed):
    target = S.sum_target(tree, "fp32")
    rev = reveal(target)
    assert rev.tree == tree
    plain = reveal(target, guess=False)
    assert plain.tree == tree
    # a probe that held asks little more than the prefix, the verifications and the checks
    assert (rev.queries < 1024 + 1024 // 2) == probed


def test_build_binary_equals_node():
    from fpspec.tree import build_binary

    rows = [(~3, ~1), (~0, 0), (~5, ~4), (1, 2), (~2, 3)]
    built = build_binary(rows)
    want = Node((2, Node((Node((0, Node((3, 1)))), Node((5, 4))))))
    assert built == want and hash(built) == hash(want)
    assert str(built) == str(want) and built.height == want.height and built.size == 6


# ---------------------------------------------------------------- gemm channels

def test_gemm_rows_and_columns_of_b_both_answer_queries():
    tree = S.blocks(64, 16, outer="pairwise")
    target = S.gemm_target([tree] * 12, "fp32", ncols=12)
    rev = reveal(target)
    assert rev.tree == tree and rev.differing == ()
    # m + ncols - 2 queries a call: the root wave (63 queries) needs 3 calls, not 6
    bare = reveal(target, check=False, guess=False)
    assert bare.tree == tree
    assert bare.queries > 8 * (bare.calls - 2)


def test_gemm_value_dependent_row_is_caught():
    """Row 1 sums like row 0 on the random input but otherwise in another order: it must not
    feed the tree (caught by the checks, asked again) and it is reported."""
    tree, other = S.strided_lanes(16, 4), sequential(range(16))
    progs = {t: S.TreeProgram(t, "fp32") for t in (tree, other)}
    from fpspec.formats import get_format, round_to
    from fpspec.reveal.targets import from_callable

    def gemm(A, B):
        A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
        out = np.empty((A.shape[0], B.shape[1]))
        for r in range(A.shape[0]):
            terms = round_to(get_format("fp32"), A[r][None, :] * B.T)
            masked = np.abs(terms).max() > 2.0 ** 40
            out[r] = progs[other if (r == 1 and masked) else tree](terms)
        return out

    target = from_callable(gemm, op="gemm", n=16, dtype="float32", m=6, ncols=6)
    rev = reveal(target)
    assert rev.tree == tree
    assert {r for r, _ in rev.differing} == {1}


def test_split_masks_gemm_asks_only_outputs_like_the_first():
    # masks split across A and B (bf16 products are exact in this synthetic): one query per
    # output on a matching of rows and columns that avoids row 1 and column 2, which sum in
    # another order
    tree, other = S.strided_lanes(16, 4), sequential(range(16))
    target = S.gemm_target([tree, other, tree, tree, tree], "bf16", ncols=5, col_trees={2: other})
    rev = reveal(target, split=True)
    assert "split" in rev.plan
    assert rev.tree == tree
    assert set(rev.differing) == {(1, c) for c in range(5)} | {(r, 2) for r in range(5)}
