#!/bin/bash
# torch.matmul along K on the GPU with the H100's measured arithmetic (--arithmetic) instead of
# probes, then each spec verified against torch.matmul (numpy replica) at a few K.
#   (on a GPU machine) bash examples/gpu/infer_along_k_known_arith.sh  -> $OUT/known/
OUT=${OUT:-gpu_out}  # where the results go
mkdir -p "$OUT/known"
for item in fp16:64x64 fp16:96x80 bf16:64x64; do
    dt=${item%%:*}; shape=${item#*:}; m=${shape%x*}; n=${shape#*x}
    case $dt in fp16) dtype=float16;; bf16) dtype=bfloat16;; esac
    tag=${dt}_${m}x${n}
    start=$(date +%s)
    timeout 120 python3 -m fpspec.infer torch.matmul -n 1..256 --op gemm --m "$m" --ncols "$n" \
        --dtype "$dtype" --device cuda --arithmetic examples/gpu/arith/h100_$dt.fps --holdout 4 \
        --full-limit 256 --replica none --quiet -o "$OUT/known/$tag.fps" > "$OUT/known/$tag.log" 2>&1
    echo "$tag infer rc=$? $(( $(date +%s) - start )) s" >> "$OUT/known/summary.txt"
    timeout 150 python3 -m fpspec verify "$OUT/known/$tag.fps" --target numpy --against torch.matmul \
        --device cuda -n 17 -n 50 -n 77 -n 128 -n 200 -n 256 --samples 600 > "$OUT/known/$tag.verify.txt" 2>&1
    echo "$tag verify rc=$? $(tail -1 $OUT/known/$tag.verify.txt)" >> "$OUT/known/summary.txt"
done
