"""Arguments a new user passes by mistake get one clear error, the same on every backend:
a NumPy scalar is named as a scalar; a read-only array goes into a Triton replica without
torch's warning; --dtype float128 says no format models it."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.compile import compile_spec, load_replica
from fpspec.spec import parse

SUM = parse("op sum\nn in 1..64\narithmetic {\n    input = fp32\n    product = none\n    accumulator = fp32\n"
            "    init = +0.0\n    output = fp32\n}\norder pairwise\n")


@pytest.mark.parametrize("backend", ["numpy", "triton"])
def test_scalars_and_read_only_arrays(backend):
    if backend == "triton":
        pytest.importorskip("triton")
    replica = load_replica(compile_spec(SUM, backend), f"sum_{backend}.fps")
    with pytest.raises(TypeError, match=r"^x is a NumPy float32 scalar, but this replica of spec takes "
                                        r"arrays of dtype float32: pass np\.atleast_1d\(x\) for one element$"):
        replica.sum(np.float32(3.0))
    with pytest.raises(ValueError, match=r"^x must have 1 dimension\(s\), got shape \(\)$"):
        replica.sum(np.ones((), np.float32))    # a 0-d array stays 0-d on its way to the kernels
    x = np.arange(1.0, 11.0, dtype=np.float32)
    x.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # torch warned on a NumPy array it cannot write
        assert float(replica.sum(x)) == 55.0


def test_dtype_float128_is_named_as_unmodelled(capsys):
    assert main(["reveal", "numpy.sum", "-n", "4", "--dtype", "float128"]) == 2
    assert capsys.readouterr().err == ("fpspec: error: --dtype float128: numpy's float128 (long double) is not a "
                                       "format fpspec models; expected one of float64, float32, float16, bfloat16, "
                                       "tf32, fp8e4m3, fp8e5m2\n")
