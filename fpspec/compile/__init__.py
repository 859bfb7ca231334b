"""spec -> kernel IR -> replica source.

    compile_spec(spec, target="numpy", n=None) -> str
    compile_kernel(kernel, target) -> str

The IR is in `ir`, the tree it denotes in `trees`, backends in `backends`
(registry `BACKENDS`).
"""
from __future__ import annotations

from fpspec.compile.ir import CompileError, Kernel


def compile_kernel(kernel: Kernel, target: str = "numpy") -> str:
    from fpspec.compile.backends import get_backend

    backend = get_backend(target)
    backend.check(kernel)
    return backend.render(kernel)


def compile_spec(spec, target: str = "numpy", n: int | None = None, name: str | None = None,
                 source: str | None = None) -> str:
    """Compile a parsed spec (fpspec.spec AST) for `target`; `n` specializes it.

    `source`: the spec's text as written (default: its canonical text), kept
    in the replica as SPEC and hashed into its header; `name` labels it.
    """
    from fpspec.compile.build import build_kernel

    return compile_kernel(build_kernel(spec, n=n, name=name, source=source), target)


__all__ = ["compile_kernel", "compile_spec", "CompileError", "Kernel"]
