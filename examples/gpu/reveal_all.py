#!/usr/bin/env python3
"""Reveal torch.matmul and torch.sum on the GPU at hand; one tree file per case.

    PYTHONPATH=. python3 examples/gpu/reveal_all.py OUTDIR [SECONDS]

Each file holds the nested-bracket tree with the provenance header that
`fpspec reveal ... -o FILE` writes (the command line given there reproduces
it); summary.json lists queries, calls, seconds and notes for every case.
Cases run in order of interest and stop before SECONDS (default 280) run out.
"""
import json
import os
import sys
import time
import traceback

import torch

from fpspec.cli.reveal import provenance, tree_file_text
from fpspec.errors import FpspecError
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import resolve_target
from fpspec.tree import format_tree, stats

DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def cases():
    for n in (8, 32, 128, 1024):
        yield dict(target="torch.sum", dtype="fp32", n=n)
    for K in (16, 32, 64, 128):
        for dt in ("fp16", "bf16", "fp32", "tf32"):
            yield dict(target="torch.matmul", dtype=dt, n=K, m=K, ncols=K)
    for dt in ("fp16", "bf16", "fp32", "tf32"):
        yield dict(target="torch.matmul", dtype=dt, n=1000, m=1000, ncols=1000)
    for m, ncols, K in ((256, 128, 64), (64, 512, 1000), (1024, 1024, 128), (32, 32, 1000)):
        for dt in ("fp16", "bf16", "fp32", "tf32"):
            yield dict(target="torch.matmul", dtype=dt, n=K, m=m, ncols=ncols)
    yield dict(target="torch.matmul", dtype="fp16", n=4096, m=128, ncols=128)


def name_of(c):
    shape = f"m{c['m']}_n{c['ncols']}_k{c['n']}" if "m" in c else f"n{c['n']}"
    return f"{c['target'].replace('.', '_')}_{c['dtype']}_{shape}"


def run_case(c, out_dir):
    tf32 = c["dtype"] == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dtype = DTYPES["fp32" if tf32 else c["dtype"]]
    argv = ["reveal", c["target"], "-n", str(c["n"]), "--dtype", dtype]
    if "m" in c:
        argv += ["--m", str(c["m"]), "--ncols", str(c["ncols"])]
    argv += ["--device", "cuda"] + (["--tf32"] if tf32 else []) + ["--no-probe"]
    target = resolve_target(c["target"], n=c["n"], dtype=dtype, m=c.get("m"), ncols=c.get("ncols"), device="cuda")
    record = {"case": name_of(c), "command": "fpspec " + " ".join(argv + ["-o", name_of(c) + ".txt"])}
    tries = [None, True] if c["target"] != "torch.sum" else [None]
    for split in tries:
        try:
            rev = reveal(target, split=split)
        except FpspecError as e:
            record.setdefault("refusals", []).append(f"masks {'split' if split else 'auto'}: {e}")
            continue
        if split:
            argv += ["--masks", "split"]
            record["command"] = "fpspec " + " ".join(argv + ["-o", name_of(c) + ".txt"])
        prov = provenance(target, argv + ["-o", name_of(c) + ".txt"])
        if tf32:
            prov["tf32"] = True
        prov["cublas"] = str(torch.backends.cuda.preferred_blas_library()) if hasattr(torch.backends.cuda, "preferred_blas_library") else "?"
        with open(os.path.join(out_dir, name_of(c) + ".txt"), "w") as f:
            f.write(tree_file_text(rev.tree, prov, rev))
        record.update(rev.summary())
        record["tree_head"] = format_tree(rev.tree)[:400]
        record["stats"] = str(stats(rev.tree))
        record["differing_count"] = len(rev.differing)
        record["differing_outputs"] = [list(d) for d in rev.differing[:50]]
        break
    return record


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "out"
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 280.0
    os.makedirs(out_dir, exist_ok=True)
    start = time.time()
    summary = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "cuda": torch.version.cuda, "cases": []}
    for c in cases():
        if time.time() - start > budget:
            summary["cases"].append({"case": name_of(c), "skipped": "out of time"})
            continue
        t0 = time.time()
        try:
            rec = run_case(c, out_dir)
        except Exception as e:  # keep going: one broken case must not lose the others
            rec = {"case": name_of(c), "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]}
        rec["wall"] = round(time.time() - t0, 3)
        summary["cases"].append(rec)
        print(f"{rec['case']}: {rec.get('stats', rec.get('error', rec.get('refusals')))} "
              f"[{rec.get('queries', '-')} q, {rec.get('calls', '-')} calls, {rec['wall']} s]", flush=True)
        with open(os.path.join(out_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
