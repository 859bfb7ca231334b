"""Where torch.nn.functional.linear adds its bias on the GPU: inside the accumulation or after it.

    PYTHONPATH=. python3 examples/gpu/linear_bias.py

One output element, K = 16, inputs chosen so that the two places give
different bits:
- fp16 / bf16 (Tensor Cores): products 2^30 and -2^30 cancel inside the first
  fused node, whose alignment grid is then 2^(30 - F); fourteen products of 1
  fall below it.  A bias of 1000 given to the node as its c is cut to that
  grid too (992 for F = 25); a bias added after the accumulation is exact:
  1000 (and the 14 ones are lost either way).
- fp32 (TF32 off): a bias of 2^24 as the first value of an fp32 chain swallows
  every product of 1 (2^24 + 1 rounds back to 2^24); added after a sum of 16
  ones it gives 2^24 + 16.
It prints the linear result next to the values the "inside" and "after"
readings predict, for several batch sizes (cuBLAS picks kernels by shape; one
row takes a path without fused nodes, where all 16 products count).
"""
import torch
import torch.nn.functional as F


def case(dtype, rows):
    K = 16
    x = torch.ones((rows, K), dtype=torch.float32)
    w = torch.ones((1, K), dtype=torch.float32)
    if dtype in (torch.float16, torch.bfloat16):
        x[:, 0], w[0, 0] = 2.0 ** 15, 2.0 ** 15
        x[:, 1], w[0, 1] = -(2.0 ** 15), 2.0 ** 15
        bias, inside, after = 1000.0, 992.0, 1000.0
    else:
        bias, inside, after = 2.0 ** 24, 2.0 ** 24, 2.0 ** 24 + 16
    x, w = x.to(dtype).cuda(), w.to(dtype).cuda()
    b = torch.tensor([bias], dtype=dtype).cuda()
    got = F.linear(x, w, b)[:, 0].float().cpu()
    plain = (F.linear(x, w)[:, 0].float() + bias).cpu()
    return float(got[0]), bool((got == got[0]).all()), inside, after, float(plain[0])


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    print(f"{'dtype':10s} {'rows':>5s} {'linear':>12s} {'inside':>12s} {'after':>12s}  where")
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for rows in (1, 16, 256, 4096):
            got, uniform, inside, after, _ = case(dtype, rows)
            exact = float(torch.tensor(after + (14.0 if dtype != torch.float32 else 0.0)).to(dtype))
            where = ("inside (bias is the accumulation's c)" if got == inside and inside != after else
                     "after (epilogue)" if got == after else
                     "no fused node (the ones kept): the place is not told apart" if got == exact else "neither")
            print(f"{str(dtype).split('.')[-1]:10s} {rows:5d} {got:12.1f} {inside:12.1f} {after:12.1f}  {where}"
                  f"{'' if uniform else ' (rows differ)'}", flush=True)


if __name__ == "__main__":
    main()
