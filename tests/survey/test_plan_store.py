"""Plans name exact jobs; the store's schema migrates in place and resumes."""
import sqlite3

import pytest

from fpspec.survey.plan import Job, PlanError, Variant, parse_plan
from fpspec.survey.store import MIGRATIONS, SCHEMA_VERSION, Store, StoreError

PLAN = '''
[survey]
name = "p"

[[variants]]
name = "one"
env = { OPENBLAS_NUM_THREADS = 1 }
resources = { "blas:openblas" = 1 }

[[variants]]
name = "two"
env = { OPENBLAS_NUM_THREADS = "2" }

[[jobs]]
targets = ["numpy.sum", "torch.sum"]
dtypes = ["float32"]
n = [100, "1..64"]

[[jobs]]
target = "numpy.matmul"
op = "gemm"
dtype = "float64"
n = 8
shapes = [{ m = 4, ncols = 3 }]
variants = ["two"]
'''


def test_a_plan_is_the_product_of_its_lists():
    plan = parse_plan(PLAN, "p.toml")
    one = Variant("one", (("OPENBLAS_NUM_THREADS", "1"),), (("blas:openblas", 1.0),))
    two = Variant("two", (("OPENBLAS_NUM_THREADS", "2"),), ())
    assert plan.name == "p"
    assert plan.jobs[:2] == (Job("numpy.sum", "float32", "100", variant=one),
                             Job("numpy.sum", "float32", "100", variant=two))
    assert len(plan.jobs) == 2 * 2 * 2 + 1
    gemm = plan.jobs[-1]
    assert gemm == Job("numpy.matmul", "float64", "8", "gemm", 4, 3, variant=two)
    assert gemm.reveal_args() == ["reveal", "numpy.matmul", "-n", "8", "--dtype", "float64", "--op", "gemm",
                                  "--m", "4", "--ncols", "3"]
    assert gemm.row == "numpy.matmul gemm float64 n=8 4x3"
    # the key names the job across databases: the variant is part of it, the row is not
    assert plan.jobs[0].key != plan.jobs[1].key and plan.jobs[0].row == plan.jobs[1].row
    assert Job.from_json(gemm.to_json()) == gemm


@pytest.mark.parametrize("text, message", [
    ("[[jobs]]\ntarget = 'numpy.sum'\n", "p.toml: [[jobs]] #1 has no n"),
    ("[[jobs]]\ntarget = 'numpy.sum'\nn = '9..3'\n", "n must be a positive integer or a range LO..HI, got '9..3'"),
    ("[[jobs]]\ntarget = 'numpy.sum'\nn = 4\ndtype = 'float8'\n", "unknown dtype 'float8'"),
    ("[[jobs]]\ntarget = 'numpy.sum'\nn = 4\nsize = 3\n", "[[jobs]] #1: unknown key 'size'"),
    ("[[jobs]]\ntarget = 'numpy.sum'\nn = 4\nvariants = ['x']\n", "no variant named 'x'"),
    ("[survey]\nname = 'x'\n", "the plan names no [[jobs]]"),
    ("[[jobs]\n", "p.toml: "),
])
def test_plan_errors_name_the_file_and_the_entry(text, message):
    with pytest.raises(PlanError) as e:
        parse_plan(text, "p.toml")
    assert message in str(e.value) and "\n" not in str(e.value)


ROW = {"job_key": "k1", "job": Job("numpy.sum", "float32", "8").to_json(), "status": "ok", "class_hash": "c1",
       "spec": "order seq", "trees": {"8@0,0": "t"}, "seconds": 0.5}


def test_an_old_database_is_migrated_in_place_and_keeps_its_rows(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    db.execute("INSERT INTO environments (hash, label, info, first_seen) VALUES ('h', 'old box', '{}', 'then')")
    db.execute("""INSERT INTO results (env_id, job_key, target, op, dtype, n, shape, device, variant, status,
                  class_hash, created) VALUES (1, 'k0', 'numpy.sum', NULL, 'float32', '8', '', 'cpu', 'default',
                  'ok', 'c0', 'then')""")
    db.commit()
    db.close()
    with Store(path) as store:
        assert store.version == SCHEMA_VERSION == 2
        (old,) = store.results()
        assert (old.job_key, old.class_hash, old.trees, old.seconds) == ("k0", "c0", {}, None)
        env = store.environment("h", "old box", {})
        store.add(env, ROW)
        assert [r.class_hash for r in store.results()] == ["c0", "c1"]
        assert store.done(env) == {"k0", "k1"}


def test_errors_are_tried_again_and_a_newer_schema_is_refused(tmp_path):
    with Store(tmp_path / "s.db") as store:
        env = store.environment("h", "box", {"cpu": "x"})
        assert store.environment("h", "box", {"cpu": "x"}) == env      # one row per fingerprint
        store.add(env, {**ROW, "status": "error", "class_hash": None})
        assert store.done(env) == set()
        store.add(env, ROW)                                              # the retry replaces it
        assert len(store.results()) == 1 and store.done(env) == {"k1"}
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer than this fpspec"):
        Store(tmp_path / "s.db")
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a survey database"):
        Store(tmp_path / "junk.db")
