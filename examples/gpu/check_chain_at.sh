#!/bin/bash
# On an H100/H200 from the checkout root (PYTHONPATH=. with lark importable):
#   bash examples/gpu/check_chain_at.sh OUTDIR
# 1. reveals torch.matmul fp16 16x16xK on cuda at K where cuBLAS's short node is
#    first, inside or a lone product, writes the lowered spec (chain(16, AT)), and
#    verifies its NumPy replica against torch.matmul on the GPU bit for bit;
# 2. verifies the inferred K = 1..256 spec (torch_matmul_fp16_16x16_h100.fps) the same way.
out=${1:-/tmp/chain_at}; mkdir -p "$out"
fp() { python3 -c "from fpspec.cli import main; import sys; sys.exit(main())" "$@"; }
for K in 17 33 49 50 65 77 81 90 129 166 194; do
  fp reveal torch.matmul -n $K --dtype float16 --m 16 --ncols 16 --device cuda -o "$out/k$K.fps" > "$out/k$K.reveal.txt" 2>&1
  echo "K=$K reveal rc=$? order: $(grep '^order' "$out/k$K.fps")"
  fp verify "$out/k$K.fps" --target numpy --against torch.matmul --device cuda -m 16 --ncols 16 -n $K --samples 1500 > "$out/k$K.verify.txt" 2>&1
  echo "K=$K verify rc=$? $(tail -1 "$out/k$K.verify.txt")"
done
ns=""; for K in 17 31 33 34 40 47 48 49 50 63 64 65 77 81 86 88 90 127 128 129 130 166 193 194 201 255 256; do ns="$ns -n $K"; done
fp verify examples/gpu/torch_matmul_fp16_16x16_h100.fps --target numpy --against torch.matmul --device cuda -m 16 --ncols 16 $ns --samples 3000 > "$out/inferred.verify.txt" 2>&1
echo "inferred spec verify rc=$? $(tail -1 "$out/inferred.verify.txt")"
# bf16 at a rectangular shape with K not a multiple of 16 (cuBLAS picks another kernel there)
fp reveal torch.matmul -n 77 --dtype bfloat16 --m 96 --ncols 80 --device cuda -o "$out/bf16_96x80x77.fps" > "$out/bf16.reveal.txt" 2>&1
echo "bf16 96x80x77 reveal rc=$? order: $(grep '^order' "$out/bf16_96x80x77.fps")"
fp verify "$out/bf16_96x80x77.fps" --target numpy --against torch.matmul --device cuda -m 96 --ncols 80 -n 77 --samples 300 > "$out/bf16.verify.txt" 2>&1
echo "bf16 96x80x77 verify rc=$? $(tail -1 "$out/bf16.verify.txt")"
