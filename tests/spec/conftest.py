from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cpu"


@pytest.fixture(scope="session")
def numpy_sum_spec():
    """NumPy's float32 sum, as committed in examples/."""
    from fpspec.spec import load

    return load(EXAMPLES / "numpy_sum_float32.fps")
