"""ReproBLAS (github.com/willow-ahrens/ReproBLAS), found through REPROBLAS_PATH.

Its code lives in a checkout outside this project and is never committed here.  REPROBLAS_PATH is
the checkout (default: $HOME/src/ReproBLAS), or a folder holding only a libreproblas.so built from
it (for a machine without the source or a compiler); the first use of a checkout builds
build/libreproblas.so there with the system C compiler, no network needed (the .ccog files hold
their generated C already, so no code generator is needed):

    git clone https://github.com/willow-ahrens/ReproBLAS $HOME/src/ReproBLAS
    REPROBLAS_PATH=$HOME/src/ReproBLAS python benchmarks/validate_reproblas.py
"""
import ctypes
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
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

    def compile_one(src: Path) -> Path:
        c = objs / f"{src.parent.name}_{src.stem}.c"
        c.write_text(src.read_text())
        subprocess.run([cc, *FLAGS, f"-I{root / 'include'}", f"-I{src.parent}", f"-I{root / 'src'}", f"-I{root}",
                        "-c", str(c), "-o", str(c.with_suffix(".o"))], check=True)
        return c.with_suffix(".o")

    # one compiler a core: the sources are independent
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        built = list(pool.map(compile_one, sources))
    tmp = out.with_suffix(".so.tmp")
    subprocess.run([cc, "-shared", "-o", str(tmp), *map(str, built), "-lm"], check=True)
    tmp.replace(out)    # a build cut short leaves no library behind
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


def find_library(root: Path):
    """The libreproblas.so of `root` (a checkout, its build folder or a folder with the library),
    built from the checkout's source when there is none; None when neither is there."""
    for lib in (root / "build" / "libreproblas.so", root / "libreproblas.so"):
        if lib.exists():
            return lib
    if (root / "src" / "binned").is_dir():
        return build(root)
    return None


def where() -> Path:
    return Path(os.environ.get("REPROBLAS_PATH") or Path.home() / "src" / "ReproBLAS")


def load_reproblas():
    """A ReproBLAS binding, or None (with a line saying why) when it is not found or does not build."""
    root = where()
    try:
        lib = find_library(root)
        if lib is None:
            print(f"ReproBLAS: no checkout or libreproblas.so at {root} (REPROBLAS_PATH); fpspec columns only")
            return None
        return ReproBLAS(lib)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"ReproBLAS at {root} does not build ({e}); fpspec columns only")
        return None
