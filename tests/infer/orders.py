"""Known parametric orders as plain tree builders, written independently of
the .fps language: the ground truth the inference must recover."""
from __future__ import annotations

from fpspec.tree import Node, Tree, building, pairwise, sequential


def numpy_pairwise(n: int, lo: int = 0) -> Tree:
    """numpy's pairwise_sum (loops_utils.h.src), blocks of 8 lanes up to 128."""
    with building():
        return _np(lo, n)


def _np(lo: int, n: int) -> Tree:
    if n < 8:
        return sequential(range(lo, lo + n))
    if n <= 128:
        lanes = [sequential(range(lo + j, lo + n - n % 8, 8)) for j in range(8)]
        r = Node((Node((Node((lanes[0], lanes[1])), Node((lanes[2], lanes[3])))),
                  Node((Node((lanes[4], lanes[5])), Node((lanes[6], lanes[7]))))))
        for i in range(lo + n - n % 8, lo + n):
            r = Node((r, i))
        return r
    n2 = n // 2
    n2 -= n2 % 8
    return Node((_np(lo, n2), _np(lo + n2, n - n2)))


def lanes_with_tail(n: int, k: int = 4) -> Tree:
    """k strided lanes over the first n - n % k, each in order, lanes folded
    left to right, then the leftovers one by one (torch-like)."""
    p = n - n % k
    if p == 0:
        return sequential(range(n))
    acc = None
    with building():
        for j in range(k):
            lane = sequential(range(j, p, k))
            acc = lane if acc is None else Node((acc, lane))
        for i in range(p, n):
            acc = Node((acc, i))
    return acc


def blocked(n: int, b: int = 16) -> Tree:
    """Contiguous blocks of b, each summed pairwise, block sums in order."""
    with building():
        parts = [pairwise(range(lo, min(lo + b, n))) for lo in range(0, n, b)]
        return sequential_of(parts)


def sequential_of(parts) -> Tree:
    acc = parts[0]
    for p in parts[1:]:
        acc = Node((acc, p))
    return acc


def fused_chain(n: int, w: int = 16) -> Tree:
    """Tensor-core style: w-term fused nodes, each taking the previous result."""
    acc = Node(tuple(range(min(w, n))), fused=True) if n > 1 else 0
    for lo in range(w, n, w):
        acc = Node((acc, *range(lo, min(lo + w, n))), fused=True)
    return acc


def switching(n: int) -> Tree:
    """Sequential up to 100, pairwise above (an order that changes with n)."""
    return sequential(range(n)) if n <= 100 else pairwise(range(n))


def openblas_sgemm_k(n: int, q: int = 320, unroll: int = 8) -> Tree:
    """OpenBLAS sgemm (Haswell kernel) along K for one output element, as its
    C code reads: the level-3 driver takes K in chunks (q while 2q or more are
    left, half of what is left rounded up to `unroll` while more than q are,
    else all of it) and adds each chunk's result into C; the kernel keeps 2
    accumulators over the first s - s % unroll terms of a chunk of s (even
    terms to accumulator 0), folds the s % unroll tail into accumulator 0,
    then adds accumulator 1."""
    with building():
        acc, start, left = None, 0, n
        while left:
            s = q if left >= 2 * q else ((left // 2 + unroll - 1) // unroll) * unroll if left > q else left
            c = _sgemm_chunk(start, s, unroll)
            acc = c if acc is None else Node((acc, c))
            start, left = start + s, left - s
        return acc


def _sgemm_chunk(lo: int, s: int, unroll: int) -> Tree:
    p = s - s % unroll
    if p == 0:
        return sequential(range(lo, lo + s))
    a0, a1 = sequential(range(lo, lo + p, 2)), sequential(range(lo + 1, lo + p, 2))
    for i in range(lo + p, lo + s):
        a0 = Node((a0, i))
    return Node((a0, a1))


def openblas_sgemv_t(n: int, nb: int = 4096) -> Tree:
    """OpenBLAS sgemv_t (Haswell) along K for one output: K in blocks of nb,
    each block's result added in turn; in a block of s, the s % 4 scalar tail
    is summed apart and added last; the rest, p = s - s % 4, goes through 8
    vector lanes (lane l folds l, l + 8, ...) except that when p % 8 == 4 the
    first 4 terms are loaded first into lanes 0..3 (zeros above) and the
    8-wide steps start at 4; then lane j + 4 is added to lane j, and the 4
    sums pairwise."""
    with building():
        acc = None
        for lo in range(0, n, nb):
            b = _sgemv_block(lo, min(nb, n - lo))
            acc = b if acc is None else Node((acc, b))
        return acc


def _sgemv_block(lo: int, s: int) -> Tree:
    p = s - s % 4
    if p == 0:
        return sequential(range(lo, lo + s))
    head = 4 if p % 8 == 4 else 0
    lanes = [[lo + l] if head and l < 4 else [] for l in range(8)]
    for b in range(head, p, 8):
        for l in range(8):
            lanes[l].append(lo + b + l)
    acc = [sequential(x) if x else None for x in lanes]
    four = [acc[j] if acc[j + 4] is None else Node((acc[j], acc[j + 4])) for j in range(4)]
    body = Node((Node((four[0], four[1])), Node((four[2], four[3]))))
    return body if s == p else Node((body, sequential(range(lo + p, lo + s))))


def sgemv_like(n: int) -> Tree:
    """OpenBLAS sgemv_t's shape with a small outer block (note [outer blocks]):
    the n % 4 tail apart, the body in blocks of 512, each padded to 8 lanes."""
    from fpspec.spec import expand, parse

    return expand(parse(f"n in 1..\norder {SGEMV_LIKE}\n"), n)


SGEMV_LIKE = ("if n <= 3: seq else: tail(4, blocks(512, pad(8, lanes(8, seq, lanes(4, seq, pairwise))), seq), "
              "split(1, seq, seq))")


def einsum_like(n: int, k: int = 4, unroll: int = 4) -> Tree:
    """np.einsum("i->", x) on float32 (x86-64, NumPy 2.4): k vector lanes; each
    turn of the main loop loads `unroll` vectors, adds them pairwise and then
    into the lane accumulators, while at least k * unroll terms are left;
    the leftover vectors (the last one partial) go into the lanes one by one;
    the k lanes are summed pairwise.  A lane's inner order depends on the
    whole n, not on the lane's length, so no .fps order says it for every n."""
    body = n - n % (k * unroll)
    with building():
        lanes = []      # a lane with no term holds zeros: a phantom the tree drops
        for j in range(k):
            turns = [pairwise(range(b + j, b + k * unroll, k)) for b in range(0, body, k * unroll)]
            acc = sequential_of(turns) if turns else None
            for i in range(body + j, n, k):
                acc = i if acc is None else Node((acc, i))
            lanes.append(acc)
        return pairwise_of(lanes)


def pairwise_of(parts) -> Tree:
    """Pairwise over the parts, None parts (phantoms) dropped with their nodes."""
    if len(parts) == 1:
        return parts[0]
    h = len(parts) // 2
    a, b = pairwise_of(parts[:h]), pairwise_of(parts[h:])
    return a if b is None else b if a is None else Node((a, b))
