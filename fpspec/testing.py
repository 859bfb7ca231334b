"""Pin the accumulation order of the library functions a project depends on.

    from fpspec.testing import assert_order

    def test_numpy_sum_order_is_pinned():
        assert_order(np.sum, "specs/numpy_sum.fps", n=[8, 9, 129, 1000])

A library upgrade that changes the order (or the arithmetic: FMA, initial
value, accumulator) then fails the build, and the message shows the first
differing subtree.  As a pytest plugin (entry point `fpspec`, or
`-p fpspec.testing`) this module also gives

* the fixture `assert_order`: the same function, with spec paths relative to
  the test file's folder;
* the marker `@pytest.mark.fpspec_order(fn, "spec.fps", n=...)`: the check
  runs before the test body, so a test that relies on np.sum's order says so
  in one line.

Importing this module imports nothing heavy: the verification engine loads
on the first check.
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Callable, Iterable

MARKER = "fpspec_order"
_LIBRARIES = ("numpy", "torch", "jax.numpy")


def assert_order(fn: Callable | str, spec: str | Path, n: int | Iterable[int] | None = None, *,
                 op: str | None = None, dtype: str | None = None, m: int | None = None,
                 ncols: int | None = None, device: str = "cpu", samples: int | None = None,
                 seed: int = 0, max_n: int = 1024, base: str | Path | None = None):
    """Fail (AssertionError) unless `fn` has the order and arithmetic of `spec` at every n.

    fn: a callable (np.sum, torch.matmul, your own) or a target name
    ("numpy.sum", "pkg.mod:fn", "torch.sum@cuda").  spec: a .fps path, found
    as given, else relative to `base` (default: the calling file's folder).
    n: one n or several; default: n that cross every branch of the spec, up to
    `max_n`.  samples: inputs also compared bit for bit with the spec's
    arithmetic model (default 200 when the spec has an arithmetic section).
    Returns the fpspec.verify.Report when the order matches.
    """
    __tracebackhide__ = True   # pytest shows the report, not this function's source
    from fpspec import verify as V

    path = _find_spec(spec, base if base is not None else _caller_folder())
    parsed = V.load_spec(path)
    ref = V.make_spec_side(parsed, str(spec), m=m, ncols=ncols)
    op = op or ref.op
    fmt = dtype or ref.fmt
    side = _side(fn, op, fmt, m=ref.m, ncols=ref.ncols, device=device, out_fmt=ref.out_fmt)
    if n is None:
        ns = V.spec_n_values(parsed, max_n=max_n, seed=seed)
    else:
        ns = [int(n)] if isinstance(n, int) else [int(k) for k in n]
    if samples is None:
        samples = 200 if parsed.header.arithmetic is not None else 0
    report = V.compare(ref, [side], ns, samples=samples, seed=seed,
                       sample_pairs=[(ref, side)] if samples else [], command="verify")
    if not report.equivalent:
        raise AssertionError(f"{side.name} does not follow {spec}\n{report.text()}")
    return report


def _side(fn, op: str, fmt: str, *, m, ncols, device: str, out_fmt: str):
    from fpspec import verify as V

    name = fn if isinstance(fn, str) else _library_name(fn)
    if name is not None:
        return V.make_target_side(name, op, fmt, role="original", m=m, ncols=ncols, device=device)
    label = getattr(fn, "__qualname__", None) or repr(fn)
    return V.make_replica_side(fn, label, op, fmt, out_fmt=out_fmt, m=m, ncols=ncols, role="original")


def _library_name(fn) -> str | None:
    """numpy.sum for np.sum, torch.matmul for torch.matmul: the library's own
    adapter then converts inputs (a torch function does not take NumPy arrays)."""
    name = getattr(fn, "__name__", None)
    if not name:
        return None
    for lib in _LIBRARIES:
        mod = sys.modules.get(lib)
        if mod is not None and getattr(mod, name, None) is fn:
            return f"{lib}.{name}"
    return None


def _caller_folder() -> Path:
    here = Path(__file__).resolve()
    for frame in inspect.stack()[1:]:
        p = Path(frame.filename)
        if p.resolve() != here and p.exists():
            return p.parent
    return Path.cwd()


def _find_spec(spec, base) -> Path:
    from fpspec.errors import FpspecError

    p = Path(spec)
    if p.is_file():
        return p
    if not p.is_absolute() and (Path(base) / p).is_file():
        return Path(base) / p
    raise FpspecError(f"{spec}: no such spec file (looked in {Path.cwd()} and {base})")


# ---------------------------------------------------------------- pytest plugin

try:
    import pytest
except ImportError:  # the function works without pytest; the plugin parts need it
    pytest = None

if pytest is not None:

    def pytest_configure(config):
        config.addinivalue_line(
            "markers",
            f"{MARKER}(fn, spec, n=None, **options): fail the test unless fn follows the .fps spec "
            "(fpspec.testing.assert_order)")

    @pytest.fixture(name="assert_order")
    def _assert_order_fixture(request):
        """fpspec.testing.assert_order with spec paths relative to the test file."""
        folder = Path(str(request.node.path)).parent

        def check(fn, spec, n=None, **options):
            __tracebackhide__ = True
            options.setdefault("base", folder)
            return assert_order(fn, spec, n, **options)

        return check

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(item):
        __tracebackhide__ = True
        for mark in item.iter_markers(name=MARKER):
            if len(mark.args) < 2:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER} needs (fn, spec)")
            options = dict(mark.kwargs)
            options.setdefault("base", Path(str(item.path)).parent)
            assert_order(*mark.args, **options)
