"""verify with a huge --max-n or -n: costs are bounded before anything runs
(fpspec.verify note [cost of an n]), guard boundaries and the range's ends are
checked by samples where a revelation is out of reach, and the verdict names
what no check reached."""
import pytest

from fpspec import verify as V
from fpspec.errors import FpspecError
from fpspec.spec.check import check
from fpspec.spec.parse import parse

UNBOUNDED = """op sum
n in 2..
arithmetic { input = fp32 product = none accumulator = fp32 init = none output = fp32 }
order if n <= 8: seq elif n < 3000000: lanes(8, seq, pairwise) else: rev
"""
BOUNDED = UNBOUNDED.replace("n in 2..", "n in 2..100000000000")


def spec(text):
    s = parse(text, "s.fps")
    check(s)
    return s


def test_a_huge_max_n_reveals_trees_only_up_to_the_cap():
    ns = V.spec_n_values(spec(UNBOUNDED), max_n=10**11, seed=0)
    assert max(ns) == V.REVEAL_MAX_N and {7, 8, 9, 16, 17}.issubset(ns)


def test_range_ends_and_guards_beyond_the_sampled_limit_are_named():
    sampled, missed = V.spec_sampled_n(spec(BOUNDED), max_n=10**11)
    # the largest n a sample reaches, and its neighbour; nothing above SAMPLED_LIMIT
    assert sampled == (V.REVEAL_MAX_N + 1, 2 * V.REVEAL_MAX_N + 1, V.SAMPLED_LIMIT - 1, V.SAMPLED_LIMIT)
    assert missed == f"n > {V.SAMPLED_LIMIT} (guards at 3000000, 3000001, 6000000, 6000001)"
    sampled, missed = V.spec_sampled_n(spec(UNBOUNDED), max_n=10**11)
    assert max(sampled) == V.SAMPLED_LIMIT and missed.startswith(f"n > {V.SAMPLED_LIMIT} (guards at 3000000")


def test_a_guard_below_the_sampled_limit_is_sampled_on_both_sides():
    s = spec(BOUNDED.replace("3000000", "20000"))
    sampled, missed = V.spec_sampled_n(s, max_n=10**11)
    assert {19999, 20000, 20001, 40000, 40001}.issubset(sampled)
    assert missed == f"n > {V.SAMPLED_LIMIT}"


def test_an_n_asked_beyond_any_bounded_check_is_refused_in_one_line():
    with pytest.raises(FpspecError) as e:
        V.split_asked_n(spec(UNBOUNDED), [8, 10**11], max_n=4096)
    assert str(e.value) == (f"-n 100000000000: too large to check (a tree of 100000000000 leaves); verify "
                            f"reveals trees up to n = 4096 and samples outputs up to n = {V.SAMPLED_MAX_N}")
    assert V.split_asked_n(spec(UNBOUNDED), [8, 5000, 4096], max_n=4096) == ((8, 4096), (5000,))


def test_verify_with_max_n_1e11_ends_and_says_what_it_did_not_check(monkeypatch):
    # the caps made small so that the whole route (revelation, sampled n, verdict) runs in seconds
    monkeypatch.setattr(V, "REVEAL_MAX_N", 24)
    monkeypatch.setattr(V, "SAMPLED_MAX_N", 40)
    monkeypatch.setattr(V, "SAMPLED_LIMIT", 64)
    report = V.verify_spec(spec(BOUNDED), spec_name="s.fps", max_n=10**11, samples=40)
    assert report.equivalent and max(report.n_values) == 24
    assert report.sampled_n == (25, 49, 63, 64)
    assert report.not_covered == "n > 64 (guards at 3000000, 3000001, 6000000, 6000001)"
    assert report.text().splitlines()[-1] == "EQUIVALENT (not checked: n > 64 (guards at 3000000, 3000001, 6000000, 6000001))"
