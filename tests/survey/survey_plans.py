"""The plan the survey tests run: the fake target in two variants (seq, rev)."""

PLAN = '''
[survey]
name = "fake"

[[variants]]
name = "seq"
env = {{ FAKE_ORDER = "seq" }}
{seq_resources}

[[variants]]
name = "rev"
env = {{ FAKE_ORDER = "rev" }}
{rev_resources}

[[jobs]]
target = "{target}"
op = "sum"
dtypes = ["float32", "float64"]
n = [4, 6]
'''


def fake_plan(target, seq_resources="", rev_resources=""):
    return PLAN.format(target=target, seq_resources=seq_resources, rev_resources=rev_resources)
