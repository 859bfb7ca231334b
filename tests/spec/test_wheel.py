"""The grammar ships inside the wheel: install it elsewhere and parse from another directory."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_installed_wheel_parses_a_spec(tmp_path):
    if shutil.which("pip") is None and subprocess.run([sys.executable, "-m", "pip", "--version"],
                                                      capture_output=True).returncode != 0:
        pytest.skip("pip is not available to build the wheel")
    wheels, target, elsewhere, src = (tmp_path / x for x in ("wheels", "site", "elsewhere", "src"))
    elsewhere.mkdir()
    # build from a copy: an in-tree build writes build/ into the shared checkout
    shutil.copytree(ROOT / "fpspec", src / "fpspec", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(wheels)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("fpspec-*.whl")
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                           str(wheel)], capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr[-2000:]
    code = ("import fpspec.spec as s, fpspec; "
            "assert fpspec.__file__.startswith(%r), fpspec.__file__; "
            "print(s.expand(s.parse('n in 1..9\\norder lanes(8, seq, pairwise)'), 9))") % str(target)
    # -S: no site processing, so an editable install of this checkout (a .pth
    # hook in site-packages) cannot shadow the wheel; dependencies still come
    # from the site-packages folders, placed after the wheel's target
    import os
    import site

    path = os.pathsep.join([str(target), *site.getsitepackages()])
    run = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=elsewhere,
                         env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == "((((0 8) 1) (2 3)) ((4 5) (6 7)))\n"
