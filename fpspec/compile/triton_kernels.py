"""Hand-written Triton device functions for the Triton backend.

This file is the kernel library of every Triton replica: the render module
(fpspec/compile/backends/triton.py) copies its source, verbatim, into the
generated module, so a replica imports only triton and torch.  It holds no
decisions about order: the K order comes from the spec through the rendered
kernels; here are only the arithmetic building blocks.

Everything works on raw bit patterns held in int32/int64 tensors so that the
Triton interpreter (TRITON_INTERPRET=1, numpy underneath) and a GPU compute the
same thing: no float16/bfloat16 loads, no clz, no inline asm.

Note [fused node]: one Tensor Core block, d = c + sum_k a_k * b_k, is modelled
as (FTTN; reproduces every row of the H100 vectors in
shared/data/tensor-core-vectors):
  - each product is exact: sign, significand ma*mb, exponent ea+eb (the
    exponents of the inputs, subnormals at emin: the product is NOT
    renormalised, so its significand lies in [1, 4));
  - E = max(product exponents of the nonzero products, exponent of c when
    c != 0, exponent floor);
  - every term (c included) is truncated toward zero, in sign-magnitude, to a
    multiple of 2^(E - F), F = 23 + extra bits;
  - the integers are summed exactly (int64) and the sum is rounded once into
    the output format (toward zero for fp32, nearest-even for fp16 output);
  - an exact zero is +0; NaN and inf follow from the inputs alone.
fpspec.arith.fused is the reference this must equal bit for bit.
Note [shift clamp]: shifts by >= the width are undefined on a GPU (poison in
LLVM); every variable shift is clamped to [0, 62] first.
"""
import triton
import triton.language as tl

NEG_EXP = tl.constexpr(-100000)  # the "exponent" of a zero term: below any floor
NEG_INF32 = tl.constexpr(-8388608)  # 0xFF800000 (-inf in fp32) as an int32
# "not given" for the exponent constexprs (ZEXP, C_EMIN, A_EMIN, B_EMIN): 0 is a value
UNSET = tl.constexpr(1048576)


@triton.jit
def fp_msb(x):
    """Index of the leading one of x (int64, 0 <= x < 2^53; 0 for x == 0).

    No clz (the interpreter lacks it): x is exact in fp64, whose exponent
    field is the answer; one conversion instead of a six-step binary search
    in int64 (a fifth of the emulated node's instructions).  Every caller
    passes less than 2^53: significands, and sums of at most 32 terms below
    2^(FRAC + 2) with FRAC = 23 + extra bits."""
    e = ((x.to(tl.float64).to(tl.int64, bitcast=True) >> 52) & 0x7FF) - 1023
    return tl.maximum(e, 0)


@triton.jit
def fp_shift(m, sh):
    """m * 2^sh truncated toward zero, for m >= 0 (int64), sh any int64; see Note [shift clamp]."""
    left = tl.minimum(tl.maximum(sh, 0), 62)
    right = tl.minimum(tl.maximum(-sh, 0), 62)
    return (m << left) >> right


@triton.jit
def fp_decode(bits, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr, FN: tl.constexpr = False):
    """Split IEEE bit patterns (int32 holding the unsigned pattern) into parts.

    Returns (neg, exp, sig, is_inf, is_nan), exp and sig as int64: value =
    (-1)^neg * sig * 2^(exp - MAN_BITS); subnormals get exp = emin.  FN = 1 (e4m3):
    no inf, and only the all-ones pattern of the top binade is nan.  FN = 2 (AMD's
    fnuz fp8): the bias one larger, no inf, no -0.0: the sign-only pattern is the nan."""
    b = bits.to(tl.int64) & ((1 << (EXP_BITS + MAN_BITS + 1)) - 1)
    neg = ((b >> (EXP_BITS + MAN_BITS)) & 1) != 0
    ebits = (b >> MAN_BITS) & ((1 << EXP_BITS) - 1)
    frac = b & ((1 << MAN_BITS) - 1)
    normal = ebits != 0
    sig = tl.where(normal, frac | (1 << MAN_BITS), frac)
    if FN == 2:
        exp = tl.where(normal, ebits, 1) - (1 << (EXP_BITS - 1))
        nan = b == (1 << (EXP_BITS + MAN_BITS))
        return neg, exp, sig, nan & ~nan, nan
    exp = tl.where(normal, ebits, 1) - ((1 << (EXP_BITS - 1)) - 1)
    special = ebits == ((1 << EXP_BITS) - 1)
    if FN:
        nan = special & (frac == ((1 << MAN_BITS) - 1))
        sig = tl.where(nan, 0, sig)
        return neg, exp, sig, nan & ~nan, nan
    return neg, exp, sig, special & (frac == 0), special & (frac != 0)


@triton.jit
def fp_round_pack(neg, m, scale, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr,
                  TO_ZERO: tl.constexpr):
    """Bits (int64) of (-1)^neg * m * 2^scale rounded once into the format.

    m >= 0 int64, scale int64.  TO_ZERO: truncate, overflow to the largest
    finite; else nearest-even, overflow to inf.  Zero gets neg's sign."""
    BIAS: tl.constexpr = (1 << (EXP_BITS - 1)) - 1
    top = fp_msb(m)
    # unit in the last place of the result: precision MAN_BITS + 1, subnormals at emin
    ulp = tl.maximum(scale + top, 1 - BIAS) - MAN_BITS
    drop = ulp - scale
    r = fp_shift(m, -drop)
    if not TO_ZERO:
        d = tl.minimum(tl.maximum(drop, 0), 62)
        rest = m - (r << d)
        half = tl.where(d > 0, (rest * 0 + 1) << tl.maximum(d - 1, 0), 0)
        up = (d > 0) & ((rest > half) | ((rest == half) & ((r & 1) == 1)))
        r = tl.where(up, r + 1, r)
    # one formula for normal and subnormal results; a carry out of the
    # significand moves into the exponent field by itself
    bits = ((ulp + MAN_BITS - 1 + BIAS) << MAN_BITS) + r
    bits = tl.where(r == 0, 0, bits)
    # overflow is inf for both roundings: the hardware's rz result at or
    # above 2^(emax+1) is inf (fpspec.arith.fused, note [result rounding])
    INF: tl.constexpr = ((1 << EXP_BITS) - 1) << MAN_BITS
    bits = tl.where(bits >= INF, INF, bits)
    return tl.where(neg, bits | (1 << (EXP_BITS + MAN_BITS)), bits)


@triton.jit
def fp_align(m, sh, neg, ALIGNED: tl.constexpr = 0):
    """m * 2^sh on an integer grid for magnitudes m >= 0 (int64) of sign neg: truncated toward
    zero (ALIGNED 0), toward -inf (1: a negative magnitude with lost bits rounds up) or to
    nearest even (2); fpspec.arith.fused shift_right.  See Note [shift clamp]."""
    left = tl.minimum(tl.maximum(sh, 0), 62)
    right = tl.minimum(tl.maximum(-sh, 0), 62)
    kept = (m << left) >> right
    if ALIGNED != 0:
        lost = m - ((kept << right) >> left)
        if ALIGNED == 1:
            kept += tl.where((lost != 0) & neg, 1, 0)
        else:
            half = tl.where(right > 0, (lost * 0 + 1) << tl.maximum(right - 1, 0), 1 << 62)
            kept += tl.where((lost > half) | ((lost == half) & ((kept & 1) == 1)), 1, 0)
    return kept


@triton.jit
def fp_fused_node(pneg, pexp, psig, pinf, pnan, c_bits, AXIS: tl.constexpr,
                  MAN_P: tl.constexpr, C_EXP: tl.constexpr, C_MAN: tl.constexpr,
                  FRAC, FLOOR, TO_ZERO: tl.constexpr,
                  RES_MAN: tl.constexpr = 0, ZEXP: tl.constexpr = UNSET, C_EMIN=UNSET,
                  AMD: tl.constexpr = False, INTERLEAVE: tl.constexpr = 1, ALIGNED: tl.constexpr = 0,
                  SUB_OUT: tl.constexpr = True):
    """One fused node over axis AXIS of the product parts, with c; see Note [fused node].

    Products: value = (-1)^pneg * psig * 2^(pexp - MAN_P) (psig exact, int64).
    c: bit patterns of the output format (C_EXP, C_MAN); the result comes back
    as bits of the same format.  FRAC = fraction bits kept below the block's
    largest exponent (23 + extra bits).  RES_MAN > 0: the result keeps RES_MAN
    fraction bits only (fp8 units: 13; fpspec.arith.fused note [result rounding]).
    ZEXP != UNSET (MMA-Sim's conventions, fpspec.arith.fused note [zero exponent]): zero
    products align at the exponent fp_product gave them (ZEXP from its zero operands)
    and a zero c at ZEXP; C_EMIN != UNSET: c's exponent is at least C_EMIN (an fp16 c).
    AMD: AMD CDNA3's combine (fpspec.arith.fused note [amd combine]), INTERLEAVE sub-blocks.
    ALIGNED: how aligned terms are rounded (fp_align); SUB_OUT False: subnormal c and
    results of the output format flush to +0."""
    cneg, cexp, csig, cinf, cnan = fp_decode(c_bits, C_EXP, C_MAN)
    if not SUB_OUT:
        csig = tl.where(csig < (1 << C_MAN), 0, csig)
    # c's exponent is that of its fp32 view (an fp16 subnormal c is normal in
    # fp32); its significand keeps its own scale, so only the alignment moves
    c_top = tl.maximum(cexp + fp_msb(csig) - C_MAN, -126)
    c_top = tl.maximum(c_top, tl.where(C_EMIN != UNSET, C_EMIN, NEG_EXP))
    if ZEXP != UNSET:
        pe = tl.where(pinf | pnan, NEG_EXP, pexp)    # (a special result replaces the sum anyway)
        c_e = tl.where(csig != 0, c_top, ZEXP)
    else:
        pe = tl.where(psig != 0, pexp, NEG_EXP)
        c_e = tl.where(csig != 0, c_top, NEG_EXP)
    if AMD:
        bits = fp_amd_node(pneg, pexp, psig, pinf, pnan, pe, cneg, cexp, csig, c_e, AXIS,
                           MAN_P, C_EXP, C_MAN, FRAC, FLOOR, INTERLEAVE, ALIGNED)
    else:
        e_max = tl.maximum(tl.max(pe, axis=AXIS), c_e)
        e_max = tl.maximum(e_max, FLOOR)
        unit = e_max - FRAC
        pa = fp_align(psig, pexp - MAN_P - tl.expand_dims(unit, AXIS), pneg, ALIGNED)
        total = tl.sum(tl.where(pneg, -pa, pa), axis=AXIS)
        ca = fp_align(csig, cexp - C_MAN - unit, cneg, ALIGNED)
        total += tl.where(cneg, -ca, ca)
        # an exact zero sum is +0, even from zeros of sign minus (as measured)
        if RES_MAN > 0:   # rounded in a layout of RES_MAN fraction bits, widened exactly
            bits = fp_round_pack(total < 0, tl.abs(total), unit, C_EXP, RES_MAN, TO_ZERO) << (C_MAN - RES_MAN)
        else:
            bits = fp_round_pack(total < 0, tl.abs(total), unit, C_EXP, C_MAN, TO_ZERO)
    if not SUB_OUT:   # a result below the output's normals flushes (fpspec.arith.fused round_value)
        bits = tl.where(((bits >> C_MAN) & ((1 << C_EXP) - 1)) == 0, 0, bits)
    if not AMD:
        # a negative sum that rounds to zero is +0 too: the datapath's magnitude has no sign
        # (fpspec.arith.fused note [zero result])
        bits = tl.where((bits & ((1 << (C_EXP + C_MAN)) - 1)) == 0, 0, bits)
    INF: tl.constexpr = ((1 << C_EXP) - 1) << C_MAN
    SIGN: tl.constexpr = 1 << (C_EXP + C_MAN)
    if AMD:   # a finite product at or above 2^128 gives inf (nan for both signs)
        big = (psig != 0) & (pexp + fp_msb(psig) - MAN_P >= 128)
        over_pos = tl.max(tl.where(big & ~pneg, 1, 0), axis=AXIS) == 1
        over_neg = tl.max(tl.where(big & pneg, 1, 0), axis=AXIS) == 1
        bits = tl.where(over_pos, INF, bits)
        bits = tl.where(over_neg, INF | SIGN, bits)
        bits = tl.where(over_pos & over_neg, INF | (1 << (C_MAN - 1)), bits)
    # specials: nan if any nan or inf - inf, else the inf
    pos_inf = (tl.max(tl.where(pinf & ~pneg, 1, 0), axis=AXIS) == 1) | (cinf & ~cneg)
    neg_inf = (tl.max(tl.where(pinf & pneg, 1, 0), axis=AXIS) == 1) | (cinf & cneg)
    nan = (tl.max(tl.where(pnan, 1, 0), axis=AXIS) == 1) | cnan | (pos_inf & neg_inf)
    bits = tl.where(pos_inf, INF, bits)
    bits = tl.where(neg_inf, INF | SIGN, bits)
    bits = tl.where(nan, INF | (1 << (C_MAN - 1)), bits)
    return bits


@triton.jit
def fp_amd_node(pneg, pexp, psig, pinf, pnan, pe, cneg, cexp, csig, c_e, AXIS: tl.constexpr,
                MAN_P: tl.constexpr, C_EXP: tl.constexpr, C_MAN: tl.constexpr, FRAC,
                FLOOR, INTERLEAVE: tl.constexpr = 1, ALIGNED: tl.constexpr = 0):
    """fp_fused_node's AMD form (fpspec.arith.fused note [amd combine]): the products of each
    of the INTERLEAVE sub-blocks (lanes j, j + INTERLEAVE, ... along AXIS) aligned among
    themselves (rounded by ALIGNED, truncation on the hardware, FRAC bits below their largest
    exponent e_j), the
    sub-block sums floored onto the grid of the largest e_p; then the product sum floored onto
    2^(e - 31) and c onto 2^(e - 24) at e = max(e_p, e_c) (with sub-blocks: a c more than 25
    binades below e dropped), one rounding to nearest even; a nonzero result keeps its sign
    even when it rounds to zero.  Returns the bits before the specials."""
    lane = tl.arange(0, pe.shape[AXIS]) % INTERLEAVE
    if AXIS == 2:
        sub = lane[None, None, :]
    else:
        sub = lane[None, :]
    e_p = tl.maximum(tl.max(pe, axis=AXIS), FLOOR)
    if INTERLEAVE > 1:
        e_p = e_p * 0 + FLOOR
        for j in tl.static_range(INTERLEAVE):
            e_p = tl.maximum(e_p, tl.max(tl.where(sub == j, pe, NEG_EXP), axis=AXIS))
    total = e_p * 0
    for j in tl.static_range(INTERLEAVE):
        if INTERLEAVE > 1:
            e_j = tl.maximum(tl.max(tl.where(sub == j, pe, NEG_EXP), axis=AXIS), FLOOR)
            s_sig = tl.where(sub == j, psig, 0)
        else:
            e_j = e_p
            s_sig = psig
        pa = fp_align(s_sig, pexp - MAN_P - tl.expand_dims(e_j - FRAC, AXIS), pneg, ALIGNED)
        s_j = tl.sum(tl.where(pneg, -pa, pa), axis=AXIS)
        total += s_j >> tl.minimum(tl.maximum(e_p - e_j, 0), 62)    # floor: arithmetic shift
    unit = e_p - FRAC
    e = tl.maximum(e_p, c_e)
    sh = (e - 31) - unit                      # floor: arithmetic shifts of signed integers
    s31 = tl.where(sh >= 0, total >> tl.minimum(tl.maximum(sh, 0), 62), total << tl.minimum(tl.maximum(-sh, 0), 62))
    cs = tl.where(cneg, -csig, csig)
    shc = (e - 24) - (cexp - C_MAN)
    c24 = tl.where(shc >= 0, cs >> tl.minimum(tl.maximum(shc, 0), 62), cs << tl.minimum(tl.maximum(-shc, 0), 62))
    if INTERLEAVE > 1:
        c24 = tl.where(c_e >= e - 25, c24, 0)
    exact = s31 + (c24 << 7)
    bits = fp_round_pack(exact < 0, tl.abs(exact), e - 31, C_EXP, C_MAN, False)
    return tl.where(exact == 0, 0, bits)


@triton.jit
def fp_operand(bits, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr, FN: tl.constexpr = False,
               EMIN=UNSET, SUB: tl.constexpr = True):
    """fp_decode of one operand format, then (fpspec.arith.fused decode) the exponent clamped
    at EMIN (a narrower format carried in fp32 bits: fp6, fp4) and, SUB False, values below
    2^emin flushed to zero.  Returns fp_decode's parts and whether the value is zero before the
    flush (inf * a flushed value is inf: fpspec.arith.fused decides specials first).  EMIN may
    be a run-time value (mm_chain_emulated_wide: one kernel for every narrow format)."""
    neg, exp, sig, inf, nan = fp_decode(bits, EXP_BITS, MAN_BITS, FN)
    zero = (sig == 0) & ~inf & ~nan
    if not SUB:
        LO: tl.constexpr = 2 - (1 << (EXP_BITS - 1)) - (1 if FN == 2 else 0)   # fnuz: the bias one larger
        lo = tl.where(EMIN != UNSET, EMIN, LO)
        sig = tl.where(exp + fp_msb(sig) - MAN_BITS < lo, 0, sig)
    if EMIN != UNSET:
        sig = sig >> tl.minimum(tl.maximum(EMIN - exp, 0), 62)
        exp = tl.maximum(exp, EMIN)
    return neg, exp, sig, inf, nan, zero


@triton.jit
def fp_product(a_bits, b_bits, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr, FN: tl.constexpr = False,
               ZEXP: tl.constexpr = UNSET, B_EXP: tl.constexpr = 0, B_MAN: tl.constexpr = 0,
               B_FN: tl.constexpr = False, A_EMIN=UNSET, B_EMIN=UNSET, SUB_IN: tl.constexpr = True):
    """Exact products of broadcast-compatible a and b bit patterns, as parts for fp_fused_node.

    Returns (neg, exp, sig, inf, nan); value = (-1)^neg * sig * 2^(exp - MAN_BITS - B_MAN).
    B_EXP, B_MAN, B_FN: b's format when it differs (0: a's).  A_EMIN, B_EMIN, SUB_IN: fp_operand.
    ZEXP != UNSET: a zero operand's exponent is ZEXP (fpspec.arith.fused note [zero exponent])."""
    an, ae, asg, ainf, anan, azero = fp_operand(a_bits, EXP_BITS, MAN_BITS, FN, A_EMIN, SUB_IN)
    if B_EXP == 0:
        bn, be, bsg, binf, bnan, bzero = fp_operand(b_bits, EXP_BITS, MAN_BITS, FN, B_EMIN, SUB_IN)
    else:
        bn, be, bsg, binf, bnan, bzero = fp_operand(b_bits, B_EXP, B_MAN, B_FN, B_EMIN, SUB_IN)
    nan = anan | bnan | (ainf & bzero) | (azero & binf)
    inf = (ainf | binf) & ~nan
    sig = tl.where(ainf | anan | binf | bnan, 0, asg * bsg)
    if ZEXP != UNSET:   # a flushed operand is a zero here
        az = (asg == 0) & ~ainf & ~anan
        bz = (bsg == 0) & ~binf & ~bnan
        return an != bn, tl.where(az, ZEXP, ae) + tl.where(bz, ZEXP, be), sig, inf, nan
    return an != bn, ae + be, sig, inf, nan


@triton.jit
def fp_fused_rows(a_ptr, b_ptr, c_ptr, d_ptr, R, K: tl.constexpr, BLOCK_R: tl.constexpr,
                  IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, C_EXP: tl.constexpr,
                  C_MAN: tl.constexpr, FRAC: tl.constexpr, FLOOR: tl.constexpr,
                  TO_ZERO: tl.constexpr, ZEXP: tl.constexpr = UNSET, C_EMIN: tl.constexpr = UNSET,
                  AMD: tl.constexpr = False):
    """d[r] = fused(c[r] + sum_k a[r, k] * b[r, k]) for R independent rows (bits in, bits out)."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    ks = tl.arange(0, K)
    live = rows < R
    offs = rows[:, None] * K + ks[None, :]
    a = tl.load(a_ptr + offs, mask=live[:, None], other=0)
    b = tl.load(b_ptr + offs, mask=live[:, None], other=0)
    c = tl.load(c_ptr + rows, mask=live, other=0)
    pn, pe, ps, pi, pq = fp_product(a, b, IN_EXP, IN_MAN, False, ZEXP)
    d = fp_fused_node(pn, pe, ps, pi, pq, c, 1, 2 * IN_MAN, C_EXP, C_MAN, FRAC, FLOOR, TO_ZERO, 0, ZEXP, C_EMIN,
                      AMD)
    tl.store(d_ptr + rows, d.to(tl.int32), mask=live)


@triton.jit
def fp_widen(bits, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr):
    """fp32 bit patterns (int64) of values of a format with <= 8 exponent bits (exact)."""
    if MAN_BITS == 23:
        return bits.to(tl.int64) & 0xFFFFFFFF
    else:
        neg, exp, sig, inf, nan = fp_decode(bits, EXP_BITS, MAN_BITS)
        out = fp_round_pack(neg, sig, exp - MAN_BITS, 8, 23, False)
        out = tl.where(inf, 0x7F800000, out)
        out = tl.where(nan, 0x7FC00000, out)
        return tl.where(neg, out | 0x80000000, out)


@triton.jit
def fp_narrow(bits, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr):
    """fp32 bit patterns rounded to nearest even into a format (its bits, int64)."""
    if MAN_BITS == 23:
        return bits.to(tl.int64) & 0xFFFFFFFF
    else:
        neg, exp, sig, inf, nan = fp_decode(bits, 8, 23)
        out = fp_round_pack(neg, sig, exp - 23, EXP_BITS, MAN_BITS, False)
        INF: tl.constexpr = ((1 << EXP_BITS) - 1) << MAN_BITS
        out = tl.where(inf, INF, out)
        out = tl.where(nan, INF | (1 << (MAN_BITS - 1)), out)
        return tl.where(neg, out | (1 << (EXP_BITS + MAN_BITS)), out)


@triton.jit
def fp_as_f32(bits):
    return (bits & 0xFFFFFFFF).to(tl.uint32).to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def fp_f32_bits(x):
    return x.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF


@triton.jit
def fp_stored_bits(bits, STORE_EXP: tl.constexpr, STORE_MAN: tl.constexpr):
    """fp32 bits (int64) of a node result as a kernel stores it in a narrower buffer (nearest even)
    and reads it back; unchanged when STORE_MAN is 0 (fpspec.arith.model note [fused output])."""
    if STORE_MAN != 0:
        bits = fp_widen(fp_narrow(bits, STORE_EXP, STORE_MAN), STORE_EXP, STORE_MAN)
    return bits


@triton.jit
def fp_stored(acc, STORE_EXP: tl.constexpr, STORE_MAN: tl.constexpr):
    """fp_stored_bits on fp32 values."""
    if STORE_MAN != 0:
        acc = fp_as_f32(fp_stored_bits(fp_f32_bits(acc), STORE_EXP, STORE_MAN))
    return acc


# Note [accumulators]: the kernels' ACC constexpr is the spec's accumulator.  0: fp32 (fp32
# values; fp64 slots where they hold exact lone products beside them).  4: fp32 values in an
# fp64 carrier, for fp64 terms (a region of an fp64 spec): each addition fp_add_once.  1: fp64 (fp64 values
# and slots, IEEE fp64 adds and FMAs).  2, 3: fp16, bf16: values of the format
# held in fp32 (fp64 slots beside lone products), every addition its exact sum rounded once
# into the format (fp_acc_add): the fp64 sum rounded to odd, then to nearest even in the
# format, which is fpspec.formats.add for the operands an accumulation holds (values of the
# format, terms of an input format: their exact sum fits fp64, or the smaller operand is
# below every tie of the result).


@triton.jit
def fp_f64_to_odd_f32(s):
    """fp64 values rounded to odd into fp32 (a value of it: its last bit set where inexact).

    A later rounding to nearest into a format of at most 22 fraction bits is then the one
    rounding of s: fp16 and bf16 results of fp64 values without double rounding.  inf and nan
    stay; a finite value beyond fp32's range becomes inf, which is beyond fp16's and bf16's."""
    f = s.to(tl.float32)
    bits = f.to(tl.int32, bitcast=True)
    finite = (bits & 0x7F800000) != 0x7F800000
    fix = (f.to(tl.float64) != s) & finite & ((bits & 1) == 0)
    # toward s: one unit up in magnitude where s is larger in magnitude, else down
    bits = tl.where(fix, bits + tl.where(tl.abs(s) > tl.abs(f.to(tl.float64)), 1, -1), bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def fp_round_acc(s, EXP: tl.constexpr, MAN: tl.constexpr):
    """fp64 values rounded once (nearest even, subnormals, overflow to inf) into a format of
    EXP exponent and MAN fraction bits (MAN <= 10 here, or 23: fp32), as fp32 values."""
    if MAN == 23:
        return s.to(tl.float32)
    else:
        return fp_as_f32(fp_widen(fp_narrow(fp_f32_bits(fp_f64_to_odd_f32(s)), EXP, MAN), EXP, MAN))


@triton.jit
def fp_sum_odd(a, b):
    """a + b (fp64 values) rounded to odd in fp64: TwoSum's error says which neighbour is odd.
    A later rounding to a format of p <= 53 - 2 bits is then the one rounding of the exact sum."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    bits = s.to(tl.int64, bitcast=True)
    # inexact and even: the odd neighbour toward the exact sum (s != 0 when inexact; inf and
    # nan are left alone: their error is nan)
    fix = (e == e) & (e != 0) & ((s - s) == 0) & ((bits & 1) == 0)
    bits = tl.where(fix, bits + tl.where((e > 0) == (s > 0), 1, -1), bits)
    return bits.to(tl.float64, bitcast=True)


@triton.jit
def fp_acc_add(a, b, ACC: tl.constexpr):
    """One addition of the accumulation into accumulator ACC (Note [accumulators]); a and b
    in the accumulator's carrier (fp32; fp64 for ACC 1)."""
    if ACC == 2:
        return fp_round_acc(fp_sum_odd(a.to(tl.float64), b.to(tl.float64)), 5, 10)
    elif ACC == 3:
        return fp_round_acc(fp_sum_odd(a.to(tl.float64), b.to(tl.float64)), 8, 7)
    elif ACC == 4:
        return fp_add_once(a, b).to(tl.float64)
    else:
        return a + b


@triton.jit
def fp_finish(acc, INIT: tl.constexpr, OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr, ACC: tl.constexpr = 0):
    """The output's bits from an accumulator value (fp32; fp64 for ACC 1): + init, then the
    cast (one rounding)."""
    if INIT:
        # an initial +0.0: turns -0.0 into +0.0, nothing else (the values are the format's)
        acc = fp_acc_add(acc, tl.zeros_like(acc), ACC)
    if OUT_MAN == 52:
        return acc.to(tl.float64).to(tl.int64, bitcast=True)
    elif ACC == 1 or ACC == 4:
        if OUT_MAN == 23:
            return fp_f32_bits(acc.to(tl.float32))
        else:
            return fp_narrow(fp_f32_bits(fp_f64_to_odd_f32(acc)), OUT_EXP, OUT_MAN)
    else:
        return fp_narrow(fp_f32_bits(acc), OUT_EXP, OUT_MAN)


@triton.jit
def fp_store_slot(dst_ptr, offs, mask, acc, DIRECT: tl.constexpr, INIT: tl.constexpr,
                  OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr, ACC: tl.constexpr = 0):
    """A segment's value: into its slot, or (DIRECT) finished into the output."""
    if DIRECT:
        bits = fp_finish(acc, INIT, OUT_EXP, OUT_MAN, ACC)
        tl.store(dst_ptr + offs, bits.to(dst_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(dst_ptr + offs, acc.to(dst_ptr.dtype.element_ty), mask=mask)   # (fp64 slots: exact)


@triton.jit
def fp_load_f32(ptr, offs, mask, IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FLOAT_IN: tl.constexpr):
    """Terms as fp32 values (exact): fp32 inputs directly, others from their bits."""
    if FLOAT_IN:
        return tl.load(ptr + offs, mask=mask, other=0.0)
    else:
        return fp_as_f32(fp_widen(tl.load(ptr + offs, mask=mask, other=0), IN_EXP, IN_MAN))


@triton.jit
def fp_load_acc(ptr, offs, mask, IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FLOAT_IN: tl.constexpr,
                ACC: tl.constexpr):
    """Terms in the accumulator's carrier, exact: fp64 for ACC 1 (fp64 inputs load as they
    are, FLOAT_IN), fp32 otherwise (fp_load_f32)."""
    if ACC == 1 or ACC == 4:
        if FLOAT_IN:
            return tl.load(ptr + offs, mask=mask, other=0.0).to(tl.float64)
        else:
            return fp_as_f32(fp_widen(tl.load(ptr + offs, mask=mask, other=0), IN_EXP, IN_MAN)).to(tl.float64)
    else:
        return fp_load_f32(ptr, offs, mask, IN_EXP, IN_MAN, FLOAT_IN)


@triton.jit
def fp_store_native(dst_ptr, offs, mask, acc, DIRECT: tl.constexpr, INIT: tl.constexpr,
                    OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr):
    """fp_store_slot with the GPU's own conversion (the native path runs only on a GPU).

    cvt.rn to fp16/bf16 is IEEE nearest-even with overflow to inf: fp_narrow's
    result, for a tenth of the instructions (the integer epilogue cost a third
    of a 4096^3 GEMM's time); NaNs get fp_narrow's quiet pattern and sign."""
    if DIRECT:
        if INIT:
            acc = acc + 0.0
        if OUT_MAN == 23:
            bits = acc.to(tl.int32, bitcast=True)
        else:
            if OUT_EXP == 5:
                bits = acc.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32)
            else:
                bits = acc.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32)
            NAN: tl.constexpr = (((1 << OUT_EXP) - 1) << OUT_MAN) | (1 << (OUT_MAN - 1))
            sign = (acc.to(tl.int32, bitcast=True) >> 31) << (OUT_EXP + OUT_MAN)   # 0 or -2^15
            bits = tl.where(acc != acc, NAN | sign, bits)
        tl.store(dst_ptr + offs, bits.to(dst_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(dst_ptr + offs, acc.to(dst_ptr.dtype.element_ty), mask=mask)   # (fp64 slots: exact)


@triton.jit
def fp_parts(bits, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr, G: tl.constexpr):
    """Parts of input bit patterns for the chain kernel, in int32.

    Returns (sign as 0/-1, exponent, significand << G, is_inf, is_nan, is_zero).
    Zeros, infs and nans get significand 0 and exponent -1000 (never the
    largest): the finite part of a node ignores them; specials are applied after."""
    neg, exp, sig, inf, nan = fp_decode(bits, EXP_BITS, MAN_BITS)
    sign = tl.where(neg, -1, 0).to(tl.int32)
    plain = (sig != 0) & ~inf & ~nan
    exp = tl.where(plain, exp, -1000).to(tl.int32)
    sig = tl.where(plain, sig << G, 0).to(tl.int32)
    return sign, exp, sig, inf, nan, (sig == 0) & ~inf & ~nan


@triton.jit
def fp_chain_node(t, head, hn, count, lone, WIDTH: tl.constexpr):
    """(first term, end) of node t of a chain whose first `head` terms are
    nodes of WIDTH (the last one short) and the rest whole nodes; hn: the
    number of head nodes (triton_host._leaf_run).  lone = 1: the chain's
    first node of one term joins the next, node 0 is terms 0 .. WIDTH
    (triton_host Note [first node of one more])."""
    u = t + lone
    j = tl.where(u < hn, u * WIDTH, head + (u - hn) * WIDTH)
    end = tl.minimum(j + WIDTH, tl.where(u < hn, head, count))
    return tl.where(t < lone, 0, j), end


@triton.jit
def fp_chain_shape(segs_ptr, sid, count, WIDTH: tl.constexpr):
    """(head, head nodes, nodes, lone) of segment sid (head 0 in the table: none; LONE_FIRST
    (-1): a first node of one term that joins the next, lone = 1)."""
    head = tl.load(segs_ptr + sid * 6 + 5)
    lone = (head < 0).to(tl.int64)
    head = tl.where(head == 0, count, tl.where(head < 0, 1, head))
    hn = (head + WIDTH - 1) // WIDTH
    return head, hn, hn + (count - head + WIDTH - 1) // WIDTH - lone, lone


@triton.jit
def fp_node_block(ptr, j, start, end, stride, s_k, s_x, rx, mx, W: tl.constexpr):
    """Bits of one node's terms j .. end-1 of a segment, for rows/columns rx: [W, len(rx)]
    (W >= end - j: the node's width, or one more for a first node of one more).

    Lanes past the node's end load zeros (a fused node ignores them)."""
    kw = tl.arange(0, W)
    live = (j + kw) < end
    kk = start + (j + kw).to(tl.int64) * stride
    return tl.load(ptr + kk[:, None] * s_k + rx[None, :] * s_x, mask=live[:, None] & mx[None, :], other=0)


@triton.jit
def fp_f64_pow2(e):
    """2^e as fp64 (int32 e, -1022 <= e <= 1023), from its bits: no libdevice call."""
    return ((e.to(tl.int64) + 1023) << 52).to(tl.float64, bitcast=True)


@triton.jit
def fp_node_result(total, e_max, c, FRAC: tl.constexpr, TO_ZERO: tl.constexpr, GPU_NODE: tl.constexpr = False,
                   FINITE: tl.constexpr = False):
    """fp32 bits (int32) of one fused node's result from its aligned product sum and its c.

    total: the sum of the aligned products in units 2^(e_max - FRAC), int32;
    c: the node's c as fp32 values (finite: inf/nan are the caller's).  The
    arithmetic of fp_fused_node in fp64, exactly: c / 2^unit truncated toward
    zero is a float-to-int conversion; the exact sum (< 2^33) times 2^unit is
    exact in fp64; then ONE rounding into fp32 (the conversion rounds to
    nearest even; for toward-zero, a result above the exact value in
    magnitude steps one ulp back, and 2^128 and above is inf as in
    fp_round_pack).  An int64 rounding costs ~100 instructions an output a
    node; this costs ~15.  GPU_NODE (GPU only): c truncated by one fp64 fma
    rounding toward zero (Note [fma truncation]) and the result by one
    conversion rounding toward zero: 3 conversions an output a node instead of 7
    (the conversion unit also does every product's float-to-int).  FINITE: the
    caller knows the result is below 2^128 (fp16 products: no overflow test)."""
    if GPU_NODE:
        big = fp_f64_pow2(52 + e_max - FRAC)
        cc = c.to(tl.float64)
        cbig = (big.to(tl.int64, bitcast=True) | (cc.to(tl.int64, bitcast=True) & (-9223372036854775807 - 1))
                ).to(tl.float64, bitcast=True)
        ct = tl.extra.cuda.libdevice.fma_rz(cc, tl.full(cc.shape, 1.0, tl.float64), cbig) - cbig
        v = total.to(tl.float64) * fp_f64_pow2(e_max - FRAC) + ct
        if TO_ZERO:
            bits = tl.extra.cuda.libdevice.double2float_rz(v).to(tl.int32, bitcast=True)
            if FINITE:
                return bits
            huge = tl.abs(v) >= 3.402823669209385e+38   # 2^128: inf (fp_round_pack)
            return tl.where(huge, tl.where(v < 0, NEG_INF32, 0x7F800000), bits)
        else:
            return v.to(tl.float32).to(tl.int32, bitcast=True)
    unit = e_max - FRAC
    ca = (c.to(tl.float64) * fp_f64_pow2(-unit)).to(tl.int64)
    v = (total.to(tl.int64) + ca).to(tl.float64) * fp_f64_pow2(unit)
    r = v.to(tl.float32)
    bits = r.to(tl.int32, bitcast=True)
    if TO_ZERO:
        bits = tl.where(tl.abs(r.to(tl.float64)) > tl.abs(v), bits - 1, bits)
        huge = tl.abs(v) >= 3.402823669209385e+38   # 2^128
        bits = tl.where(huge, tl.where(v < 0, NEG_INF32, 0x7F800000), bits)
    return bits


@triton.jit
def fp_node_values(bits, IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, F64: tl.constexpr):
    """Values of fp16/bf16 bit patterns as fp32 (F64: fp64), exact; inf and nan give 0.

    Only the finite part of a node reads them (specials are the caller's)."""
    b = bits.to(tl.int32) & 0xFFFF
    special = ((b >> IN_MAN) & ((1 << IN_EXP) - 1)) == (1 << IN_EXP) - 1
    if IN_EXP == 5:
        v = b.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    else:
        v = (b << 16).to(tl.float32, bitcast=True)
    v = tl.where(special, 0.0, v)
    if F64:
        v = v.to(tl.float64)
    return v


@triton.jit
def fp_f32_pow2(e):
    """2^e as fp32 (int32 e, -126 <= e <= 127), from its bits."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def fp_node_e_max(ea, eb, IN_EXP: tl.constexpr, ARITH: tl.constexpr):
    """max_k (ea[k, i] + eb[k, j]) for a node ([BM, BN], int32; below -900 where every product is 0).

    ea, eb: the exponents of fp_parts ([W, BM], [W, BN]; -1000 for zeros and specials).
    bf16 (exponent sums beyond fp32's range): the integer max.  fp16, ARITH 4: the
    largest of the exact fp32 products 2^ea * 2^eb (an fp32 multiply and max a
    product instead of an integer add and max: the integer unit is the busy one).
    fp16, ARITH 5, Note [exponent sum]: one fp32 fma a product."""
    if IN_EXP != 5:
        return tl.max(ea[:, :, None] + eb[:, None, :], axis=0)
    elif ARITH == 4:
        pa = tl.where(ea > -500, fp_f32_pow2(ea), 0.0)
        pb = tl.where(eb > -500, fp_f32_pow2(eb), 0.0)
        pm = tl.max(pa[:, :, None] * pb[:, None, :], axis=0)
        return tl.where(pm > 0, ((pm.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -2000)
    else:
        # Note [exponent sum]: with EA, EB the row's and the column's largest
        # exponents in the node and r_k = ea_k + eb_k - EA - EB <= 0, the exact
        # fp32 terms 2^(5 r_k) sum to S in [2^(5 r), 16 * 2^(5 r)] for r = max r_k
        # (rounding is monotone and both ends are fp32 numbers), so r = floor(log2(S) / 5)
        # wherever S is normal: then r >= -26 and the largest term's factors
        # 2^(5 (ea - EA)), 2^(5 (eb - EB)) are >= 2^-125 (smaller ones are set to 0,
        # as if flushed).  A zero or subnormal S (every product 0 or all below
        # 2^-125 of the bound) takes the integer max: rare, a branch a node.
        EA = tl.max(ea, axis=0)
        EB = tl.max(eb, axis=0)
        da = ea - EA[None, :]
        db = eb - EB[None, :]
        pa = tl.where(da >= -25, fp_f32_pow2(5 * tl.maximum(da, -25)), 0.0)
        pb = tl.where(db >= -25, fp_f32_pow2(5 * tl.maximum(db, -25)), 0.0)
        S = tl.sum(pa[:, :, None] * pb[:, None, :], axis=0)
        es = (S.to(tl.int32, bitcast=True) >> 23) & 0xFF   # S >= 0; 0: zero or subnormal
        live = (EA > -500)[:, None] & (EB > -500)[None, :]
        e = tl.where(live, EA[:, None] + EB[None, :] + (es + 3) // 5 - 26, -2000)
        bad = live & (es == 0)
        if tl.max(bad.to(tl.int32)) != 0:
            e = tl.where(bad, tl.max(ea[:, :, None] + eb[:, None, :], axis=0), e)
        return e


@triton.jit
def fp_node_fma_rz(a, b, sa, sb, e_max, c, W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                   IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FRAC: tl.constexpr, TO_ZERO: tl.constexpr):
    """fp32 bits (int32) of a node's finite result (mm_chain_emulated's ARITH 4 and 5; GPU only).

    Note [fma truncation]: with U = 2^(e_max - FRAC) and C = 2^52 U, every
    |a_k b_k| < 2^(FRAC + 2) U, so the exact |a_k b_k| + C lies in [2^52 U, 2^53 U),
    whose fp64 spacing is U: ONE fp64 fma rounding toward zero truncates the
    product's magnitude to a multiple of U, and the low word of the result is
    that multiple (an integer below 2^27): no float-to-int conversion (a quarter-rate
    unit), no scale multiply.  The sign goes in with one three-input xor (one's
    complement), and the number of negative terms, popc of the row's and the
    column's sign masks, makes it two's complement.  c and the rounding:
    fp_node_result with GPU_NODE."""
    va = tl.abs(fp_node_values(a, IN_EXP, IN_MAN, True))   # [W, BM]
    vb = tl.abs(fp_node_values(b, IN_EXP, IN_MAN, True))   # [W, BN]
    big = fp_f64_pow2(52 + e_max - FRAC)                   # [BM, BN]
    r = tl.extra.cuda.libdevice.fma_rz(tl.broadcast_to(va[:, :, None], (W, BM, BN)),
                                       tl.broadcast_to(vb[:, None, :], (W, BM, BN)),
                                       tl.broadcast_to(big[None, :, :], (W, BM, BN)))
    mag = r.to(tl.int64, bitcast=True).to(tl.int32)
    total = tl.sum(mag ^ sa[:, :, None] ^ sb[:, None, :], axis=0)
    k = tl.arange(0, W)
    mask_a = tl.sum((sa & 1) << k[:, None], axis=0)   # bit k: a[k] < 0
    mask_b = tl.sum((sb & 1) << k[:, None], axis=0)
    total += tl.extra.cuda.libdevice.popc(mask_a[:, None] ^ mask_b[None, :])
    return fp_node_result(total, e_max, c, FRAC, TO_ZERO, True)


@triton.jit
def fp_fp16_parts(bits):
    """(value as fp32, exponent) of finite fp16 bit patterns; exponent -1000 for zeros."""
    m = bits.to(tl.int32) & 0x7FFF
    e = tl.where(m == 0, -1000, tl.maximum(m >> 10, 1) - 15)
    return bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32), e


@triton.jit
def fp_node_fp16_finite(va, ea, vb, eb, acc, FRAC: tl.constexpr, FLOOR: tl.constexpr, TO_ZERO: tl.constexpr,
                        GPU_NODE: tl.constexpr):
    """mm_chain_emulated's node for fp16 inputs on a tile without inf or nan (ARITH 1;
    GPU_NODE as fp_node_result's): the fp32 accumulator after one fused node of the blocks
    (fp_fp16_parts) va, ea [W, BM] and vb, eb [W, BN] with c = acc.

    Note [finite fp16 node]: nothing here can be inf or nan: inputs are finite and
    |c| grows by less than 2^37 a node, so it never reaches 2^128; c's exponent is
    max(field, 1) - 127 even for c = 0 (-126: below every nonzero fp16 product,
    2^-28 and up, so it moves e_max only where every product is 0, and then the
    result is c's +0 or -0 made +0 either way).  That drops the inf/nan tests of c
    and the overflow test of the result."""
    cb = acc.to(tl.int32, bitcast=True)
    c_exp = tl.maximum((cb >> 23) & 0xFF, 1) - 127
    e_max = tl.maximum(tl.maximum(tl.max(ea[:, :, None] + eb[:, None, :], axis=0), c_exp), FLOOR)
    # e_max >= -126, so FRAC - e_max <= 151: clamped where every product is 0 (x = 0 * scale)
    scale = ((tl.minimum(FRAC - e_max, 127) + 127) << 23).to(tl.float32, bitcast=True)
    x = (va[:, :, None] * vb[:, None, :]) * scale[None, :, :]
    total = tl.sum(x.to(tl.int32), axis=0)
    return fp_node_result(total, e_max, acc, FRAC, TO_ZERO, GPU_NODE, True).to(tl.float32, bitcast=True)


@triton.jit
def fp_chain_fp16_finite(a_ptr, b_ptr, a_next, b_next, acc, nodes, head, hn, count, lone, start, stride,
                         s_ak, s_am, rm, mm, s_bk, s_bn, rn, mn, WIDTH: tl.constexpr, W: tl.constexpr,
                         FRAC: tl.constexpr, FLOOR: tl.constexpr, TO_ZERO: tl.constexpr,
                         GPU_NODE: tl.constexpr, STORE_EXP: tl.constexpr = 0, STORE_MAN: tl.constexpr = 0):
    """mm_chain_emulated's chain on a tile without inf or nan (fp16, Note [finite fp16 node]),
    from the first node's blocks a_next, b_next; returns the fp32 accumulator.

    The blocks are decoded when loaded and the loop carries the parts, so each element is
    decoded once (Triton otherwise moves cheap decoding after the layout conversion that
    broadcasts a block to the threads, and every thread that reads it decodes it again:
    10.3 against 21.7 instructions a product in the node loop's SASS)."""
    va_next, ea_next = fp_fp16_parts(a_next)
    vb_next, eb_next = fp_fp16_parts(b_next)
    for t in range(0, nodes):
        va, ea, vb, eb = va_next, ea_next, vb_next, eb_next
        j, end = fp_chain_node(t + 1, head, hn, count, lone, WIDTH)
        va_next, ea_next = fp_fp16_parts(fp_node_block(a_ptr, j, start, end, stride, s_ak, s_am, rm, mm, W))
        vb_next, eb_next = fp_fp16_parts(fp_node_block(b_ptr, j, start, end, stride, s_bk, s_bn, rn, mn, W))
        acc = fp_stored(fp_node_fp16_finite(va, ea, vb, eb, acc, FRAC, FLOOR, TO_ZERO, GPU_NODE),
                        STORE_EXP, STORE_MAN)
    return acc


@triton.jit
def mm_chain_emulated(a_ptr, b_ptr, dst_ptr, segs_ptr, ids_ptr, M, N,
                      s_am, s_ak, s_bk, s_bn, s_dslot, s_dm, s_dn,
                      BM: tl.constexpr, BN: tl.constexpr, WIDTH: tl.constexpr, W: tl.constexpr,
                      IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FRAC: tl.constexpr,
                      FLOOR: tl.constexpr, TO_ZERO: tl.constexpr, DIRECT: tl.constexpr,
                      INIT: tl.constexpr, OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr,
                      ARITH: tl.constexpr = 0, SPECIALS: tl.constexpr = True, GPU_NODE: tl.constexpr = False,
                      bad_a_ptr=None, bad_b_ptr=None, STORE_EXP: tl.constexpr = 0, STORE_MAN: tl.constexpr = 0):
    """A chain of fused nodes of WIDTH products over one segment, for a BM x BN tile (emulated).

    Same arithmetic as fp_fused_node (Note [fused node]), arranged for a GPU:
    a node's A and B blocks are loaded and decoded once, as [W, BM] and
    [W, BN], and its products form one [W, BM, BN] tile.  The node's axis
    comes first, so the default layout keeps it inside a thread: the largest
    exponent and the sum of the aligned terms are in-register reductions
    (integer max and sum are exact in any order).  Note [int32 terms]: an
    aligned product is below 2^(FRAC + 2) = 2^27 units (its significand
    product lies in [1, 4)), so every aligned product fits int32 and 16 of
    them sum below 2^31.  c and the rounding go through fp64
    (fp_node_result).  An inf or nan c alone is applied per element; tiles
    with inf/nan inputs take a third pass for the special results.  The next
    node's blocks are loaded before this node is computed, so their latency
    overlaps the arithmetic.  SPECIALS=False (the host saw no inf or nan in A
    and B) drops that pass and its block-wide test; on an H100 that measured
    2.4x slower (ARITH 1, 16 x 32 tiles), so the host passes True by default.
    Nsight Compute (fp16 1024^3, triton 3.6): without the pass the kernel
    EXECUTES 2.5x the instructions (1175M against 462M; 204 against 255
    registers), so the difference is in Triton's code generation, not in
    scheduling.  With it: 255 registers and spills, 2 warps a scheduler, an
    instruction every 2 cycles (stalls: fixed-latency dependencies, short
    scoreboard); the host's maxnreg=168 (3 programs an SM) gains 5%.

    ARITH picks how an aligned product is formed; all give the same integers
    (fp16 4096^3 on an H100, 16 x 32 tiles: 0 188 ms, 1 60 ms, 3 109 ms):
      0: integers: significands multiplied in int32, shifted right;
      1: fp32: the product a*b (exact for fp16: 22 significant bits, exponents
         in -28..31) times 2^(FRAC - e_max) (exact), truncated by the float to
         int conversion (toward zero = sign-magnitude truncation);
      2: the same in fp64 (bf16 products span 2^-266..2^256: not fp32);
      3: fp64, truncated by one fma rounding toward zero onto 2^52, whose low
         word is then the magnitude (GPU only: libdevice.fma_rz);
      4: no scale multiply and no float-to-int conversion: one fp64 fma
         |a| * |b| + 2^(52 + e_max - FRAC) rounding toward zero a product
         (Note [fma truncation], fp_node_fma_rz), the largest exponent from
         exact fp32 products 2^ea * 2^eb (fp16); GPU only;
      5: 4 with the largest exponent from one fp32 fma a product (Note
         [exponent sum] in fp_node_e_max).
    4 and 5 are bit-identical to the Tensor Cores (benchmarks/triton/arith_check.py)
    but slower on an H100 (16 x 32: 93 and 138 ms against 56): a node's fp64
    operands fill the registers (255 and spills), which costs more than the
    quarter-rate conversions they save.  Also measured slower, and removed: a
    form holding TM x TN outputs a thread as [W, TM, TN, PM, PN] tensors (89 ms
    at best; commit a3c4e4a, mm_chain_emulated_micro); an accumulator made by a
    reduction, to skip layout conversions (the same code).  GPU_NODE (GPU
    only): each node's c and result through fp_node_result's GPU form.

    Note [tile specials]: SPECIALS=2 takes the inf/nan pass's condition from
    the host's flags (bad_a_ptr: per row of A, bad_b_ptr: per column of B, int32,
    1 where the row/column holds an inf or nan), tested once a tile, instead of
    a block-wide max over every node's blocks (a cross-warp reduction with
    barriers each node).  A tile that meets a flag still tests each node (the
    pass costs about 3x a node).
    H100, fp16 4096^3, ARITH 1 + GPU_NODE, 16 x 32 x 4 warps, maxnreg 168:
    53.9 -> 47.4 ms, bit-identical (benchmarks/results/triton_replica_h100_h200_2026-11-26/bench_h100_tile_specials.txt);
    static SASS (triton 3.6, sm_90) of the node loop: 16.1 -> 15.1 instructions a product.

    SPECIALS=3 (fp16, ARITH 1; the host found no inf or nan at all): only the
    finite chain, fp_chain_fp16_finite (Note [finite fp16 node]): 128 registers,
    no spills, 9.4 instructions a product (Nsight), 28.6 ms = 4.8 TFLOP/s
    (benchmarks/results/triton_replica_h100_h200_2026-11-26/bench_h100_finite_fp16.txt).  With SPECIALS=2 the
    tiles without flags take that chain and the others this loop."""
    G: tl.constexpr = FRAC - 2 * IN_MAN
    tl.static_assert(G >= 0)
    tl.static_assert(WIDTH <= 16)
    tl.static_assert((ARITH != 1) | (IN_EXP == 5))
    tl.static_assert((WIDTH << (FRAC + 2)) <= (1 << 31))   # Note [int32 terms]
    sid = tl.load(ids_ptr + tl.program_id(2)).to(tl.int64)
    start = tl.load(segs_ptr + sid * 6)
    count = tl.load(segs_ptr + sid * 6 + 1)
    stride = tl.load(segs_ptr + sid * 6 + 2)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mm, mn = rm < M, rn < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)   # c of the first node: +0, changes nothing
    if SPECIALS == 2:
        # Note [tile specials]: whether any of the tile's rows of A or columns of B holds an
        # inf or nan (the host's flags): one test a tile instead of a block-wide one a node
        tile_special = (tl.max(tl.load(bad_a_ptr + rm, mask=mm, other=0))
                        | tl.max(tl.load(bad_b_ptr + rn, mask=mn, other=0)))
    head, hn, nodes, lone = fp_chain_shape(segs_ptr, sid, count, WIDTH)
    j, end = fp_chain_node(0, head, hn, count, lone, WIDTH)
    # Note [finite fp16 node]: tiles without inf or nan take the short node; SPECIALS=3
    # (the host found none in A and B) compiles only that loop
    FAST: tl.constexpr = (SPECIALS >= 2) & (ARITH == 1) & (IN_EXP == 5)
    tl.static_assert((SPECIALS != 3) | FAST)
    fast = 0
    if SPECIALS == 3:
        fast = 1
    elif FAST:
        fast = tile_special == 0
    if fast:
        a_next = fp_node_block(a_ptr, j, start, end, stride, s_ak, s_am, rm, mm, W)
        b_next = fp_node_block(b_ptr, j, start, end, stride, s_bk, s_bn, rn, mn, W)
        acc = fp_chain_fp16_finite(a_ptr, b_ptr, a_next, b_next, acc, nodes, head, hn, count, lone, start, stride,
                                   s_ak, s_am, rm, mm, s_bk, s_bn, rn, mn, WIDTH, W, FRAC, FLOOR, TO_ZERO,
                                   GPU_NODE, STORE_EXP, STORE_MAN)
        nodes = nodes * 0   # the general loop below: nothing left
    # (SPECIALS=3: a trip count of 0 known when compiling, so the general loop is not compiled.
    # Each loop loads its own first blocks: shared, they took one layout, which cost the
    # general loop 4x its instructions)
    a_next = fp_node_block(a_ptr, j, start, end, stride, s_ak, s_am, rm, mm, W)
    b_next = fp_node_block(b_ptr, j, start, end, stride, s_bk, s_bn, rn, mn, W)
    for t in range(0, nodes * (SPECIALS != 3)):
        a, b = a_next, b_next
        j, end = fp_chain_node(t + 1, head, hn, count, lone, WIDTH)
        a_next = fp_node_block(a_ptr, j, start, end, stride, s_ak, s_am, rm, mm, W)
        b_next = fp_node_block(b_ptr, j, start, end, stride, s_bk, s_bn, rn, mn, W)
        sa, ea, ma, ia, na, za = fp_parts(a, IN_EXP, IN_MAN, G)   # [W, BM]
        sb, eb, mb, ib, nb, zb = fp_parts(b, IN_EXP, IN_MAN, 0)   # [W, BN]
        # c: its exponent as an fp32 value (subnormals at -126), whether inf/nan
        cb = acc.to(tl.int32, bitcast=True)
        cfield = (cb >> 23) & 0xFF
        cspecial = cfield == 0xFF
        cnan = cspecial & ((cb & 0x7FFFFF) != 0)
        cinf = cspecial & ~cnan
        c_live = ((cb & 0x7FFFFFFF) != 0) & ~cspecial
        c_exp = tl.where(c_live, tl.maximum(cfield, 1) - 127, -1000)
        if ARITH < 4:
            e = ea[:, :, None] + eb[:, None, :]
            e_max = tl.maximum(tl.maximum(tl.max(e, axis=0), c_exp), FLOOR)
        else:
            e_max = tl.maximum(tl.maximum(fp_node_e_max(ea, eb, IN_EXP, ARITH), c_exp), FLOOR)
        if ARITH == 0:
            # aligned finite products, truncated toward zero in sign-magnitude
            mag = (ma[:, :, None] * mb[:, None, :]) >> tl.minimum(e_max[None, :, :] - e, 31)
            sgn = sa[:, :, None] ^ sb[:, None, :]
            total = tl.sum((mag ^ sgn) - sgn, axis=0)
        elif ARITH == 1:
            # 2^(FRAC - e_max) in fp32; clamped where no product is nonzero
            # (e_max < -28 for fp16), where every x below is 0 * scale
            scale = ((tl.minimum(tl.maximum(FRAC - e_max, -126), 127) + 127) << 23).to(tl.float32, bitcast=True)
            va = fp_node_values(a, IN_EXP, IN_MAN, False)
            vb = fp_node_values(b, IN_EXP, IN_MAN, False)
            x = (va[:, :, None] * vb[:, None, :]) * scale[None, :, :]
            total = tl.sum(x.to(tl.int32), axis=0)
        elif ARITH < 4:
            scale = fp_f64_pow2(FRAC - e_max)
            va = fp_node_values(a, IN_EXP, IN_MAN, True)
            vb = fp_node_values(b, IN_EXP, IN_MAN, True)
            p = va[:, :, None] * vb[:, None, :]
            if ARITH == 2:
                total = tl.sum((p * scale[None, :, :]).to(tl.int32), axis=0)
            else:
                two52 = tl.full(p.shape, 4503599627370496.0, tl.float64)
                r = tl.extra.cuda.libdevice.fma_rz(tl.abs(p), scale[None, :, :] + 0 * p, two52)
                mag = r.to(tl.int64, bitcast=True).to(tl.int32)
                sgn = (p.to(tl.int64, bitcast=True) >> 63).to(tl.int32)
                total = tl.sum((mag ^ sgn) - sgn, axis=0)
        if ARITH >= 4:
            finite = fp_node_fma_rz(a, b, sa, sb, e_max, tl.where(cspecial, 0.0, acc), W, BM, BN,
                                    IN_EXP, IN_MAN, FRAC, TO_ZERO)
        else:
            finite = fp_node_result(total, e_max, tl.where(cspecial, 0.0, acc), FRAC, TO_ZERO, GPU_NODE)
        # finite products and an inf c: that inf; a nan c: nan (fp_fused_node's rules)
        finite = tl.where(cinf, cb, finite)
        finite = tl.where(cnan, 0x7FC00000, finite)
        if SPECIALS == 2:
            # a flagged tile still tests each node (the pass costs 3x the node)
            special = tile_special * 0
            if tile_special != 0:
                special = (tl.max(tl.max((ia | na).to(tl.int32), axis=1), axis=0)
                           | tl.max(tl.max((ib | nb).to(tl.int32), axis=1), axis=0))
        elif SPECIALS:
            special = (tl.max(tl.max((ia | na).to(tl.int32), axis=1), axis=0)
                       | tl.max(tl.max((ib | nb).to(tl.int32), axis=1), axis=0))
        else:
            special = 0
        if special != 0:
            # rare: nan if any nan, inf * 0 or inf - inf; else an inf wins
            cneg = cb < 0
            sgn = sa[:, :, None] ^ sb[:, None, :]
            p_nan = (na[:, :, None] | nb[:, None, :] | (ia[:, :, None] & zb[:, None, :])
                     | (za[:, :, None] & ib[:, None, :]))
            p_inf = (ia[:, :, None] | ib[:, None, :]) & ~p_nan
            p_neg = sgn != 0
            nan = cnan | (tl.max(p_nan.to(tl.int32), axis=0) != 0)
            pos = (cinf & ~cneg) | (tl.max((p_inf & ~p_neg).to(tl.int32), axis=0) != 0)
            negi = (cinf & cneg) | (tl.max((p_inf & p_neg).to(tl.int32), axis=0) != 0)
            nan = nan | (pos & negi)
            finite = tl.where(pos, 0x7F800000, finite)
            finite = tl.where(negi, NEG_INF32, finite)
            finite = tl.where(nan, 0x7FC00000, finite)
        acc = fp_stored(finite.to(tl.int32).to(tl.float32, bitcast=True), STORE_EXP, STORE_MAN)
    offs = sid * s_dslot + rm[:, None] * s_dm + rn[None, :] * s_dn
    fp_store_slot(dst_ptr, offs, mm[:, None] & mn[None, :], acc, DIRECT, INIT, OUT_EXP, OUT_MAN)


# Note [wide kernel constants]: a fused node's numbers (FRAC, FLOOR, C_EMIN, A_EMIN, B_EMIN) are
# arguments of the wide kernel, not constexprs, and never specialized on: the named sets that
# differ only in them (the fp6 / fp4 formats, which travel as fp32 bits and differ only in their
# emin; units that keep another number of bits) share one compiled kernel, which is most of the
# compile time of a list of sets on a GPU.
@triton.jit(do_not_specialize=["FRAC", "FLOOR", "C_EMIN", "A_EMIN", "B_EMIN"])
def mm_chain_emulated_wide(a_ptr, b_ptr, dst_ptr, segs_ptr, ids_ptr, M, N,
                      s_am, s_ak, s_bk, s_bn, s_dslot, s_dm, s_dn,
                      BM: tl.constexpr, BN: tl.constexpr, WIDTH: tl.constexpr, W: tl.constexpr,
                      IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FRAC,
                      FLOOR, TO_ZERO: tl.constexpr, DIRECT: tl.constexpr,
                      INIT: tl.constexpr, OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr,
                      STORE_EXP: tl.constexpr = 0, STORE_MAN: tl.constexpr = 0,
                      IN_FN: tl.constexpr = False, RES_MAN: tl.constexpr = 0,
                      ZEXP: tl.constexpr = UNSET, C_EMIN=UNSET, AMD: tl.constexpr = False,
                      B_EXP: tl.constexpr = 0, B_MAN: tl.constexpr = 0, B_FN: tl.constexpr = False,
                      A_EMIN=UNSET, B_EMIN=UNSET, SUB_IN: tl.constexpr = True,
                      SUB_OUT: tl.constexpr = True, ALIGNED: tl.constexpr = 0, INTERLEAVE: tl.constexpr = 1,
                      NODE_EXP: tl.constexpr = 8, NODE_MAN: tl.constexpr = 23):
    """mm_chain_emulated with each node as one BM x BN x W tensor through fp_fused_node (int64).

    Few, wide operations: the fast form for the interpreter (TRITON_INTERPRET=1
    pays per operation); on a GPU its registers overflow.  W: WIDTH rounded up
    to a power of two; the extra lanes load zeros, which a fused node ignores (with
    ZEXP, MMA-Sim's conventions, they align at 2 ZEXP, below c's ZEXP).  The only
    form with ZEXP, C_EMIN and AMD (fp_fused_node), b of another format (B_EXP, B_MAN,
    B_FN; A_EMIN, B_EMIN: fp6 / fp4 held in fp32 bits), flushed subnormals, rounded aligned
    terms, and nodes writing NODE_EXP / NODE_MAN (fp16: the chain carries fp16 bits, widened
    to fp32 at the end, exactly)."""
    sid = tl.load(ids_ptr + tl.program_id(2)).to(tl.int64)
    start = tl.load(segs_ptr + sid * 6)
    count = tl.load(segs_ptr + sid * 6 + 1)
    stride = tl.load(segs_ptr + sid * 6 + 2)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mm, mn = rm < M, rn < N
    acc = tl.zeros((BM, BN), dtype=tl.int64)   # c of the first node: +0, changes nothing
    head, hn, nodes, lone = fp_chain_shape(segs_ptr, sid, count, WIDTH)
    for t in range(0, nodes):
        j, end = fp_chain_node(t, head, hn, count, lone, WIDTH)
        ks = j + tl.arange(0, W)
        live = ks < end   # (end - j <= W: the host's W)
        kk = start + ks.to(tl.int64) * stride
        a = tl.load(a_ptr + rm[:, None] * s_am + kk[None, :] * s_ak, mask=mm[:, None] & live[None, :], other=0)
        b = tl.load(b_ptr + kk[None, :] * s_bk + rn[:, None] * s_bn, mask=mn[:, None] & live[None, :], other=0)
        pn, pe, ps, pi, pq = fp_product(a[:, None, :], b[None, :, :], IN_EXP, IN_MAN, IN_FN, ZEXP,
                                        B_EXP, B_MAN, B_FN, A_EMIN, B_EMIN, SUB_IN)
        acc = fp_fused_node(pn, pe, ps, pi, pq, acc, 2, IN_MAN + (IN_MAN if B_EXP == 0 else B_MAN),
                            NODE_EXP, NODE_MAN, FRAC, FLOOR, TO_ZERO, RES_MAN, ZEXP, C_EMIN, AMD, INTERLEAVE,
                            ALIGNED, SUB_OUT)
        if NODE_MAN == 23:
            acc = fp_stored_bits(acc, STORE_EXP, STORE_MAN)
    if NODE_MAN != 23:
        acc = fp_widen(acc, NODE_EXP, NODE_MAN)
    offs = sid * s_dslot + rm[:, None] * s_dm + rn[None, :] * s_dn
    fp_store_slot(dst_ptr, offs, mm[:, None] & mn[None, :], fp_as_f32(acc), DIRECT, INIT, OUT_EXP, OUT_MAN)


@triton.jit
def mm_fold(a_ptr, b_ptr, dst_ptr, segs_ptr, ids_ptr, M, N,
            s_am, s_ak, s_bk, s_bn, s_dslot, s_dm, s_dn,
            BM: tl.constexpr, BN: tl.constexpr, IN_EXP: tl.constexpr, IN_MAN: tl.constexpr,
            FMA: tl.constexpr, DIRECT: tl.constexpr, INIT: tl.constexpr,
            OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr, EXACT: tl.constexpr = False, FIRST: tl.constexpr = False):
    """A sequential fold of products over one segment (binary adds, or FMAs), for a tile.

    The first product is rounded; with FMA each later one is fused into the
    partial sum.  EXACT (product = exact): the first two products' exact sum is
    rounded once (fp64 holds a product of bf16 or tf32 values exactly, and one
    fp64 rounding before the fp32 one is innocuous: 53 >= 2 * 24 + 2), so a
    product beyond fp32's range is no inf before its node.  Launched with
    enable_fp_fusion=False: no other contraction."""
    sid = tl.load(ids_ptr + tl.program_id(2)).to(tl.int64)
    start = tl.load(segs_ptr + sid * 6)
    count = tl.load(segs_ptr + sid * 6 + 1)
    stride = tl.load(segs_ptr + sid * 6 + 2)
    # head > 0: the first `head` terms at `stride`, the rest contiguous after
    # them at stride `tstride` (lane 0 of lanes(k, seq, ..., seq, u) folding on into the leftovers)
    tstride = tl.load(segs_ptr + sid * 6 + 4)
    head = tl.load(segs_ptr + sid * 6 + 5)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mm, mn = rm < M, rn < N
    # fpspec.arith.evaluate, note [which child is fused]: of the first two
    # leaves the later index is the fused one, also when the fold runs backwards
    # (FIRST, product = fma_first: the earlier index); the other is rounded first
    k1 = tl.where((head == 0) | (1 < head), start + stride, start + head * stride + (1 - head) * tstride)
    swap = FMA & ((stride < 0) != FIRST) & (count > 1)
    k0 = tl.where(swap, k1, start)
    a = fp_as_f32(fp_widen(tl.load(a_ptr + rm * s_am + k0 * s_ak, mask=mm, other=0), IN_EXP, IN_MAN))
    b = fp_as_f32(fp_widen(tl.load(b_ptr + k0 * s_bk + rn * s_bn, mask=mn, other=0), IN_EXP, IN_MAN))
    acc = a[:, None] * b[None, :]
    first = 1
    if EXACT:
        k = tl.where((head == 0) | (1 < head), start + stride, start + head * stride + (1 - head) * tstride)
        k = tl.where(count > 1, tl.where(swap, start, k), k0)
        a1 = fp_as_f32(fp_widen(tl.load(a_ptr + rm * s_am + k * s_ak, mask=mm, other=0), IN_EXP, IN_MAN))
        b1 = fp_as_f32(fp_widen(tl.load(b_ptr + k * s_bk + rn * s_bn, mask=mn, other=0), IN_EXP, IN_MAN))
        p0 = a.to(tl.float64)[:, None] * b.to(tl.float64)[None, :]
        p1 = a1.to(tl.float64)[:, None] * b1.to(tl.float64)[None, :]
        acc = tl.where(count > 1, (p0 + p1).to(tl.float32), acc)
        first = tl.where(count > 1, 2, 1)
    for i in range(first, count):
        k = tl.where((head == 0) | (i < head), start + i * stride, start + head * stride + (i - head) * tstride)
        k = tl.where(swap & (i == 1), start, k)
        a = fp_as_f32(fp_widen(tl.load(a_ptr + rm * s_am + k * s_ak, mask=mm, other=0), IN_EXP, IN_MAN))
        b = fp_as_f32(fp_widen(tl.load(b_ptr + k * s_bk + rn * s_bn, mask=mn, other=0), IN_EXP, IN_MAN))
        if FMA:
            acc = tl.fma(a[:, None], b[None, :], acc)
        else:
            acc = acc + a[:, None] * b[None, :]
    offs = sid * s_dslot + rm[:, None] * s_dm + rn[None, :] * s_dn
    fp_store_slot(dst_ptr, offs, mm[:, None] & mn[None, :], acc, DIRECT, INIT, OUT_EXP, OUT_MAN)


@triton.jit
def fp_mm_operand(ptr, offs, mask, IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FLOAT_IN: tl.constexpr):
    """Operands as fp64 values (exact): fp32 and fp64 inputs as they are (FLOAT_IN), others from
    their bits."""
    if FLOAT_IN:
        return tl.load(ptr + offs, mask=mask, other=0.0).to(tl.float64)
    else:
        return fp_as_f32(fp_widen(tl.load(ptr + offs, mask=mask, other=0), IN_EXP, IN_MAN)).to(tl.float64)


@triton.jit
def fp_mm_term(a, b, ACC: tl.constexpr, ROUND: tl.constexpr, PRODUCT_F32: tl.constexpr):
    """A product entering the accumulation as a value of accumulator ACC (fp64 operands; fp64
    carrier for ACC 1, else fp32): the fp64 product (exact for inputs of <= 26 bits) rounded
    once to the accumulator; PRODUCT_F32 (product_format = fp32): to fp32 first.  ROUND False
    (a sum's term times one): the term unrounded (its node rounds it)."""
    p = a[:, None] * b[None, :]
    if PRODUCT_F32:
        p = (a.to(tl.float32)[:, None] * b.to(tl.float32)[None, :]).to(tl.float64)
    if ACC == 1:
        return p
    elif ACC == 4 and not ROUND:
        return p
    elif ACC == 4:
        return p.to(tl.float32).to(tl.float64)
    elif not ROUND:
        return p.to(tl.float32)
    elif ACC == 2:
        return fp_round_acc(p, 5, 10)
    elif ACC == 3:
        return fp_round_acc(p, 8, 7)
    else:
        return p.to(tl.float32)


@triton.jit
def fp_mm_fma(a, b, acc, ACC: tl.constexpr):
    """round_acc(a * b + acc) once (fp64 operands; fpspec.formats.fma): an fp64 FMA for ACC 1;
    for ACC 2, 3 the exact fp64 product (<= 26-bit inputs) and acc summed to odd, then rounded."""
    if ACC == 1:
        return tl.fma(a[:, None], b[None, :], acc)
    elif ACC == 0:
        return fp_add_once(a[:, None] * b[None, :], acc.to(tl.float64))
    elif ACC == 4:
        return fp_add_once(a[:, None] * b[None, :], acc).to(tl.float64)
    elif ACC == 2:
        return fp_round_acc(fp_sum_odd(a[:, None] * b[None, :], acc.to(tl.float64)), 5, 10)
    else:
        return fp_round_acc(fp_sum_odd(a[:, None] * b[None, :], acc.to(tl.float64)), 8, 7)


@triton.jit
def mm_fold_acc(a_ptr, b_ptr, dst_ptr, segs_ptr, ids_ptr, M, N,
                s_am, s_ak, s_bk, s_bn, s_dslot, s_dm, s_dn,
                BM: tl.constexpr, BN: tl.constexpr, IN_EXP: tl.constexpr, IN_MAN: tl.constexpr,
                FLOAT_IN: tl.constexpr, FMA: tl.constexpr, DIRECT: tl.constexpr, INIT: tl.constexpr,
                OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr, ACC: tl.constexpr,
                ROUND: tl.constexpr = True, PRODUCT_F32: tl.constexpr = False, EXACT: tl.constexpr = False,
                FIRST: tl.constexpr = False):
    """mm_fold for any accumulator (Note [accumulators]) and regions: the same segments,
    operands read as fp64 values.  The first product rounded to the accumulator; with FMA each
    later one fused into the partial sum (one rounding), else rounded and added.  EXACT (ACC 1,
    product = exact): the first two products' exact sum rounded to odd, as the reference
    rounds it into fp64 (fpspec.arith.evaluate note [exact products]; once into fp32), then FMAs."""
    sid = tl.load(ids_ptr + tl.program_id(2)).to(tl.int64)
    start = tl.load(segs_ptr + sid * 6)
    count = tl.load(segs_ptr + sid * 6 + 1)
    stride = tl.load(segs_ptr + sid * 6 + 2)
    tstride = tl.load(segs_ptr + sid * 6 + 4)   # (mm_fold: lane 0 folding on into the leftovers)
    head = tl.load(segs_ptr + sid * 6 + 5)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mm, mn = rm < M, rn < N
    # fpspec.arith.evaluate, note [which child is fused]: the later index of the first two leaves
    # (FIRST, product = fma_first: the earlier); the other is rounded first
    k1 = tl.where((head == 0) | (1 < head), start + stride, start + head * stride + (1 - head) * tstride)
    swap = FMA & ((stride < 0) != FIRST) & (count > 1)
    k0 = tl.where(swap, k1, start)
    a = fp_mm_operand(a_ptr, rm * s_am + k0 * s_ak, mm, IN_EXP, IN_MAN, FLOAT_IN)
    b = fp_mm_operand(b_ptr, k0 * s_bk + rn * s_bn, mn, IN_EXP, IN_MAN, FLOAT_IN)
    acc = fp_mm_term(a, b, ACC, ROUND, PRODUCT_F32)
    first = 1
    if EXACT:
        k = tl.where(count > 1, tl.where(swap, start, k1), k0)   # the other of the first two
        a1 = fp_mm_operand(a_ptr, rm * s_am + k * s_ak, mm, IN_EXP, IN_MAN, FLOAT_IN)
        b1 = fp_mm_operand(b_ptr, k * s_bk + rn * s_bn, mn, IN_EXP, IN_MAN, FLOAT_IN)
        both = fp_sum_odd(a[:, None] * b[None, :], a1[:, None] * b1[None, :])
        if ACC == 0:
            both = both.to(tl.float32)
        elif ACC == 4:
            both = both.to(tl.float32).to(tl.float64)
        acc = tl.where(count > 1, both, acc)
        first = tl.where(count > 1, 2, 1)
    for i in range(first, count):
        k = tl.where((head == 0) | (i < head), start + i * stride, start + head * stride + (i - head) * tstride)
        k = tl.where(swap & (i == 1), start, k)
        a = fp_mm_operand(a_ptr, rm * s_am + k * s_ak, mm, IN_EXP, IN_MAN, FLOAT_IN)
        b = fp_mm_operand(b_ptr, k * s_bk + rn * s_bn, mn, IN_EXP, IN_MAN, FLOAT_IN)
        if FMA:
            acc = fp_mm_fma(a, b, acc, ACC)
        else:
            acc = fp_acc_add(acc, fp_mm_term(a, b, ACC, ROUND, PRODUCT_F32), ACC)
    offs = sid * s_dslot + rm[:, None] * s_dm + rn[None, :] * s_dn
    fp_store_slot(dst_ptr, offs, mm[:, None] & mn[None, :], acc, DIRECT, INIT, OUT_EXP, OUT_MAN, ACC)


@triton.jit
def mm_chain_native(a_ptr, b_ptr, dst_ptr, segs_ptr, ids_ptr, M, N,
                    s_am, s_ak, s_bk, s_bn, s_dslot, s_dm, s_dn,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    DIRECT: tl.constexpr, INIT: tl.constexpr,
                    OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr, GROUP: tl.constexpr,
                    ALIGNED: tl.constexpr, EVEN_K: tl.constexpr,
                    STORE_EXP: tl.constexpr = 0, STORE_MAN: tl.constexpr = 0):
    """The same chain on the Tensor Cores: tl.dot over BK-wide blocks (BK a multiple of 16).

    Valid only where the GPU's fused node is the spec's (H100/H200, fp16/bf16,
    w = 16): each 16-wide MMA step takes the running accumulator as its c, so
    a BK block is BK/16 fused nodes of the chain, in order.  The tail block is
    padded with zeros, which a fused node ignores.  ALIGNED: every segment
    starts at a multiple of 16 (lets loads be 16 bytes wide); EVEN_K: every
    segment's length is a multiple of BK (no masks along K)."""
    sid = tl.load(ids_ptr + tl.program_id(2)).to(tl.int64)
    start = tl.load(segs_ptr + sid * 6)
    count = tl.load(segs_ptr + sid * 6 + 1)
    if ALIGNED:
        start = tl.multiple_of(start, 16)
    # grouped tile order: neighbouring programs share A rows in L2
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    group = pid // (GROUP * tiles_n)
    first_m = group * GROUP
    size_m = tl.minimum(tiles_m - first_m, GROUP)
    pm = first_m + (pid % size_m)
    pn = (pid % (GROUP * tiles_n)) // size_m
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mm, mn = rm < M, rn < N
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * s_am + (start + rk[None, :]) * s_ak
    b_ptrs = b_ptr + (start + rk[:, None]) * s_bk + rn[None, :] * s_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    head = tl.load(segs_ptr + sid * 6 + 5)   # a head (the short node not last): nodes restart after it
    head = tl.where(head == 0, count, head)
    for j in range(0, head, BK):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=mm[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=mn[None, :], other=0.0)
        else:
            live = (j + rk) < head
            a = tl.load(a_ptrs, mask=mm[:, None] & live[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=live[:, None] & mn[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    a_ptrs = a_ptr + rm[:, None] * s_am + (start + head + rk[None, :]) * s_ak
    b_ptrs = b_ptr + (start + head + rk[:, None]) * s_bk + rn[None, :] * s_bn
    for j in range(head, count, BK):   # empty without a head
        live = (j + rk) < count
        a = tl.load(a_ptrs, mask=mm[:, None] & live[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=live[:, None] & mn[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    offs = sid * s_dslot + rm[:, None] * s_dm + rn[None, :] * s_dn
    # (STORE: the host launches stored chains of one node only: rounding once here is per node)
    fp_store_native(dst_ptr, offs, mm[:, None] & mn[None, :], fp_stored(acc, STORE_EXP, STORE_MAN), DIRECT, INIT,
                    OUT_EXP, OUT_MAN)


@triton.jit
def sum_fold(x_ptr, dst_ptr, segs_ptr, ids_ptr, F, max_count, BS: tl.constexpr,
             IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FLOAT_IN: tl.constexpr,
             DIRECT: tl.constexpr, INIT: tl.constexpr,
             OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr, ACC: tl.constexpr = 0):
    """Sequential folds of a sum's terms: the F segments ids[...], BS side by side (one lane each);
    ACC: the accumulator (Note [accumulators])."""
    f = tl.program_id(0) * BS + tl.arange(0, BS)
    live = f < F
    sid = tl.load(ids_ptr + f, mask=live, other=0)
    row = sid.to(tl.int64) * 6
    start = tl.load(segs_ptr + row, mask=live, other=0)
    count = tl.load(segs_ptr + row + 1, mask=live, other=0)
    stride = tl.load(segs_ptr + row + 2, mask=live, other=0)
    acc = fp_load_acc(x_ptr, start, live, IN_EXP, IN_MAN, FLOAT_IN, ACC)
    for i in range(1, max_count):
        on = live & (i < count)
        acc = tl.where(on, fp_acc_add(acc, fp_load_acc(x_ptr, start + i * stride, on, IN_EXP, IN_MAN, FLOAT_IN, ACC),
                                      ACC), acc)
    fp_store_slot(dst_ptr, sid, live, acc, DIRECT, INIT, OUT_EXP, OUT_MAN, ACC)


@triton.jit
def fp_pairs(v, R: tl.constexpr, C: tl.constexpr, LEVELS: tl.constexpr, HALVES: tl.constexpr,
             ACC: tl.constexpr = 0):
    """LEVELS levels of a perfect tree along the last axis of v [R, C]: returns [R, C >> LEVELS].

    Each level adds elements (2i, 2i+1) (a pairwise sum split in halves, on a
    power of two) or, with HALVES, elements (i, i + C/2) (tree_reduce).  The
    pairs come apart by reshape + split: no reduction primitive, whose order
    Triton does not promise."""
    for lvl in tl.static_range(LEVELS):
        if HALVES:
            v = tl.permute(tl.reshape(v, (R, 2, (C >> lvl) // 2)), (0, 2, 1))
        else:
            v = tl.reshape(v, (R, (C >> lvl) // 2, 2))
        a, b = tl.split(v)
        v = fp_acc_add(a, b, ACC)
    return v


@triton.jit
def sum_lanes(x_ptr, dst_ptr, ids_ptr, starts_ptr, counts_ptr, L,
              BG: tl.constexpr, K: tl.constexpr, ROWS: tl.constexpr, TAIL: tl.constexpr,
              LOG_K: tl.constexpr, TREE: tl.constexpr, GROUP_H: tl.constexpr, ALIGNED: tl.constexpr,
              IN_EXP: tl.constexpr, IN_MAN: tl.constexpr, FLOAT_IN: tl.constexpr,
              DIRECT: tl.constexpr, INIT: tl.constexpr, OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr,
              ACC: tl.constexpr = 0):
    """BG leaf blocks of a sum side by side, one row of a [BG, K] tile each (Note [leaf blocks]
    in triton_host.py): K lanes folded over ROWS rows, the tree TREE over the lanes (2:
    halves, 3: tree_reduce, 4: fold), the tail folded in.  GROUP_H > 0: then GROUP_H
    perfect levels over consecutive blocks (Note [perfect levels]), BG >> GROUP_H results a
    program; else each block's result goes to its slot ids[g].

    Every row is its own load (ROWS unrolled): all loads are in flight at once
    and each 8-lane row is one 32-byte sector."""
    g = tl.program_id(0) * BG + tl.arange(0, BG)
    live = g < L
    start = tl.load(starts_ptr + g, mask=live, other=0)
    count = tl.load(counts_ptr + g, mask=live, other=0)
    if ALIGNED:
        start = tl.multiple_of(start, K)   # every block starts at a multiple of K: 16-byte loads
    rows = count // K
    main = rows * K
    lane = tl.arange(0, K)
    offs = start[:, None] + lane[None, :]
    # masks by row, the same across a row's lanes (so a row's loads can be one vector load)
    acc = fp_load_acc(x_ptr, offs, (live & (rows > 0))[:, None], IN_EXP, IN_MAN, FLOAT_IN, ACC)
    for i in tl.static_range(1, ROWS):
        on = (live & (rows > i))[:, None]
        acc = tl.where(on, fp_acc_add(acc, fp_load_acc(x_ptr, offs + i * K, on, IN_EXP, IN_MAN, FLOAT_IN, ACC), ACC),
                       acc)
    if TREE == 4:
        # a fold over the lanes: take lane j out exactly (an integer sum of
        # one pattern and zeros; a float sum would turn -0.0 into +0.0)
        if ACC == 1:
            bits = acc.to(tl.int64, bitcast=True)
            t = tl.sum(tl.where(lane[None, :] == 0, bits, 0), axis=1).to(tl.float64, bitcast=True)
            for j in tl.static_range(1, K):
                t = fp_acc_add(t, tl.sum(tl.where(lane[None, :] == j, bits, 0), axis=1).to(tl.float64, bitcast=True),
                               ACC)
        else:
            bits = acc.to(tl.int32, bitcast=True)
            t = tl.sum(tl.where(lane[None, :] == 0, bits, 0), axis=1).to(tl.float32, bitcast=True)
            for j in tl.static_range(1, K):
                t = fp_acc_add(t, tl.sum(tl.where(lane[None, :] == j, bits, 0), axis=1).to(tl.float32, bitcast=True),
                               ACC)
    else:
        t = tl.reshape(fp_pairs(acc, BG, K, LOG_K, TREE == 3, ACC), (BG,))
    # a block shorter than K has no lanes: its fold starts at its first term
    first = fp_load_acc(x_ptr, start, live & (rows == 0), IN_EXP, IN_MAN, FLOAT_IN, ACC)
    res = tl.where(main > 0, t, first)
    for j in tl.static_range(TAIL):
        pos = main + j
        on = live & (pos < count) & (pos > 0)
        res = tl.where(on, fp_acc_add(res, fp_load_acc(x_ptr, start + pos, on, IN_EXP, IN_MAN, FLOAT_IN, ACC), ACC),
                       res)
    if GROUP_H > 0:
        OUT_N: tl.constexpr = BG >> GROUP_H
        res = tl.reshape(fp_pairs(tl.reshape(res, (OUT_N, 1 << GROUP_H)), OUT_N, 1 << GROUP_H, GROUP_H, False, ACC),
                         (OUT_N,))
        o = tl.program_id(0) * OUT_N + tl.arange(0, OUT_N)
        fp_store_slot(dst_ptr, o, o < (L >> GROUP_H), res, DIRECT, INIT, OUT_EXP, OUT_MAN, ACC)
    else:
        sid = tl.load(ids_ptr + g, mask=live, other=0)
        fp_store_slot(dst_ptr, sid, live, res, DIRECT, INIT, OUT_EXP, OUT_MAN, ACC)


@triton.jit
def sum_pairs(src_ptr, dst_ptr, count_out, GH: tl.constexpr, BO: tl.constexpr,
              DIRECT: tl.constexpr, INIT: tl.constexpr, OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr,
              ACC: tl.constexpr = 0):
    """dst[i] = the perfect pairwise tree over src[i * 2^GH, (i + 1) * 2^GH), BO outputs a program."""
    G: tl.constexpr = 1 << GH
    o = tl.program_id(0) * BO + tl.arange(0, BO)
    live = o < count_out
    v = tl.load(src_ptr + o[:, None] * G + tl.arange(0, G)[None, :], mask=live[:, None], other=0.0)
    res = tl.reshape(fp_pairs(v, BO, G, GH, False, ACC), (BO,))
    fp_store_slot(dst_ptr, o, live, res, DIRECT, INIT, OUT_EXP, OUT_MAN, ACC)


@triton.jit
def fp_add_once(a, b):
    """a + b rounded once to fp32, for fp64 operands that are fp32 values or exact products of
    two inputs (at most 48 significant bits, Note [lone products]): the exact sum rounded to odd
    in fp64 (fp_sum_odd), then to nearest fp32."""
    return fp_sum_odd(a, b).to(tl.float32)


@triton.jit
def fp_combine_mixed(va, vb, acc, WIDE: tl.constexpr):
    """fp_combine_step with each step's own accumulator `acc` (triton_host Note [regions in
    plans]): every form computed, the step's taken."""
    plain = va + vb
    a64, b64 = va.to(tl.float64), vb.to(tl.float64)
    odd = fp_sum_odd(a64, b64)
    r = tl.where(acc == 2, fp_round_acc(odd, 5, 10).to(va.dtype), plain)
    r = tl.where(acc == 3, fp_round_acc(odd, 8, 7).to(va.dtype), r)
    if WIDE:
        r = tl.where((acc == 0) | (acc == 4), odd.to(tl.float32).to(va.dtype), r)
    return r


@triton.jit
def fp_combine_step(va, vb, WIDE: tl.constexpr, ACC: tl.constexpr = 0):
    """One node of two slot values: fp32 slots add in fp32; fp64 slots (WIDE) hold exact lone
    products beside fp32 values and add with one rounding (fp_add_once).  ACC 1: fp64 adds;
    2, 3: fp_acc_add on either slots (Note [accumulators])."""
    if ACC == 1:
        return va + vb
    elif ACC != 0:
        return fp_acc_add(va, vb, ACC).to(va.dtype)
    elif WIDE:
        return fp_add_once(va, vb).to(tl.float64)
    else:
        return va + vb


@triton.jit
def mm_lone(a_ptr, b_ptr, dst_ptr, segs_ptr, ids_ptr, M, N,
            s_am, s_ak, s_bk, s_bn, s_dslot, s_dm, s_dn,
            BM: tl.constexpr, BN: tl.constexpr, IN_EXP: tl.constexpr, IN_MAN: tl.constexpr,
            F64_IN: tl.constexpr = False):
    """Note [lone products]: the product of a segment of one leaf, exact, into its fp64 slot.

    A lone leaf is formed by the node that takes it (fpspec.arith.evaluate, note [regions]):
    with product = fma or exact its product joins a partial sum (or another leaf) in one
    rounding.  Rounded to fp32 first it would round twice, and a product of bf16 or tf32 values
    can overflow fp32 or fall below its subnormals.  A product of two fp32 (or narrower) values
    is exact in fp64; the combine step (WIDE) then rounds each node once."""
    sid = tl.load(ids_ptr + tl.program_id(2)).to(tl.int64)
    k = tl.load(segs_ptr + sid * 6)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mm, mn = rm < M, rn < N
    if F64_IN:   # (the fp64 product: what an fp32 region of an fp64 spec rounds; Note [accumulators])
        prod = fp_mm_operand(a_ptr, rm * s_am + k * s_ak, mm, IN_EXP, IN_MAN, True)[:, None] * \
            fp_mm_operand(b_ptr, k * s_bk + rn * s_bn, mn, IN_EXP, IN_MAN, True)[None, :]
    else:
        a = fp_as_f32(fp_widen(tl.load(a_ptr + rm * s_am + k * s_ak, mask=mm, other=0), IN_EXP, IN_MAN))
        b = fp_as_f32(fp_widen(tl.load(b_ptr + k * s_bk + rn * s_bn, mask=mn, other=0), IN_EXP, IN_MAN))
        prod = a.to(tl.float64)[:, None] * b.to(tl.float64)[None, :]
    offs = sid * s_dslot + rm[:, None] * s_dm + rn[None, :] * s_dn
    tl.store(dst_ptr + offs, prod, mask=mm[:, None] & mn[None, :])


@triton.jit
def combine(vals_ptr, steps_ptr, lo, cnt, R, BS: tl.constexpr, BO: tl.constexpr, WIDE: tl.constexpr = False,
            ACC: tl.constexpr = 0, accs_ptr=None, MIXED: tl.constexpr = False):
    """One level of additions: vals[dst] = vals[a] + vals[b], BS steps x BO outputs a program.
    MIXED: each step's accumulator is accs[its mode] (triton_host Note [regions in plans])."""
    s = tl.program_id(0) * BS + tl.arange(0, BS)
    live = s < cnt
    row = (lo + s).to(tl.int64) * 4
    dst = tl.load(steps_ptr + row, mask=live, other=0)
    a = tl.load(steps_ptr + row + 1, mask=live, other=0)
    b = tl.load(steps_ptr + row + 2, mask=live, other=0)
    o = tl.program_id(1) * BO + tl.arange(0, BO)
    on = live[:, None] & (o < R)[None, :]
    va = tl.load(vals_ptr + a[:, None] * R + o[None, :], mask=on)
    vb = tl.load(vals_ptr + b[:, None] * R + o[None, :], mask=on)
    if MIXED:
        acc = tl.load(accs_ptr + tl.load(steps_ptr + row + 3, mask=live, other=0), mask=live, other=0)
        res = fp_combine_mixed(va, vb, acc[:, None], WIDE)
    else:
        res = fp_combine_step(va, vb, WIDE, ACC)
    tl.store(vals_ptr + dst[:, None] * R + o[None, :], res, mask=on)


@triton.jit
def combine_fused(vals_ptr, steps_ptr, lone_ptr, a_ptr, b_ptr, s_am, s_ak, s_bk, s_bn, N, lo, cnt, R,
                  BS: tl.constexpr, BO: tl.constexpr, accs_ptr, MIXED: tl.constexpr = False):
    """combine for an fp64 accumulator (Note [fp64 lone products]): a step that takes a term of
    its own (lone[step] = (term k, 0 if it is operand a else 1, odd); k = -1: none) computes
    fma(A[m, k], B[k, n], other operand), one rounding, for output o = m * N + n; a step of two
    exact products (odd = 1) their sum rounded to odd, as the reference rounds it into fp64
    (fpspec.arith.evaluate note [exact products])."""
    s = tl.program_id(0) * BS + tl.arange(0, BS)
    live = s < cnt
    row = (lo + s).to(tl.int64) * 4
    dst = tl.load(steps_ptr + row, mask=live, other=0)
    a = tl.load(steps_ptr + row + 1, mask=live, other=0)
    b = tl.load(steps_ptr + row + 2, mask=live, other=0)
    k = tl.load(lone_ptr + (lo + s).to(tl.int64) * 3, mask=live, other=-1)
    side = tl.load(lone_ptr + (lo + s).to(tl.int64) * 3 + 1, mask=live, other=0)
    odd = tl.load(lone_ptr + (lo + s).to(tl.int64) * 3 + 2, mask=live, other=0)
    o = tl.program_id(1) * BO + tl.arange(0, BO)
    on = live[:, None] & (o < R)[None, :]
    va = tl.load(vals_ptr + a[:, None] * R + o[None, :], mask=on)
    vb = tl.load(vals_ptr + b[:, None] * R + o[None, :], mask=on)
    if MIXED:
        acc = tl.load(accs_ptr + tl.load(steps_ptr + row + 3, mask=live, other=0), mask=live, other=0)
        res = fp_combine_mixed(va, vb, acc[:, None], True)
    else:
        res = va + vb
    fused = on & (k >= 0)[:, None]
    kk = tl.maximum(k, 0)[:, None]
    x = tl.load(a_ptr + (o // N)[None, :] * s_am + kk * s_ak, mask=fused, other=0.0)
    y = tl.load(b_ptr + kk * s_bk + (o % N)[None, :] * s_bn, mask=fused, other=0.0)
    res = tl.where(fused, tl.fma(x, y, tl.where((side == 0)[:, None], vb, va)), res)
    res = tl.where((odd == 1)[:, None], fp_sum_odd(va, vb), res)
    tl.store(vals_ptr + dst[:, None] * R + o[None, :], res, mask=on)


# Note [fp64 lone products]: a term of its own that an addition of fp64 products takes with
# product = fma is fused into it (fpspec.arith.evaluate note [which child is fused]): for fp64
# inputs no slot holds the exact product, so the combine step reads the term's operands and
# makes the FMA itself (combine_fused); the term's own slot (its rounded product) goes unread.
# With product = exact two terms of their own meeting in an fp64 addition are summed to odd
# (the reference's one rounding of their exact sum, held in fp64); their slots hold the exact
# products (inputs of <= 26 bits).


@triton.jit
def combine_levels(vals_ptr, steps_ptr, levels_ptr, L, R, BS: tl.constexpr, BO: tl.constexpr,
                   WIDE: tl.constexpr = False, ACC: tl.constexpr = 0, accs_ptr=None, MIXED: tl.constexpr = False):
    """Several small levels in one launch of one program, a barrier between levels.

    The top of a tree has many levels of few additions each: one launch per
    level would cost more in launches than in work."""
    for lvl in range(L):
        lo = tl.load(levels_ptr + 2 * lvl)
        cnt = tl.load(levels_ptr + 2 * lvl + 1)
        for s0 in range(0, cnt, BS):
            s = s0 + tl.arange(0, BS)
            live = s < cnt
            row = (lo + s).to(tl.int64) * 4
            dst = tl.load(steps_ptr + row, mask=live, other=0)
            a = tl.load(steps_ptr + row + 1, mask=live, other=0)
            b = tl.load(steps_ptr + row + 2, mask=live, other=0)
            for o0 in range(0, R, BO):
                o = o0 + tl.arange(0, BO)
                on = live[:, None] & (o < R)[None, :]
                va = tl.load(vals_ptr + a[:, None] * R + o[None, :], mask=on)
                vb = tl.load(vals_ptr + b[:, None] * R + o[None, :], mask=on)
                if MIXED:
                    acc = tl.load(accs_ptr + tl.load(steps_ptr + row + 3, mask=live, other=0), mask=live, other=0)
                    res = fp_combine_mixed(va, vb, acc[:, None], WIDE)
                else:
                    res = fp_combine_step(va, vb, WIDE, ACC)
                tl.store(vals_ptr + dst[:, None] * R + o[None, :], res, mask=on)
        tl.debug_barrier()   # this level's results are the next level's operands


@triton.jit
def finish(vals_ptr, out_ptr, root, R, BO: tl.constexpr, INIT: tl.constexpr,
           OUT_EXP: tl.constexpr, OUT_MAN: tl.constexpr, ACC: tl.constexpr = 0):
    o = tl.program_id(0) * BO + tl.arange(0, BO)
    on = o < R
    acc = tl.load(vals_ptr + root * R + o, mask=on)
    if ACC != 1:
        acc = acc.to(tl.float32)   # (fp64 slots hold values of the accumulator here)
    fp_store_slot(out_ptr, o, on, acc, True, INIT, OUT_EXP, OUT_MAN, ACC)
