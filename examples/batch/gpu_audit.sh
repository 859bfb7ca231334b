#!/bin/bash
# Batch-invariance runs on a GPU (H100/H200), as recorded in examples/batch/ and
# benchmarks/results/batch_*.txt.  Run from the repository root:
#     FPSPEC_BIO=/path/to/batch_invariant_ops bash examples/batch/gpu_audit.sh OUTDIR
# (FPSPEC_BIO: a checkout of thinking-machines-lab/batch_invariant_ops, the peer audited last)
# Each step has a time limit (the whole script fits 8 minutes) and writes its wall time.
set -u
OUT=${1:-out}
mkdir -p "$OUT/torch_bf16" "$OUT/replica_bf16"
shape="--m 1..4096 -n 4096 --ncols 4096 --dtype bfloat16 --device cuda"
step() {   # step NAME LIMIT COMMAND...: run with a limit, append "exit E, S s" to OUT/NAME.txt
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    local rc=$?
    echo "exit $rc, $((SECONDS - t0)) s (limit $limit s)" >> "$OUT/$name.txt"
    return $rc
}

# 1. replica vs cuBLAS vs batch_invariant_ops: time and bits, bf16 and fp16, N = K = 4096
step bench_batch 150 python3 benchmarks/bench_batch.py --sweep

# 2. cuBLAS: which order and arithmetic row 0 of torch.matmul gets at every M (goal: under 2 minutes);
#    where the probes refuse an arithmetic, the orders alone
step audit_torch_matmul_bf16 110 python3 -m fpspec.cli audit torch.matmul --op gemm $shape -o "$OUT/torch_bf16"
case $? in 0|1) ;; *) step audit_torch_matmul_bf16_orders 70 python3 -m fpspec.cli audit torch.matmul --op gemm \
    $shape --no-probe -o "$OUT/torch_bf16" ;; esac

# 3. the proof: the batch-invariant replica of cuBLAS's M = 4096 order, audited like cuBLAS
python3 -m fpspec.cli compile examples/batch/cublas_bf16_chain16.fps --target triton --batch-invariant \
    -o "$OUT/replica_bf16.py"
step audit_replica_bf16 45 python3 -m fpspec.cli audit "$OUT/replica_bf16.py" --op gemm $shape --no-probe \
    -o "$OUT/replica_bf16"

# 4. the peer: batch_invariant_ops's Triton matmul
if [ -n "${FPSPEC_BIO:-}" ]; then
    step audit_batch_invariant_ops_bf16 45 env PYTHONPATH="${PYTHONPATH:-}:$FPSPEC_BIO" python3 -m fpspec.cli \
        audit batch_invariant_ops.batch_invariant_ops:matmul_persistent --op gemm $shape --no-probe
fi

# 5. the GPU tests: decode equals prefill equals cuBLAS, through the replica's direct launches
step pytest_gpu 50 env TRITON_INTERPRET=0 python3 -m pytest -q -m gpu tests/audit -p no:cacheprovider
