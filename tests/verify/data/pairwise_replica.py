"""A hand-written replica of numpy_sum.fps (NumPy's pairwise sum), plain Python
on float32 scalars: independent of fpspec's compiler.  PLANT names a
deliberate defect; the verify tests write copies with it set."""
import numpy as np

PLANT = ""   # the tests write copies with a planted defect named here
_rng = np.random.default_rng(0)
f32 = np.float32


def _seq(a):
    res = a[0]
    for v in a[1:]:
        res = f32(res + v)
    return res


def _pairwise(a):
    n = len(a)
    if n < 8:
        if PLANT == "tree":            # one node: (a0 (a1 a2)) instead of ((a0 a1) a2)
            if n >= 3:
                return _seq([a[0], f32(a[1] + a[2])] + list(a[3:]))
        return _seq(list(a))
    if n <= 128:
        r = list(a[:8])
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] = f32(r[j] + a[i + j])
            i += 8
        res = f32(f32(f32(r[0] + r[1]) + f32(r[2] + r[3])) + f32(f32(r[4] + r[5]) + f32(r[6] + r[7])))
        for v in a[i:]:
            res = f32(res + v)
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return f32(_pairwise(a[:n2]) + _pairwise(a[n2:]))


def sum(x):
    x = np.asarray(x, dtype=np.float32)
    if PLANT == "raise":
        raise RuntimeError("replica exploded")
    if PLANT == "shape":
        return np.zeros(2, np.float32)
    if PLANT == "flaky" and _rng.random() < 0.5:
        return _seq(list(x[::-1]))
    res = _pairwise(list(x))
    if PLANT == "init":                # no +0.0: an all -0.0 input stays -0.0
        return res
    return f32(res + f32(0.0))
