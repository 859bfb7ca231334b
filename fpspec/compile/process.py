"""A replica file imported in a fresh Python process, called over a pipe.

    with ReplicaProcess.start(path, label) as rp:
        rp.functions            # the public functions the module exposes
        rp.call("sum", x)       # NumPy in, NumPy out

The child imports the file as a user would (importlib from the path, no
sys.modules entry, no fpspec import), so what is checked is the artifact and
nothing the checking process has loaded.  Requests and answers are pickled
(length-prefixed) on the child's stdin and on a duplicate of its stdout;
anything the replica prints goes to its stderr, kept in a file next to it.
"""
from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

from fpspec.compile.ir import CompileError

# the public functions a replica may expose (docs/replicas.md)
PUBLIC = ("sum", "sums", "dot", "gemv", "gemm")

_CHILD = r'''
import os, pickle, struct, sys, traceback
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)                       # the replica's prints go to stderr, not into the answers
inp = os.fdopen(0, "rb")

def send(obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()

def receive():
    head = inp.read(8)
    if len(head) < 8:
        return None
    return pickle.loads(inp.read(struct.unpack("<Q", head)[0]))

def first_line(e):
    text = str(e).strip().splitlines()
    return text[0][:300] if text else ""

try:
    import importlib.util
    path = sys.argv[1]
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
except BaseException as e:
    send(("error", type(e).__name__, first_line(e)))
    sys.exit(0)
names = [n for n in sys.argv[2].split(",") if callable(getattr(module, n, None))]
send(("ok", names, "torch" in vars(module)))
torch_types = {}
while True:
    request = receive()
    if request is None:
        break
    name, args, torch_dtype = request
    try:
        if torch_dtype is not None:       # a replica that takes tensors (Triton)
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
            dtype = getattr(torch, torch_dtype)
            args = [torch.from_numpy(a.astype("float64")).to(device=device, dtype=dtype) for a in args]
        value = getattr(module, name)(*args)
        if hasattr(value, "detach"):
            value = value.detach().cpu()
            value = (value.float() if str(value.dtype) == "torch.bfloat16" else value).numpy()
        send(("ok", value))
    except Exception as e:
        send(("raised", type(e).__name__, first_line(e)))
'''


class ReplicaCallError(Exception):
    """The replica raised (`type_name` and the first line of its message), or its process died."""

    def __init__(self, message: str, type_name: str = "ReplicaCallError"):
        super().__init__(message)
        self.type_name = type_name


class ReplicaProcess:
    """One replica module loaded in a child process."""

    def __init__(self, proc: subprocess.Popen, label: str, stderr_path: Path):
        self._proc = proc
        self.label = label
        self._stderr_path = stderr_path
        self.functions: tuple[str, ...] = ()    # the public functions the module exposes
        self.takes_tensors = False              # the module imports torch (a Triton replica)
        self.pid = proc.pid

    @classmethod
    def start(cls, path: str | Path, label: str) -> "ReplicaProcess":
        """Import `path` in a new interpreter; CompileError (naming `label`) when it does not import."""
        path = Path(path)
        stderr_path = path.with_suffix(".stderr")
        # the child imports nothing of fpspec itself; a hand-written replica that does finds
        # this fpspec (the one running verify), as it would where the user runs it
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), ",".join(PUBLIC)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                    cwd=str(path.parent), env=env)
        rp = cls(proc, label, stderr_path)
        try:
            answer = rp._receive()
        except ReplicaCallError as e:
            rp.close()
            raise CompileError(f"replica {label} does not import: {e}") from None
        if answer[0] == "error":
            rp.close()
            raise CompileError(f"replica {label} does not import: {answer[1]}: {answer[2]}")
        rp.functions, rp.takes_tensors = tuple(answer[1]), bool(answer[2])
        return rp

    def call(self, name: str, *args, torch_dtype: str | None = None):
        """`name(*args)` in the child: its result, or ReplicaCallError."""
        if self._proc.poll() is not None:
            raise ReplicaCallError(self._death())
        data = pickle.dumps((name, [_plain(a) for a in args], torch_dtype), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ReplicaCallError(self._death()) from None
        answer = self._receive()
        if answer[0] == "raised":
            raise ReplicaCallError(answer[2], answer[1])
        return answer[1]

    def _receive(self):
        head = self._proc.stdout.read(8)
        if len(head) < 8:
            self._proc.wait()
            raise ReplicaCallError(self._death())
        return pickle.loads(self._proc.stdout.read(struct.unpack("<Q", head)[0]))

    def _death(self) -> str:
        code = self._proc.wait()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        try:
            tail = [s for s in self._stderr_path.read_text(errors="replace").strip().splitlines() if s.strip()]
        except OSError:
            tail = []
        return f"the replica's process {how}" + (f" ({tail[-1].strip()[:200]})" if tail else "")

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _plain(a):
    """An argument as the child receives it: NumPy arrays stay arrays (contiguity and
    strides are not what is checked here), anything else as given."""
    import numpy as np

    return np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a


def private_folder(prefix: str = "fpspec-") -> Path:
    """A new directory only this user can read (mkdtemp: mode 0700, a fresh name)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=prefix))


def remove_folder(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def file_sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


__all__ = ["ReplicaProcess", "ReplicaCallError", "PUBLIC", "private_folder", "remove_folder", "file_sha256"]
