#!/bin/sh
# Re-make the inferred CPU examples in this folder (one spec per target, each
# with its JSON: per-n timings, fit, held-out n, sampled checks; the .log is
# the report).  Run from the checkout root:  sh examples/infer/make_examples.sh
# (a target whose .fps exists is skipped; delete it to redo).  They were made
# under a 600 s limit: some take longer than the default (fpspec reveal --help).
set -u
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
D=examples/infer
run() {
  out=$1; shift
  [ -e $D/$out.fps ] && return
  python -m fpspec.infer "$@" --time-limit 600 --quiet -o $D/$out.fps --json $D/$out.json 2> $D/$out.log
  echo "$out rc $?"
}
run numpy_dot_float32   numpy.dot -n 1..65536 --dtype float32
run numpy_gemm_m64_n64  numpy.matmul -n 1..65536 --op gemm --m 64 --ncols 64 --dtype float32 --full-limit 2048 --check 65536
run numpy_gemm_m8_n8    numpy.matmul -n 1..4096 --op gemm --m 8 --ncols 8 --dtype float32
run numpy_gemm_m256_n32 numpy.matmul -n 1..4096 --op gemm --m 256 --ncols 32 --dtype float32
run numpy_gemv_m64      numpy.matmul -n 1..4096 --op gemv --m 64 --dtype float32
run numpy_sum_float64   numpy.sum -n 1..65536 --dtype float64
# torch.sum (CPU) folds the leftovers into the first lane group: no .fps
# combinator says that, so this one ends in a one-line refusal (see its .log)
run torch_sum_float32   torch.sum -n 1..65536 --dtype float32
