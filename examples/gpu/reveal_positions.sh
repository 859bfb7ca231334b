#!/bin/bash
# Orders per output position of torch.matmul on a GPU (fpspec reveal finds every order
# across the outputs, fpspec verify checks the spec against torch.matmul and a Triton replica).
# Usage (device): bash examples/gpu/reveal_positions.sh OUTDIR
out=${1:-/tmp/gpu_positions}
mkdir -p "$out"
nvidia-smi --query-gpu=name --format=csv,noheader > "$out/device.txt"
for shape in "16 16 50 float16" "96 80 77 float16" "256 256 100 float16" "1000 1000 77 float16" "512 512 4096 float16" "128 128 1000 bfloat16" "300 200 64 float32"; do
  set -- $shape
  name="torch_matmul_${4}_${1}x${2}x${3}"
  timeout 300 python3 -m fpspec reveal torch.matmul --op gemm --m $1 --ncols $2 -n $3 --dtype $4 --device cuda \
     -o "$out/$name.fps" > "$out/$name.reveal.txt" 2>&1
  echo "$name reveal rc=$?" >> "$out/summary.txt"
  grep -c "^order [0-9]*:" "$out/$name.reveal.txt" >> "$out/summary.txt"
  if [ -f "$out/$name.fps" ] && [ $(( $1 * $2 )) -le 8000 ]; then
    timeout 300 python3 -m fpspec verify "$out/$name.fps" --target numpy --against torch.matmul --device cuda \
       --samples 200 > "$out/$name.verify.txt" 2>&1
    echo "$name verify rc=$? $(tail -1 $out/$name.verify.txt)" >> "$out/summary.txt"
  fi
done
