"""Two register-blocked forms of the emulated fp16 node tried (offline, sm_90 SASS only).

Neither is used by the replicas: both compile (triton 3.6) to more instructions a product than
the finite fp16 chain they were meant to replace (9.4 measured), so 10 TFLOP/s (5e12 products/s,
at most 6.7 issue slots a product on an H100 at 1.98 GHz) stays out of reach.  Kept so the next
attempt starts from numbers:

    PYTHONPATH=<triton 3.6> python benchmarks/triton/emulated_stream_prototypes.py

- `mm_stream_4d`: the tile as a 4-D tensor [TM, TN, WM, WN] (lanes on WM, WN by Triton's default
  layout, TM x TN = 32 outputs a thread), k streamed one term at a time: pass 1 the exponent sum
  (one FFMA a product, Note [exponent sum] of triton_kernels), pass 2 one fp64 fma rounding toward
  zero a product (Note [fma truncation]) with the sign by a three-input xor.  Static unrolling
  made ptxas allocate 32 registers and spill 9.6 KB; with dynamic k loops: 228 registers, pass 1
  1.7 instructions a product (FFMA + scalar loads: the default layout gives no vector loads),
  pass 2 6.4 (32 DFMA, 32 xor, 32 add, 61 moves that rebuild the fp64 addend pairs under register
  pressure, 12 scalar loads, 24 for the signs and |x|), per node 2.1 (c, rounding, loads of the
  row and column exponents and sign masks): about 10 in all.
- `mm_stream_dot`: the same with the exponent sum from one tl.dot a node (bf16 powers of two on
  the Tensor Cores: a monotone sum of 16 terms keeps floor(log2 S) / 5 exact) and the compute
  in the dot's layout: pass 2 4.6 instructions a product (addend pairs rebuilt, LDS for the
  operands), per node 2.4 (255 registers, spills): about 7.
The floor for this design is DFMA + LOP3 + half an IADD3 a product (2.5) plus the per-node c and
rounding (about 1.5 a product for 16-term nodes): 10 TFLOP/s needs the operands delivered for
under one instruction a product, i.e. per-thread register blocking with vector loads, which
Triton's layouts do not let a kernel ask for (Gluon can, but the interpreter cannot run it).
"""
import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from fpspec.compile.triton_kernels import fp_f64_pow2, fp_node_result, fp_store_slot  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sass_count import loops, sass_of  # noqa: E402


@triton.jit
def _opnd(ptr, k, n0, N, W: tl.constexpr, T: tl.constexpr):
    """[T, W] of row k: element (t, w) is column n0 + w*T + t."""
    w = tl.arange(0, W)
    t = tl.arange(0, T)
    return tl.load(ptr + k * N + n0 + w[None, :] * T + t[:, None])
@triton.jit
def mm_stream_4d(a64_ptr, b64_ptr, pa_ptr, pb_ptr, ea_ptr, eb_ptr, ma_ptr, mb_ptr, dst_ptr, M, N, nodes,
                    s_dm, s_dn, TM: tl.constexpr, TN: tl.constexpr, WM: tl.constexpr, WN: tl.constexpr,
                    FRAC: tl.constexpr, FLOOR: tl.constexpr,
                    TO_ZERO: tl.constexpr, DIRECT: tl.constexpr, INIT: tl.constexpr, OUT_EXP: tl.constexpr,
                    OUT_MAN: tl.constexpr, GPU_NODE: tl.constexpr):
    m0 = tl.program_id(0) * (TM * WM)
    n0 = tl.program_id(1) * (TN * WN)
    acc = tl.zeros((TM, TN, WM, WN), dtype=tl.float32)
    for t in range(0, nodes):
        EA = _opnd(ea_ptr, t, m0, M, WM, TM)[:, None, :, None]
        EB = _opnd(eb_ptr, t, n0, N, WN, TN)[None, :, None, :]
        S = tl.zeros((TM, TN, WM, WN), dtype=tl.float32)
        for kk in range(0, 16):
            k = t * 16 + kk
            pa = _opnd(pa_ptr, k, m0, M, WM, TM)[:, None, :, None]
            pb = _opnd(pb_ptr, k, n0, N, WN, TN)[None, :, None, :]
            S = tl.fma(pa, pb, S)
        es = S.to(tl.int32, bitcast=True) >> 23
        e = EA + EB + (es + 3) // 5
        cb = acc.to(tl.int32, bitcast=True)
        c_exp = ((cb >> 23) & 0xFF) - 127
        e_max = tl.maximum(tl.maximum(e, c_exp), -126)
        big = fp_f64_pow2(52 + e_max - FRAC)
        total = tl.zeros((TM, TN, WM, WN), dtype=tl.int32)
        for kk in range(0, 16):
            k = t * 16 + kk
            va = _opnd(a64_ptr, k, m0, M, WM, TM)
            vb = _opnd(b64_ptr, k, n0, N, WN, TN)
            sa = (va.to(tl.int64, bitcast=True) >> 63).to(tl.int32)[:, None, :, None]
            sb = (vb.to(tl.int64, bitcast=True) >> 63).to(tl.int32)[None, :, None, :]
            r = tl.extra.cuda.libdevice.fma_rz(tl.abs(va)[:, None, :, None], tl.abs(vb)[None, :, None, :], big)
            total += r.to(tl.int64, bitcast=True).to(tl.int32) ^ sa ^ sb
        MA = _opnd(ma_ptr, t, m0, M, WM, TM)[:, None, :, None]
        MB = _opnd(mb_ptr, t, n0, N, WN, TN)[None, :, None, :]
        total += tl.extra.cuda.libdevice.popc(MA ^ MB)
        acc = fp_node_result(total, e_max, acc, FRAC, TO_ZERO, True, True).to(tl.float32, bitcast=True)
    rm = m0 + tl.arange(0, WM)[None, None, :, None] * TM + tl.arange(0, TM)[:, None, None, None]
    rn = n0 + tl.arange(0, WN)[None, None, None, :] * TN + tl.arange(0, TN)[None, :, None, None]
    fp_store_slot(dst_ptr, rm * s_dm + rn, (rm < M) & (rn < N), acc, DIRECT, INIT, OUT_EXP, OUT_MAN)


@triton.jit
def mm_stream_dot(a64_ptr, b64_ptr, pa_ptr, pb_ptr, ea_ptr, eb_ptr, ma_ptr, mb_ptr, dst_ptr, M, N, KP, nodes,
                  s_dm, BM: tl.constexpr, BN: tl.constexpr, FRAC: tl.constexpr, TO_ZERO: tl.constexpr,
                  DIRECT: tl.constexpr, INIT: tl.constexpr, OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr,
                  UNROLL: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    k16 = tl.arange(0, 16)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for t in range(0, nodes):
        PA = tl.load(pa_ptr + rm[:, None] * KP + (t * 16 + k16)[None, :])
        PB = tl.load(pb_ptr + (t * 16 + k16)[:, None] * N + rn[None, :])
        S = tl.dot(PA, PB)
        EA = tl.load(ea_ptr + t * M + rm)
        EB = tl.load(eb_ptr + t * N + rn)
        es = S.to(tl.int32, bitcast=True) >> 23
        e = EA[:, None] + EB[None, :] + (es + 3) // 5
        cb = acc.to(tl.int32, bitcast=True)
        c_exp = ((cb >> 23) & 0xFF) - 127
        e_max = tl.maximum(tl.maximum(e, c_exp), -126)
        big = fp_f64_pow2(52 + e_max - FRAC)
        total = tl.zeros((BM, BN), dtype=tl.int32)
        for kq in range(0, 16 // UNROLL):
            for ku in tl.static_range(UNROLL):
                k = t * 16 + kq * UNROLL + ku
                va = tl.load(a64_ptr + k * M + rm)
                vb = tl.load(b64_ptr + k * N + rn)
                sa = -(va.to(tl.int64, bitcast=True).to(tl.int32))
                sb = -(vb.to(tl.int64, bitcast=True).to(tl.int32))
                r = tl.extra.cuda.libdevice.fma_rz(va[:, None], vb[None, :], big)
                total += r.to(tl.int64, bitcast=True).to(tl.int32) ^ sa[:, None] ^ sb[None, :]
        MA = tl.load(ma_ptr + t * M + rm)
        MB = tl.load(mb_ptr + t * N + rn)
        total += tl.extra.cuda.libdevice.popc(MA[:, None] ^ MB[None, :])
        acc = fp_node_result(total, e_max, acc, FRAC, TO_ZERO, True, True).to(tl.float32, bitcast=True)
    fp_store_slot(dst_ptr, rm[:, None] * s_dm + rn[None, :], (rm < M)[:, None] & (rn < N)[None, :], acc,
                  DIRECT, INIT, OUT_EXP, OUT_MAN)


PTRS = {"a64_ptr": "*fp64", "b64_ptr": "*fp64", "ea_ptr": "*i32", "eb_ptr": "*i32", "ma_ptr": "*i32",
        "mb_ptr": "*i32", "dst_ptr": "*i16"}
FORMS = {
    "mm_stream_4d": (mm_stream_4d, dict(TM=4, TN=8, WM=16, WN=8), {"pa_ptr": "*fp32", "pb_ptr": "*fp32"}),
    "mm_stream_dot": (mm_stream_dot, dict(BM=64, BN=64, UNROLL=2), {"pa_ptr": "*bf16", "pb_ptr": "*bf16"}),
}


def report(name):
    fn, shape, ptrs = FORMS[name]
    consts = dict(shape, FRAC=25, TO_ZERO=True, DIRECT=True, INIT=False, OUT_EXP=5, OUT_MAN=10)
    consts = {k: v for k, v in {**consts, "FLOOR": -133, "GPU_NODE": True}.items() if k in fn.arg_names}
    sig = {k: {**PTRS, **ptrs}.get(k, "constexpr" if k in consts else "i32") for k in fn.arg_names}
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4})
    usage, sass = sass_of(kernel)
    print(f"{name} (triton {triton.__version__}): {usage}")
    outputs = (shape.get("TM", 1) * shape.get("WM", 1) * shape.get("TN", 1) * shape.get("WN", 1)
               if "TM" in shape else shape["BM"] * shape["BN"])
    per_node = 16 * outputs / 128     # products a thread computes a node (4 warps)
    loops(sass, per_node)

if __name__ == "__main__":
    for name in (sys.argv[1:] or FORMS):
        report(name)
