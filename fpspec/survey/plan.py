"""A survey plan (TOML) and the jobs it names.

    [survey]
    name = "orders on this fleet"

    [[variants]]                      # environments every job runs in (default: one, as is)
    name = "1 thread"
    env = { OPENBLAS_NUM_THREADS = "1" }
    resources = { "blas:openblas" = 1 }   # with --cluster: only workers that have these

    [[jobs]]
    targets = ["numpy.sum", "torch.sum"]
    dtypes = ["float32", "float64"]
    n = [100, 1000, "1..4096"]        # one n: reveal; a range: infer one spec
    op = "sum"                        # optional: the target's own by default
    shapes = [{ m = 8, ncols = 8 }]   # gemv / gemm
    device = "cpu"
    tf32 = false
    variants = ["1 thread"]           # optional: a subset of the variants

A job is one (target, op, dtype, n, shape, device, tf32, variant); its key
names it across databases, so a job's result before and after an upgrade can
be compared.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fpspec.errors import FpspecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class PlanError(FpspecError):
    """A plan file that cannot be read (exit 2)."""


DTYPES = ("float64", "float32", "float16", "bfloat16")
OPS = ("sum", "dot", "gemv", "gemm")
DEVICES = ("cpu", "cuda")
_N = re.compile(r"^\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class Variant:
    name: str
    env: tuple = ()          # ((name, value), ...), sorted
    resources: tuple = ()    # ((resource, amount), ...), sorted


@dataclass(frozen=True)
class Job:
    target: str
    dtype: str
    n: str                   # "1000" or "1..4096"
    op: str | None = None
    m: int | None = None
    ncols: int | None = None
    device: str = "cpu"
    tf32: bool = False
    variant: Variant = field(default_factory=lambda: Variant("default"))

    @property
    def shape(self) -> str:
        return "" if self.m is None else f"{self.m}x{self.ncols}" if self.ncols is not None else f"{self.m}"

    @property
    def key(self) -> str:
        """The job's identity across databases and machines: what is computed, and the variant's name (the
        variables a variant sets belong to the environment's fingerprint, like library versions)."""
        text = json.dumps([self.target, self.op, self.dtype, self.n, self.m, self.ncols, self.device, self.tf32,
                           self.variant.name], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def row(self) -> str:
        """The report's row: what was computed, whatever the environment."""
        parts = [self.target, *([self.op] if self.op else []), self.dtype, f"n={self.n}"]
        if self.shape:
            parts.append(self.shape)
        if self.device != "cpu":
            parts.append(self.device + (" tf32" if self.tf32 else ""))
        return " ".join(parts)

    def reveal_args(self) -> list[str]:
        """The `fpspec reveal` arguments of this job (its -o comes from the worker)."""
        args = ["reveal", self.target, "-n", self.n, "--dtype", self.dtype]
        if self.op:
            args += ["--op", self.op]
        if self.m is not None:
            args += ["--m", str(self.m)]
        if self.ncols is not None:
            args += ["--ncols", str(self.ncols)]
        if self.device != "cpu":
            args += ["--device", self.device]
        if self.tf32:
            args.append("--tf32")
        return args

    def to_json(self) -> dict:
        return {"target": self.target, "dtype": self.dtype, "n": self.n, "op": self.op, "m": self.m,
                "ncols": self.ncols, "device": self.device, "tf32": self.tf32,
                "variant": {"name": self.variant.name, "env": [list(p) for p in self.variant.env],
                            "resources": [list(p) for p in self.variant.resources]}}

    @staticmethod
    def from_json(d: dict) -> "Job":
        v = d["variant"]
        variant = Variant(v["name"], tuple(tuple(p) for p in v["env"]), tuple(tuple(p) for p in v["resources"]))
        return Job(d["target"], d["dtype"], d["n"], d["op"], d["m"], d["ncols"], d["device"], d["tf32"], variant)


@dataclass(frozen=True)
class Plan:
    name: str
    jobs: tuple          # tuple[Job, ...]
    source: str = "<plan>"


def load_plan(path) -> Plan:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as e:
        raise PlanError(f"{path}: cannot read the plan ({type(e).__name__})") from None
    return parse_plan(text, str(path))


def parse_plan(text: str, source: str = "<plan>") -> Plan:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{source}: {e}") from None
    _only(data, {"survey", "variants", "jobs"}, source, "the plan")
    survey = data.get("survey", {})
    _only(survey, {"name"}, source, "[survey]")
    variants = [_variant(v, source, k) for k, v in enumerate(data.get("variants", []), 1)] or [Variant("default")]
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise PlanError(f"{source}: [[variants]] repeat a name: {names}")
    jobs: list[Job] = []
    entries = data.get("jobs", [])
    if not entries:
        raise PlanError(f"{source}: the plan names no [[jobs]]")
    for k, entry in enumerate(entries, 1):
        jobs.extend(_jobs(entry, variants, source, k))
    seen: dict[str, Job] = {}
    for job in jobs:
        seen.setdefault(job.key, job)
    return Plan(str(survey.get("name", Path(source).stem)), tuple(seen.values()), source)


def _only(table, allowed: set, source: str, where: str) -> None:
    if not isinstance(table, dict):
        raise PlanError(f"{source}: {where} must be a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise PlanError(f"{source}: {where}: unknown key {unknown[0]!r} (expected one of {', '.join(sorted(allowed))})")


def _variant(v, source: str, k: int) -> Variant:
    where = f"[[variants]] #{k}"
    _only(v, {"name", "env", "resources"}, source, where)
    if "name" not in v:
        raise PlanError(f"{source}: {where} has no name")
    env = v.get("env", {})
    res = v.get("resources", {})
    if not isinstance(env, dict) or not all(isinstance(x, (str, int)) for x in env.values()):
        raise PlanError(f"{source}: {where}: env must be a table of strings")
    if not isinstance(res, dict) or not all(isinstance(x, (int, float)) and x > 0 for x in res.values()):
        raise PlanError(f"{source}: {where}: resources must be a table of positive numbers")
    return Variant(str(v["name"]), tuple(sorted((str(a), str(b)) for a, b in env.items())),
                   tuple(sorted((str(a), float(b)) for a, b in res.items())))


def _list(entry, key, default, source, where):
    value = entry.get(key, default)
    return value if isinstance(value, list) else [value]


def _jobs(entry, variants, source: str, k: int) -> list[Job]:
    where = f"[[jobs]] #{k}"
    _only(entry, {"targets", "target", "dtypes", "dtype", "n", "op", "shapes", "device", "tf32", "variants"},
          source, where)
    targets = _list(entry, "targets", entry.get("target"), source, where)
    if targets == [None] or not targets:
        raise PlanError(f"{source}: {where} names no targets")
    dtypes = _list(entry, "dtypes", entry.get("dtype", "float32"), source, where)
    for d in dtypes:
        if d not in DTYPES:
            raise PlanError(f"{source}: {where}: unknown dtype {d!r} (expected one of {', '.join(DTYPES)})")
    if "n" not in entry:
        raise PlanError(f"{source}: {where} has no n")
    ns = [_n(x, source, where) for x in _list(entry, "n", None, source, where)]
    op = entry.get("op")
    if op is not None and op not in OPS:
        raise PlanError(f"{source}: {where}: unknown op {op!r} (expected one of {', '.join(OPS)})")
    device = entry.get("device", "cpu")
    if device not in DEVICES:
        raise PlanError(f"{source}: {where}: unknown device {device!r} (expected cpu or cuda)")
    shapes = entry.get("shapes", [{}])
    if not isinstance(shapes, list) or not all(isinstance(s, dict) and set(s) <= {"m", "ncols"} for s in shapes):
        raise PlanError(f"{source}: {where}: shapes must be a list of tables with m and ncols")
    chosen = variants
    if "variants" in entry:
        by_name = {v.name: v for v in variants}
        missing = [x for x in entry["variants"] if x not in by_name]
        if missing:
            raise PlanError(f"{source}: {where}: no variant named {missing[0]!r}")
        chosen = [by_name[x] for x in entry["variants"]]
    tf32 = bool(entry.get("tf32", False))
    return [Job(str(t), d, n, op, s.get("m"), s.get("ncols"), device, tf32, v)
            for t, d, n, s, v in itertools.product(targets, dtypes, ns, shapes, chosen)]


def _n(x, source: str, where: str) -> str:
    m = _N.match(str(x))
    if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < int(m.group(1))):
        raise PlanError(f"{source}: {where}: n must be a positive integer or a range LO..HI, got {x!r}")
    return m.group(1) if not m.group(2) else f"{m.group(1)}..{m.group(2)}"
