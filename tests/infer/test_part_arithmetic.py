"""The arithmetic of a fitted order, per part (fpspec.infer.engine note [arithmetic per part]):
fused chains beside plain parts, the initial value that the probes at one n leave open,
and guards inside parts whose arms the root guard does not show."""
from __future__ import annotations

import dataclasses
import types

from fpspec.arith.probe import ProbeReport
from fpspec.infer.engine import _part_cover, _per_part
from fpspec.infer.fit import Budget
from fpspec.infer.roundtrip import _first_difference, replica_target
from fpspec.spec import parse
from fpspec.spec.expand import expand
from fpspec.spec.regions import main_arithmetic
from fpspec.tree import observable

HI = 10
FUSED = ("op sum\nn in 1..{hi}\narithmetic {{ input = {fmt} product = none accumulator = fp32 init = +0.0 "
         "output = {fmt} fused {{ w = 4 extra_bits = {extra} aligned = truncate result = rz c_aligned = true "
         "exponent_floor = none }} }}\n")


def _per_part_of(generating: str, inferred_order: str, init: str):
    """_per_part on the generating spec's replica (numpy), every n of 1..HI revealed, the
    probe report the generating arithmetic with `init`."""
    spec = parse(generating)
    make = replica_target(spec, box="numpy")
    src = types.SimpleNamespace(first_target=make(2), budget=Budget(),
                                trees={n: observable(expand(spec, n)) for n in range(1, HI + 1)})
    report = ProbeReport(dataclasses.replace(main_arithmetic(spec), init=init))
    got = _per_part(parse(f"n in 1..{HI}\norder {inferred_order}\n"), src, make, report, 0)
    assert got is not None
    return spec, got[1]


def test_initial_value_left_open_by_the_probes_is_read_where_a_chain_takes_one_term():
    """chain(4) over one term at n = 2 keeps a -0.0 term only without init +0.0; the fused
    probes write init none, so the whole tree's check fails there and +0.0 is tried."""
    order = "split((n + 1) // 2, chain(4), gpu_tree)"
    spec, out = _per_part_of(FUSED.format(hi=HI, fmt="fp32", extra=3) + "order split(n - n // 2, chain(4), gpu_tree)\n",
                             order, "none")
    assert str(out.order) == order and out.header.arithmetics == ()
    assert main_arithmetic(out) == main_arithmetic(spec)
    assert _first_difference(spec, out, range(1, HI + 1), arithmetic=True) == ""


def test_fused_chain_beside_a_narrower_part_keeps_its_fused_block():
    """A bf16 part beside a fused chain: the probes per part give the chain's region the
    fused block, and the joining nodes find their accumulator once the chain's region
    takes its other fit (fp32: the bf16 one is what its own probes preferred)."""
    generating = (FUSED.format(hi=HI, fmt="bf16", extra=1) + "arithmetic part0 { accumulator = bf16 }\n"
                  "order split(n - n // 2, using(part0, if n % 5 != 3: pad(5, gpu_tree) else: pairwise), chain(4))\n")
    spec, out = _per_part_of(generating, "split((n + 1) // 2, if n % 5 == 3: pairwise else: pad(5, gpu_tree), "
                                         "chain(4))", "+0.0")
    assert str(out.order) == ("split((n + 1) // 2, if n % 5 == 3: pairwise else: pad(5, gpu_tree), "
                              "using(fused_fp32, chain(4)))")
    assert [(a.name, str(a.entries[0].key), str(a.entries[0].value)) for a in out.header.arithmetics] == [
        ("fused_fp32", "accumulator", "fp32")]
    main = main_arithmetic(out)
    assert (main.accumulator, main.init, main.fused.w, main.fused.extra_bits) == ("bf16", "+0.0", 4, 1)
    assert _first_difference(spec, out, range(1, HI + 1), arithmetic=True) == ""


def test_checked_n_cover_the_arms_of_a_guard_inside_a_part():
    """A guard in a split's first part takes its arm by the part's size ((n + 1) // 2 here):
    n = 5 is the least whose part of 3 takes the pairwise arm, n = 15 the next past 7."""
    spec = parse("n in 1..40\norder split((n + 1) // 2, if n % 5 == 3: pairwise else: pad(5, gpu_tree), seq)\n")
    assert _part_cover(spec, list(range(1, 41))) == [2, 3, 4, 5]
    assert _part_cover(spec, list(range(7, 41))) == [7, 15]
    assert _part_cover(spec, list(range(1, 41)), checked={2, 3, 4, 19}) == [5]   # only arms not checked yet
    assert _part_cover(parse("n in 1..9\norder seq\n"), list(range(1, 10))) == []
