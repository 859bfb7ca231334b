#!/bin/sh
# Second device run: the tf32 Triton replica against torch.matmul, torch._scaled_mm's special inputs.
#   OUT=DIR sh examples/gpu/run_device_final.sh        (everything lands in DIR/run.tar.gz)
set -u
FINAL=$OUT
OUT=$(mktemp -d)
R() { name=$1; shift; echo "== $name: $*"; timeout "${T:-90}" "$@" > "$OUT/$name.log" 2>&1; echo "rc $?"; tail -n "${L:-8}" "$OUT/$name.log"; }
R tf32_k32 python3 -m fpspec.cli reveal torch.matmul -n 32 --tf32 --device cuda --m 16 --ncols 16 -o "$OUT/torch_matmul_tf32_16x16x32.fps"
L=12 R verify_tf32 python3 -m fpspec.cli verify "$OUT/torch_matmul_tf32_16x16x32.fps" --target triton --against torch.matmul --device cuda -m 16 --ncols 16 --samples 100
L=30 R scaled_mm_diag python3 examples/gpu/scaled_mm_diag.py "$OUT" 64
L=4 R scaled_mm_e4m3 python3 -m fpspec.cli reveal torch._scaled_mm -n 64 --dtype float8_e4m3fn --device cuda --m 16 --ncols 16 -o "$OUT/torch_scaled_mm_e4m3_16x16x64.fps"
tar -czf "$FINAL/run.tar.gz" -C "$OUT" .
