"""Collectives: the order in which an all-reduce (or a reduce-scatter) adds the
W ranks' contributions, element by element.

A collective over W ranks and a buffer of L elements is L independent sums of
W terms: element e of the result is x_0[e] + ... + x_{W-1}[e], in an order the
library chooses per element (NCCL's ring starts each chunk's reduction at
another rank; its tree splits the buffer into chunks too).  Every element
therefore carries its own FPRev query (Note [one query per element]), and one
collective call answers L queries.

    with Collective("all_reduce", world=4, backend="gloo", fmt="fp32") as c:
        rv = reveal_columns(c.run, world=4, numel=4096, fmt="fp32")
    rv.trees[rv.labels[e]]      # the tree over ranks of element e

`Collective` launches the W ranks itself, torchrun-style: one process per rank
(`python -m fpspec.reveal.collective`, RANK / WORLD_SIZE / MASTER_ADDR /
MASTER_PORT in its environment), each bound to GPU `rank` for nccl.  The
parent is no rank: it writes the W input rows to a memory-mapped file, tells
every rank to run the collective, and reads each rank's result back from the
file.  The same ranks serve every buffer size of a session.

`reveal_columns` takes any function from a [W, L] stack to the [L] result, so
a replica (or a simulated collective in tests) is revealed exactly like the
live one.

Note [one query per element]: for ranks i < j, element e gets +M from rank i,
-M from rank j and the unit u from every other rank; its result is
(W - l) * u with l the number of ranks under the lowest common ancestor of i
and j in e's tree (FPRev, seed 000).  Call k asks pair k at every element:
W (W - 1) / 2 calls give every element all of its pairs, and the tree follows
by merging in ascending l (FPRev-basic, Algorithm 2), once per distinct answer
pattern (few: the elements share a handful of orders).  W is small (a node's
GPUs, a few CPU processes), so the quadratic pair count costs 6 calls at
W = 4 and 28 at W = 8, each answering every element.
"""
from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fpspec.errors import FpspecError, RevealRefused
from fpspec.formats import get_format
from fpspec.tree import Node, Tree, evaluate, format_tree, postorder

# library name -> the collective's own name (torch.distributed.<name>)
COLLECTIVES = {"torch.distributed.all_reduce": "all_reduce",
               "torch.distributed.reduce_scatter_tensor": "reduce_scatter_tensor"}
BACKENDS = ("gloo", "nccl")
# the settings that choose an all-reduce's algorithm, recorded as "default" when unset (every
# other NCCL_* variable the ranks see is recorded as found)
NCCL_CHOICES = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")
# not settings: NCCL_VERSION is a container image's label, not the library torch loads
NOT_SETTINGS = ("NCCL_VERSION",)
# set for every rank unless the caller's environment says otherwise: NVLink SHARP
# (multicast) reductions are off, so that the order is the ring's or the tree's
SAFE_DEFAULTS = {"NCCL_NVLS_ENABLE": "0"}
_DTYPES = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
START_TIMEOUT = 300.0       # seconds for W processes to import torch and meet
CALL_TIMEOUT = 300.0


def collective_name(target: str) -> str | None:
    """`all_reduce` for 'torch.distributed.all_reduce' (or 'dist.all_reduce'), None for any other target."""
    key = "torch.distributed." + target.split(".", 1)[1] if target.startswith("dist.") else target
    return COLLECTIVES.get(key)


# ================================================================ the ranks

class Collective:
    """W processes in one process group, running `op` on the buffers the parent hands them.

    run(X): X is [W, L] float64 (row r: rank r's buffer, exact in `fmt`); returns the
    [L] float64 result: all_reduce's (the same on every rank: checked), or the W
    ranks' reduce_scatter_tensor outputs end to end (rank r holds elements
    r L/W .. (r + 1) L/W - 1)."""

    def __init__(self, op: str, *, world: int, backend: str = "gloo", fmt: str = "fp32",
                 env: dict | None = None):
        if op not in COLLECTIVES.values():
            raise FpspecError(f"unknown collective {op!r}; expected one of {', '.join(COLLECTIVES.values())}")
        if backend not in BACKENDS:
            raise FpspecError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if not isinstance(world, (int, np.integer)) or world < 2:
            raise FpspecError(f"the world size must be an integer >= 2, got {world!r}")
        if fmt not in _DTYPES:
            raise FpspecError(f"collectives take {', '.join(_DTYPES)} buffers, not {fmt}")
        self.op, self.world, self.backend, self.fmt = op, int(world), backend, fmt
        self.extra_env = dict(env or {})
        self.calls = 0
        self.environment: dict = {}
        self.procs: list = []
        self.start_seconds = 0.0
        self._dir = None
        self._files: dict = {}

    # ------------------------------------------------------------ lifetime
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self) -> None:
        import importlib.util

        # the parent is no rank: torch is imported by the ranks only
        if importlib.util.find_spec("torch") is None:
            raise FpspecError("torch is not installed (pip install 'fpspec[torch]')")
        t0 = time.perf_counter()
        self._dir = tempfile.TemporaryDirectory(prefix="fpspec-collective-",
                                                dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        env = dict(os.environ)
        for k, v in SAFE_DEFAULTS.items():
            env.setdefault(k, v)
        env.update(self.extra_env)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(self.world))
        for rank in range(self.world):
            read_fd, write_fd = os.pipe()
            log = open(Path(self._dir.name) / f"rank{rank}.log", "wb")
            rank_env = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), FPSPEC_REPLY_FD=str(write_fd))
            proc = subprocess.Popen(
                [sys.executable, "-m", "fpspec.reveal.collective", self.backend, _DTYPES[self.fmt]],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=rank_env,
                pass_fds=(write_fd,), cwd=root)
            os.close(write_fd)
            log.close()
            self.procs.append((proc, os.fdopen(read_fd, "rb", buffering=0)))
        replies = self._replies(START_TIMEOUT, "start")
        self.environment = json.loads(replies[0][len("ready "):])
        self.start_seconds = time.perf_counter() - t0

    def close(self, graceful: bool = True) -> None:
        """Stop the ranks: told to quit (they leave at once), or killed after a failure (the
        others may wait for the failed one inside a collective or the group's start)."""
        for proc, reply in self.procs:
            try:
                if graceful:
                    proc.stdin.write(b"quit\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass
            if not graceful:
                proc.kill()
        for proc, reply in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            reply.close()
        self.procs = []
        self._files = {}
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    # ------------------------------------------------------------ calls
    def out_numel(self, numel: int, op: str | None = None) -> int:
        """Elements each rank's output holds."""
        return numel // self.world if (op or self.op) == "reduce_scatter_tensor" else numel

    def run(self, X: np.ndarray, op: str | None = None) -> np.ndarray:
        """`op` (default: the session's) on the [W, L] stack X; the ranks serve any op and size."""
        op = op or self.op
        if op not in COLLECTIVES.values():
            raise FpspecError(f"unknown collective {op!r}; expected one of {', '.join(COLLECTIVES.values())}")
        if not self.procs:
            raise FpspecError("the collective's ranks are not running (use Collective as a context manager)")
        X = np.asarray(X, np.float64)
        W, L = X.shape
        if W != self.world:
            raise FpspecError(f"{self.world} ranks take {self.world} rows, got {W}")
        if op == "reduce_scatter_tensor" and L % W:
            raise FpspecError(f"reduce_scatter_tensor splits the buffer into {W} equal parts: "
                              f"the size {L} is not a multiple of {W}")
        buf = self._buffer(L, op)
        buf[0][:] = X
        for proc, _ in self.procs:
            proc.stdin.write(f"{op} {buf[2]} {L}\n".encode())
            proc.stdin.flush()
        self._replies(CALL_TIMEOUT, "run")
        self.calls += 1
        out = np.array(buf[1])
        if op == "reduce_scatter_tensor":
            return out.reshape(-1)
        first = out[0].view(np.uint64)
        for r in range(1, W):
            bad = np.flatnonzero(out[r].view(np.uint64) != first)
            if len(bad):
                raise RevealRefused(f"ranks disagree: rank {r}'s result differs from rank 0's at element "
                                    f"{int(bad[0])} ({len(bad)} elements); each rank would need its own spec")
        return out[0]

    def _buffer(self, numel: int, op: str):
        """(input view [W, L], output view [W, L_out], path) of the file for `op` on buffers of `numel`."""
        key = (numel, op)
        if key not in self._files:
            path = Path(self._dir.name) / f"{op}{numel}.f64"
            lo = self.out_numel(numel, op)
            mm = np.memmap(path, np.float64, "w+", shape=(self.world * (numel + lo),))
            self._files[key] = (mm[:self.world * numel].reshape(self.world, numel),
                                mm[self.world * numel:].reshape(self.world, lo), str(path))
        return self._files[key]

    def _replies(self, timeout: float, what: str) -> list[str]:
        out = []
        deadline = time.monotonic() + timeout
        for rank, (proc, reply) in enumerate(self.procs):
            line = b""
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                ready, _, _ = select.select([reply], [], [], max(left, 0))
                if not ready:
                    self._fail(rank, f"no answer to {what} within {timeout:.0f} s")
                chunk = os.read(reply.fileno(), 65536)
                if not chunk:
                    self._fail(rank, f"exited during {what}")
                line += chunk
            text = line.decode().strip()
            if text.startswith("error "):
                self._fail(rank, text[len("error "):])
            out.append(text)
        return out

    def _fail(self, rank: int, why: str):
        log = Path(self._dir.name) / f"rank{rank}.log"
        tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip()][-1:] if log.exists() else []
        self.close(graceful=False)
        raise FpspecError(f"{self.backend} rank {rank} {why}" + (f": {tail[0].strip()[:300]}" if tail else ""))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ================================================================ revealing

@dataclass(frozen=True)
class ColumnRevelation:
    """The order of every element of a [W, L] -> [L] reduction: trees[labels[e]] is element e's."""

    trees: tuple[Tree, ...]          # distinct orders, numbered by first element
    world: int
    numel: int
    queries: int
    calls: int
    seconds: float
    call_seconds: float = 0.0        # of `seconds`, inside the reduction's calls
    notes: tuple[str, ...] = ()
    labels: np.ndarray = field(default=None, compare=False, repr=False)   # (L,) int64

    def tree_at(self, e: int) -> Tree:
        return self.trees[int(self.labels[e])]

    def counts(self) -> list[int]:
        return np.bincount(self.labels, minlength=len(self.trees)).tolist()


def masks(fmt: str, world: int) -> tuple[float, float]:
    """(M, u) for W ranks: W units stay exact and every partial sum of up to W units
    vanishes beside M even in the widest accumulator plausible for `fmt`."""
    from fpspec.reveal.targets import WIDEST_ACCUMULATOR

    f = get_format(fmt)
    acc = get_format(WIDEST_ACCUMULATOR.get(f.name, "fp64"))
    need = acc.precision + int(world).bit_length() + 1
    e_m = min(f.emax - 1, need)
    e_u = e_m - need
    if e_u < f.emin or world.bit_length() >= f.precision:
        raise RevealRefused(f"{fmt} has too little range to swamp {world} units in a {acc.name} accumulator")
    return 2.0 ** e_m, 2.0 ** e_u


def reveal_columns(fn, *, world: int, numel: int, fmt: str = "fp32", seed: int = 0,
                   check_samples: int = 2) -> ColumnRevelation:
    """Reveal the tree over the W rows of every column of a reduction `fn`: [W, L] float64 -> [L].

    Refuses (RevealRefused) a reduction that gives two answers to one input, answers no
    tree fits, or results that the revealed trees, added in `fmt`, do not reproduce on
    random inputs (an arithmetic other than one rounding per addition in `fmt`)."""
    start = time.perf_counter()
    W, L = int(world), int(numel)
    M, u = masks(fmt, W)
    rng = np.random.default_rng(seed)
    calls, inside = 0, 0.0

    def call(X):
        nonlocal calls, inside
        calls += 1
        t0 = time.perf_counter()
        with np.errstate(all="ignore"):
            out = np.asarray(fn(X), np.float64).reshape(-1)
        inside += time.perf_counter() - t0
        if out.shape != (L,):
            raise RevealRefused(f"the reduction returned {out.shape[0]} elements, expected {L}")
        return out

    # determinism first: the same random input twice
    probe = _random_exact(fmt, (W, L), rng)
    first = call(probe)
    if not np.array_equal(first.view(np.uint64), call(probe).view(np.uint64)):
        raise RevealRefused("nondeterministic: the same input gave different outputs on two calls")
    pairs = [(i, j) for i in range(W) for j in range(i + 1, W)]
    lmat = np.empty((L, len(pairs)), np.int64)
    for k, (i, j) in enumerate(pairs):
        X = np.full((W, L), u)
        X[i], X[j] = M, -M
        s = call(X) / u
        ok = np.isfinite(s) & (s == np.rint(s))
        l = W - np.where(ok, s, -1).astype(np.int64)
        bad = np.flatnonzero(~ok | (l < 2) | (l > W))
        if len(bad):
            e = int(bad[0])
            raise RevealRefused(f"element {e}: the query on ranks {i}, {j} gave {s[e] * u!r}, not a count of "
                                f"units (l must be an integer in 2..{W}); the reduction does not add in "
                                f"{fmt} one term at a time")
        lmat[:, k] = l
    labels, firsts = _pattern_labels(lmat, W + 1)
    patterns = lmat[firsts]
    if W > 2 and np.all(patterns == 2):
        raise RevealRefused("order-independent: every pair of masks cancels first (an exact or compensated "
                            "sum); there is no order to reveal")
    trees = tuple(_tree_from_pairs(W, pairs, p, int(e)) for p, e in zip(patterns, firsts))
    for t, e in zip(trees, firsts):
        wide = next((s for s in postorder(t) if isinstance(s, Node) and s.fused), None)
        if wide is not None:
            raise RevealRefused(f"element {int(e)}: {len(wide.children)} partial sums meet in one node "
                                f"{format_tree(wide)}; a collective adds two at a time")
    # the trees, added in fmt, must give the bits of random inputs
    for _ in range(check_samples):
        X = _random_exact(fmt, (W, L), rng)
        got = call(X)
        want = evaluate_columns(trees, labels, X, fmt)
        bad = np.flatnonzero(got.view(np.uint64) != want.view(np.uint64))
        if len(bad):
            e = int(bad[0])
            raise RevealRefused(
                f"element {e}: the revealed tree added in {fmt} gives {want[e]!r}, the reduction {got[e]!r} "
                f"({len(bad)} of {L} elements differ): it does not round once per addition in {fmt}")
    return ColumnRevelation(trees, W, L, L * len(pairs), calls, time.perf_counter() - start, inside,
                            labels=labels)


def _pattern_labels(rows: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(label of every row, first row of every label): equal rows share a label, labels
    numbered by their first row.  Column by column, the distinct prefixes so far
    renumbered through a table (no sort: a few distinct patterns over a million rows)."""
    key = np.zeros(len(rows), np.int64)
    count = 1
    for col in rows.T:
        code = key * base + col
        seen = np.zeros(count * base, bool)
        seen[code] = True
        key = (np.cumsum(seen) - 1)[code]
        count = int(seen.sum())
    firsts = np.full(count, len(rows), np.int64)
    np.minimum.at(firsts, key, np.arange(len(rows)))
    order = np.argsort(firsts, kind="stable")
    renumber = np.empty_like(order)
    renumber[order] = np.arange(count)
    return renumber[key], firsts[order]


def evaluate_columns(trees, labels, X, fmt: str) -> np.ndarray:
    """Element e of the [W, L] stack X summed in trees[labels[e]], one rounding to fmt per addition."""
    X = np.asarray(X, np.float64)
    out = np.empty(X.shape[1])
    # NumPy's own float32 / float64 additions round once; float16's go through float32,
    # which holds the exact sum of two fp16 values to within one rounding that is innocuous
    # (24 >= 2 * 11 + 2 bits); bf16 has no NumPy dtype: the exact model
    native = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16}.get(fmt)
    for k, t in enumerate(trees):
        cols = np.flatnonzero(labels == k)
        if not len(cols):
            continue
        with np.errstate(all="ignore"):     # inf - inf is a nan like the collective's
            if native is None:
                out[cols] = evaluate(t, X[:, cols], fmt)
            else:
                out[cols] = _evaluate_native(t, X[:, cols].astype(native))
    return out


def _evaluate_native(t: Tree, rows: np.ndarray) -> np.ndarray:
    """Row r is leaf r; every binary node one addition in rows' dtype."""
    stack: list = []
    for s in postorder(t):
        if isinstance(s, int):
            stack.append(rows[s])
        else:
            b, a = stack.pop(), stack.pop()
            stack.append(a + b)
    return np.asarray(stack[0], np.float64)


def _tree_from_pairs(W: int, pairs, ls, element: int) -> Tree:
    """FPRev-basic (seed 000, Algorithm 2) on one element's l of every pair."""
    parent = list(range(W))
    tree_of: dict = {k: k for k in range(W)}
    size = [1] * W

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    order = np.argsort(ls, kind="stable")
    for lv in sorted(set(ls.tolist())):
        parts: dict = {}
        for k in order[ls[order] == lv].tolist():
            rx, ry = find(pairs[k][0]), find(pairs[k][1])
            if rx == ry:
                continue
            kids = parts.pop(rx, [rx]) + parts.pop(ry, [ry])
            parent[ry] = rx
            size[rx] += size[ry]
            parts[rx] = kids
        for root, kids in parts.items():
            if size[root] != lv:
                raise RevealRefused(f"element {element}: answers inconsistent with any tree (a node of "
                                    f"l = {lv} holds {size[root]} ranks)")
            tree_of[root] = Node(tuple(tree_of.pop(k) if k != root else tree_of[root] for k in kids),
                                 fused=len(kids) > 2)
    roots = {find(k) for k in range(W)}
    if len(roots) != 1:
        raise RevealRefused(f"element {element}: answers inconsistent with any tree")
    return tree_of[roots.pop()]


def _random_exact(fmt: str, shape, rng) -> np.ndarray:
    """Random normal values exact in fmt (bf16: float32 values with the low 16 bits cleared)."""
    x = rng.standard_normal(shape, dtype=np.float32)
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float64)
    if fmt == "bf16":
        return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    return x.astype(np.float64) if fmt == "fp32" else rng.standard_normal(shape)


def ring_all_reduce(world: int, numel: int, fmt: str = "fp32", start: int = -1):
    """A simulated ring all-reduce, [W, L] float64 -> [L]: the buffer cut into W contiguous
    chunks of ceil(L / W), chunk c summed from rank (c + start) mod W down the ring, one
    rounding to fmt per addition.  With start = -1 it is gloo's ring on CPU ranks whenever
    ceil(L / W) is even (gloo rounds its chunks up to an even count of elements).
    Tests and examples reveal it without starting any process."""
    from fpspec.formats import add

    W, L, f = int(world), int(numel), get_format(fmt)
    q = -(-L // W)

    def run(X):
        X = np.asarray(X, np.float64)
        out = np.empty(L)
        for c in range(W):
            cols = slice(c * q, (c + 1) * q)
            r = (c + start) % W
            acc = X[r, cols]
            with np.errstate(all="ignore"):
                for k in range(1, W):
                    acc = add(f, acc, X[(r - k) % W, cols])
            out[cols] = acc
        return out
    return run


# ================================================================ one rank (a child process)

def _rank_main(backend: str, dtype_name: str) -> None:
    reply = os.fdopen(int(os.environ["FPSPEC_REPLY_FD"]), "w", buffering=1)
    try:
        import torch
        import torch.distributed as dist

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dtype = getattr(torch, dtype_name)
        if backend == "nccl":
            if torch.cuda.device_count() < world:
                raise RuntimeError(f"nccl with {world} ranks needs {world} GPUs, torch sees "
                                   f"{torch.cuda.device_count()}")
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
            dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", rank=rank, world_size=world)
        # one small collective: NCCL connects lazily, and a failure belongs to the start
        warm = torch.ones(world, dtype=dtype, device=device)
        dist.all_reduce(warm)
        env = _environment(backend, world) if rank == 0 else {}
        reply.write("ready " + json.dumps(env) + "\n")
    except Exception as e:
        reply.write("error " + " ".join(f"{type(e).__name__}: {e}".split())[:500] + "\n")
        return
    files: dict = {}
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        try:
            op, path, numel = words[0], words[1], int(words[2])
            lo = numel // world if op == "reduce_scatter_tensor" else numel
            if path not in files:
                mm = np.memmap(path, np.float64, "r+", shape=(world * (numel + lo),))
                files[path] = (mm[:world * numel].reshape(world, numel), mm[world * numel:].reshape(world, lo))
            src, dst = files[path]
            x = torch.from_numpy(np.array(src[rank])).to(dtype).to(device)
            if op == "all_reduce":
                dist.all_reduce(x)
                out = x
            else:
                out = torch.empty(lo, dtype=dtype, device=device)
                dist.reduce_scatter_tensor(out, x)
            dst[rank] = out.to("cpu", torch.float64).numpy()
            reply.write("ok\n")
        except Exception as e:
            reply.write("error " + " ".join(f"{type(e).__name__}: {e}".split())[:500] + "\n")
    # every rank was told to quit at once and none has a collective in flight: leaving without
    # tearing torch down takes a fraction of the seconds an orderly exit does
    reply.close()
    os._exit(0)


def _environment(backend: str, world: int) -> dict:
    """What chose the order: versions, devices, NCCL settings, topology (rank 0's view)."""
    import platform

    import torch

    env: dict = {"backend": backend, "world": world, "torch": torch.__version__}
    if backend == "nccl":
        v = torch.cuda.nccl.version()
        env["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        names = [torch.cuda.get_device_name(k) for k in range(world)]
        env["devices"] = f"{world} x {names[0]}" if len(set(names)) == 1 else ", ".join(names)
        settings = {k: os.environ[k] for k in sorted(os.environ) if k.startswith("NCCL_") and k not in NOT_SETTINGS}
        for k in NCCL_CHOICES:
            settings.setdefault(k, "default")
        env["settings"] = settings
        env["topology"] = _topology(world)
    else:
        env["devices"] = f"{world} CPU processes ({platform.machine()})"
    return env


def _topology(world: int) -> str:
    """The GPU link matrix of `nvidia-smi topo -m` (the W GPUs' rows), or peer access from torch."""
    try:
        text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20).stdout
        rows = [line.split() for line in text.splitlines() if line.startswith("GPU")]
        links = sorted({rows[a][1 + b] for a in range(world) for b in range(world) if a != b})
        if links:
            return f"GPU pairs linked by {', '.join(links)} (nvidia-smi topo -m)"
    except Exception:
        pass
    import torch

    peer = all(torch.cuda.can_device_access_peer(a, b) for a in range(world) for b in range(world) if a != b)
    return "peer access between every pair" if peer else "no peer access between some pairs"


if __name__ == "__main__":
    _rank_main(*sys.argv[1:3])
