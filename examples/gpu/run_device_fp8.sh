#!/bin/sh
# torch._scaled_mm e4m3 revealed, then its NumPy replica verified against it on the GPU.
#   OUT=DIR sh examples/gpu/run_device_fp8.sh        (everything lands in DIR/run.tar.gz)
set -u
FINAL=$OUT
OUT=$(mktemp -d)
R() { name=$1; shift; echo "== $name: $*"; timeout "${T:-90}" "$@" > "$OUT/$name.log" 2>&1; echo "rc $?"; tail -n "${L:-8}" "$OUT/$name.log"; }
L=4 R scaled_mm_e4m3 python3 -m fpspec.cli reveal torch._scaled_mm -n 64 --dtype float8_e4m3fn --device cuda --m 16 --ncols 16 -o "$OUT/torch_scaled_mm_e4m3_16x16x64.fps"
L=12 R verify_scaled_mm python3 -m fpspec.cli verify "$OUT/torch_scaled_mm_e4m3_16x16x64.fps" --target numpy --against torch._scaled_mm --device cuda -m 16 --ncols 16 --samples 100
tar -czf "$FINAL/run.tar.gz" -C "$OUT" .
