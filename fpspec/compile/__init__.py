"""spec -> kernel IR -> replica source.

    compile_spec(spec, target="numpy", n=None) -> str
    compile_kernel(kernel, target) -> str

The IR is in `ir`, the tree it denotes in `trees`, backends in `backends`
(registry `BACKENDS`).
"""
from __future__ import annotations

from fpspec.compile.ir import CompileError, Kernel, Positional


def compile_kernel(kernel: Kernel | Positional, target: str = "numpy", **options) -> str:
    """Render `kernel` for `target`; `options` are the backend's own (Backend.options)."""
    from fpspec.compile.backends import get_backend

    backend = get_backend(target)
    unknown = sorted(set(options) - set(backend.options))
    if unknown:
        takes = ", ".join(backend.options) or "no options"
        raise CompileError(f"target {target} does not take {', '.join(unknown)} (it takes {takes})")
    if isinstance(kernel, Positional):
        from fpspec.compile.positions import compose

        for k in kernel.kernels:
            backend.check(k)
        return compose(kernel, [backend.render(k, **options) for k in kernel.kernels], target)
    backend.check(kernel)
    return backend.render(kernel, **options)


def compile_spec(spec, target: str = "numpy", n: int | None = None, name: str | None = None,
                 source: str | None = None, **options) -> str:
    """Compile a parsed spec (fpspec.spec AST) for `target`; `n` specializes it.

    `source`: the spec's text as written (default: its canonical text), kept
    in the replica as SPEC and hashed into its header; `name` labels it.
    """
    from fpspec.compile.build import build_kernel

    return compile_kernel(build_kernel(spec, n=n, name=name, source=source), target, **options)


def load_replica(source: str, label: str):
    """Import replica source as a module (from a file, so that numba can see it)."""
    import importlib.util
    import sys
    import tempfile
    from pathlib import Path

    import hashlib

    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "fpspec-replicas"
    folder.mkdir(exist_ok=True)
    path = folder / f"replica_{digest}.py"
    if not path.exists():
        from fpspec.io import write_atomic

        write_atomic(path, source)
    modname = f"fpspec_replica_{digest}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CompileError(f"replica {label} does not import: {type(e).__name__}: {first}") from None
    sys.modules[modname] = module
    return module


__all__ = ["compile_kernel", "compile_spec", "load_replica", "CompileError", "Kernel"]
