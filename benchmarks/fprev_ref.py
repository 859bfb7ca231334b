"""The published FPRev (peichenxie/FPRev), found through FPREV_PATH.

Its code lives in a checkout outside this project and is never committed
here; the benchmarks import it from there.
"""
import os
import sys


def load_fprev():
    """(fprev module, accumimpls.numpy module), or None when FPREV_PATH is unset or broken."""
    path = os.environ.get("FPREV_PATH")
    if not path or not os.path.exists(os.path.join(path, "fprev.py")):
        return None
    sys.path[:0] = [path, os.path.join(path, "experiments")]
    try:
        import fprev
        from accumimpls import numpy as fnp
    except ImportError as e:
        print(f"FPRev at {path} does not import ({e}); fpspec columns only")
        return None
    return fprev, fnp
