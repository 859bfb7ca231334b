"""Surveys: which machines, library versions, thread counts and GPUs compute
an op in the same order and arithmetic, kept in one database over time.

    plan (TOML) -> jobs -> workers (one process per environment variant,
    locally or on a Ray cluster) -> rows in a SQLite store -> report (HTML)

- `fpspec.survey.plan`: the plan file and the jobs it names (frozen dataclasses).
- `fpspec.survey.environment`: the fingerprint of the environment a job ran in.
- `fpspec.survey.worker`: runs jobs in one process (`python -m fpspec.survey.worker`).
- `fpspec.survey.store`: the SQLite schema, its migrations, reads and writes.
- `fpspec.survey.run`: fans jobs out (local processes or Ray) and stores what comes back.
- `fpspec.survey.report`: the static HTML report and the CSV export.

A survey drives the command line's own `reveal` in each worker, so it sits
above fpspec.cli in the import order.
"""
from fpspec.survey.plan import Job, Plan, load_plan, parse_plan as parse_plan_text  # noqa: F401
from fpspec.survey.run import compare, run_survey  # noqa: F401
from fpspec.survey.store import Store  # noqa: F401
