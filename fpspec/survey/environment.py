"""The fingerprint of the environment a job runs in.

Everything that can change an op's order or arithmetic: Python and library
versions (read from package metadata, so nothing heavy is imported to learn
them), the BLAS NumPy was built with and the core type it runs on, the CPU
model and its vector extensions, the GPU (name, SM count, driver, CUDA), thread
counts and the environment variables libraries read.  Two machines with equal
fingerprints are one environment (the host name is kept, not hashed).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
from importlib import metadata

LIBRARIES = ("fpspec", "numpy", "torch", "numba", "triton", "jax", "jaxlib", "scipy")
# variables that select kernels, thread counts or math modes
ENV_PREFIXES = ("OPENBLAS_", "OMP_", "MKL_", "BLIS_", "GOTO_", "VECLIB_", "CUBLAS_", "CUDA_", "NVIDIA_TF32",
                "TORCH_", "NCCL_", "XLA_", "JAX_", "NUMBA_", "TRITON_")
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16",
             "amx_bf16", "amx_tile", "asimd", "sve", "sve2")
# where it ran, not what it is: kept, not hashed
VOLATILE = ("host", "node")


def fingerprint(with_gpu: bool = False) -> dict:
    info = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.machine()}",
        "cpu": _cpu_model(),
        "isa": _isa_flags(),
        "cores": os.cpu_count(),
        "versions": {lib: v for lib in LIBRARIES if (v := _version(lib))},
        "blas": _blas(),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
    }
    if with_gpu:
        info["gpu"] = _gpu()
    if os.environ.get("FPSPEC_SURVEY_NODE"):
        info["node"] = os.environ["FPSPEC_SURVEY_NODE"]
    return info


def fingerprint_hash(info: dict) -> str:
    stable = {k: v for k, v in info.items() if k not in VOLATILE}
    return hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:16]


def label(info: dict) -> str:
    """A short column title for the report."""
    parts = [info.get("cpu", "?").replace("(R)", "").replace("(TM)", "")[:32]]
    gpu = info.get("gpu") or {}
    if gpu.get("name"):
        parts.append(gpu["name"])
    versions = info.get("versions", {})
    parts += [f"{lib} {versions[lib]}" for lib in ("numpy", "torch") if lib in versions]
    blas = info.get("blas", {})
    if blas.get("name"):
        parts.append(f"{blas['name']} {blas.get('version', '')}".strip())
    shown = set(info.get("variant_env", ()))
    threads = {k: v for k, v in info.get("env", {}).items() if "THREADS" in k or k in shown}
    parts += [f"{k}={v}" for k, v in threads.items()]
    return ", ".join(parts)


def _version(lib: str) -> str | None:
    try:
        return metadata.version(lib)
    except metadata.PackageNotFoundError:
        return None


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _cpu_model() -> str:
    m = re.search(r"^(?:model name|Processor|cpu model)\s*:\s*(.+)$", _cpuinfo(), re.M)
    return m.group(1).strip() if m else (platform.processor() or platform.machine())


def _isa_flags() -> list[str]:
    m = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", _cpuinfo(), re.M)
    have = set(m.group(1).split()) if m else set()
    return [f for f in ISA_FLAGS if f in have]


def _blas() -> dict:
    """NumPy's BLAS as it was built (name, version) and the core type it picks (OPENBLAS_CORETYPE)."""
    out: dict = {}
    try:
        import numpy

        config = getattr(numpy, "show_config", None) and numpy.__config__.CONFIG
        blas = (config or {}).get("Build Dependencies", {}).get("blas", {})
        out = {"name": blas.get("name"), "version": blas.get("version")}
    except Exception:   # an older NumPy without CONFIG: the name stays unknown
        pass
    if os.environ.get("OPENBLAS_CORETYPE"):
        out["coretype"] = os.environ["OPENBLAS_CORETYPE"]
    return {k: v for k, v in out.items() if v}


def _gpu() -> dict:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "sm_count": p.multi_processor_count, "capability": f"{p.major}.{p.minor}",
            "cuda": torch.version.cuda, "driver": _driver(), "count": torch.cuda.device_count(),
            "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32)}


def _driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            m = re.search(r"Kernel Module\s+(\S+)", f.read())
            return m.group(1) if m else None
    except OSError:
        return None
