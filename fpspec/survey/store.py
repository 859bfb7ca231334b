"""The survey store: one SQLite file, a real schema, migrations.

`PRAGMA user_version` is the schema's version; opening a store applies the
migrations it has not seen, each in one transaction, so an old database is
upgraded in place and keeps its rows.  A database from a newer fpspec is
refused (its schema is not known here).  Every result is committed as it
arrives: an interrupted survey loses nothing it had finished.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fpspec.errors import FpspecError

MIGRATIONS: tuple[str, ...] = (
    # 1: environments and results
    """
    CREATE TABLE environments (
        id INTEGER PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        label TEXT NOT NULL,
        info TEXT NOT NULL,
        first_seen TEXT NOT NULL
    );
    CREATE TABLE results (
        id INTEGER PRIMARY KEY,
        env_id INTEGER NOT NULL REFERENCES environments(id),
        job_key TEXT NOT NULL,
        target TEXT NOT NULL,
        op TEXT,
        dtype TEXT NOT NULL,
        n TEXT NOT NULL,
        shape TEXT NOT NULL,
        device TEXT NOT NULL,
        variant TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ok', 'refused', 'error')),
        message TEXT,
        spec TEXT,
        class_hash TEXT,
        created TEXT NOT NULL,
        UNIQUE (env_id, job_key)
    );
    """,
    # 2: what a class is made of, and the cost of finding it
    """
    ALTER TABLE results ADD COLUMN spec_hash TEXT;
    ALTER TABLE results ADD COLUMN trees TEXT;
    ALTER TABLE results ADD COLUMN arithmetic TEXT;
    ALTER TABLE results ADD COLUMN seconds REAL;
    ALTER TABLE results ADD COLUMN fpspec_version TEXT;
    ALTER TABLE results ADD COLUMN job TEXT;
    CREATE INDEX results_by_row ON results (target, op, dtype, n, shape, device);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(FpspecError):
    """A database that cannot be used (exit 2)."""


@dataclass(frozen=True)
class Environment:
    id: int
    hash: str
    label: str
    info: dict


@dataclass(frozen=True)
class Result:
    id: int
    env_id: int
    job_key: str
    target: str
    op: str | None
    dtype: str
    n: str
    shape: str
    device: str
    variant: str
    status: str
    message: str | None
    spec: str | None
    class_hash: str | None
    trees: dict
    arithmetic: str | None
    seconds: float | None
    job: dict

    @property
    def row(self) -> str:
        from fpspec.survey.plan import Job

        return Job.from_json(self.job).row if self.job else f"{self.target} {self.dtype} n={self.n}"


class Store:
    def __init__(self, path):
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a database")
        try:
            self.db = sqlite3.connect(str(self.path), timeout=30)
            self.db.execute("PRAGMA foreign_keys = ON")
            # one commit a result: WAL keeps each durable against a crash of fpspec without an fsync a row
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a survey database ({e})") from None
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path}: schema version {version} is newer than this fpspec's "
                             f"({SCHEMA_VERSION}); upgrade fpspec to read it")
        self.migrate(version)

    def migrate(self, version: int) -> None:
        for k in range(version, SCHEMA_VERSION):
            try:
                with self.db:
                    # executescript commits on its own; BEGIN keeps a migration whole
                    self.db.executescript("BEGIN;\n" + MIGRATIONS[k] + f"\nPRAGMA user_version = {k + 1};\nCOMMIT;")
            except sqlite3.DatabaseError as e:
                self.db.rollback()
                raise StoreError(f"{self.path}: migration to schema {k + 1} failed ({e})") from None

    @property
    def version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ writes

    def environment(self, hash_: str, label: str, info: dict) -> int:
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO environments (hash, label, info, first_seen) VALUES (?, ?, ?, ?)",
                            (hash_, label, json.dumps(info, sort_keys=True), _now()))
        return self.db.execute("SELECT id FROM environments WHERE hash = ?", (hash_,)).fetchone()[0]

    def add(self, env_id: int, row: dict) -> None:
        job = row["job"]
        shape = "" if job.get("m") is None else f"{job['m']}x{job['ncols']}" if job.get("ncols") is not None \
            else str(job["m"])
        with self.db:
            self.db.execute(
                """INSERT OR REPLACE INTO results (env_id, job_key, target, op, dtype, n, shape, device, variant,
                       status, message, spec, class_hash, created, spec_hash, trees, arithmetic, seconds,
                       fpspec_version, job)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (env_id, row["job_key"], job["target"], job.get("op"), job["dtype"], job["n"], shape,
                 job.get("device", "cpu"), job["variant"]["name"], row["status"], row.get("message"),
                 row.get("spec"), row.get("class_hash"), _now(), row.get("spec_hash"),
                 json.dumps(row.get("trees") or {}), row.get("arithmetic"), row.get("seconds"),
                 row.get("fpspec_version"), json.dumps(job)))

    # ------------------------------------------------------------ reads

    def done(self, env_id: int) -> set[str]:
        """Keys of the jobs this environment has a final answer for (errors are tried again)."""
        rows = self.db.execute("SELECT job_key FROM results WHERE env_id = ? AND status != 'error'", (env_id,))
        return {r[0] for r in rows}

    def environments(self) -> list[Environment]:
        return [Environment(i, h, label, json.loads(info))
                for i, h, label, info in self.db.execute("SELECT id, hash, label, info FROM environments ORDER BY id")]

    def results(self) -> list[Result]:
        cur = self.db.execute(
            """SELECT id, env_id, job_key, target, op, dtype, n, shape, device, variant, status, message, spec,
                      class_hash, trees, arithmetic, seconds, job FROM results ORDER BY id""")
        return [Result(*r[:14], json.loads(r[14] or "{}"), r[15], r[16], json.loads(r[17] or "{}")) for r in cur]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
