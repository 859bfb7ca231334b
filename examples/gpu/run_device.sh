#!/bin/sh
# The device run behind examples/gpu/ (one H100/H200): instruction-level checks of the
# matrix-unit model, the torch ops revealed, the bias placement, the bf16 native path.
#   OUT=DIR sh examples/gpu/run_device.sh        (everything lands in DIR/run.tar.gz)
set -u
FINAL=$OUT
OUT=$(mktemp -d)
R() { name=$1; shift; echo "== $name: $*"; timeout "${T:-90}" "$@" > "$OUT/$name.log" 2>&1; echo "rc $?"; tail -n "${L:-8}" "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R linear_bias python3 examples/gpu/linear_bias.py
T=200 R mma_blocks python3 examples/gpu/mma_blocks.py "$OUT/mma" --launches 256
for K in 16 32 64; do
  L=30 R tf32_k$K python3 -m fpspec.cli reveal torch.matmul -n $K --tf32 --device cuda --m 16 --ncols 16 -o "$OUT/torch_matmul_tf32_16x16x$K.fps"
done
L=20 R verify_tf32 python3 -m fpspec.cli verify "$OUT/torch_matmul_tf32_16x16x32.fps" --target triton --against torch.matmul --device cuda -m 16 --ncols 16 --samples 200
R bf16_16 python3 -m fpspec.cli reveal torch.matmul -n 16 --dtype bfloat16 --device cuda --m 16 --ncols 16 -o "$OUT/torch_matmul_bf16_16x16x16.fps"
R bf16_256 python3 -m fpspec.cli reveal torch.matmul -n 256 --dtype bfloat16 --device cuda --m 64 --ncols 64 -o "$OUT/torch_matmul_bf16_64x64x256.fps"
L=20 R verify_bf16 python3 -m fpspec.cli verify "$OUT/torch_matmul_bf16_64x64x256.fps" --target triton --against torch.matmul --device cuda -m 64 --ncols 64 --samples 200
R bmm_fp16 python3 -m fpspec.cli reveal torch.bmm -n 64 --dtype float16 --device cuda --m 16 --ncols 16 -o "$OUT/torch_bmm_fp16_16x16x64.fps"
R sum_1024_basic python3 -m fpspec.cli reveal torch.sum -n 1024 --device cuda --algorithm basic -o "$OUT/torch_sum_cuda_float32_n1024.fps"
R sum_1024_modified python3 -m fpspec.cli reveal torch.sum -n 1024 --device cuda --algorithm modified --no-probe
L=40 T=150 R scaled_mm_diag python3 examples/gpu/scaled_mm_diag.py "$OUT" 64
L=6 T=120 R bench_bf16 python3 benchmarks/bench_triton.py --only native --dtype bf16
tar -czf "$FINAL/run.tar.gz" -C "$OUT" .
