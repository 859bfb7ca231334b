"""Named fused-node parameter sets: GPU-INPUT[-to-OUTPUT], one per matrix unit.

Every fused matrix unit of fpspec.arith.units gives its node here under the
unit's name: "h100-fp16" (fp32 output), "h100-fp16-to-fp16" (fp16 output),
"a100-tf32", "ada-fp8e4m3", "b200-fp8e4m3xfp8e5m2", "mi300x-fp16", ...
(note [two conventions] in units.py says which conventions each follows).
Checked against measured data: the H100 and A100 vectors (data/tensor-core-
vectors: fp16, bf16, tf32, fp8 with fp32 output) and an H200's wgmma outputs
(fp16, bf16, tf32, fp8; examples/gpu/); every set against MMA-Sim
(benchmarks/validate_mmasim.py).  Units whose instruction is not one fused node
(fp64 and AMD fp32 FMA chains, CDNA1/2 pairwise sums, Blackwell's mxf4nvf4)
have no FusedParams and live in fpspec.arith.units.UNITS only.
"""
from __future__ import annotations

from fpspec.arith.fused import FusedParams
from fpspec.arith.units import UNITS


def _build() -> dict[str, FusedParams]:
    # (an instruction of several steps is no one node: fpspec.arith.units note [fp8 mma with fp16 output])
    out = {name: unit.node for name, unit in UNITS.items()
           if unit.kind == "fused" and unit.block == 0 and not (unit.pairs or unit.c_last)}
    out["h100-fp8"] = out["h100-fp8e4m3"]      # the short name of the common case
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
        raise ValueError(f"unknown fused parameter set {key!r}: expected GPU-INPUT[-to-fp16] "
                         f"({len(PARAMS)} names in fpspec.arith.params.PARAMS)") from None
    if out_format is not None and p.output != out_format:
        raise ValueError(f"parameter set {name!r} writes {p.output}, not {out_format}")
    return p


def names_of(params: FusedParams) -> list[str]:
    """Every published name whose parameters equal `params` (a node of fewer products counts:
    the same unit's smaller instruction), nodes of exactly this width first."""
    from dataclasses import replace

    exact = [name for name, p in PARAMS.items() if p == params and name != "h100-fp8"]
    wider = [name for name, p in PARAMS.items()
             if p.w > params.w and replace(p, w=params.w) == params and name != "h100-fp8"]
    return exact + wider


def name_of(params: FusedParams) -> str | None:
    """The first published name whose parameters equal `params`, if any."""
    names = names_of(params)
    return names[0] if names else None


def describe(params: FusedParams) -> str | None:
    """'h100-fp16 (also h200-fp16, gh200-fp16)': the names of a probed node, for reports."""
    names = names_of(params)
    if not names:
        return None
    return names[0] + (f" (also {', '.join(names[1:])})" if len(names) > 1 else "")
