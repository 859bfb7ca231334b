"""Where the grammar and the Jinja templates are read from.

They live at the top of the source tree (grammar/, templates/) and the wheel
and sdist ship them inside the package (fpspec/grammar, fpspec/templates,
mapped in pyproject.toml).  An installed wheel finds them through
importlib.resources; a source checkout run in place (an editable install, or
PYTHONPATH=.) has no copy inside the package and reads the top-level folder.
"""
from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path


def resource_dir(name: str) -> Traversable:
    packaged = resources.files("fpspec").joinpath(name)
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"fpspec is installed without its {name}/ folder")


def grammar_file() -> Traversable:
    return resource_dir("grammar").joinpath("fps.lark")


def templates_dir() -> Traversable:
    return resource_dir("templates")
