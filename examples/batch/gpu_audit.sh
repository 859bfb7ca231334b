#!/bin/bash
# Batch-invariance audits on a GPU (H100/H200), as recorded in examples/batch/ and
# benchmarks/results/batch_*.txt.  Run from the repository root:
#     FPSPEC_BIO=/path/to/batch_invariant_ops bash examples/batch/gpu_audit.sh OUTDIR
# (FPSPEC_BIO: a checkout of thinking-machines-lab/batch_invariant_ops, the peer audited last)
set -u
OUT=${1:-out}
mkdir -p "$OUT/torch_bf16" "$OUT/replica_bf16"
fpspec() { python3 -m fpspec.cli "$@"; }
shape="--m 1..4096 -n 4096 --ncols 4096 --dtype bfloat16 --device cuda"

# 1. replica vs cuBLAS vs batch_invariant_ops: time and bits, bf16 and fp16, N = K = 4096
timeout 150 python3 benchmarks/bench_batch.py --small-configs > "$OUT/bench_batch.txt" 2>&1

# 2. cuBLAS: which order row 0 of torch.matmul gets at every M (goal: under 2 minutes)
timeout 170 python3 -m fpspec.cli audit torch.matmul --op gemm $shape -o "$OUT/torch_bf16" \
    > "$OUT/audit_torch_matmul_bf16.txt" 2>&1; echo "exit $?" >> "$OUT/audit_torch_matmul_bf16.txt"

# 3. the proof: the batch-invariant replica of cuBLAS's M = 4096 order, audited like cuBLAS
fpspec compile examples/batch/cublas_bf16_chain16.fps --target triton --batch-invariant -o "$OUT/replica_bf16.py"
timeout 150 python3 -m fpspec.cli audit "$OUT/replica_bf16.py" --op gemm $shape --no-probe -o "$OUT/replica_bf16" \
    > "$OUT/audit_replica_bf16.txt" 2>&1; echo "exit $?" >> "$OUT/audit_replica_bf16.txt"

# 4. the peer: batch_invariant_ops's Triton matmul
if [ -n "${FPSPEC_BIO:-}" ]; then
    PYTHONPATH="$PYTHONPATH:$FPSPEC_BIO" timeout 150 python3 -m fpspec.cli audit \
        batch_invariant_ops.batch_invariant_ops:matmul_persistent --op gemm $shape --no-probe \
        > "$OUT/audit_batch_invariant_ops_bf16.txt" 2>&1; echo "exit $?" >> "$OUT/audit_batch_invariant_ops_bf16.txt"
fi
