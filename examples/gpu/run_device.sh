#!/bin/sh
# The device run behind examples/gpu/ (one H100/H200): instruction-level checks of the
# matrix-unit model, the torch ops revealed, the bias placement, the bf16 native path.
#   OUT=DIR sh examples/gpu/run_device.sh
set -u
R() { name=$1; shift; echo "== $name: $*"; timeout "${T:-90}" "$@" > "$OUT/$name.log" 2>&1; echo "rc $?"; tail -n 12 "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T=150 R mma_blocks python3 examples/gpu/mma_blocks.py "$OUT/mma" --launches 256
R linear_bias python3 examples/gpu/linear_bias.py
for K in 16 32 64; do
  R tf32_k$K python3 -m fpspec.cli reveal torch.matmul -n $K --dtype float32 --tf32 --device cuda --m 16 --ncols 16 -o "$OUT/torch_matmul_tf32_16x16x$K.fps"
done
R bf16_16 python3 -m fpspec.cli reveal torch.matmul -n 16 --dtype bfloat16 --device cuda --m 16 --ncols 16 -o "$OUT/torch_matmul_bf16_16x16x16.fps"
R sum_1024 python3 -m fpspec.cli reveal torch.sum -n 1024 --device cuda -o "$OUT/torch_sum_cuda_float32_n1024.fps"
R sum_1024_fprev python3 -m fpspec.cli reveal torch.sum -n 1024 --device cuda --algorithm fprev --no-probe
R sum_1024_basic python3 -m fpspec.cli reveal torch.sum -n 1024 --device cuda --algorithm basic --no-probe
for F in float8_e4m3fn float8_e5m2; do
  R scaled_mm_$F python3 -m fpspec.cli reveal torch._scaled_mm -n 64 --dtype $F --device cuda --m 16 --ncols 16 -o "$OUT/torch_scaled_mm_${F}_16x16x64.fps"
done
R bmm_fp16 python3 -m fpspec.cli reveal torch.bmm -n 64 --dtype float16 --device cuda --m 16 --ncols 16 -o "$OUT/torch_bmm_fp16_16x16x64.fps"
T=150 R bench_bf16 python3 benchmarks/bench_triton.py --only native --dtype bf16
