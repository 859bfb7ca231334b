#!/bin/sh
# Range inference on the black boxes of named_boxes.py and torch.mv; each
# writes NAME.fps (when a spec, or a fallback spec, comes out) and NAME.log
# (the report, in benchmarks/results/infer_named_x86-64_2026-11-26/).  Run from the checkout root: sh examples/infer/make_named.sh
set -u
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=examples/infer:.
D=examples/infer
L=benchmarks/results/infer_named_x86-64_2026-11-26
mkdir -p $L
run() {
  out=$1; shift
  /usr/bin/time -f "%e s, %M KB peak" python -m fpspec.cli reveal "$@" -o $D/$out.fps > /dev/null 2> $L/$out.log
  echo "$out rc $?"
}
run einsum_sum           named_boxes:einsum_sum --op sum -n 1..4096
run einsum_dot           named_boxes:einsum_dot --op dot -n 1..4096
run add_reduce_where     named_boxes:add_reduce_where --op sum -n 1..4096
run torch_sum_strided    named_boxes:torch_sum_strided --op sum -n 1..4096
run torch_mv_m8          torch.mv --op gemv --m 8 -n 1..1024
run compensated_pairwise named_boxes:compensated_pairwise --op sum -n 1..512 --dtype float32
