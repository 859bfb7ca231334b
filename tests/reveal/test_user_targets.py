"""resolve_target on user callables (pkg.mod:func): imported before anything
else is asked of them, tried once, and guarded, so that a library user gets
one FpspecError naming the target, never the callable's raw exception."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import TargetError, resolve_target

MODULE = "fpspec_test_user_targets_lib"
SOURCE = textwrap.dedent("""
    import numpy as np
    calls = 0
    def raises(x):
        raise RuntimeError("boom\\n  second line")
    def wrong_shape(x):
        return np.zeros(3, dtype=x.dtype)
    def integer(x):
        return np.sum(x).astype(np.int32)
    def returns_none(x):
        return None
    def returns_text(x):
        return "12"
    def gemv_wrong(A, x):
        return A @ x[:2] if False else np.zeros(2)
    def later(x):
        # answers the first two calls (the try: all ones, all twos), raises from the third on
        global calls
        calls += 1
        if calls > 2:
            raise ValueError("gave up")
        return np.sum(x)
    def interrupted(x):
        raise KeyboardInterrupt
    def good(x):
        return np.sum(x)
    def constant(x):
        return np.float32(1.5)
    def exits(x):
        raise SystemExit(0)
    def as_list(x):
        return [float(np.sum(x))]
    def crashes(x):
        import ctypes
        return ctypes.string_at(0)
    def leaves(x):
        import os
        os._exit(0)
    shuffler = np.random.default_rng(0)
    def shuffled(x):
        return np.sum(x[shuffler.permutation(len(x))])
""")


@pytest.fixture
def users(tmp_path, monkeypatch):
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, MODULE, raising=False)


def message(name, **kw) -> str:
    with pytest.raises(FpspecError) as info:
        resolve_target(name, n=8, **kw)
    text = str(info.value)
    assert "\n" not in text and info.value.exit_code == 2
    return text


def test_the_module_is_imported_before_the_op_is_asked_for():
    assert message("nosuchmodule.func") == ("cannot import 'nosuchmodule' for target 'nosuchmodule.func': "
                                            "No module named 'nosuchmodule'")
    assert message("numpy") == ("cannot find 'numpy': name a callable as package.module:function "
                                "or path/to/file.py:function")
    assert message("nosuchmodule.sub.func") == ("cannot import 'nosuchmodule' for target 'nosuchmodule.sub.func': "
                                                "No module named 'nosuchmodule'")
    assert message("boxes.py") == ("cannot use 'boxes.py' as a target: name a function in a Python file as "
                                   "path/to/file.py:function")
    assert message("lambda x: x.sum()") == ("cannot use 'lambda x: x.sum()' as a target: write the function in a "
                                            "file and name it as path/to/file.py:function")


SEQ5 = "((((0 1) 2) 3) 4)"


@pytest.mark.parametrize("name", ["numpy.add.reduce", "np.add.reduce", "np.nansum", "sum", "builtins:sum"])
def test_names_as_python_spells_them(name):
    """An attribute of an attribute (numpy.add.reduce), the np. abbreviation, and Python's builtins."""
    t = resolve_target(name, op="sum", n=5, dtype="float64")
    want = {"sum": SEQ5, "builtins:sum": SEQ5}.get(name, str(reveal(resolve_target("numpy.sum", n=5, dtype="float64")).tree))
    assert str(reveal(t).tree) == want


def test_a_file_path_names_a_callable(tmp_path):
    box = tmp_path / "my bóx.py"
    box.write_text("import functools, operator\ndef red(x):\n    return functools.reduce(operator.add, x)\n")
    assert str(reveal(resolve_target(f"{box}:red", op="sum", n=5)).tree) == SEQ5
    assert message(f"{tmp_path / 'none.py'}:red", op="sum") == (
        f"cannot find {str(tmp_path / 'none.py')!r} for target {str(tmp_path / 'none.py') + ':red'!r}: no such file")


def test_a_module_in_the_current_directory_is_found_without_it_on_sys_path(tmp_path, monkeypatch):
    """An installed `fpspec` script's sys.path starts at its own folder, not at the user's."""
    import sys

    (tmp_path / "cwd_box_for_fpspec.py").write_text("def red(x):\n    return sum(x)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "cwd_box_for_fpspec", raising=False)
    assert str(reveal(resolve_target("cwd_box_for_fpspec:red", op="sum", n=5)).tree) == SEQ5


def test_an_importable_callable_still_needs_its_op(users):
    assert "is a user callable: give its op kind" in message(f"{MODULE}:good")


@pytest.mark.parametrize("func, text", [
    ("raises", f"target {MODULE}:raises raised RuntimeError: boom second line"),
    ("wrong_shape", f"target {MODULE}:wrong_shape (sum, n=8) returned shape (3,), expected a scalar"),
    ("integer", f"target {MODULE}:integer (sum, n=8) returned int32 values, expected floating point (fp32)"),
    ("returns_none", f"target {MODULE}:returns_none (sum, n=8) returned None, expected a number"),
    ("returns_text", f"target {MODULE}:returns_text (sum, n=8) returned str, expected a floating-point number"),
])
def test_a_callable_that_answers_nonsense_is_named(users, func, text):
    with pytest.raises(TargetError):
        resolve_target(f"{MODULE}:{func}", op="sum", n=8)
    assert message(f"{MODULE}:{func}", op="sum").startswith(text)


def test_gemv_shape_is_checked(users):
    assert message(f"{MODULE}:gemv_wrong", op="gemv", m=4) == (
        f"target {MODULE}:gemv_wrong (gemv, 4 outputs) returned shape (2,), expected (4,)")


def test_later_calls_are_guarded(users):
    t = resolve_target(f"{MODULE}:later", op="sum", n=8)
    with pytest.raises(TargetError, match=f"^target {MODULE}:later raised ValueError: gave up$"):
        reveal(t)


def test_ctrl_c_is_not_an_error(users):
    with pytest.raises(KeyboardInterrupt):
        resolve_target(f"{MODULE}:interrupted", op="sum", n=8)


def test_a_good_callable_reveals(users):
    t = resolve_target(f"{MODULE}:good", op="sum", n=8)
    assert float(t.run_sum(np.arange(8.0))) == 28.0
    assert str(reveal(t).tree) == "(((0 1) (2 3)) ((4 5) (6 7)))"


def test_verify_target_sides_get_the_same_messages(users):
    from fpspec.verify import make_target_side

    with pytest.raises(TargetError, match=f"target {MODULE}:raises raised RuntimeError: boom"):
        make_target_side(f"{MODULE}:raises", "sum", "fp32")
    with pytest.raises(FpspecError, match="cannot import 'nosuchmodule'"):
        make_target_side("nosuchmodule.func", None, "fp32")


def test_other_library_functions_are_user_callables():
    """numpy.vdot, torch.vdot: not among the adapted targets, so callables with --op (torch ones
    get tensors); without --op the message names the op kinds and the known targets."""
    with pytest.raises(FpspecError) as e:
        resolve_target("numpy.vdot", n=8)
    assert "give its op kind" in str(e.value) and "numpy.sum, numpy.dot, numpy.matmul" in str(e.value)
    assert reveal(resolve_target("numpy.vdot", op="dot", n=5)).tree is not None
    torch = pytest.importorskip("torch")
    t = resolve_target("torch.vdot", op="dot", n=6)
    assert isinstance(t.native(np.ones(6, np.float32)), torch.Tensor)
    assert str(reveal(t).tree) != ""
    with pytest.raises(FpspecError, match=r"numpy.dot_matrix computes gemv or gemm: give its op kind"):
        resolve_target("numpy.dot_matrix", n=8)


def test_a_triton_replica_called_with_numpy_answers_numpy():
    """verify's wrapper of a Triton replica: NumPy arrays in, NumPy out (the revelation
    engine reads output bits in place; a positional replica's tree stage failed on tensors)."""
    torch = pytest.importorskip("torch")
    from fpspec.verify import torch_replica

    call = torch_replica(lambda a, b: (a * b).to(torch.bfloat16), "bf16", device="cpu")
    out = call(np.array([1.5, 2.0]), np.array([2.0, 0.5]))
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.tolist() == [3.0, 1.0]


@pytest.mark.parametrize("func, text", [
    ("constant", f"target {MODULE}:constant (sum, n=8) returned 1.5 for all-ones and for all-twos inputs: its "
                 "result does not depend on its inputs, so it has no accumulation order to reveal"),
    ("exits", f"target {MODULE}:exits raised SystemExit: 0"),
    ("as_list", f"target {MODULE}:as_list (sum, n=8) returned a Python list of 1 (float); expected a "
                "floating-point number, or a numpy array or torch tensor of shape ()"),
])
def test_a_target_that_cannot_be_revealed_is_one_error(users, func, text):
    assert message(f"{MODULE}:{func}", op="sum") == text


def test_a_crash_is_caught_in_a_child_process(users):
    """Note [crashing targets]: under the command line's isolated_first_calls the first call
    runs in a child, so a segfault or an os._exit is a TargetError, not fpspec's death."""
    from fpspec.reveal.targets import isolated_first_calls

    with isolated_first_calls():
        assert message(f"{MODULE}:crashes", op="sum") == (
            f"target {MODULE}:crashes crashed (signal 11, SIGSEGV) when called on sum operands of length 8; "
            "fpspec calls it in its own process, so it cannot be revealed")
        assert message(f"{MODULE}:leaves", op="sum") == (
            f"target {MODULE}:leaves ended the process (exit status 0) when called on sum operands of length 8; "
            "expected it to return its result")
        assert str(reveal(resolve_target(f"{MODULE}:good", op="sum", n=8)).tree) == "(((0 1) (2 3)) ((4 5) (6 7)))"


def test_a_target_that_shuffles_its_order_is_called_nondeterministic(users):
    """Exact random inputs sum alike in every order; the refusal still names the cause."""
    from fpspec.errors import RevealRefused

    with pytest.raises(RevealRefused) as e:
        reveal(resolve_target(f"{MODULE}:shuffled", op="sum", n=17, dtype="float64"))
    assert str(e.value) == "nondeterministic: the same input gave different outputs on two calls"


def test_a_mean_is_refused_with_what_it_is():
    """numpy.mean divides the sum by n: the count it answers is whole only times n."""
    from fpspec.errors import RevealRefused

    with pytest.raises(RevealRefused) as e:
        reveal(resolve_target("numpy.mean", op="sum", n=17))
    assert str(e.value) == (
        "output 0.7647058963775635 for masks at 0, 1 is not a whole number of units in [0, 15]: l is not an "
        "integer in [2, n], so the target is not a summation tree over its inputs; it is a whole count times "
        "1/n: a mean? reveal the sum it divides")


def test_a_norm_is_not_called_a_mean():
    from fpspec.errors import RevealRefused

    with pytest.raises(RevealRefused) as e:
        reveal(resolve_target("numpy.linalg.norm", op="sum", n=17, dtype="float64"))
    assert str(e.value) == (
        "output 1.2030798458400226e+38 for masks at 0, 1 is not a whole number of units in [0, 15]: l is not an "
        "integer in [2, n], so the target is not a summation tree over its inputs")


def test_overflowing_probes_print_no_warning():
    """Masks overflow fp16 on purpose: inf is an answer, not a RuntimeWarning on the user's stderr."""
    import warnings

    t = resolve_target("numpy.dot", n=4, dtype="float16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = t.call(t.native(np.full(4, 60000.0)), t.native(np.full(4, 2.0)))
    assert float(out) == float("inf")
