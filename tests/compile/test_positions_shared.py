"""Joining the arms of a positional replica: a definition that some arms (not all) have
the same, referring to the same things, is written once and used by each of them."""
from fpspec.compile.positions import _Module, _owners, _renamed, _shared

# three arms: `kernel` is the same text in all three, but reads `_step`, which arm 0 defines
# otherwise; `_table` is the same in arms 0 and 2 only; `_entry` reads arm-local `_order`
ARMS = [
    "_SHARED = 1\n_step = 10\n_table = (1, 2)\n_order = 0\n"
    "def kernel(x):\n    return _step * x + _SHARED\n"
    "def _entry(x):\n    return kernel(x) + _order\n",
    "_SHARED = 1\n_step = 20\n_table = (3, 4)\n_order = 1\n"
    "def kernel(x):\n    return _step * x + _SHARED\n"
    "def _entry(x):\n    return kernel(x) + _order\n",
    "_SHARED = 1\n_step = 20\n_table = (1, 2)\n_order = 2\n"
    "def kernel(x):\n    return _step * x + _SHARED\n"
    "def _entry(x):\n    return kernel(x) + _order\n",
]


def test_owners_are_the_first_arm_with_the_same_definition():
    parts = [_Module(src) for src in ARMS]
    shared = _shared(parts)
    assert shared == {"_SHARED"}
    owners = _owners(parts, shared)
    # arm 2's `_step` and `kernel` are arm 1's; its `_table` is arm 0's; `_entry` reads `_order`,
    # which differs in every arm, so each arm keeps its own
    assert owners == {("_step", 2): 1, ("kernel", 2): 1, ("_table", 2): 0}


def test_renamed_gives_each_name_its_owner_suffix():
    text = "def _entry(x):\n    return kernel(x) + _order + f(kernel=_table)"
    assert _renamed(text, {"_entry": "_o2", "kernel": "_o1", "_order": "_o2", "_table": "_o0"}) == (
        "def _entry_o2(x):\n    return kernel_o1(x) + _order_o2 + f(kernel=_table_o0)")


def test_a_kernel_two_arms_share_is_defined_once():
    from fpspec.compile.positions import compose
    from fpspec.compile.ir import Compare, Const, Positional, Var

    class Arm:      # compose reads only the sources and the cases' conditions
        pass
    below = [Compare("<", Var("i"), Const(k)) for k in (1, 2)]
    positional = Positional(op="sum", cases=((below[0], Arm()), (below[1], Arm())), otherwise=Arm(),
                            texts=("i < 1", "i < 2"), shape=(3, 1))
    sources = ["# head\n# target: numpy\n" + src.replace("def _entry", "def sum")
               .replace("_entry", "sum") for src in ARMS]
    joined = compose(positional, sources, "numpy")
    defined = [line.split("(")[0].split(" = ")[0].replace("def ", "") for line in joined.splitlines()
               if line.startswith(("def ", "_step", "_table", "kernel"))]
    assert [d for d in defined if d.startswith(("kernel", "_step", "_table"))] == [
        "_step_o0", "_table_o0", "kernel_o0", "_step_o1", "_table_o1", "kernel_o1"]
    scope: dict = {}
    exec(compile(joined, "joined", "exec"), scope)
    # each arm's sum as its own module computes it: _step * x + 1 + _order
    assert [scope[f"sum_o{k}"](2) for k in range(3)] == [21, 42, 43]
