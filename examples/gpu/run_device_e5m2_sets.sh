#!/bin/sh
# torch._scaled_mm e5m2 x e4m3 revealed on the GPU (the diagnostic of its sample and probe rows beside it), the
# revealed spec's numpy and triton replicas verified against it, and the named fused sets that an earlier run
# (SKIP=its log) did not reach, through the compiled Triton kernels, side by side.
#   OUT=DIR T=SECONDS JOBS=J SKIP=LOG COMMIT=SHA sh examples/gpu/run_device_e5m2_sets.sh
# (every job's log lands in DIR/logs.tar.gz, the revealed spec in DIR)
set -u
T=${T:-100}
LOGS=$(mktemp -d)
V="-m 16 --ncols 16 --device cuda"
J() { name=$1; shift; ( echo "\$ $*"; timeout "$T" "$@"; echo "rc $?" ) > "$LOGS/$name.log" 2>&1 & }
nvidia-smi -L > "$LOGS/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$LOGS/device.txt"
echo "commit ${COMMIT:-unknown}" >> "$LOGS/device.txt"
SPEC="$OUT/torch_scaled_mm_e5m2xe4m3_16x16x64.fps"
J e5m2_diag python3 examples/gpu/scaled_mm_e5m2_sample_diag.py "$LOGS"
( echo "\$ fpspec reveal torch._scaled_mm -n 64 --dtype float8_e5m2 --dtype-b float8_e4m3fn $V -o $SPEC"
  timeout "$T" python3 -m fpspec.cli reveal torch._scaled_mm -n 64 --dtype float8_e5m2 --dtype-b float8_e4m3fn \
    --m 16 --ncols 16 --device cuda -o "$SPEC"; echo "rc $?"
  if [ -f "$SPEC" ]; then
    for b in numpy triton; do
      ( echo "\$ fpspec verify $SPEC --target $b --against torch._scaled_mm $V --samples ${SAMPLES:-300}"
        timeout "$T" python3 -m fpspec.cli verify "$SPEC" --target "$b" --against torch._scaled_mm $V \
          --samples "${SAMPLES:-300}"; echo "rc $?" ) > "$LOGS/e5m2_verify_$b.log" 2>&1 &
    done
    wait
  fi ) > "$LOGS/e5m2_reveal.log" 2>&1 &
k=0
while [ "$k" -lt "${JOBS:-8}" ]; do
  J "sets_$k" env SLICE=$k SLICES=${JOBS:-8} SKIP="${SKIP:-}" TRITON_INTERPRET=0 python3 \
    benchmarks/triton_fused_sets_gpu.py "$LOGS/sets.txt"
  k=$((k + 1))
done
wait
tar -czf "$OUT/logs.tar.gz" -C "$LOGS" .
