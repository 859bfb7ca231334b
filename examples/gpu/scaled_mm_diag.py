"""torch._scaled_mm (fp8 e4m3, per-tensor scales 1, fp32 output): its tree, its probed
arithmetic, and every sample input the model does not reproduce.

    PYTHONPATH=. python3 examples/gpu/scaled_mm_diag.py OUTDIR [K]
"""
import sys

import numpy as np

from fpspec.arith import evaluate
from fpspec.arith.probe import probe_arithmetic
from fpspec.cli.reveal import order_target
from fpspec.reveal.engine import reveal as run_reveal
from fpspec.reveal.targets import resolve_target
from fpspec.tree import format_tree


def main():
    out = sys.argv[1]
    K = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    t = resolve_target("torch._scaled_mm", n=K, dtype="fp8e4m3", m=16, ncols=16, device="cuda")
    rev = run_reveal(t)
    print("tree:", format_tree(rev.tree), flush=True)
    rep = probe_arithmetic(order_target(t, rev.shared, (0, 0)), rev.tree)
    print("\n".join(rep.lines), flush=True)
    ar = rep.arithmetic
    rng = np.random.default_rng(0)
    vals = np.array([v for v in (np.arange(256, dtype=np.uint8).view(np.uint8))], np.uint8)
    import torch

    allv = torch.from_numpy(vals).view(torch.float8_e4m3fn).double().numpy()
    finite = allv[np.isfinite(allv)]
    bad = []
    for trial in range(64):
        A = rng.choice(finite, size=(16, K))
        B = rng.choice(finite, size=(K, 16))
        if trial % 4 == 1:
            A = A * (rng.random((16, K)) < 0.2)
        got = t.to_float64(t.fn(t.native(A), t.native(B)))
        for j in range(16):
            want = evaluate(rev.tree, A.T, np.repeat(B[:, j:j + 1], 16, 1), ar)
            diff = ~((got[:, j] == want) | (np.isnan(got[:, j]) & np.isnan(want)))
            for i in np.flatnonzero(diff):
                bad.append((A[i], B[:, j], got[i, j], want[i]))
    print(f"{len(bad)} of {64 * 256} random elements differ from the probed arithmetic", flush=True)
    # the sample check's inputs (fpspec.inputs: random, special, cancelling ...): which differ
    from fpspec.inputs import samples

    for s in samples("gemm", K, "fp8e4m3", 288, seed=K, m=16, ncols=16):
        A = np.asarray(s.args[0], np.float64)
        B = np.asarray(s.args[1], np.float64)
        got = t.to_float64(t.fn(t.native(A), t.native(B)))
        for j in range(16):
            want = evaluate(rev.tree, A.T, np.repeat(B[:, j:j + 1], 16, 1), ar)
            diff = ~((got[:, j] == want) & (np.signbit(got[:, j]) == np.signbit(want))
                     | (np.isnan(got[:, j]) & np.isnan(want)))
            for i in np.flatnonzero(diff)[:1]:
                print(f"sample {s.index} ({s.kind}) element {i},{j}: gpu {got[i, j]!r} model {want[i]!r}\n"
                      f"  a {A[i].tolist()}\n  b {B[:, j].tolist()}", flush=True)
    if bad:
        np.savez_compressed(f"{out}/scaled_mm_diff.npz", a=np.stack([b[0] for b in bad[:200]]),
                            b=np.stack([b[1] for b in bad[:200]]), got=np.array([b[2] for b in bad[:200]]),
                            model=np.array([b[3] for b in bad[:200]]), tree=format_tree(rev.tree))
        for a, b, g, w in bad[:3]:
            print("a", a.tolist(), "\nb", b.tolist(), "\ngpu", g, "model", w)


if __name__ == "__main__":
    main()
