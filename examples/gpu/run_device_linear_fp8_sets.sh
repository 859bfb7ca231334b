#!/bin/sh
# F.linear with its bias and torch._scaled_mm with two fp8 formats verified on the GPU (numpy and
# triton replicas), the e5m2 x e4m3 sample diagnostic and reveal, and the named fused sets through
# the compiled Triton kernels, all side by side.
#   OUT=DIR T=SECONDS SLICES=S JOBS=J COMMIT=SHA sh examples/gpu/run_device_linear_fp8_sets.sh
# (every job's log lands in DIR; J of the S slices of benchmarks/triton_fused_sets_gpu.py run, from FIRST)
set -u
T=${T:-100}
V="-m 16 --ncols 16 --device cuda"
J() { name=$1; shift; ( echo "\$ $*"; timeout "$T" "$@"; echo "rc $?" ) > "$OUT/$name.log" 2>&1 & }
nvidia-smi -L > "$OUT/device.txt"; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/device.txt"
echo "commit ${COMMIT:-unknown}" >> "$OUT/device.txt"
for d in fp16 bf16 fp32; do
  for b in numpy triton; do
    J "linear_${d}_$b" python3 -m fpspec.cli verify "examples/gpu/torch_linear_bias_${d}_16x16x64_h200.fps" --target "$b" \
      --against torch.nn.functional.linear --bias $V --samples "${SAMPLES:-300}"
  done
done
for b in numpy triton; do
  J "scaled_mm_e4m3xe5m2_$b" python3 -m fpspec.cli verify examples/gpu/torch_scaled_mm_e4m3xe5m2_16x16x64_h200.fps \
    --target "$b" --against torch._scaled_mm $V --samples "${SAMPLES:-300}"
done
J e5m2_sample_diag python3 examples/gpu/scaled_mm_e5m2_sample_diag.py "$OUT"
J e5m2_reveal python3 -m fpspec.cli reveal torch._scaled_mm -n 64 --dtype float8_e5m2 --dtype-b float8_e4m3fn --m 16 \
  --ncols 16 --device cuda -o "$OUT/torch_scaled_mm_e5m2xe4m3_16x16x64.fps"
if [ -n "${E5M2_SPEC:-}" ]; then
  for b in numpy triton; do
    J "scaled_mm_e5m2xe4m3_$b" python3 -m fpspec.cli verify "$E5M2_SPEC" --target "$b" --against torch._scaled_mm $V \
      --samples "${SAMPLES:-300}"
  done
fi
k=${FIRST:-0}
while [ "$k" -lt $(( ${FIRST:-0} + ${JOBS:-8} )) ]; do
  J "sets_$k" env SLICE=$k SLICES=${SLICES:-${JOBS:-8}} TRITON_INTERPRET=0 python3 benchmarks/triton_fused_sets_gpu.py "$OUT/sets.txt"
  k=$((k + 1))
done
wait
