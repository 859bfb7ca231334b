"""How many compiled kernels the named fused parameter sets need on a GPU, and each one's offline
compile time for sm_90 (no GPU needed: the installed triton's ptxas).

    python benchmarks/triton/fused_set_kernels.py [--compile] [LABEL ...]

Each set's emulated Triton replica (tests/triton/test_fused_params.py's spec) is called once under
the interpreter in a child process until its launch of mm_chain_emulated_wide, with the GPU's tile
(16 x 32, 4 warps); the launch's argument types and constexprs name its compiled kernel (Note [wide
kernel constants] in fpspec/compile/triton_kernels.py: a fused node's numbers are arguments, not
constexprs).  Prints, per set, whether it needs a kernel of its own (and, with --compile, how long
that kernel takes to compile), then how many kernels the sets need.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TYPES = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16", "float8_e4m3fn": "*fp8e4nv",
         "float8_e5m2": "*fp8e5", "int64": "*i64", "int32": "*i32", "int16": "*i16", "uint8": "*u8",
         "int8": "*i8"}


def _tile_on_gpu(p) -> bool:
    """Whether a GPU runs the set's nodes in the tile form (mm_chain_emulated, its numbers
    constexprs; fpspec.compile.triton_run: plain fp16 / bf16 / tf32 nodes whose terms fit int32)."""
    from fpspec.formats import get_format

    general = (p.zero_exponent is not None or p.c_emin is not None or p.combine == "amd" or p.input_b is not None
               or p.output != "fp32" or p.aligned != "truncate" or not p.subnormal_inputs
               or not p.subnormal_outputs or p.interleave != 1)
    man_in = get_format(p.input).precision - 1
    return (not general and not p.input.startswith("fp8") and 2 * man_in <= 23 + p.extra_bits
            and p.w << (25 + p.extra_bits) <= 1 << 31)


def capture(labels: list, out: str) -> None:
    """(in a child with TRITON_INTERPRET=1) label -> (positional, keyword) arguments of its wide launch."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "triton")]
    import numpy as np
    import torch

    import test_fused_params as T
    from fpspec.arith.params import PARAMS
    from fpspec.io import write_atomic

    def described(v):
        return ["T", TYPES[str(v.dtype).removeprefix("torch.")]] if hasattr(v, "dtype") else ["V", v]

    found = {}
    with tempfile.TemporaryDirectory() as folder:
        for label in labels or sorted(T.DISTINCT.values()):
            params = PARAMS.get(label) or T.BITS[label]
            a, b = T._blocks(params, [params.w, len(label)])
            path = Path(folder) / f"r{len(found)}.py"
            write_atomic(path, T._sources(params)[0])
            spec = importlib.util.spec_from_file_location(f"replica_{len(found)}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)

            class Launch:   # records the launch and stops there (the kernel is not run)
                def __getitem__(self, grid):
                    def call(*args, **kw):
                        found[label] = ([described(v) for v in args], {k: described(v) for k, v in kw.items()})
                        raise StopIteration
                    return call

            module.mm_chain_emulated_wide = Launch()
            fb = params.input_b or params.input
            if _tile_on_gpu(params):
                found[label] = "tile"
                continue
            A = torch.from_numpy(a.astype(np.float32)).to(getattr(torch, T._torch_dtype(params.input)))
            B = torch.from_numpy(b.astype(np.float32)).to(getattr(torch, T._torch_dtype(fb)))
            try:
                module.gemm(A, B, path="emulated")
            except StopIteration:
                pass
    Path(out).write_text(json.dumps(found))


def launches_of(labels: list, children: int = 1) -> dict:
    """label -> its wide launch (capture's form) or "tile", captured by `children` interpreter
    processes side by side (labels: every distinct set when empty)."""
    if not labels:
        sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
        import tests.triton.test_fused_params as T
        labels = sorted(T.DISTINCT.values())
    parts = [labels[k::children] for k in range(max(1, min(children, len(labels))))]
    env = dict(os.environ, TRITON_INTERPRET="1")
    found = {}
    with tempfile.TemporaryDirectory() as folder:
        outs = [str(Path(folder) / f"launches{k}.json") for k in range(len(parts))]
        procs = [subprocess.Popen([sys.executable, __file__, "--capture", out, *part], env=env)
                 for out, part in zip(outs, parts)]
        if any(proc.wait() for proc in procs):
            raise SystemExit("capturing the sets' launches failed")
        for out in outs:
            found.update(json.loads(Path(out).read_text()))
    return found


def kernel_key(fn, launch, bn: int = 32):
    """(signature, constexprs) naming the kernel a GPU compiles for a captured wide launch at the
    GPU's tile width bn: argument types, constexpr values, and for an integer argument Triton
    specializes on, whether it is 1 / a multiple of 16 (the arguments of do_not_specialize not)."""
    if not hasattr(fn, "params"):    # under TRITON_INTERPRET=1: the kernel as the GPU's Triton sees it
        from triton.runtime.jit import JITFunction

        fn = JITFunction(fn.fn, **fn.kwargs)
    positional, keywords = launch
    given = {**dict(zip(fn.arg_names, positional)), **keywords, "BN": ["V", bn]}
    loose = {fn.arg_names[i] if isinstance(i, int) else i for i in getattr(fn, "do_not_specialize", ())}
    signature, constants, specialized = {}, {}, []
    for p in fn.params:
        kind, value = given.get(p.name, ["V", p.default])
        if p.is_constexpr:
            signature[p.name], constants[p.name] = "constexpr", value
        else:
            signature[p.name] = value if kind == "T" else "i32"
            if kind == "V" and p.name not in loose and type(value) is int:
                specialized.append((p.name, "1" if value == 1 else "16" if value % 16 == 0 else ""))
    return signature, constants, (tuple(sorted(signature.items())),
                                  tuple(sorted((k, str(v)) for k, v in constants.items())), tuple(specialized))


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--compile"]
    build = "--compile" in sys.argv[1:]
    launches = launches_of(args)
    os.environ.pop("TRITON_INTERPRET", None)
    cache = tempfile.TemporaryDirectory()
    os.environ["TRITON_CACHE_DIR"] = cache.name    # compile times of compiles, not of cache hits
    sys.path.insert(0, str(ROOT))
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fpspec.compile.triton_kernels import mm_chain_emulated_wide as fn

    kernels, tiles = set(), 0
    for label, launch in launches.items():
        if launch == "tile":
            tiles += 1
            print(f"{label}: the tile form (mm_chain_emulated)")
            continue
        signature, constants, key = kernel_key(fn, launch)
        own = key not in kernels
        kernels.add(key)
        t = time.time()
        if own and build:
            triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": 4})
        print(f"{label}: {'a kernel of its own' if own else 'the kernel of an earlier set'}"
              + (f", compiled in {time.time() - t:.1f} s" if own and build else ""), flush=True)
    print(f"{len(launches)} sets: {tiles} in the tile form, {len(launches) - tiles} in the wide form, "
          f"which need {len(kernels)} compiled kernels")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--capture"]:
        capture(sys.argv[3:], sys.argv[2])
    else:
        sys.exit(main())
