#!/usr/bin/env bash
# Every NCCL run behind examples/collective, on one machine with 4 GPUs:
#   bash examples/collective/run_nccl.sh OUTDIR
# (BACKEND=gloo WORLD=3 runs the same steps on CPU processes.)  Each step is bounded by
# `timeout`; what a step printed goes to OUTDIR/<step>.txt.
set -u
OUT=${1:?output folder}
BACKEND=${BACKEND:-nccl}
WORLD=${WORLD:-4}
SIZES=${SIZES:-1024,16384,262144,1048576,4194304}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0          # NVLink SHARP (multicast) reductions stay off
F="python -m fpspec.cli"
NUMEL=$(echo "$SIZES" | tr ',' '\n' | sed 's/^/--numel /' | tr '\n' ' ')
AR=torch.distributed.all_reduce
step() { local name=$1; shift; echo "== $name: $*" | tee -a "$OUT/log.txt"; local t0=$SECONDS
         timeout "${LIMIT:-120}" "$@" > "$OUT/$name.txt" 2>&1; echo "   exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/log.txt"; }

(nvidia-smi -L; nvidia-smi topo -m; git log -1 --format='commit %H' 2>/dev/null) > "$OUT/device.txt" 2>&1
# 1. default settings: the benchmark (5 sizes, start-up included) writes the specs
step bench_default python benchmarks/bench_collective.py --backend "$BACKEND" --world "$WORLD" --numel "$SIZES" \
    -o "$OUT/${BACKEND}_default_{numel}.fps"
# 2. vLLM's deterministic settings: the tree, the Simple protocol, one channel
NCCL_ALGO=allreduce:tree NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 \
    step deterministic $F reveal $AR --world "$WORLD" --backend "$BACKEND" $NUMEL -o "$OUT/${BACKEND}_deterministic_{numel}.fps"
# 3. the ring
NCCL_ALGO=Ring step ring $F reveal $AR --world "$WORLD" --backend "$BACKEND" $NUMEL -o "$OUT/${BACKEND}_ring_{numel}.fps"
# (the diffs between settings and sizes need no GPU: compare_settings.py reads the specs)
# 4. replicas against the live all-reduce
step verify_default_triton $F verify "$OUT/${BACKEND}_default_1048576.fps" --against $AR --target triton
NCCL_ALGO=allreduce:tree NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 \
    step verify_deterministic_numpy $F verify "$OUT/${BACKEND}_deterministic_4194304.fps" --against $AR --target numpy
# 5. reduce_scatter_tensor, and bf16 buffers
step reduce_scatter $F reveal torch.distributed.reduce_scatter_tensor --world "$WORLD" --backend "$BACKEND" \
    --numel 65536 -o "$OUT/${BACKEND}_reduce_scatter_65536.fps"
step bf16 $F reveal $AR --world "$WORLD" --backend "$BACKEND" --dtype bfloat16 --numel 65536 \
    -o "$OUT/${BACKEND}_default_bf16_65536.fps"
# 6. gloo with 8 CPU ranks on this machine's cores
[ "$BACKEND" = nccl ] && [ -z "${NO_EXTRA:-}" ] && step bench_gloo8 python benchmarks/bench_collective.py --backend gloo --world 8 \
    --numel "$SIZES" -o "$OUT/gloo8_{numel}.fps"
# 7. the NCCL test
[ "$BACKEND" = nccl ] && [ -z "${NO_EXTRA:-}" ] && step pytest_multigpu python -m pytest -q -m multigpu tests/collective
exit 0
