"""A target whose order is chosen by its environment: seq, or rev when FAKE_ORDER=rev
(as a library whose kernel depends on a thread count or a version would)."""
import os
import sys
import textwrap

import pytest

FAKE = textwrap.dedent('''
    import os

    import numpy as np


    def env_sum(x):
        x = np.asarray(x)
        terms = x[::-1] if os.environ.get("FAKE_ORDER") == "rev" else x
        total = terms[0]
        for v in terms[1:]:
            total = total + v
        return total
''')


@pytest.fixture
def fake_target(tmp_path, monkeypatch):
    """`survey_fake:env_sum`, importable here and in every worker process started from here."""
    (tmp_path / "survey_fake.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + (os.pathsep + os.environ["PYTHONPATH"]
                                                      if os.environ.get("PYTHONPATH") else ""))
    sys.modules.pop("survey_fake", None)
    return "survey_fake:env_sum"
