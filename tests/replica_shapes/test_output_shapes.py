"""A gemv / gemm spec covers the output shapes it says (its `shapes` section) or the one it was
revealed at (provenance { shape }): its replicas, on every backend and in a fresh interpreter,
refuse others with one ValueError naming the argument and the covered shape, and take the
covered ones with the spec's bits; a spec written for any shape takes any."""
from __future__ import annotations

import numpy as np
import pytest

from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.errors import FpspecError, SpecError
from fpspec.spec import check, parse

ARITH = "arithmetic {\n    input = fp32\n    product = fma\n    accumulator = fp32\n    init = +0.0\n    output = fp32\n}\n"
# numpy.matmul at 4 x 4 x 4 (fpspec reveal numpy.matmul --op gemm -m 4 --ncols 4 -n 4):
# OpenBLAS computes a one-row or one-column output with gemv, in another order
REVEALED_GEMM = ('target "numpy.matmul"\nop gemm\nn in 4\n'
                 "provenance {\n    shape {\n        m = 4\n        ncols = 4\n    }\n}\n" + ARITH + "order seq\n")
REVEALED_GEMV = ('target "torch.mv"\nop gemv\nn in 1..64\n'
                 "provenance {\n    shape {\n        m = 4\n        ncols = 1\n    }\n}\n" + ARITH + "order pairwise\n")
ANY_GEMM = REVEALED_GEMM.replace("order seq", "shapes {\n    m = any\n    ncols = any\n}\norder seq")
RANGE_GEMV = REVEALED_GEMV.replace("order pairwise", 'shapes {\n    m = "2..3, 8"\n}\norder pairwise')
HAND_WRITTEN = 'op gemm\nn in 1..64\n' + ARITH + "order pairwise\n"

BACKENDS = ("numpy", "numba", "triton")


def _arrays(rng, m, k, ncols=None):
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal(k if ncols is None else (k, ncols)).astype(np.float32)
    return A, B


def test_replicas_refuse_shapes_their_spec_does_not_cover(tmp_path):
    rng = np.random.default_rng(5)
    gemm, gemv, any_gemm = parse(REVEALED_GEMM), parse(REVEALED_GEMV), parse(ANY_GEMM)
    ok_gemm, ok_gemv = _arrays(rng, 4, 4, 4), _arrays(rng, 4, 16)
    refused = [  # (replica, arguments), the one line every backend raises
        ("gemm", _arrays(rng, 5, 4, 6), "A has 5 rows, but this replica of numpy.matmul covers 4 x 4 outputs only "
                                         "(A with 4 rows, B with 4 columns); other shapes may take other orders"),
        ("gemm", _arrays(rng, 4, 4, 6), "B has 6 columns, but this replica of numpy.matmul covers 4 x 4 outputs only"),
        ("gemm", _arrays(rng, 1, 4, 4), "A has 1 rows, but"),
        ("gemv", _arrays(rng, 7, 16), "A has 7 rows, but this replica of torch.mv covers 4 rows only; other shapes"),
        # where the spec covers any shape, operands that do not fit: the same words on every backend
        ("any", (ok_gemm[0], ok_gemm[1][:3]), "gemm: A is 4x4 but B is 3x4"),
        ("any", _arrays(rng, 2, 5, 2), "A has length 5, outside the range n in 4..4 this replica of numpy.matmul "
                                       "is valid for"),
    ]
    empties = (_arrays(rng, 0, 4, 3), _arrays(rng, 3, 4, 0))     # Triton raised ZeroDivisionError
    calls, expected = [], []
    for backend in BACKENDS:
        torch_in = "float32" if backend == "triton" else None
        source = {"gemm": compile_spec(gemm, backend), "gemv": compile_spec(gemv, backend),
                  "any": compile_spec(any_gemm, backend)}
        # numba compiles a kernel at its first call: the refusals come before it, one call pays for it
        calls += [(source["gemm"], "gemm", ok_gemm, torch_in)]
        expected += [("bits", reference_outputs(gemm, "gemm", ok_gemm))]
        if backend != "numba":
            calls += [(source["gemv"], "gemv", ok_gemv, torch_in)] + [(source["any"], "gemm", e, torch_in)
                                                                      for e in empties]
            expected += [("bits", reference_outputs(gemv, "gemv", ok_gemv))] + [("empty", None)] * 2
        for which, args, message in refused:
            calls.append((source[which], "gemm" if which == "any" else which, args, torch_in))
            expected.append(("raised", message))
    got = run_fresh(calls, tmp_path, dtypes=True)
    for (out, dtype), (kind, want), call in zip(got, expected, calls):
        what = f"{call[1]} {tuple(np.shape(a) for a in call[2])}" + (" (triton)" if call[3] else "")
        if kind == "bits":
            assert_fresh_bits(out, want, what)
            assert dtype == "float32", what
        elif kind == "empty":
            assert not isinstance(out, str) and out.size == 0 and dtype == "float32", (what, out)
        else:
            assert isinstance(out, str) and out.startswith("ValueError: " + want) and "\n" not in out, (what, out)


def test_specs_that_say_their_shapes_take_them(tmp_path):
    rng = np.random.default_rng(6)
    specs = {"any": parse(ANY_GEMM), "range": parse(RANGE_GEMV), "hand": parse(HAND_WRITTEN)}
    cases = [("any", "gemm", _arrays(rng, 5, 4, 6)), ("any", "gemm", _arrays(rng, 1, 4, 1)),
             ("range", "gemv", _arrays(rng, 3, 9)), ("range", "gemv", _arrays(rng, 8, 9)),
             ("hand", "gemm", _arrays(rng, 3, 7, 5))]
    sources = {k: compile_spec(s, "numpy") for k, s in specs.items()}
    calls = [(sources[k], f, args) for k, f, args in cases]
    calls.append((sources["range"], "gemv", _arrays(rng, 4, 9)))
    got = run_fresh(calls, tmp_path)
    for (k, f, args), out in zip(cases, got):
        assert_fresh_bits(out, reference_outputs(specs[k], f, args), f"{k} {f} {args[0].shape}")
    assert got[-1].startswith("ValueError: A has 4 rows, but this replica of torch.mv covers 2..3 or 8 rows only")


@pytest.mark.parametrize("section, message", [
    ("shapes {\n    m = 0\n}", "shapes: m = 0; expected `m = any`"),
    ('shapes {\n    m = "4..2"\n}', "'4..2' is not a size or range"),
    ('shapes {\n    m = "4, x"\n}', "'x' is not a size or range"),
    ("shapes {\n    rows = 4\n}", "unknown key 'rows'; expected m or ncols"),
    ("shapes {\n    m = 4\n    m = 5\n}", "m is given twice"),
    ("shapes {\n    m = fp32\n}", "shapes: m = fp32; expected"),
])
def test_check_refuses_malformed_shapes_sections(section, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("[", r"\[")) as e:
        check(parse(REVEALED_GEMM.replace("order seq", section + "\norder seq"), "g.fps"))
    assert str(e.value).startswith("g.fps:")


def test_check_refuses_shapes_on_a_sum_and_widening_an_if_on_the_position():
    with pytest.raises(SpecError, match="a `shapes` section is for gemv and gemm"):
        check(parse("op sum\nn in 1..8\nshapes {\n    m = any\n}\norder seq\n"))
    positional = REVEALED_GEMV.replace("order pairwise", "shapes {\n    m = any\n}\norder\n"
                                       "    if i < 2: seq\n    else: pairwise")
    with pytest.raises(SpecError, match="written for the revealed shape"):
        check(parse(positional))
    check(parse(positional.replace("m = any", "m = 4")))     # the revealed shape itself, said again


def test_verify_refuses_a_shape_the_spec_does_not_cover(tmp_path):
    from fpspec.verify import verify_spec

    with pytest.raises(FpspecError, match=r"^-m 5: the spec covers outputs of 4 rows only"):
        verify_spec(parse(REVEALED_GEMM), spec_name="g.fps", backend="numpy", samples=4, m=5)
    with pytest.raises(FpspecError, match=r"^--ncols 2: the spec covers outputs of 4 columns only"):
        verify_spec(parse(REVEALED_GEMM), spec_name="g.fps", backend="numpy", samples=4, ncols=2)
    # covered shapes: the first a `shapes` section names when the provenance has none
    report = verify_spec(parse(RANGE_GEMV.replace("provenance {\n    shape {\n        m = 4\n        ncols = 1\n"
                                                  "    }\n}\n", "")), spec_name="r.fps", backend="numpy",
                         samples=8, n_values=[9])
    assert report.equivalent


def test_check_warns_that_a_revealed_spec_covers_its_shape_only():
    from fpspec.spec.check import advice

    assert advice(parse(REVEALED_GEMM)) == [
        "its replicas take 4 x 4 outputs only (the shape in its provenance, where it was revealed): other shapes "
        "may take other orders; where the order is known to hold for them, say so in `shapes { m = ... ncols = ... }` "
        "(docs/fps.md, \"Output shapes\")"]
    assert advice(parse(REVEALED_GEMV))[0].startswith("its replicas take 4 rows only")
    assert advice(parse(ANY_GEMM)) == advice(parse(HAND_WRITTEN)) == []
