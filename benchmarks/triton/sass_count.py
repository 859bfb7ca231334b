"""Offline SASS of the emulated chain kernel for sm_90 (no GPU needed): registers, spills and
instructions a product in each loop (the numbers quoted in triton_kernels' notes).

    python benchmarks/triton/sass_count.py '{"ARITH": 1, "GPU_NODE": true, "SPECIALS": 3}'

The JSON sets mm_chain_emulated's constexprs (defaults: fp16 in and out, H100 node, 16 x 32
tile, 4 warps; "num_warps" and "maxnreg" are compile options).  Uses the installed triton's
ptxas and cuobjdump; the device has triton 3.6 (PYTHONPATH=<a triton 3.6 install> gives its
code generation: 3.9's differs).  A loop's "per product" divides its instructions (minus
forward branches over more than 64 of them: the rare inf/nan pass) by the products a thread
computes a node, 16 * BM * BN / (32 * num_warps).
"""
import collections
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from fpspec.compile.triton_kernels import mm_chain_emulated  # noqa: E402

PTRS = {"a_ptr": "*i16", "b_ptr": "*i16", "dst_ptr": "*i16", "segs_ptr": "*i64", "ids_ptr": "*i32",
        "bad_a_ptr": "*i32", "bad_b_ptr": "*i32"}


def compile_chain(options):
    consts = dict(BM=16, BN=32, WIDTH=16, W=16, IN_EXP=5, IN_MAN=10, FRAC=25, FLOOR=-1000, TO_ZERO=True,
                  DIRECT=True, INIT=False, OUT_EXP=5, OUT_MAN=10)
    opts = {k: options.pop(k) for k in ("num_warps", "maxnreg") if k in options}
    opts.setdefault("num_warps", 4)
    consts.update(options)
    for p in inspect.signature(mm_chain_emulated.fn).parameters.values():
        if p.name not in PTRS and p.name not in consts and p.default is not inspect.Parameter.empty:
            consts[p.name] = p.default
    sig = {k: PTRS.get(k, "constexpr" if k in consts else "i32") for k in mm_chain_emulated.arg_names}
    src = ASTSource(fn=mm_chain_emulated, signature=sig, constexprs=consts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts), consts, opts


def loops(sass, products):
    ins = [(int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    br = [(a, int(m.group(1), 16)) for a, t in ins for m in [re.search(r"BRA (?:`\(\.\w+\) )?0x([0-9a-f]+)", t)] if m]
    for top, end in sorted((t, a) for a, t in br if t < a):
        skips = [(x, y) for x, y in br if top <= x < y <= end and (y - x) // 16 > 64]
        body = [t for a, t in ins if top <= a <= end and not any(x < a < y for x, y in skips)]
        ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in body)
        print(f"loop {top:#x}-{end:#x}: {len(body)} instructions, {len(body) / products:.2f} a product")
        print("   ", "  ".join(f"{k}:{v}" for k, v in ops.most_common(16)))


def sass_of(kernel):
    """(resource usage line, SASS text) of a compiled kernel, from the installed triton's cuobjdump."""
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([tools / "cuobjdump", "-res-usage", cubin], capture_output=True, text=True).stdout
        sass = subprocess.run([tools / "cuobjdump", "-sass", cubin], capture_output=True, text=True).stdout
    return usage.strip().splitlines()[-1].strip(), sass


def main():
    kernel, consts, opts = compile_chain(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
    usage, sass = sass_of(kernel)
    print(f"triton {triton.__version__}, {opts}:", usage)
    loops(sass, 16 * consts["BM"] * consts["BN"] / (32 * opts["num_warps"]))


if __name__ == "__main__":
    main()
