"""ReproBLAS (github.com/willow-ahrens/ReproBLAS), found through REPROBLAS_PATH.

Its code lives in a checkout outside this project and is never committed here.  REPROBLAS_PATH is
the checkout; the first use builds build/libreproblas.so there with the system C compiler (the
.ccog files hold their generated C already, so no code generator is needed):

    git clone https://github.com/willow-ahrens/ReproBLAS $HOME/src/ReproBLAS
    REPROBLAS_PATH=$HOME/src/ReproBLAS python benchmarks/validate_reproblas.py
"""
import ctypes
import os
import subprocess
from pathlib import Path

import numpy as np

FLAGS = ["-O2", "-fPIC", "-std=gnu99", "-march=x86-64"]


def build(root: Path) -> Path:
    """Compile ReproBLAS's binned, binnedBLAS and reproBLAS sources into one shared library."""
    out = root / "build" / "libreproblas.so"
    if out.exists():
        return out
    objs = root / "build" / "obj"
    objs.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    sources = [p for d in ("binned", "binnedBLAS", "reproBLAS") for p in sorted((root / "src" / d).iterdir())
               if p.suffix in (".c", ".ccog")]
    for src in sources:
        c = objs / f"{src.parent.name}_{src.stem}.c"
        c.write_text(src.read_text())
        subprocess.run([cc, *FLAGS, f"-I{root / 'include'}", f"-I{src.parent}", f"-I{root / 'src'}", f"-I{root}",
                        "-c", str(c), "-o", str(c.with_suffix(".o"))], check=True)
    subprocess.run([cc, "-shared", "-o", str(out), *map(str, sorted(objs.glob("*.o"))), "-lm"], check=True)
    return out


class ReproBLAS:
    """ctypes bindings of the functions compared: rdsum, rssum, rddot, rsdot, rdgemm, rsgemm."""

    def __init__(self, lib_path: Path):
        self.lib = lib = ctypes.CDLL(str(lib_path))
        d, f, i, p, ch = ctypes.c_double, ctypes.c_float, ctypes.c_int, ctypes.c_void_p, ctypes.c_char
        for name, ret, args in (("reproBLAS_rdsum", d, [i, i, p, i]), ("reproBLAS_rssum", f, [i, i, p, i]),
                                ("reproBLAS_rddot", d, [i, i, p, i, p, i]), ("reproBLAS_rsdot", f, [i, i, p, i, p, i]),
                                ("reproBLAS_rdgemm", None, [i, ch, ch, ch, i, i, i, d, p, i, p, i, d, p, i]),
                                ("reproBLAS_rsgemm", None, [i, ch, ch, ch, i, i, i, f, p, i, p, i, f, p, i])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = ret, args

    def sum(self, x, fold=3):
        x = np.ascontiguousarray(x)
        fn = self.lib.reproBLAS_rdsum if x.dtype == np.float64 else self.lib.reproBLAS_rssum
        return x.dtype.type(fn(fold, x.size, x.ctypes.data, 1))

    def dot(self, x, y, fold=3):
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
        fn = self.lib.reproBLAS_rddot if x.dtype == np.float64 else self.lib.reproBLAS_rsdot
        return x.dtype.type(fn(fold, x.size, x.ctypes.data, 1, y.ctypes.data, 1))

    def gemm(self, A, B, fold=3):
        A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
        M, K = A.shape
        N = B.shape[1]
        C = np.zeros((M, N), A.dtype)
        fn = self.lib.reproBLAS_rdgemm if A.dtype == np.float64 else self.lib.reproBLAS_rsgemm
        fn(fold, b"r", b"n", b"n", M, N, K, 1.0, A.ctypes.data, K, B.ctypes.data, N, 0.0, C.ctypes.data, N)
        return C


def load_reproblas():
    """A ReproBLAS binding, or None when REPROBLAS_PATH is unset or does not build."""
    path = os.environ.get("REPROBLAS_PATH")
    if not path or not (Path(path) / "src" / "binned").is_dir():
        lib = Path(path or "") / "libreproblas.so"
        return ReproBLAS(lib) if path and lib.exists() else None
    try:
        return ReproBLAS(build(Path(path)))
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"ReproBLAS at {path} does not build ({e}); fpspec columns only")
        return None
