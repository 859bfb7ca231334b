"""torch._scaled_mm e5m2 x e4m3 (scales 1, fp32 output) on the reveal's own inputs: the sample rows
`fpspec reveal --dtype float8_e5m2 --dtype-b float8_e4m3fn` checks its arithmetic on, and the fused
probe rows it chooses the arithmetic by, against the fused model of the H100/H200
(h100-fp8e5m2xfp8e4m3, chain(32)); the rows the model misses are printed, and the inputs and
outputs saved for a look on any machine.

    PYTHONPATH=. python3 examples/gpu/scaled_mm_e5m2_sample_diag.py OUT_DIR
"""
import dataclasses
import os
import sys

import numpy as np
import torch

from fpspec.arith.evaluate import evaluate
from fpspec.arith.params import PARAMS
from fpspec.arith.probe import _fused_candidates, _fused_rows, _places, _Runner, _select, sample_inputs
from fpspec.reveal.targets import resolve_target
from fpspec.spec.expand import expand
from fpspec.verify import load_spec, spec_arithmetic


DEVICE = os.environ.get("DEVICE", "cuda")   # cpu: a stand-in for torch._scaled_mm, to try the script


def main(out_dir: str) -> None:
    spec = load_spec("examples/gpu/torch_scaled_mm_e4m3_16x16x64_h200.fps")
    tree = expand(spec, 64)
    for fa, fb, dt_a, dt_b in (("fp8e5m2", "fp8e4m3", "float8_e5m2", "float8_e4m3fn"),
                               ("fp8e4m3", "fp8e5m2", "float8_e4m3fn", "float8_e5m2")):
        target = resolve_target("torch._scaled_mm", n=64, dtype=dt_a, dtype_b=dt_b, m=16, ncols=16, device=DEVICE)
        X, Y = sample_inputs(target)
        got = _Runner(target)(X, Y)
        params = dataclasses.replace(PARAMS[f"h100-{fa}x{fb}"], exponent_floor=None)
        arith = dataclasses.replace(spec_arithmetic(spec), input=fa, fused=params)
        with np.errstate(all="ignore"):
            want = np.asarray(evaluate(tree, X.T, Y.T, arith), np.float64)
        same = (want.view(np.uint64) == got.view(np.uint64)) | (np.isnan(want) & np.isnan(got))
        # the same rows as one 288 x 64 by 64 x 288 product (the diag's way: every row against every column)
        one = torch.ones((), device=DEVICE)
        A = torch.from_numpy(X).float().to(DEVICE).to(getattr(torch, dt_a))
        B = torch.from_numpy(Y.T.copy()).float().to(DEVICE).to(getattr(torch, dt_b))
        full = torch._scaled_mm(A, B.t().contiguous().t(), scale_a=one, scale_b=one,
                                out_dtype=torch.float32).double().cpu().numpy()
        diag = np.diagonal(full)
        same_full = (diag.view(np.uint64) == got.view(np.uint64)) | (np.isnan(diag) & np.isnan(got))
        print(f"{fa} x {fb}: {int((~same).sum())} of {len(got)} sample rows differ from {params}; "
              f"one big call differs from the probe's calls at {int((~same_full).sum())} rows", flush=True)
        bad = np.flatnonzero(~same)[:5]
        for i in bad:
            print(f"  row {i}: target {got[i].hex()} model {want[i].hex()}")
        # the fused probe rows of the reveal (fpspec.arith.probe._probe_tree, seed 0)
        places = _places(tree)
        rows = _fused_rows(target, places, np.random.default_rng(0), 300)
        Xp, Yp = rows.arrays()
        gotp = _Runner(target)(Xp, Yp)
        with np.errstate(all="ignore"):
            wantp = np.asarray(evaluate(tree, Xp.T, Yp.T, arith), np.float64)
        samep = (wantp.view(np.uint64) == gotp.view(np.uint64)) | (np.isnan(wantp) & np.isnan(gotp))
        cands = _fused_candidates(target, places.w)
        keep, misses = _select(cands, tree, Xp, Yp, gotp, True)
        print(f"  probe rows: {int((~samep).sum())} of {len(gotp)} differ from the model; "
              f"{len(keep)} stage-1 candidates fit them: {[str(a.fused) for a in keep[:3]]}")
        for c in np.argsort(misses, kind="stable")[:0 if keep else 3]:
            print(f"  closest: {misses[c]} misses (of the first rows), {cands[c].fused}")
        for i in np.flatnonzero(~samep)[:10]:
            terms = {int(k): (float(Xp[i, k]), float(Yp[i, k])) for k in np.flatnonzero(Xp[i])}
            print(f"  probe row {i} ({rows.names[i] or '-'}): terms {terms}; target {gotp[i].hex()} "
                  f"model {wantp[i].hex()}")
        np.savez(f"{out_dir}/sample_{fa}x{fb}.npz", X=X, Y=Y, got=got, want=want, full=full,
                 Xp=Xp, Yp=Yp, gotp=gotp, wantp=wantp)


if __name__ == "__main__":
    main(sys.argv[1])
