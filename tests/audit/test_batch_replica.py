"""--batch-invariant replicas: one order per output whatever the batch M, proven by
auditing the replica itself; the Triton replica's rows equal across M on the
interpreter, and on a GPU against cuBLAS (decode equals prefill equals cuBLAS)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fpspec.audit import audit, audit_subject
from fpspec.compile import compile_spec, load_replica
from fpspec.compile.batch import batch_invariant
from fpspec.io import write_atomic
from fpspec.spec import load, parse

ROOT = Path(__file__).resolve().parents[2]
GEMV_M7 = ROOT / "examples" / "cpu" / "numpy_matmul_float32_gemv_m7.fps"     # OpenBLAS sgemv: rows 4..6 in other orders
CHAIN16 = ROOT / "examples" / "batch" / "cublas_fp16_chain16.fps"   # cuBLAS fp16: one chain of 16-product nodes


def test_positional_spec_takes_row_zeros_order():
    spec = load(GEMV_M7)
    one, note = batch_invariant(spec)
    assert str(one.order) == str(spec.order.cases[0].order)      # the arm of i = 0
    # the revealed 7 rows widened to any: the arm holds for every output whatever the batch
    assert str(one.header.section("shapes")) == "shapes {\n    m = any\n}"
    assert replace(one.header, sections=spec.header.sections) == spec.header and "(i, j) = (0, 0)" in note
    plain = load(CHAIN16)
    assert batch_invariant(plain)[0] is plain


def test_condition_on_n_and_position_keeps_n():
    spec = parse('target "t"\nop gemv\nn in 1..\norder\n    if i < 2 and n > 8: rev\n    else: seq\n')
    one, _ = batch_invariant(spec)
    assert str(one.order) == "if 0 < 2 and n > 8: rev else: seq"


def test_audit_proves_the_replica_invariant(tmp_path):
    from fpspec.errors import FpspecError
    from fpspec.spec import expand
    from fpspec.tree import observable

    spec = load(GEMV_M7)
    one = batch_invariant(spec)[0]
    paths = {}
    for label, s in (("plain", spec), ("invariant", one)):
        paths[label] = tmp_path / f"{label}.py"
        write_atomic(paths[label], compile_spec(s, "numpy"))
    result = audit(audit_subject(str(paths["invariant"]), op="gemv", m=(1, 9), n=40, rows="all"), probe=False)
    assert result.invariant and result.verdict() == "batch-invariant"
    assert result.classes[0].sample.orders[0].tree == observable(expand(one, 40))
    # the plain replica keeps OpenBLAS's leftover rows, written for its 7-row shape: it refuses other batches
    with pytest.raises(FpspecError, match="depend on the output position"):
        audit(audit_subject(str(paths["plain"]), op="gemv", m=(1, 9), n=40, rows="all"), probe=False)


def test_triton_rows_equal_across_batch_sizes(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from fpspec.cli import main

    out = tmp_path / "replica.py"
    assert main(["compile", str(CHAIN16), "--target", "triton", "--batch-invariant", "-o", str(out)]) == 0
    source = out.read_text()
    assert source.splitlines()[1].startswith("# batch-invariant: one order")
    replica = load_replica(source, "chain16")
    rng = np.random.default_rng(1)
    A = torch.from_numpy(rng.standard_normal((9, 32)) * 8).half()
    B = torch.from_numpy(rng.standard_normal((32, 8))).half()
    full = replica.gemm(A, B, path="emulated").view(torch.int16)
    for M in (1, 5):
        part = replica.gemm(A[:M].contiguous(), B, path="emulated").view(torch.int16)
        assert torch.equal(part, full[:M]), M
    # tiles by batch size: every BM a multiple of 64 (one warpgroup MMA: Note [tiles and bits])
    tiles = replica.REPLICA.batch_tiles
    assert [top for top, _ in tiles] == [64, 1024] and all(cfg["BM"] % 64 == 0 for _, cfg in tiles)


def test_numba_rows_equal_across_batch_sizes_and_positions(tmp_path):
    pytest.importorskip("numba")
    from fpspec.cli import main

    out = tmp_path / "replica_numba.py"
    assert main(["compile", str(GEMV_M7), "--target", "numba", "--batch-invariant", "-o", str(out)]) == 0
    replica = load_replica(out.read_text(), "gemv-m7-numba")
    rng = np.random.default_rng(2)
    A = (rng.standard_normal((9, 40)) * np.ldexp(1.0, rng.integers(-6, 7, (9, 40)))).astype(np.float32)
    x = rng.standard_normal(40).astype(np.float32)
    full = replica.gemv(A, x).view(np.uint32)
    for M in range(1, 9):
        assert np.array_equal(replica.gemv(A[:M], x).view(np.uint32), full[:M]), M
    # one order whatever the row's position: OpenBLAS's leftover rows 4..6 alone give the bits of row 0's order
    for r in (4, 5, 6):
        assert replica.gemv(A[r:r + 1], x).view(np.uint32)[0] == full[r], r
    # and that order is the reference row's (the spec's arm for i = 0), as the NumPy replica computes it
    ref = tmp_path / "replica_numpy.py"
    assert main(["compile", str(GEMV_M7), "--target", "numpy", "--batch-invariant", "-o", str(ref)]) == 0
    assert np.array_equal(load_replica(ref.read_text(), "gemv-m7-numpy").gemv(A, x).view(np.uint32), full)


@pytest.mark.gpu
def test_gpu_decode_equals_prefill_equals_cublas(tmp_path):
    import torch

    spec = load(CHAIN16)
    path = tmp_path / "replica.py"
    from fpspec.compile.batch import mark

    write_atomic(path, mark(compile_spec(batch_invariant(spec)[0], "triton"), "triton", "batch-invariant"))
    replica = load_replica(path.read_text(), "chain16-gpu")
    g = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(4096, 4096, device="cuda", generator=g).half()
    B = torch.randn(4096, 4096, device="cuda", generator=g).half()
    ref = torch.matmul(A, B)
    big = replica.gemm(A, B)
    assert replica.last_path() == "native"
    assert torch.equal(big.view(torch.int16), ref.view(torch.int16))
    for M in (1, 8, 64, 512):
        a = A[:M].contiguous()
        for _ in range(2):      # the second call launches the kept compiled kernel (Note [direct launch])
            row = replica.gemm(a, B)
            assert torch.equal(row.view(torch.int16), ref[:M].view(torch.int16)), M
    assert sum(bool(v) for v in replica.REPLICA.launch.kept.values()) >= 4
    result = audit(audit_subject(str(path), op="gemm", m=(1, 70), n=4096, ncols=4096, dtype="float16",
                                 device="cuda"), probe=False)
    assert result.invariant and str(result.classes[0].sample.orders[0].spec.order) == "chain(16)"
