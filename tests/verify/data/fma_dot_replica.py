"""dot(x, y) in sequence; PLANT = "fma" fuses each product into its add."""
import numpy as np

from fpspec.formats import fma, get_format

FP32 = get_format("fp32")
PLANT = ""   # the tests write copies with a planted defect named here


def dot(x, y):
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    with np.errstate(all="ignore"):
        acc = FP32.round(x[0] * y[0])
        for k in range(1, len(x)):
            if PLANT == "fma":
                acc = fma(FP32, x[k], y[k], acc)
            else:
                acc = FP32.round(acc + FP32.round(x[k] * y[k]))
    return np.float32(acc)
