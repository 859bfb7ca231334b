"""Named fused-node parameter sets, as published (data/tensor-core-vectors/README.md).

Names are GPU-INPUT for fp32 output ("h100-fp16") and GPU-INPUT-to-fp16 for
fp16 output ("h100-fp16-to-fp16").  fp32 output: result rounded toward zero, exponent
floor -133 on Hopper/Blackwell, -132 on Ampere/Ada; fp16 output: nearest even,
floor -21 / -20 (V100: -19, from the published V100 model).  Only the H100 and
A100 sets are checked against measured data here; the others are the
published parameters, unverified by this project.
"""
from __future__ import annotations

from fpspec.arith.fused import FusedParams

# gpu: (fp32-output floor, fp16-output floor, {input: (w, extra_bits)})
_PUBLISHED = {
    "v100": (None, -19, {"fp16": (4, 0)}),
    "a100": (-132, -20, {"fp16": (8, 1), "bf16": (8, 1), "tf32": (4, 1)}),
    "ada": (-132, -20, {"fp16": (8, 1), "bf16": (8, 1), "tf32": (4, 1)}),
    "l40s": (-132, -20, {"fp16": (8, 1), "bf16": (8, 1), "tf32": (4, 1)}),
    "h100": (-133, -21, {"fp16": (16, 2), "bf16": (16, 2), "tf32": (8, 2)}),
    "h200": (-133, -21, {"fp16": (16, 2), "bf16": (16, 2), "tf32": (8, 2)}),
    "b200": (-133, -21, {"fp16": (16, 2), "bf16": (16, 2), "tf32": (8, 2)}),
}


def _build() -> dict[str, FusedParams]:
    out: dict[str, FusedParams] = {}
    for gpu, (floor32, floor16, inputs) in _PUBLISHED.items():
        for fmt, (w, extra) in inputs.items():
            out[f"{gpu}-{fmt}"] = FusedParams(w, extra, "truncate", "rz", True, floor32,
                                              input=fmt, output="fp32")
            if fmt == "fp16":   # fp16 output exists for fp16 inputs
                out[f"{gpu}-{fmt}-to-fp16"] = FusedParams(w, extra, "truncate", "rne", True, floor16,
                                                       input=fmt, output="fp16")
    # H100 fp8: 32 products per node, 13 fraction bits kept, result truncated to 13 bits
    for fmt in ("fp8e4m3", "fp8e5m2"):
        out[f"h100-{fmt}"] = FusedParams(32, -10, "truncate", "rz", True, -133, input=fmt, output="fp32")
    out["h100-fp8"] = out["h100-fp8e4m3"]
    return out


PARAMS: dict[str, FusedParams] = _build()


def get_params(name: str, out_format: str | None = None) -> FusedParams:
    """The named set; with out_format="fp16", its fp16-output variant (NAME-to-fp16)."""
    key = str(name).lower()
    if out_format not in (None, "fp32") and not key.endswith(f"-to-{out_format}"):
        key = f"{key}-to-{out_format}"
    try:
        p = PARAMS[key]
    except KeyError:
        raise ValueError(f"unknown fused parameter set {key!r}; known: {', '.join(PARAMS)}") from None
    if out_format is not None and p.output != out_format:
        raise ValueError(f"parameter set {name!r} writes {p.output}, not {out_format}")
    return p


def name_of(params: FusedParams) -> str | None:
    """The first published name whose parameters equal `params`, if any."""
    for name, p in PARAMS.items():
        if p == params:
            return name
    return None
