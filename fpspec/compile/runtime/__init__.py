"""Support code embedded in replicas: real, importable, tested Python.

A replica must import only numpy (or numba), so the renderer copies the
source of the functions it needs from these modules into the generated file
(`embed`), renaming a chosen variant to the name the generated code calls
(`_add_native` -> `_add`).  Functions here read module globals that the
template defines (`_ACC`, `_ACC_FMT`, ...): see each backend's render module.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import textwrap


@functools.lru_cache(maxsize=None)
def _source(module_name: str, name: str) -> str:
    # inspect parses the whole module to find a class: once per class, not once per replica
    return textwrap.dedent(inspect.getsource(getattr(importlib.import_module(module_name), name)))


def embed(module, names, rename=None, decorator: str | None = None) -> str:
    """Source of `names` from `module`, in that order; `rename` maps a source name
    to the name it gets in the replica; `decorator` is put above each def."""
    rename = rename or {}
    parts = []
    for name in names:
        src = _source(module.__name__, name)
        new = rename.get(name, name)
        if new != name:
            src = src.replace(f"def {name}(", f"def {new}(", 1)
        if decorator and src.startswith("def "):
            src = f"{decorator}\n{src}"
        parts.append(src.rstrip() + "\n")
    return "\n\n".join(parts)
