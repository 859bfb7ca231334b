#!/bin/bash
# torch.matmul on the GPU along K for several output shapes: one fpspec.infer run each.
#   (on a GPU machine) [INFER_ARGS=--no-probe] bash examples/gpu/infer_along_k.sh "fp16:64x64 fp16:96x80 bf16:64x64" [seconds per shape]
# -> $OUT/k/<dtype>_<M>x<N>.{fps,json,jsonl,log}
OUT=${OUT:-gpu_out}  # where the results go
mkdir -p "$OUT/k"
for item in $1; do
    dt=${item%%:*}; shape=${item#*:}; m=${shape%x*}; n=${shape#*x}
    case $dt in fp16) dtype=float16;; bf16) dtype=bfloat16;; esac
    tag=${dt}_${m}x${n}
    start=$(date +%s)
    timeout "${2:-120}" python3 -m fpspec.infer torch.matmul -n 1..256 --op gemm --m "$m" --ncols "$n" \
        --dtype "$dtype" --device cuda ${INFER_ARGS:-} --holdout 4 --full-limit 256 --replica none --quiet \
        --trace "$OUT/k/$tag.jsonl" --json "$OUT/k/$tag.json" -o "$OUT/k/$tag.fps" > "$OUT/k/$tag.log" 2>&1
    echo "$tag rc=$? $(( $(date +%s) - start )) s" >> "$OUT/k/summary.txt"
done
