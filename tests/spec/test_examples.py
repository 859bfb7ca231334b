"""Every spec under examples/ is canonical text and passes check; a full
spec also names its target, op and the command that made it (arith/ holds
arithmetic sections users pass as --arithmetic FILE)."""
from pathlib import Path

import pytest

from fpspec.spec import check, load

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").rglob("*.fps"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_is_canonical_and_checks(path):
    spec = load(path)
    assert str(spec) == path.read_text()
    if path.parent.name == "arith":
        assert spec.header.sections[0].name == "arithmetic"
        return
    check(spec)
    assert spec.header.target and spec.header.op and spec.header.provenance.get("command")
