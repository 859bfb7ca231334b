#!/bin/sh
# torch.sum / torch.mean on CUDA (fp32, fp16, bf16), torch._scaled_mm with e5m2, a range of n for
# torch.sum, and (with MMASIM_PATH set) the block-scaled k64 MMA-Sim families on the CPU cores.
#   OUT=DIR [MMASIM_PATH=...] sh examples/gpu/run_device_sum.sh
set -u
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
if [ -n "${MMASIM_PATH:-}" ]; then
  timeout 480 python3 benchmarks/validate_mmasim.py --blocks 10000 --split 12 --jobs 12 --only k64 \
    > "$OUT/validate_mmasim_k64.txt" 2>&1 &
fi
R() { name=$1; t=$2; shift 2; echo "== $name: $*"; timeout "$t" "$@" > "$OUT/$name.log" 2>&1; echo "rc $?"; tail -n 14 "$OUT/$name.log"; }
R sum_mean 230 python3 examples/gpu/sum_mean_cuda.py "$OUT" float32:1024 float16:1024 bfloat16:1024 float32:1000 float32:65536
R scaled_mm_e5m2 60 python3 -m fpspec.cli reveal torch._scaled_mm -n 64 --dtype float8_e5m2 --device cuda --m 16 --ncols 16 -o "$OUT/torch_scaled_mm_e5m2_16x16x64.fps"
R verify_scaled_mm_e5m2 60 python3 -m fpspec.cli verify "$OUT/torch_scaled_mm_e5m2_16x16x64.fps" --target numpy --against torch._scaled_mm --device cuda -m 16 --ncols 16 --samples 100
R sum_range 110 python3 -m fpspec.cli reveal torch.sum -n 2..100000000 --dtype float32 --device cuda --time-limit 90 -o "$OUT/torch_sum_cuda_float32_range.fps"
wait
