#!/bin/sh
# torch.matmul fp16 on CUDA along K for a few (M, N): one spec per shape.
# Run from the checkout root on a GPU machine (lark installed, or the wheel
# in .whl/ as docs/agents/TEAM.md says).  Each shape writes its spec, JSON and
# a --trace file (one JSON line per revealed K, so a run cut short keeps
# what it revealed).
#
# Status (2026-11-26, NVIDIA H200, torch 2.11.0+cu130): run once with
# K = 1..1024, --no-probe, a 48 s limit per shape: all three shapes hit the
# limit before the first fit (no trace option then, so nothing came back).
# Next run: give each shape a few minutes, or a smaller K range.
set -u
OUT=${OUT:-examples/infer}
for mn in "16 16" "128 128" "1024 1024"; do
  set -- $mn
  f=$OUT/torch_matmul_fp16_cuda_m$1_n$2
  python -m fpspec.infer torch.matmul -n 1..1024 --op gemm --m $1 --ncols $2 --dtype float16 --device cuda \
    --quiet --holdout 4 --full-limit 1024 --replica none --trace $f.trace.jsonl -o $f.fps --json $f.json 2> $f.log
  echo "m=$1 n=$2 rc $?"
done
