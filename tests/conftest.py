import os

import pytest

from pathlib import Path

# Triton kernels run on the CPU interpreter unless a GPU run asks otherwise.
os.environ.setdefault("TRITON_INTERPRET", "1")


def _find_tensor_core_vectors() -> str:
    """The measured Tensor Core vectors live in shared/ beside the checkout (CI
    lays a copy there); FPSPEC_TC_VECTORS overrides."""
    here = Path(__file__).resolve().parents[1]
    for candidate in (here.parent / "shared", here / "shared", Path("/work/shared")):
        path = candidate / "data" / "tensor-core-vectors"
        if path.is_dir():
            return str(path)
    return str(here.parent / "shared" / "data" / "tensor-core-vectors")


os.environ.setdefault("FPSPEC_TC_VECTORS", _find_tensor_core_vectors())


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
