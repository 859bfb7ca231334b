"""A spec whose fused nodes read B in another format (fused input_b: torch._scaled_mm e5m2 x e4m3):
its replica's tree is revealed with masks that B's format holds."""
from pathlib import Path

from fpspec.verify import load_spec, verify_spec

SPEC = Path(__file__).parents[2] / "examples" / "gpu" / "torch_scaled_mm_e5m2xe4m3_16x16x64_h200.fps"


def test_the_e5m2_by_e4m3_replica_verifies():
    report = verify_spec(load_spec(str(SPEC)), spec_name=SPEC.name, backend="numpy", m=16, ncols=16, samples=20)
    text = report.text()
    assert report.equivalent, text
    assert "trees:      1 compared (replica (numpy) 1), all equal" in text, text
