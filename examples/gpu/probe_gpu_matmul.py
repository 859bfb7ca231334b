#!/usr/bin/env python3
"""Probe the arithmetic of torch.matmul on the GPU at hand.

    PYTHONPATH=. python3 examples/gpu/probe_gpu_matmul.py OUTDIR [K]

For fp16, bf16, tf32 (fp32 inputs with TF32 allowed), fp32 and fp8 (e4m3 via
torch._scaled_mm, where torch has it): reveal the tree of one K-long output,
run the probes inside it, and write OUTDIR/<case>.txt (the findings and the
arithmetic section) and OUTDIR/summary.json.  The probed fused parameters are
compared with the published ones (fp16/bf16 on H100: w = 16, 2 extra bits,
truncation, fp32 result rounded toward zero).
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from fpspec.arith.params import name_of
from fpspec.arith.probe import probe_arithmetic
from fpspec.cli.probe import section_text
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import from_callable, resolve_target


def tf32_target(K: int, m: int, ncols: int):
    """fp32 matmul with TF32 allowed, seen as a tf32-input op (inputs are tf32 values)."""

    def fn(A, B):
        torch.backends.cuda.matmul.allow_tf32 = True
        a = torch.from_numpy(np.asarray(A, np.float32)).cuda()
        b = torch.from_numpy(np.asarray(B, np.float32)).cuda()
        out = (a @ b).double().cpu().numpy()
        torch.backends.cuda.matmul.allow_tf32 = False
        return out

    t = from_callable(fn, op="gemm", n=K, dtype="tf32", m=m, ncols=ncols, name="torch.matmul[tf32]")
    return dataclasses.replace(t, out_fmt="fp32", device="cuda")


def fp8_target(K: int, m: int, ncols: int):
    """torch._scaled_mm on e4m3 inputs, fp32 output (scales 1)."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    one = torch.ones((), device="cuda")

    def fn(A, B):
        a = torch.from_numpy(np.asarray(A, np.float32)).cuda().to(torch.float8_e4m3fn)
        b = torch.from_numpy(np.asarray(B, np.float32)).cuda().to(torch.float8_e4m3fn)
        b = b.t().contiguous().t()          # column-major, as _scaled_mm wants
        out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)
        return out.double().cpu().numpy()

    t = from_callable(fn, op="gemm", n=K, dtype="fp8e4m3", m=m, ncols=ncols, name="torch._scaled_mm[e4m3]")
    return dataclasses.replace(t, out_fmt="fp32", device="cuda")


def cases(K: int):
    m = ncols = 16
    yield "fp16", lambda: resolve_target("torch.matmul", n=K, dtype="float16", m=m, ncols=ncols, device="cuda")
    yield "bf16", lambda: resolve_target("torch.matmul", n=K, dtype="bfloat16", m=m, ncols=ncols, device="cuda")
    yield "tf32", lambda: tf32_target(K, m, ncols)
    yield "fp32", lambda: resolve_target("torch.matmul", n=K, dtype="float32", m=m, ncols=ncols, device="cuda")
    yield "fp8e4m3", lambda: fp8_target(K, m, ncols)


def main() -> None:
    out = Path(sys.argv[1])
    K = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "K": K, "cases": {}}
    for name, make in cases(K):
        t0 = time.time()
        try:
            target = make()
            if target is None:
                summary["cases"][name] = {"skipped": "torch has no _scaled_mm / float8"}
                continue
            tree = reveal(target).tree
            rep = probe_arithmetic(target, tree)
            fused = rep.arithmetic.fused
            text = "\n".join([f"# {target.describe()} on {summary['device']}, torch {torch.__version__}",
                              f"# tree: {tree}", *rep.lines, section_text(rep.arithmetic)])
            (out / f"{name}.txt").write_text(text + "\n")
            summary["cases"][name] = {
                "consistent": rep.consistent, "seconds": round(time.time() - t0, 1),
                "published": name_of(dataclasses.replace(fused, exponent_floor=-133)) if fused else None,
                "fused": dataclasses.asdict(fused) if fused else None, "lines": rep.lines}
        except Exception as e:  # record and go on: one failing case must not hide the others
            summary["cases"][name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
        print(name, json.dumps({k: v for k, v in summary["cases"][name].items() if k != "lines"})[:300], flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
