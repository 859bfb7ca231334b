"""The wheel ships the grammar and every template (top-level grammar/ and
templates/ mapped into the package): build it from a copy of the checkout,
install it into a fresh virtual environment, parse a spec and render every
backend's template from another directory."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RUN_IN_VENV = r"""
import fpspec, fpspec.spec as s
from fpspec.compile import compile_spec
assert fpspec.__file__.startswith(%(venv)r), fpspec.__file__
spec = s.parse('n in 1..9\narithmetic { input = fp32 product = none accumulator = fp32 output = fp32 }\n'
               'order lanes(8, seq, pairwise)')
print(s.expand(spec, 9))
for target in ("numpy", "numba", "triton"):
    source = compile_spec(spec, target=target, n=9)
    assert "def sum" in source, target
    print(target, "rendered")
"""


def _pip_works():
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0


def test_installed_wheel_parses_a_spec_and_renders_every_template(tmp_path):
    if not _pip_works():
        pytest.skip("pip is not available to build the wheel")
    wheels, venv, elsewhere, src = (tmp_path / x for x in ("wheels", "venv", "elsewhere", "src"))
    elsewhere.mkdir()
    # build from a copy: an in-tree build writes build/ into the shared checkout
    for folder in ("fpspec", "grammar", "templates"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(wheels)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("fpspec-*.whl")

    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "fpspec").rglob("__init__.py")}
    missing = sorted(p for p in packages if f"{p}/__init__.py" not in names)
    assert not missing, f"subpackages missing from the wheel (list them in pyproject.toml): {missing}"
    shipped = {f"fpspec/grammar/{p.name}" for p in (ROOT / "grammar").iterdir()}
    shipped |= {f"fpspec/templates/{p.name}" for p in (ROOT / "templates").iterdir()}
    assert shipped <= names, sorted(shipped - names)

    # the venv sees the dependencies of this interpreter but installs fpspec itself from the wheel
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    inst = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
                          capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr[-2000:]
    run = subprocess.run([str(python), "-c", RUN_IN_VENV % {"venv": str(venv)}], capture_output=True, text=True,
                         cwd=elsewhere, env={"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == ("((((0 8) 1) (2 3)) ((4 5) (6 7)))\n"
                          "numpy rendered\nnumba rendered\ntriton rendered\n")


def test_sdist_carries_the_grammar_and_templates(tmp_path):
    if not _pip_works():
        pytest.skip("pip is not available")
    build = pytest.importorskip("build", reason="the 'build' package makes the sdist")
    del build
    src = tmp_path / "src"
    for folder in ("fpspec", "grammar", "templates"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    made = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(tmp_path / "dist"),
                           str(src)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    import tarfile

    (sdist,) = (tmp_path / "dist").glob("fpspec-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert {"grammar/fps.lark", "templates/numpy.py.j2", "templates/numba.py.j2", "templates/triton.py.j2"} <= names
