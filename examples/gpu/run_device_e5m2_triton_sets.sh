#!/bin/sh
# On one GPU host: the Triton replica of examples/gpu/torch_scaled_mm_e5m2xe4m3_16x16x64_h200.fps verified against
# torch._scaled_mm (e5m2 A, e4m3 B), and beside it every named fused set through the compiled Triton kernels
# (benchmarks/triton_fused_sets_gpu.py: JOBS processes compile the distinct kernels side by side into one Triton
# cache, then every set runs).  Each log is written under OUT as it goes (a run cut short keeps what it did).
#   OUT=DIR TV=SECONDS TS=SECONDS JOBS=14 COMMIT=SHA sh examples/gpu/run_device_e5m2_triton_sets.sh
set -u
SPEC=examples/gpu/torch_scaled_mm_e5m2xe4m3_16x16x64_h200.fps
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  echo "commit ${COMMIT:-unknown}, $(nproc) cores"; } > "$OUT/device.txt" 2>&1
TRITON_CACHE_DIR=$(mktemp -d)
export TRITON_CACHE_DIR
( set -x; timeout "${TV:-300}" python3 -m fpspec.cli verify "$SPEC" --target triton --against torch._scaled_mm \
    -m 16 --ncols 16 --device cuda --samples "${SAMPLES:-300}"; echo "rc $?" ) > "$OUT/e5m2_verify_triton.log" 2>&1 &
( set -x; TRITON_INTERPRET=0 JOBS=${JOBS:-14} timeout "${TS:-360}" python3 benchmarks/triton_fused_sets_gpu.py \
    "$OUT/sets.txt"; echo "rc $?" ) > "$OUT/sets_run.log" 2>&1
wait
