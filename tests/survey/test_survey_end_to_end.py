"""A small plan end to end: two environments that compute a sum in different
orders, into a temporary database; resume, compare against a baseline, report."""
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

from survey_plans import fake_plan
from fpspec.survey import Store, compare, parse_plan_text, run_survey
from fpspec.survey.report import build_rows

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "fpspec.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env)


def test_two_environments_two_classes_resume_and_report(tmp_path, fake_target):
    plan = parse_plan_text(fake_plan(fake_target))
    db = tmp_path / "s.db"
    with Store(db) as store:
        summary = run_survey(plan, store, parallel=2)
        assert (summary.ran, summary.skipped, summary.failed) == (8, 0, 0)
        results = store.results()
        assert {r.status for r in results} == {"ok"}
        assert len(store.environments()) == 2
        by_variant = {}
        for r in results:
            by_variant.setdefault(r.variant, set()).add(r.class_hash)
            order = "rev" if r.variant == "rev" else "seq"
            assert f"order {order}" in r.spec
        assert by_variant["seq"].isdisjoint(by_variant["rev"])
        rows = build_rows(results)
        assert [row.name for row in rows] == [f"{fake_target} sum {d} n={n}" for d in ("float32", "float64")
                                              for n in (4, 6)]
        assert [row.classes for row in rows] == [2, 2, 2, 2]
        again = run_survey(plan, store, parallel=2)
        assert (again.ran, again.skipped) == (0, 8) and len(store.results()) == 8


def test_compare_names_every_changed_job_and_the_cli_exits_1(tmp_path, fake_target):
    text = fake_plan(fake_target).replace('FAKE_ORDER = "rev"', 'FAKE_ORDER = "seq"')
    (tmp_path / "before.toml").write_text(text)
    done = cli("survey", tmp_path / "before.toml", "--db", tmp_path / "base.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "8 jobs ran, 0 already stored, 0 failed; 1 environment(s)" in done.stdout
    # the "upgrade": the variant named rev now sums in reverse
    (tmp_path / "after.toml").write_text(fake_plan(fake_target))
    after = cli("survey", tmp_path / "after.toml", "--db", tmp_path / "new.db", "--compare", tmp_path / "base.db",
                cwd=tmp_path)
    assert after.returncode == 1, after.stderr
    changed = sorted(re.findall(r"^CHANGED: (.*) \[", after.stdout, re.M))
    assert changed == sorted(f"{fake_target} sum {d} n={n}" for d in ("float32", "float64") for n in (4, 6))
    assert "4 job(s) changed order or arithmetic" in after.stdout
    same = cli("survey", tmp_path / "before.toml", "--db", tmp_path / "base.db", "--compare", tmp_path / "base.db",
               cwd=tmp_path)
    assert same.returncode == 0 and "no order changed" in same.stdout, same.stdout + same.stderr
    with Store(tmp_path / "new.db") as new, Store(tmp_path / "base.db") as base:
        changes, missing = compare(new, base, {r.job_key: r.env_id for r in new.results()})
    assert len(changes) == 4 and missing == []

    out = cli("report", tmp_path / "new.db", "-o", tmp_path / "report", "--csv", tmp_path / "all.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    index = (tmp_path / "report" / "index.html").read_text()
    assert index.count('<td class="cell"') == 8
    assert "http://" not in index and "https://" not in index      # nothing fetched from elsewhere
    rows = list(csv.DictReader((tmp_path / "all.csv").open()))
    assert len(rows) == 8 and {r["status"] for r in rows} == {"ok"}
    cell = next((tmp_path / "report" / "cells").glob("*.html")).read_text()
    assert "first difference at" in cell and "Environment fingerprint" in cell


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "p.toml").write_text("[[jobs]]\ntarget = 'numpy.sum'\n")
    done = cli("survey", tmp_path / "p.toml", "--db", tmp_path / "s.db", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"fpspec: error: {tmp_path / 'p.toml'}: [[jobs]] #1 has no n"]
    report = cli("report", tmp_path / "missing.db", "-o", tmp_path / "r", cwd=tmp_path)
    assert report.returncode == 2 and "no such database" in report.stderr
