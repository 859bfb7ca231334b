#!/bin/bash
# One device call: GPU tests, numpy.sum / torch.matmul checks, benchmarks (with sweeps when SWEEP=1).
#   (on the GPU machine) bash benchmarks/triton/run_device.sh     -> results under $OUT (set OUT first)
export TRITON_INTERPRET=0
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
git log -1 --format='commit %h %s' > "$OUT/commit.txt" 2>/dev/null
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/triton/test_gpu.py tests/triton/test_fused_kernel.py \
    -k "gpu or native_store or native_equals" 2>&1 | grep -v "leaked\|nanobind\|skipped remainder" | tail -15 > "$OUT/pytest.txt"
timeout 200 python3 examples/gpu/gpu_validate.py "$OUT/val" "--shapes=${SHAPES:-}" > /dev/null 2>&1
BENCH_ARGS=${BENCH_ARGS:-}
[ "${SWEEP:-0}" = 1 ] && BENCH_ARGS="$BENCH_ARGS --configs"
timeout ${BENCH_S:-300} python3 benchmarks/bench_triton.py $BENCH_ARGS 2>&1 | tee "$OUT/bench.txt"
cat "$OUT/pytest.txt" "$OUT/val/validate.txt"
