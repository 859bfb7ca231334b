"""Replicas whose order depends on the output position (a spec whose outermost
`if` tests the output row i and column j): one replica per arm, rendered by
the backend as usual, joined into one module with a dispatcher.

Each arm's module is a complete replica.  Joining them: module docstrings and
imports go (the imports once at the top); a top-level definition that every
arm has word for word, and whose top-level references are all such
definitions too, is written once (the runtime functions, Triton's kernels);
every other top-level name gets the arm's suffix (`gemm_o1`).  The
dispatcher labels the outputs with the first arm whose condition holds,
calls each arm on the rows of A and columns of B that hold its outputs
(an arm's order does not depend on where its outputs sit) and scatters the
results.  A sum or a dot has one output, at i = j = 0; `sums(X)` sums every
column of X, and column i is output i (a collective: X stacks the ranks'
buffers, row r rank r's, and element i of the result takes its own order).
"""
from __future__ import annotations

import ast
import io
import tokenize

from fpspec.compile.backends import py_cond
from fpspec.compile.ir import CompileError, Positional

# the entry points a replica may expose; the dispatcher gives each one
ENTRIES = ("sum", "sums", "dot", "gemv", "gemm")


def compose(positional: Positional, sources: list[str], target: str) -> str:
    """One module from the arms' replica sources (sources[k] for arm k, the last
    for `otherwise`)."""
    parts = [_Module(src) for src in sources]
    shared = _shared(parts)
    imports: list[str] = []
    for p in parts:
        imports += [s for s in p.imports if s not in imports]
    if "import numpy as np" not in imports:         # the dispatcher's own
        imports.append("import numpy as np")
    future = [s for s in imports if s.startswith("from __future__")]
    imports = future + [s for s in imports if s not in future]
    body: list[str] = []
    body += [text for name, text in parts[0].statements if name in shared]
    entries = [e for e in ENTRIES if e in parts[0].names]
    owner = _owners(parts, shared)
    for k, p in enumerate(parts):
        cond = positional.cases[k][0] if k < len(positional.cases) else None
        text = positional.texts[k] if k < len(positional.texts) else cond is not None and py_cond(cond)
        where = "every other output" if cond is None else f"outputs where {text}"
        body.append(f"# ---------------------------------------------------------------- order {k}: {where}")
        suffixes = {x.split("[")[0]: f"_o{owner.get((key, k), k)}" for key, _ in p.statements if key not in shared
                    for x in key.split(",")}
        for name, text in p.statements:
            if name not in shared and owner.get((name, k), k) == k:
                body.append(_renamed(text, suffixes))
    # n is the kernel's length, m the list's: one and the same at the root
    conds = ", ".join(f"lambda i, j, n: {py_cond(c, m='n', vector=True)}" for c, _ in positional.cases)
    arms = len(parts)
    rows, cols = positional.shape
    dispatch = [
        "# ---------------------------------------------------------------- dispatch on the output position",
        f"_CONDITIONS = ({conds},)",
        f"_SHAPE = ({rows}, {cols})   # the output the conditions were written for (the spec's provenance)",
        "",
        _RUNTIME.strip(),
    ]
    for e in entries:
        dispatch.append(_ENTRY[e].format(arms=", ".join(f"{e}_o{k}" for k in range(arms))).strip())
    if "last_path" in parts[0].names:
        dispatch.append("def last_path():\n    return _LAST[0]()\n".replace(
            "_LAST[0]()", "(" + ", ".join(f"last_path_o{k}" for k in range(arms)) + ")[_LAST[0]]()"))
    head = sources[0].split("\n", 2)
    doc = (f'"""Replica of {positional.name}: {positional.op} in the orders and arithmetic of the spec below, '
           f"one order per part of the output\n({arms} orders, chosen by the output row i and column j).  "
           f'Public: {", ".join(entries)}, SPEC.\n"""')
    out = [head[0], head[1].replace("# target:", "# target:", 1), doc, *imports, "",
           f"SPEC = {positional.source!r}", "", *body, "", *("\n\n" + d for d in dispatch)]
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------- parsing an arm's module

class _Module:
    def __init__(self, source: str):
        self.source = source
        tree = ast.parse(source)
        lines = source.splitlines(keepends=True)
        self.imports: list[str] = []
        self.statements: list[tuple[str, str]] = []      # (name it defines, its text)
        self.names: set[str] = set()
        for node in tree.body:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            text = "".join(lines[start - 1:node.end_lineno]).rstrip("\n")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports.append(text)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue                                   # the docstring
            else:
                name = _defined(node)
                if name is None:
                    raise CompileError(f"internal error: a replica statement at line {node.lineno} "
                                       "defines no single name; cannot join replicas")
                self.names.update(name.split(","))
                self.statements.append((name, text))
        self.text = dict(self.statements)
        self.refs = {name: _references(text) for name, text in self.statements}


def _defined(node) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if len(names) == 1 and len(targets) == 1:
        return names[0]
    if len(targets) == 1 and isinstance(targets[0], ast.Tuple) and \
            all(isinstance(t, ast.Name) for t in targets[0].elts):
        return ",".join(t.id for t in targets[0].elts)
    if isinstance(node, ast.Expr):
        # a top-level call (ORDERS["x"] = ...) keeps the name it changes
        return None
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                            for t in targets):
        return targets[0].value.id + f"[{ast.unparse(targets[0].slice)}]"
    return None


def _references(text: str) -> set[str]:
    return {t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME}


def _shared(parts: list[_Module]) -> set[str]:
    """Names every arm defines with the same text, referring only to such names."""
    first = parts[0]
    indexed = {x.split("[")[0] for p in parts for x, _ in p.statements if "[" in x}   # changed in place: per arm
    cand = {name for name, text in first.statements
            if name not in ENTRIES and name not in ("SPEC", "last_path") and "[" not in name
            and name not in indexed and all(p.text.get(name) == text for p in parts[1:])}
    changed = True
    while changed:
        changed = False
        kept = {x for key in cand for x in key.split(",")}
        for name in sorted(cand):
            if any(r in first.names and r not in kept and r not in name.split(",") for r in first.refs[name]):
                cand.discard(name)
                changed = True
    return cand


def _owners(parts: list[_Module], shared: set[str]) -> dict[tuple[str, int], int]:
    """(name, arm k) -> the first arm j < k whose definition of the name is the same: the
    same text, referring to names that are the same in arms j and k or shared.  Arm k then
    uses arm j's (`_sched_gemv_o1` for arms 1 and 2 whose schedules differ only in their
    rows): numba compiles each definition at its first call, so a kernel written once
    compiles once (note [compile time] in fpspec.compile.backends.numba)."""
    indexed = {x.split("[")[0] for p in parts for x, _ in p.statements if "[" in x}   # changed in place: per arm
    fixed = set(ENTRIES) | {"SPEC", "last_path"} | indexed
    same = {(name, j, k) for k, p in enumerate(parts) for j in range(k) for name, text in p.statements
            if name not in shared and name not in fixed and "," not in name and "[" not in name
            and parts[j].text.get(name) == text}
    changed = True
    while changed:
        changed = False
        for name, j, k in sorted(same):
            local = parts[k].refs[name] & parts[k].names - shared - {name}
            if any((r, j, k) not in same for r in local):
                same.discard((name, j, k))
                changed = True
    owner: dict[tuple[str, int], int] = {}
    for name, j, k in sorted(same, key=lambda t: t[1]):
        owner.setdefault((name, k), owner.get((name, j), j))
    return owner


def _renamed(text: str, suffixes: dict[str, str]) -> str:
    """`text` with every top-level name in `suffixes` given its suffix (not attributes, not
    keyword arguments, not the keys of subscript-assigned names)."""
    toks = list(tokenize.generate_tokens(io.StringIO(text + "\n").readline))
    lines = (text + "\n").splitlines(keepends=True)
    edits = []
    depth = 0
    for k, t in enumerate(toks):
        if t.type == tokenize.OP:
            depth += t.string in "([{"
            depth -= t.string in ")]}"
        if t.type != tokenize.NAME:
            continue
        if t.string not in suffixes:
            continue
        prev = next((p for p in reversed(toks[:k]) if p.type not in (tokenize.NL, tokenize.COMMENT)), None)
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if prev is not None and prev.string == ".":
            continue
        if depth > 0 and nxt is not None and nxt.string == "=" and prev is not None and prev.string in "(,":
            continue
        edits.append((t.start, suffixes[t.string]))
    for (row, col), suffix in reversed(edits):
        line = lines[row - 1]
        end = col
        while end < len(line) and (line[end].isalnum() or line[end] == "_"):
            end += 1
        lines[row - 1] = line[:end] + suffix + line[end:]
    return "".join(lines).rstrip("\n")


_RUNTIME = '''
_LAST = [0]


def _labels(rows, cols, n):
    """The arm of every output: the first whose condition holds, else the last."""
    i = np.arange(rows)[:, None]
    j = np.arange(cols)[None, :]
    label = np.full((rows, cols), len(_CONDITIONS), np.int64)
    todo = np.ones((rows, cols), bool)
    for k, cond in enumerate(_CONDITIONS):
        hit = todo & np.broadcast_to(np.asarray(cond(i, j, n), bool), todo.shape)
        label[hit] = k
        todo &= ~hit
    return label


def _take(x, index, axis):
    if isinstance(x, np.ndarray):
        return np.take(x, index, axis=axis)
    import torch

    return torch.index_select(x, axis, torch.as_tensor(index, device=x.device))


def _scatter(out, where, sub, at):
    """out[where] = sub[at] for index tuples (numpy arrays, or torch tensors)."""
    if out is None:
        return None
    if isinstance(out, np.ndarray):
        out[where] = sub[at]
        return out
    import torch

    put = tuple(torch.as_tensor(w, device=out.device) for w in where)
    get = tuple(torch.as_tensor(a, device=sub.device) for a in at)
    out[put] = sub[get]
    return out


def _empty(sub, shape):
    if isinstance(sub, np.ndarray):
        return np.empty(shape, sub.dtype)
    import torch

    return torch.empty(shape, dtype=sub.dtype, device=sub.device)


def _by_position(arms, A, B, n, options, vector):
    """Each arm on the rows of A (and columns of B) that hold its outputs."""
    if not hasattr(A, "shape"):
        A = np.asarray(A)
    if not hasattr(B, "shape"):
        B = np.asarray(B)
    if len(A.shape) != 2 or (not vector and len(B.shape) != 2):
        return arms[0](A, B, **options)           # the arm says what is wrong with the shapes
    _covered(A, B, vector)
    label = _labels(A.shape[0], 1 if vector else B.shape[1], n)
    out = None
    for k, arm in enumerate(arms):
        mask = label == k
        if not mask.any():
            continue
        rows = np.flatnonzero(mask.any(1))
        cols = np.flatnonzero(mask.any(0))
        sub = arm(_take(A, rows, 0), B if vector else _take(B, cols, 1), **options)
        _LAST[0] = k
        if out is None:
            out = _empty(sub, (A.shape[0],) if vector else label.shape)
        r, c = np.nonzero(mask[np.ix_(rows, cols)])
        out = _scatter(out, (rows[r],) if vector else (rows[r], cols[c]), sub, (r,) if vector else (r, c))
    return out


def _covered(A, B, vector):
    """ValueError unless the output has the shape the conditions on i, j were written for:
    elsewhere an output at the same i, j may well take another order."""
    rows, cols = _SHAPE
    covered = (f"{rows} outputs only (A with {rows} rows)" if vector else
               f"{rows} x {cols} outputs only (A with {rows} rows, B with {cols} columns)")
    if A.shape[0] != rows:
        raise ValueError(f"A has {A.shape[0]} rows, but this replica's orders depend on the output position "
                         f"and its spec covers {covered}")
    if not vector and B.shape[1] != cols:
        raise ValueError(f"B has {B.shape[1]} columns, but this replica's orders depend on the output position "
                         f"and its spec covers {covered}")
def _by_column(arms, X, options):
    """Each arm on the columns of X that are its outputs (output i: column i)."""
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    if len(X.shape) != 2:
        return arms[0](X, **options)             # the arm says what is wrong with the shape
    if X.shape[1] != _SHAPE[0]:
        raise ValueError(f"X has {X.shape[1]} columns, but this replica's orders depend on the output position "
                         f"and its spec covers {_SHAPE[0]} outputs only (X with {_SHAPE[0]} columns)")
    label = _labels(X.shape[1], 1, X.shape[0])[:, 0]
    out = None
    for k, arm in enumerate(arms):
        cols = np.flatnonzero(label == k)
        if not len(cols):
            continue
        sub = arm(_take(X, cols, 1), **options)
        _LAST[0] = k
        if out is None:
            out = _empty(sub, (X.shape[1],))
        out = _scatter(out, (cols,), sub, (np.arange(len(cols)),))
    return out


def _at_origin(arms, n):
    k = int(_labels(1, 1, n)[0, 0])
    _LAST[0] = k
    return arms[k]
'''

_ENTRY = {
    "sum": '''
def sum(x, **options):
    """The spec's sum of the 1-D array x."""
    return _at_origin(({arms}), len(x))(x, **options)
''',
    "sums": '''
def sums(X, **options):
    """The spec's sum of every column of X, column i in the order of its arm."""
    return _by_column(({arms}), X, options)
''',
    "dot": '''
def dot(x, y, **options):
    """The spec's dot product of the 1-D arrays x and y."""
    return _at_origin(({arms}), len(x))(x, y, **options)
''',
    "gemv": '''
def gemv(A, x, **options):
    """A @ x, each output element in the order of its row's arm."""
    return _by_position(({arms}), A, x, len(x), options, True)
''',
    "gemm": '''
def gemm(A, B, **options):
    """A @ B, each output element in the order of its position's arm."""
    n = A.shape[1] if hasattr(A, "shape") and len(A.shape) == 2 else 0
    return _by_position(({arms}), A, B, n, options, False)
''',
}
