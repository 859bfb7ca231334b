#!/bin/sh
# torch._scaled_mm e5m2 x e4m3 on the GPU: examples/gpu/torch_scaled_mm_e5m2xe4m3_16x16x64_h200.fps verified against
# it (numpy and triton replicas), the reveal run again (its spec's numpy replica verified after it), the diagnostic
# of the reveal's sample and probe rows; beside them the named fused sets that an earlier run (SKIP=its log) did
# not reach, through the compiled Triton kernels.
#   OUT=DIR T=SECONDS JOBS=J SKIP=LOG COMMIT=SHA sh examples/gpu/run_device_e5m2_sets.sh
# (every job's log lands in DIR/logs.tar.gz)
set -u
T=${T:-100}
LOGS=$(mktemp -d)
V="-m 16 --ncols 16 --device cuda"
SPEC=examples/gpu/torch_scaled_mm_e5m2xe4m3_16x16x64_h200.fps
J() { name=$1; shift; ( echo "\$ $*"; timeout "$T" "$@"; echo "rc $?" ) > "$LOGS/$name.log" 2>&1 & }
nvidia-smi -L > "$LOGS/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$LOGS/device.txt"
echo "commit ${COMMIT:-unknown}" >> "$LOGS/device.txt"
for b in numpy triton; do
  J "e5m2_verify_$b" python3 -m fpspec.cli verify "$SPEC" --target "$b" --against torch._scaled_mm $V \
    --samples "${SAMPLES:-300}"
done
J e5m2_diag python3 examples/gpu/scaled_mm_e5m2_sample_diag.py "$LOGS"
REVEALED="$LOGS/torch_scaled_mm_e5m2xe4m3_16x16x64.fps"
( echo "\$ fpspec reveal torch._scaled_mm -n 64 --dtype float8_e5m2 --dtype-b float8_e4m3fn $V -o $REVEALED"
  timeout "$T" python3 -m fpspec.cli reveal torch._scaled_mm -n 64 --dtype float8_e5m2 --dtype-b float8_e4m3fn \
    --m 16 --ncols 16 --device cuda -o "$REVEALED"; echo "rc $?"
  if [ -f "$REVEALED" ]; then
    echo "\$ fpspec verify $REVEALED --target numpy --against torch._scaled_mm $V --samples ${SAMPLES:-300}"
    timeout "$T" python3 -m fpspec.cli verify "$REVEALED" --target numpy --against torch._scaled_mm $V \
      --samples "${SAMPLES:-300}"; echo "rc $?"
  fi ) > "$LOGS/e5m2_reveal.log" 2>&1 &
k=0
while [ "$k" -lt "${JOBS:-8}" ]; do
  J "sets_$k" env SLICE=$k SLICES=${JOBS:-8} SKIP="${SKIP:-}" TRITON_INTERPRET=0 python3 \
    benchmarks/triton_fused_sets_gpu.py "$LOGS/sets.txt"
  k=$((k + 1))
done
wait
tar -czf "$OUT/logs.tar.gz" -C "$LOGS" .
