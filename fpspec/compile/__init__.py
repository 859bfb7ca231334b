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
    from fpspec.compile.bias import kernel_bias, unbiased, wrapper
    from fpspec.compile.build import build_kernel

    kernel = build_kernel(spec, n=n, name=name, source=source)
    if kernel_bias(kernel) == "none":
        return compile_kernel(kernel, target, **options)
    # a bias (`bias = after | inside`): the kernel without it, wrapped (fpspec.compile.bias)
    return compile_kernel(unbiased(kernel), target, **options) + wrapper(kernel, target)


_LOADED: dict = {}          # sha256 of the source -> module, this process only
_FOLDER: list = []          # the private folder replicas are written to, made on first use


def load_replica(source: str, label: str):
    """Import replica source as a module in this process, from a file (numba and
    triton read a function's source from its file) in a private folder made
    for this process (mode 0700, removed at exit): nothing already on disk is
    ever imported.  `fpspec verify` runs replicas in a fresh process instead
    (fpspec.compile.process)."""
    import atexit
    import hashlib
    import importlib.util

    from fpspec.compile.process import private_folder, remove_folder
    from fpspec.io import write_atomic

    digest = hashlib.sha256(source.encode()).hexdigest()
    if digest in _LOADED:
        return _LOADED[digest]
    if not _FOLDER:
        _FOLDER.append(private_folder("fpspec-replicas-"))
        atexit.register(remove_folder, _FOLDER[0])
    path = _FOLDER[0] / f"replica_{digest[:16]}.py"
    write_atomic(path, source)
    spec = importlib.util.spec_from_file_location(f"fpspec_replica_{digest[:16]}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CompileError(f"replica {label} does not import: {type(e).__name__}: {first}") from None
    _LOADED[digest] = module
    return module


__all__ = ["compile_kernel", "compile_spec", "load_replica", "CompileError", "Kernel"]
