"""Host driver of every Triton replica: plan, pick the path, launch the kernels.

Copied verbatim into each generated module after triton_kernels.py and
triton_host.py (the import block below is dropped there: in a replica those
names are already defined in the same module).
"""
import contextlib
import types

# -- imports: dropped in replicas
import numpy as np
import torch
import triton

# the argument checks of every backend's replica (embedded with their settings: backends.triton)
from fpspec.compile.runtime.inputs_rt import _NAME, _input, _length, _operands, _shape

from fpspec.compile.triton_host import CHAIN, LONE_FIRST, STORED_FORMATS, PlanError, lone_kinds, plan
from fpspec.compile.triton_kernels import (combine, combine_fused, combine_levels, finish, mm_chain_emulated, mm_chain_emulated_wide,
                                           UNSET, mm_chain_native, mm_fold, mm_fold_acc, mm_lone, sum_fold, sum_lanes,
                                           sum_pairs)
# -- end imports

# name: (exponent bits, fraction bits, torch dtype, torch int dtype of the same width)
FORMATS = {
    "fp16": (5, 10, torch.float16, torch.int16),
    "bf16": (8, 7, torch.bfloat16, torch.int16),
    "fp32": (8, 23, torch.float32, torch.int32),
    "fp64": (11, 52, torch.float64, torch.int64),
    # tf32 inputs travel in fp32 tensors; the replica reads their top 19 bits, as a TF32 unit does
    "tf32": (8, 23, torch.float32, torch.int32),
    # fp8 inputs (fused chains on the emulated path): bit patterns read as uint8
    "fp8e4m3": (4, 3, torch.float8_e4m3fn, torch.uint8),
    "fp8e5m2": (5, 2, torch.float8_e5m2, torch.uint8),
    # AMD CDNA3's fp8 (bias one larger, no inf, no -0.0)
    "fp8e4m3fnuz": (4, 3, torch.float8_e4m3fnuz, torch.uint8),
    "fp8e5m2fnuz": (5, 2, torch.float8_e5m2fnuz, torch.uint8),
    # fp6 and fp4 (fused chains on the emulated path): values in fp32 tensors, read as fp32
    # bits with the exponent clamped at the format's emin (FUSED_EMIN), as fpspec.arith.fused
    # decodes every format
    "fp6e2m3": (8, 23, torch.float32, torch.int32),
    "fp6e3m2": (8, 23, torch.float32, torch.int32),
    "fp4e2m1": (8, 23, torch.float32, torch.int32),
}
# emin of the formats carried in fp32 (fpspec.arith.fused._FORMATS)
FUSED_EMIN = {"fp6e2m3": 0, "fp6e3m2": -2, "fp4e2m1": 0}
# fp_decode's FN of an input format: 1 for e4m3 (no inf), 2 for the fnuz formats, else 0 (IEEE)
DECODE_KIND = {"fp8e4m3": 1, "fp8e4m3fnuz": 2, "fp8e5m2fnuz": 2}
# the kernels' ACC of an accumulator (triton_kernels Note [accumulators])
ACC_CODES = {"fp32": 0, "fp64": 1, "fp16": 2, "bf16": 3}


def acc_code(accumulator, input):
    """The kernels' ACC of an accumulator for terms of format `input` (fp32 values of fp64
    terms: an fp64 carrier, 4)."""
    return 4 if accumulator == "fp32" and input == "fp64" else ACC_CODES[accumulator]


class Mode:
    """A `using` region's own arithmetic (triton_host Note [regions in plans])."""

    def __init__(self, accumulator, product, product_format=None):
        self.accumulator, self.product, self.product_format = accumulator, product, product_format

def _device_of(t):
    """A context in which kernels launch on tensor t's GPU: Triton launches on the current CUDA
    device, and tensors on another GPU would be read there through pointers of another device."""
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


# GPUs whose Tensor Core fused node is (w=16, 2 extra bits, truncation, rz,
# floor -133) for fp16 and bf16: Hopper, compute capability 9.0 (H100, H200)
NATIVE_CAPABILITY = (9, 0)
NATIVE_FUSED = dict(width=16, extra_bits=2, floor=-133, to_zero=True)
# the kernels' floor for a spec without one (exponent_floor = none): below every product's
# exponent (fp32 subnormals squared: 2^-298) and every c, so it never moves the alignment,
# while 2^(FLOOR - FRAC) stays a normal fp64 number
NO_FLOOR = -320


def _stored_format(kind):
    """(exponent bits, fraction bits) a chain kind's node results are rounded to; (0, 0): none."""
    return FORMATS[STORED_FORMATS[kind]][:2] if kind in STORED_FORMATS else (0, 0)


def _taken(p, fma, exact, both=False, first=False):
    """Which segments of plan p are one term (a fold of one, in a region or not) that a combine
    step of fma or exact products takes as a leaf (Note [lone products] at mm_lone).  fma,
    exact, first: bools, or one per step.  With fma, of two such leaves the earlier is rounded,
    not taken (fpspec.arith.evaluate, note [which child is fused]); with first (product =
    fma_first, an fma) the later.  both: only steps of two."""
    S = p.segs.shape[0]
    kinds = p.segs[:, 3]
    one = (p.segs[:, 1] == 1) & lone_kinds(kinds)
    T = p.steps.shape[0]
    fma, exact = torch.as_tensor(fma).expand(T), torch.as_tensor(exact).expand(T)
    first = torch.as_tensor(first).expand(T)
    taken = torch.zeros(S, dtype=torch.bool)
    for x, y in ((p.steps[:, 1], p.steps[:, 2]), (p.steps[:, 2], p.steps[:, 1])):
        xs, ys = x.clamp(max=S - 1), y.clamp(max=S - 1)
        leaf = (x < S) & one[xs] & (fma | exact)
        leaf &= ~(fma & (y < S) & one[ys] & ((p.segs[xs, 0] < p.segs[ys, 0]) != first))
        if both:
            leaf &= (y < S) & one[ys]
        taken[x[leaf]] = True
    return taken


class Numerics:
    """What the replica's kernels need of the spec's arithmetic section."""

    def __init__(self, input, accumulator, output, product, init, fused=None, product_format=None, regions=()):
        self.input, self.accumulator, self.output = input, accumulator, output
        self.product, self.init, self.fused = product, init, fused
        self.product_format = product_format
        # mode k >= 1 of the plans is regions[k - 1]; mode 0 the spec's own arithmetic
        self.modes = [Mode(accumulator, product, product_format)] + list(regions)
        self.accs = [self.acc] + [acc_code(r.accumulator, input) for r in regions]

    @property
    def acc(self):
        """The kernels' ACC (Note [accumulators]); fused nodes writing fp16 into an fp16
        accumulator are chains only, whose values the fp32 kernels carry (ACC 0)."""
        return 0 if self.fused is not None else ACC_CODES[self.accumulator]


class Fused:
    def __init__(self, width, extra_bits, floor, to_zero, zero_exponent=None, c_emin=None, amd=False,
                 input_b=None, output="fp32", aligned=0, subnormal_inputs=True,
                 subnormal_outputs=True, interleave=1):
        self.width, self.extra_bits, self.floor, self.to_zero = width, extra_bits, floor, to_zero
        # MMA-Sim's conventions (fpspec.arith.fused note [zero exponent]) and AMD's combine
        # (note [amd combine]): the wide form only
        self.zero_exponent, self.c_emin, self.amd = zero_exponent, c_emin, amd
        # b's format (None: a's), the format nodes write, their result's significand bits,
        # aligned terms' rounding (0 truncate, 1 floor, 2 nearest even), subnormal flushing,
        # AMD's sub-blocks: the wide form only as well
        self.input_b, self.output, self.aligned = input_b, output, aligned
        # fpspec.arith.fused FusedParams.result_precision (fp8 units: 24 + extra_bits bits)
        self.result_bits = min(FORMATS[output][1] + 1, 24 + min(extra_bits, 0))
        self.subnormal_inputs, self.subnormal_outputs, self.interleave = subnormal_inputs, subnormal_outputs, interleave

    @property
    def general(self):
        """True where only the wide form computes these nodes (fp_fused_node's optional constexprs)."""
        return (self.zero_exponent is not None or self.c_emin is not None or self.amd or self.input_b is not None
                or self.output != "fp32" or self.aligned != 0 or not self.subnormal_inputs
                or not self.subnormal_outputs or self.interleave != 1)


class Replica:
    """The spec's order and numerics, runnable on any tensor device (CPU via the interpreter)."""

    def __init__(self, op, numerics, root, orders, n_min, n_max):
        self.op, self.numerics, self.root, self.orders = op, numerics, root, orders
        self.n_min, self.n_max = n_min, n_max
        self.plans = {}
        self.lone = {}          # plan -> its lone products (Replica.lone_products)
        self.last_path = None   # "native" or "emulated": which the last call used
        self.columns = None     # api_sums' GEMV twin (made on first use)
        # tile shapes (tuning only: the order along K does not depend on them)
        self.native_config = dict(BM=128, BN=256, BK=64, GROUP=8, num_warps=8, num_stages=3)
        # ((max M, tiles), ...) ascending: a batch of M rows runs the first whose max M >= M
        # (none: native_config at every M); fpspec/compile/batch.py, Note [tiles and bits]
        self.batch_tiles = ()
        self.launch = Launch()
        self.native_why = {}    # (device, plan) -> native_reason: asked once, not per call
        self.native_groups = {}     # (device, plan, BK) -> the chain launches of the native path
        # GPU_NODE: each node's c and result through fp64 fma/conversion rounding toward zero
        # (fp_node_result): 56.6 against 59.8 ms at fp16 4096^3 on an H100
        # (benchmarks/results/triton_replica_h100_h200_2026-11-26/bench_h100_gpu_node.txt)
        self.emulated_config = dict(BM=16, BN=32, num_warps=4, GPU_NODE=True)
        # register limit of the tile form with fp32 products (ARITH 1; None: the compiler's
        # choice, 255 with spills): 3 programs an SM instead of 2, 53.9 against 56.6 ms
        self.emulated_maxnreg = 168
        # "tile" (GPU form), "wide" (interpreter form) or "auto"
        self.emulated_kernel = "auto"
        # the tile form's aligned products (mm_chain_emulated's ARITH): "auto" or 0..5 (4, 5: GPU only)
        self.emulated_arith = "auto"
        # the tile form's inf/nan pass: True (tested every node), "auto" (only when the inputs
        # have some; measured slower than True, 144.6 against 59.8 ms at fp16 4096^3 on an
        # H100, bench_h100_float_products.txt: Triton's code for the loop without the test)
        # or "tile", the default: the host flags the rows of A and columns of B that hold an
        # inf or nan (two torch reductions, one sync) and a tile tests its flags once (Note
        # [tile specials] in triton_kernels); with no flag at all, fp16 with ARITH 1 runs the
        # finite chain alone (SPECIALS=3, Note [finite fp16 node]): 53.9 -> 28.6 ms
        # (benchmarks/results/triton_replica_h100_h200_2026-11-26/bench_h100_finite_fp16.txt)
        self.emulated_specials = "tile"
        # leaf blocks a program (a power of two), and at most this many perfect levels a pairs launch
        self.sum_config = dict(BG=16, num_warps=2, PAIRS_H=10)

    def plan(self, n, what="the reduction"):
        if n < self.n_min or (self.n_max is not None and n > self.n_max):
            _length(n, what)    # the message every replica gives (N_MIN, N_MAX: the replica's range)
            raise ValueError(f"{what} has length {n}, outside the range n in {self.n_min}..{self.n_max or ''}")
        got = self.plans.get(n)
        if got is None:
            f = self.numerics.fused
            p = plan(self.root, self.orders, n, leaves=self.op == "sum", fused_width=None if f is None else f.width)
            self.check_plan(p)
            got = self.plans[n] = p
        return got

    def check_plan(self, p):
        """PlanError where the kernels cannot run plan p (the compiler refuses such specs
        by planning sample n: fpspec.compile.backends.triton)."""
        nm = self.numerics
        if self.op == "sum" and p.has_chain:
            raise PlanError("fused nodes in a sum are not supported by the triton kernels")
        if self.op == "sum":
            return
        f = nm.fused
        if p.has_chain and f is None:
            raise PlanError("the order has fused chains but the spec's arithmetic has no fused section")
        for width, _ in p.chain_ids:
            if width > f.width:
                raise PlanError(f"fused nodes of {width} products but the spec's fused nodes take {f.width}")
        # a lone product that meets a partial sum or another leaf: an exact product in an fp64
        # slot, and the combine step rounds once (Note [lone products] at mm_lone); with an fp64
        # accumulator, combine_fused (triton_kernels Note [fp64 lone products])

    def step_products(self, p, product):
        """Whether each step of plan p (its leveled rows) adds with products `product`."""
        return torch.tensor([m.product == product for m in self.numerics.modes])[p.steps[:, 3]]

    def step_accs(self, p):
        """The ACC of each step of plan p (its leveled rows)."""
        return torch.tensor(self.numerics.accs)[p.steps[:, 3]]

    def fused_lone(self, p):
        """Note [fp64 lone products] (triton_kernels): per step of plan p (its leveled rows), the
        term it fuses and which operand that is ((-1, 0) where none), and whether it adds two
        exact products (rounded to odd in fp64); None: no such step."""
        key = ("fused", p)
        if key in self.lone:
            return self.lone[key]
        nm, got = self.numerics, None
        if p.steps.shape[0] and 1 in nm.accs:
            wide = self.step_accs(p) == 1
            first = self.step_products(p, "fma_first")
            fma = (self.step_products(p, "fma") | first) & wide & (nm.input == "fp64")
            S = p.segs.shape[0]
            one = (p.segs[:, 1] == 1) & lone_kinds(p.segs[:, 3])
            table = torch.full((p.steps.shape[0], 3), -1, dtype=torch.int64)
            table[:, 1:] = 0
            for side, (x, y) in enumerate(((p.steps[:, 1], p.steps[:, 2]), (p.steps[:, 2], p.steps[:, 1]))):
                xs, ys = x.clamp(max=S - 1), y.clamp(max=S - 1)
                leaf = fma & (x < S) & one[xs] & ~((y < S) & one[ys] & ((p.segs[xs, 0] < p.segs[ys, 0]) != first))
                table[leaf, 0] = p.segs[xs[leaf], 0]
                table[leaf, 1] = side
            a, b = p.steps[:, 1], p.steps[:, 2]
            table[:, 2] = (self.step_products(p, "exact") & wide & (a < S) & one[a.clamp(max=S - 1)] & (b < S)
                           & one[b.clamp(max=S - 1)]).long()
            if bool((table[:, 0] >= 0).any() or table[:, 2].any()):
                got = table
        self.lone[key] = got
        return got

    def lone_products(self, p):
        """Note [lone products]: the fold segments of one leaf that a combine step takes with
        product = fma or exact, whose exact product goes into an fp64 slot (None: none, or
        products exact in fp32: fp16 and fp8 inputs).  With product = fma a node of two leaves
        fuses the later one and rounds the earlier first (fpspec.arith.evaluate, note [which
        child is fused]): that one keeps its rounded fp32 product."""
        if p in self.lone:
            return self.lone[p]
        nm, got = self.numerics, None
        if p.mixed and p.steps.shape[0]:
            # regions: every leaf an addition of fma or exact products takes (Note [regions in plans])
            first = self.step_products(p, "fma_first")
            taken = _taken(p, self.step_products(p, "fma") | first, self.step_products(p, "exact"), first=first)
            if bool(taken.any()):
                got = torch.nonzero(taken).flatten()
            self.lone[p] = got
            return got
        # fp32: products of fp16 and fp8 values are exact in it; fp16, bf16 accumulators: every
        # product is rounded to them, and with product = fma a taken one must not be
        fma = nm.product in ("fma", "fma_first")
        wide = nm.acc == 0 and (fma or nm.product == "exact") and nm.input in ("fp32", "bf16", "tf32")
        if (wide or (nm.acc in (2, 3) and fma)) and p.steps.shape[0]:
            taken = _taken(p, fma, nm.product == "exact", first=nm.product == "fma_first")
            if bool(taken.any()):
                got = torch.nonzero(taken).flatten()
        self.lone[p] = got
        return got

    # ------------------------------------------------------------ paths

    def native_reason(self, device, p):
        """None when the native path reproduces the spec on `device`, else why not."""
        nm = self.numerics
        f = nm.fused
        if device.type != "cuda":
            return "not on a CUDA device"
        if torch.cuda.get_device_capability(device) != NATIVE_CAPABILITY:
            return f"the GPU ({torch.cuda.get_device_name(device)}) is not an H100/H200"
        if nm.input not in ("fp16", "bf16") or f is None:
            return "the spec has no fp16/bf16 fused nodes"
        hw = NATIVE_FUSED
        # no floor is the H100's for fp16: its products (>= 2^-48) and results never reach 2^-133;
        # bf16 through a bf16 or fp16 output: the probes cannot observe the floor (it is recorded as none)
        floor = hw["floor"] if f.floor is None and (nm.input == "fp16" or nm.output != "fp32") else f.floor
        if ((f.extra_bits, floor, f.to_zero) != (hw["extra_bits"], hw["floor"], hw["to_zero"]) or f.width > 16
                or f.general):
            return "the spec's fused nodes are not the H100's"
        segs = p.segs
        kinds = segs[:, 3]
        stored = p.stored
        # a chain of 16-wide nodes, or one node of at most the spec's width (zeros pad it to 16);
        # a stored chain is one node (its result is rounded once, after the MMA)
        one_node = segs[:, 1] <= segs[:, 4]
        # (a first node of one more, triton_host Note [first node of one more]: the emulated kernels)
        ok = ((((kinds == CHAIN) & ((segs[:, 4] == 16) | one_node)) | (stored & one_node)) & (segs[:, 2] == 1)
              & (segs[:, 5] != LONE_FIRST))
        if not bool(ok.all()):
            return "the order has terms outside contiguous chains of 16"
        return None

    def pick(self, path, device, p):
        if path not in ("auto", "native", "emulated"):
            raise ValueError(f"path must be auto, native or emulated, got {path!r}")
        if path == "emulated":
            return "emulated"
        key = (device, id(p))     # plans live in self.plans: their ids are not reused
        why = self.native_why.get(key, 0)
        if why == 0:
            why = self.native_why[key] = self.native_reason(device, p)
        if why is None:
            return "native"
        if path == "native":
            raise ValueError(f"the native path cannot run this spec here: {why}")
        return "emulated"

    # ------------------------------------------------------------ the public API
    # Note [replica arguments]: the same contract as the NumPy and Numba replicas
    # (docs/replicas.md): torch tensors (CPU or CUDA) in -> torch out on their
    # device; NumPy arrays in -> NumPy out, run on the GPU when there is one (lists,
    # scalars and masked arrays refused, as the NumPy replica refuses them); any strides (a view is read as the
    # values it shows, a stride-0 expand included); the spec's input dtype only
    # (no silent conversion); the dimensions the op takes (never flattened);
    # each problem one ValueError or TypeError naming the argument.

    def arguments(self, named):
        """named: ((name, value, ndim), ...) -> (tensors on one device, give_back(result))."""
        fused = self.numerics.fused
        kinds, tensors = set(), []
        for i, (name, v, ndim) in enumerate(named):
            # the second operand is in the unit's b format where it has one
            fmt = fused.input_b if i == 1 and fused is not None and fused.input_b else self.numerics.input
            dt = FORMATS[fmt][2]
            if isinstance(v, torch.Tensor):
                kinds.add("torch")
                if v.dtype != dt:
                    raise TypeError(f"{name} has dtype {v.dtype}, but this replica of {_NAME} takes {dt} "
                                    f"tensors (input format {fmt})")
                t = v
            else:
                # anything else is checked as by the NumPy and Numba replicas (lists, scalars, masked
                # arrays, other dtypes, values off the format's grid): the same function, the same errors
                kinds.add("numpy")
                a = _input(v, name, i == 1)
                c = np.ascontiguousarray(a)
                if not c.flags.writeable:    # torch shares a NumPy array's memory and warns on a read-only one
                    c = c.copy()
                t = torch.from_numpy(c.reshape(a.shape)).to(dt)  # (0-d stays 0-d)
            _shape(name, types.SimpleNamespace(ndim=t.dim(), shape=tuple(t.shape)), ndim)   # (4, 5), not torch.Size
            tensors.append(t)
        if len(kinds) > 1:
            raise TypeError(f"{' and '.join(n for n, _, _ in named)} mix torch tensors and NumPy arrays; "
                            "pass one kind")
        # compiled kernels run on the GPU only: there, NumPy arrays and CPU tensors go to the GPU
        # and their result comes back (the interpreter runs on the CPU and cannot launch on CUDA)
        import os

        compiled = os.environ.get("TRITON_INTERPRET", "0") != "1"
        devices = {t.device for t in tensors}
        if "numpy" in kinds:
            device = torch.device("cuda" if compiled and torch.cuda.is_available() else "cpu")
            tensors = [t.to(device) for t in tensors]

            def give_back(result):
                r = result.detach().cpu()
                r = r.float() if r.dtype == torch.bfloat16 else r   # no NumPy bf16: its values, exact in float32
                return r.numpy()[()] if r.dim() == 0 else r.numpy()
        elif len(devices) > 1:
            raise ValueError(f"{' and '.join(n for n, _, _ in named)} are on different devices "
                             f"({', '.join(sorted(str(d) for d in devices))})")
        elif compiled and devices == {torch.device("cpu")} and torch.cuda.is_available():
            tensors = [t.cuda() for t in tensors]

            def give_back(result):
                return result.cpu()
        else:
            def give_back(result):
                return result
        return tensors, give_back

    def api_sum(self, x):
        (x,), back = self.arguments((("x", x, 1),))
        return back(self.sum(x))

    def api_sums(self, X):
        """The sum of every column of X (each its own accumulation), in one launch: the columns
        as the rows of a GEMV against ones (each term times one, exactly) on a GEMV's plan (a
        sum's plan is for one vector).  A collective's [W, L] stack has millions of columns."""
        (X,), back = self.arguments((("X", X, 2),))
        self.plan(X.shape[0], "every column of X")
        if self.columns is None:
            self.columns = Replica("gemv", self.numerics, self.root, self.orders, self.n_min, self.n_max)
        ones = torch.ones((X.shape[0], 1), dtype=X.dtype, device=X.device)
        return back(self.columns.matmul(X.T.contiguous(), ones, "emulated").reshape(-1))

    def api_dot(self, x, y, path):
        (x, y), back = self.arguments((("x", x, 1), ("y", y, 1)))
        _operands("dot", x, y)       # the checks and messages of every replica
        return back(self.matmul(x.reshape(1, -1), y.reshape(-1, 1), path, ("x", "y")).reshape(()))

    def api_gemv(self, A, x, path):
        (A, x), back = self.arguments((("A", A, 2), ("x", x, 1)))
        _operands("gemv", A, x)
        return back(self.matmul(A, x.reshape(-1, 1), path, ("A", "x")).reshape(-1))

    def api_gemm(self, A, B, path):
        (A, B), back = self.arguments((("A", A, 2), ("B", B, 2)))
        _operands("gemm", A, B)
        return back(self.matmul(A, B, path))

    # ------------------------------------------------------------ matrix ops

    def matmul(self, A, B, path="auto", names=("A", "B")):
        """C = A @ B (2-D), every element reduced over K in the spec's order."""
        with _device_of(A):
            return self._matmul(A, B, path, names)

    def _matmul(self, A, B, path, names):
        nm = self.numerics
        M, K = A.shape
        K2, N = B.shape
        if K != K2:
            raise ValueError(f"{names[0]} has {K} columns but {names[1]} has {K2} rows; expected the same length")
        exp_in, man_in, dt_in, it_in = FORMATS[nm.input]
        exp_out, man_out, dt_out, it_out = FORMATS[nm.output]
        fmt_b = nm.fused.input_b if nm.fused is not None and nm.fused.input_b else nm.input
        exp_b, man_b, dt_b, it_b = FORMATS[fmt_b]
        if A.dtype != dt_in or B.dtype != dt_b:
            raise TypeError(f"inputs must be {dt_in} and {dt_b}, got {A.dtype} and {B.dtype}")
        p = self.plan(K, f"the inner dimension of {names[0]} and {names[1]}")
        if M == 0 or N == 0:     # no output to compute (a grid of no programs cannot be launched)
            return torch.empty((M, N), dtype=dt_out, device=A.device)
        if nm.input == "tf32":   # the low 13 fraction bits cleared (toward zero), on the host
            A = (A.view(torch.int32) & -8192).view(torch.float32)
            B = (B.view(torch.int32) & -8192).view(torch.float32)
        chosen = self.pick(path, A.device, p)
        self.last_path = chosen
        out = torch.empty((M, N), dtype=dt_out, device=A.device)
        S = p.segs.shape[0]
        direct = p.num_slots == 1
        dev = p.on(A.device)
        segs = dev.segs
        if direct:
            dst, s_slot, s_m, s_n = out.view(it_out), 0, out.stride(0), out.stride(1)
        else:
            lone = self.lone_products(p)
            narrow = lone is None and not any(a in (1, 4) for a in nm.accs)   # fp32 slots (Note [accumulators])
            vals = torch.empty((p.num_slots, M, N), dtype=torch.float32 if narrow else torch.float64, device=A.device)
            dst, s_slot, s_m, s_n = vals, M * N, N, 1
        init = nm.init == "+0.0"
        if chosen == "native":
            cfg = next((c for top, c in self.batch_tiles if M <= top), self.native_config)
            key = (A.device, id(p), cfg["BK"])
            groups = self.native_groups.get(key)
            if groups is None:
                groups = self.native_groups[key] = self._native_groups(p, dev, cfg["BK"])
            BM, BN = cfg["BM"], cfg["BN"]
            options = {k: v for k, v in cfg.items() if k not in NATIVE_TILES}
            for ids, even_k, store_exp, store_man in groups:
                grid = (-(-M // BM) * -(-N // BN), 1, ids.numel())    # (triton.cdiv is a slow call on the host)
                self.launch(mm_chain_native, grid, NATIVE_ARGS, 5, (
                    A, B, dst, segs, ids, M, N, A.stride(0), A.stride(1), B.stride(0), B.stride(1), s_slot, s_m,
                    s_n, BM, BN, cfg["BK"], direct, init, exp_out, man_out, cfg["GROUP"], p.aligned16, even_k,
                    store_exp, store_man), options)
        else:
            Ab, Bb = A.view(it_in), B.view(it_b)
            common = (M, N, Ab.stride(0), Ab.stride(1), Bb.stride(0), Bb.stride(1), s_slot, s_m, s_n)
            f = nm.fused
            if p.has_chain and f is None:
                raise PlanError("the order has fused chains but the spec's arithmetic has no fused section")
            specials = flags = None
            # one launch per chain width (a constexpr of the kernel)
            for (width, kind), group in dev.chain_ids.items():
                store_exp, store_man = _stored_format(kind)
                # a chain's first node may take one product more (triton_host Note [first node of
                # one more]): the blocks have a lane for it
                lanes = width + p.lone_first[width, kind]
                if width > f.width:
                    raise PlanError(f"fused nodes of {width} products but the spec's fused nodes take {f.width}")
                form = self.emulated_kernel
                if f.general:
                    form = "wide"   # MMA-Sim's conventions, AMD, two formats, fp16 nodes: fp_fused_node's
                if form == "auto":
                    # the interpreter pays per operation, not per element: there the
                    # wide form (same arithmetic, few large operations) is the fast one.
                    # The tile form holds a product's aligned significand in int32 and
                    # the sum of a node's terms too (Note [int32 terms])
                    tile_ok = (2 * man_in <= 23 + f.extra_bits and lanes << (25 + f.extra_bits) <= 1 << 31
                               and not nm.input.startswith("fp8"))   # fp8: the wide form only
                    form = "tile" if A.device.type == "cuda" and tile_ok else "wide"
                kern = {"wide": mm_chain_emulated_wide, "tile": mm_chain_emulated}[form]
                cfg = self.emulated_config if A.device.type == "cuda" else dict(BM=16, BN=16)
                if nm.input != "fp16":
                    # GPU_NODE's conversion flushes fp32-subnormal node results to zero (bf16 products
                    # reach them; fp16 ones stay above 2^-73): H100, bf16 16x16x50, 127 of 38400
                    # outputs of subnormal inputs differed with it, none without (k50 notes)
                    cfg = dict(cfg, GPU_NODE=False)
                if form == "wide":   # the wide form takes the tile shape only (fp32 / tf32 / fp8 inputs on a GPU)
                    cfg = {key: cfg[key] for key in ("BM", "BN", "num_warps") if key in cfg}
                    # e4m3 has no inf; fp8 units keep 13 fraction bits (23 + extra_bits < 23)
                    node_exp, node_man = FORMATS[f.output][:2]
                    cfg.update(IN_FN=DECODE_KIND.get(nm.input, 0),
                               RES_MAN=min(node_man, f.result_bits - 1) % node_man)
                    if f.general:
                        cfg.update(AMD=f.amd, NODE_EXP=node_exp, NODE_MAN=node_man, SUB_IN=f.subnormal_inputs,
                                   SUB_OUT=f.subnormal_outputs, ALIGNED=f.aligned, INTERLEAVE=f.interleave)
                        for key, value in (("ZEXP", f.zero_exponent), ("C_EMIN", f.c_emin)):
                            if value is not None:
                                cfg[key] = value
                    if fmt_b != nm.input:
                        cfg.update(B_EXP=exp_b, B_MAN=man_b, B_FN=DECODE_KIND.get(fmt_b, 0))
                    if nm.input in FUSED_EMIN:
                        cfg["A_EMIN"] = FUSED_EMIN[nm.input]
                    if fmt_b in FUSED_EMIN:
                        cfg["B_EMIN"] = FUSED_EMIN[fmt_b]
                    for key in ("C_EMIN", "A_EMIN", "B_EMIN"):   # arguments, not constexprs: always given
                        cfg.setdefault(key, UNSET.value)
                if form == "tile":
                    arith = self._arith(A.device)
                    if specials is None and self.emulated_specials == "tile":
                        flags = dict(bad_a_ptr=(~torch.isfinite(A)).any(dim=1).to(torch.int32),
                                     bad_b_ptr=(~torch.isfinite(B)).any(dim=0).to(torch.int32))
                        # 3: no inf or nan at all (one sync): the kernel without the inf/nan
                        # code, where it has such a form (Note [finite fp16 node])
                        finite = (arith == 1 and nm.input == "fp16"
                                  and not bool(flags["bad_a_ptr"].any() | flags["bad_b_ptr"].any()))
                        specials = 3 if finite else 2
                    elif specials is None:
                        specials = self.emulated_specials is True or not bool(torch.isfinite(A).all()
                                                                              and torch.isfinite(B).all())
                    cfg = dict(cfg, ARITH=arith, SPECIALS=specials, **(flags if specials == 2 else {}))
                    # (the finite kernel, SPECIALS=3, fits 128 registers: no limit)
                    if cfg["ARITH"] == 1 and self.emulated_maxnreg and A.device.type == "cuda" and specials != 3:
                        cfg.setdefault("maxnreg", self.emulated_maxnreg)
                grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]), group.numel())
                kern[grid](Ab, Bb, dst, segs, group, *common, **cfg,
                           WIDTH=width, W=triton.next_power_of_2(lanes), IN_EXP=exp_in,
                           IN_MAN=man_in, FRAC=23 + f.extra_bits, FLOOR=NO_FLOOR if f.floor is None else f.floor, TO_ZERO=f.to_zero,
                           DIRECT=direct, INIT=init, OUT_EXP=exp_out, OUT_MAN=man_out,
                           STORE_EXP=store_exp, STORE_MAN=store_man)
            float_in = nm.input in ("fp32", "fp64", "tf32")
            for mode, ids in ([(0, dev.fold_ids)] if nm.acc != 0 else []) + list(dev.region_folds.items()):
                # fp64, fp16, bf16 accumulators and regions (Note [accumulators], triton_host
                # Note [regions in plans]): each mode's folds in its arithmetic
                if not ids.numel():
                    continue
                md = nm.modes[mode]
                BM, BN = 32, 32
                grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), ids.numel())
                Aa, Ba = (A, B) if float_in else (Ab, Bb)
                mm_fold_acc[grid](Aa, Ba, dst, segs, ids, *common, BM=BM, BN=BN, IN_EXP=exp_in, IN_MAN=man_in,
                                  FLOAT_IN=float_in, FMA=md.product in ("fma", "fma_first", "exact"), DIRECT=direct,
                                  INIT=init, FIRST=md.product == "fma_first",
                                  OUT_EXP=exp_out, OUT_MAN=man_out, ACC=nm.accs[mode],
                                  ROUND=md.product != "none", PRODUCT_F32=md.product_format == "fp32",
                                  EXACT=md.product == "exact", enable_fp_fusion=False)
            if dev.fold_ids.numel() and nm.acc == 0:
                BM, BN = 32, 32
                grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), dev.fold_ids.numel())
                mm_fold[grid](Ab, Bb, dst, segs, dev.fold_ids, *common, BM=BM, BN=BN,
                              IN_EXP=exp_in, IN_MAN=man_in, FMA=nm.product in ("fma", "fma_first", "exact"),
                              FIRST=nm.product == "fma_first",
                              EXACT=nm.product == "exact", DIRECT=direct, INIT=init, OUT_EXP=exp_out, OUT_MAN=man_out,
                              enable_fp_fusion=False)
        if not direct:
            if lone is not None:
                ids = lone.to(A.device)
                Ab, Bb = (A, B) if nm.input == "fp64" else (A.view(it_in), B.view(it_in))
                mm_lone[(triton.cdiv(M, 32), triton.cdiv(N, 32), ids.numel())](
                    Ab, Bb, vals, segs, ids, M, N, Ab.stride(0), Ab.stride(1), Bb.stride(0), Bb.stride(1), M * N, N, 1,
                    BM=32, BN=32, IN_EXP=exp_in, IN_MAN=man_in, F64_IN=nm.input == "fp64", enable_fp_fusion=False)
            self._combine(p, vals, M * N, (A, B, N))
            finish[(triton.cdiv(M * N, 1024),)](vals, out.view(it_out), p.root, M * N, BO=1024, INIT=init,
                                                OUT_EXP=exp_out, OUT_MAN=man_out, ACC=nm.acc)
        return out

    @staticmethod
    def _native_groups(p, dev, BK):
        """(segment ids, EVEN_K, STORE_EXP, STORE_MAN) per launch of the native path: one launch per
        kind (plain chains, chains stored into a narrower format)."""
        even_k = bool(((p.segs[:, 1] % BK == 0) & (p.segs[:, 5] == 0)).all())
        groups = {}
        for (_, kind), ids in dev.chain_ids.items():
            groups[kind] = torch.cat([groups[kind], ids]) if kind in groups else ids
        return [(ids, even_k, *_stored_format(kind)) for kind, ids in groups.items()]

    def _arith(self, device):
        """mm_chain_emulated's ARITH: floating point where it is exact (fp16/bf16 inputs)."""
        if self.emulated_arith != "auto":
            return self.emulated_arith
        if self.numerics.input == "fp16":
            return 1
        if self.numerics.input == "bf16":
            return 3 if device.type == "cuda" else 2
        return 0

    SMALL_LEVEL = 4096   # additions x outputs below which a level shares one launch with the next

    def _combine(self, p, vals, R, operands=None):
        """Every step of plan p on the slot values `vals` (fp64 slots: Note [lone products]);
        operands (A, B, N) of a matrix product, for fp64 terms fused into additions."""
        dev = p.on(vals.device)
        wide = vals.dtype == torch.float64
        mixed = dict(MIXED=getattr(p, "mixed", False),
                     accs_ptr=torch.tensor(self.numerics.accs, dtype=torch.int32, device=vals.device))
        BO = 1 if R == 1 else min(1024, triton.next_power_of_2(R))
        BS = max(1, 1024 // BO)
        lone = self.fused_lone(p) if operands is not None else None
        if lone is not None:   # triton_kernels Note [fp64 lone products]: one launch a level
            A, B, N = operands
            lone = lone.to(vals.device)
            for lo, cnt in p.levels:
                combine_fused[(triton.cdiv(cnt, BS), triton.cdiv(R, BO))](
                    vals, dev.steps, lone, A, B, A.stride(0), A.stride(1), B.stride(0), B.stride(1), N, lo, cnt, R,
                    BS=BS, BO=BO, **mixed, enable_fp_fusion=False)
            return
        big = len(p.levels)
        while big and p.levels[big - 1][1] * R <= self.SMALL_LEVEL:
            big -= 1
        for lo, cnt in p.levels[:big]:
            combine[(triton.cdiv(cnt, BS), triton.cdiv(R, BO))](vals, dev.steps, lo, cnt, R, BS=BS, BO=BO, WIDE=wide,
                                                                 ACC=self.numerics.acc, **mixed,
                                                                 enable_fp_fusion=False)
        if big < len(p.levels):
            tail = dev.tails.get(big)
            if tail is None:
                tail = dev.tails[big] = torch.tensor(p.levels[big:], dtype=torch.int64, device=vals.device)
            combine_levels[(1,)](vals, dev.steps, tail, len(p.levels) - big, R, BS=BS, BO=BO, WIDE=wide,
                                 ACC=self.numerics.acc, **mixed, enable_fp_fusion=False)

    # ------------------------------------------------------------ sum

    def sum(self, x):
        """The sum of the 1-D tensor x (any strides: the kernels read a contiguous copy of a view)."""
        with _device_of(x):
            return self._sum(x)

    def _sum(self, x):
        nm = self.numerics
        n = x.numel()
        exp_in, man_in, dt_in, it_in = FORMATS[nm.input]
        exp_out, man_out, dt_out, it_out = FORMATS[nm.output]
        if x.dtype != dt_in:
            raise TypeError(f"x must be {dt_in}, got {x.dtype}")
        if x.dim() != 1:
            raise ValueError(f"x must have 1 dimension, got shape {tuple(x.shape)}")
        x = x.contiguous()
        p = self.plan(n, "x")
        self.last_path = "emulated"
        if p.has_chain:
            raise PlanError("fused nodes in a sum are not supported by the triton kernels")
        out = torch.empty((), dtype=dt_out, device=x.device)
        float_in = nm.input in ("fp32", "fp64")
        xin = x if float_in else x.view(it_in)
        carrier = torch.float64 if any(a in (1, 4) for a in nm.accs) else torch.float32   # Note [accumulators]
        dev = p.on(x.device)
        init = nm.init == "+0.0"
        fmt = dict(IN_EXP=exp_in, IN_MAN=man_in, FLOAT_IN=float_in)
        res = dict(INIT=init, OUT_EXP=exp_out, OUT_MAN=man_out, ACC=nm.acc)
        cfg = self.sum_config
        up = p.upper
        direct = up.num_slots == 1
        vals = out.view(it_out).reshape(1) if direct else torch.empty(up.num_slots, dtype=carrier,
                                                                      device=x.device)
        if p.height:
            # one group of leaf blocks under perfect levels (Note [perfect levels]):
            # the leaf kernel takes the first levels, sum_pairs launches the rest
            (g,) = dev.leaf_groups
            L = g.ids.numel()
            h = min(p.height, cfg["BG"].bit_length() - 1)
            last = h == p.height
            dst = vals if last else torch.empty(L >> h, dtype=carrier, device=x.device)
            self._leaves(g, xin, dst, h, direct and last, fmt, res)
            done, cur = h, L >> h
            while done < p.height:
                h = min(p.height - done, cfg["PAIRS_H"])
                done += h
                last = done == p.height
                nxt = vals if last else torch.empty(cur >> h, dtype=carrier, device=x.device)
                BO = max(1, 1024 >> h)
                sum_pairs[(triton.cdiv(cur >> h, BO),)](dst, nxt, cur >> h, GH=h, BO=BO, DIRECT=direct and last,
                                                        **res, enable_fp_fusion=False)
                dst, cur = nxt, cur >> h
        else:
            F = dev.fold_ids.numel()
            if F:
                BS = 256
                sum_fold[(triton.cdiv(F, BS),)](xin, vals, dev.segs, dev.fold_ids, F, p.max_count, BS=BS, **fmt,
                                                DIRECT=direct, **res, enable_fp_fusion=False)
            for mode, ids in dev.region_folds.items():   # triton_host Note [regions in plans]
                BS = 256
                sum_fold[(triton.cdiv(ids.numel(), BS),)](xin, vals, dev.segs, ids, ids.numel(), p.max_count, BS=BS,
                                                          **fmt, DIRECT=direct, **dict(res, ACC=nm.accs[mode]),
                                                          enable_fp_fusion=False)
            for g in dev.leaf_groups:
                self._leaves(g, xin, vals, 0, direct, fmt, res)
        if not direct:
            self._combine(up, vals, 1)
            finish[(1,)](vals, out.view(it_out).reshape(1), up.root, 1, BO=1, **res)
        return out

    def _leaves(self, g, xin, dst, group_h, direct, fmt, res):
        """sum_lanes over one group of leaf blocks (Note [leaf blocks])."""
        BG, L = self.sum_config["BG"], g.ids.numel()
        sum_lanes[(triton.cdiv(L, BG),)](xin, dst, g.ids, g.starts, g.counts, L, BG=BG, K=g.k, ROWS=g.rows,
                                         TAIL=g.tail, LOG_K=g.k.bit_length() - 1, TREE=g.kind,
                                         GROUP_H=group_h, ALIGNED=g.aligned, **fmt, DIRECT=direct, **res,
                                         num_warps=self.sum_config["num_warps"], enable_fp_fusion=False)


# mm_chain_native's arguments in its order, and the tile sizes among them (Note [direct launch])
NATIVE_ARGS = ("a_ptr", "b_ptr", "dst_ptr", "segs_ptr", "ids_ptr", "M", "N", "s_am", "s_ak", "s_bk", "s_bn",
               "s_dslot", "s_dm", "s_dn", "BM", "BN", "BK", "DIRECT", "INIT", "OUT_EXP", "OUT_MAN", "GROUP",
               "ALIGNED", "EVEN_K", "STORE_EXP", "STORE_MAN")
NATIVE_TILES = ("BM", "BN", "BK", "GROUP")


class Launch:
    """launch(kernel, grid, names, tensors, values, options): kernel[grid](**dict(zip(names, values)),
    **options) (the first `tensors` values are tensors, the others plain values), through the
    compiled kernel itself after the first launch of the same key.

    Note [direct launch]: at a small batch the GPU time of a matmul is a few microseconds, less
    than Triton's launch path in Python (binding the arguments, computing the specialization
    key, looking the kernel up).  The first launch of a key goes through kernel[grid] and keeps
    the compiled kernel it returns; later launches of the same key call its launcher directly,
    as kernel[grid] itself does at its end (Triton >= 3.3).  The key holds every integer
    argument's value, the option values and every tensor's device and 16-byte alignment
    (their dtypes are the replica's, fixed by the values): everything Triton specializes a
    kernel on, so the kept kernel is the one kernel[grid] would pick.  `names` must be the
    kernel's own arguments in order (checked at the first launch; otherwise kernel[grid]
    always).  The interpreter (TRITON_INTERPRET=1) returns no compiled kernel: kernel[grid]."""

    def __init__(self):
        self.kept = {}

    def __call__(self, kernel, grid, names, tensors, values, options):
        key = (kernel, names, values[0].device, *[t.data_ptr() & 15 for t in values[:tensors]], *values[tensors:],
               *options.items())
        got = self.kept.get(key)
        if got is None:
            compiled = kernel[grid](**dict(zip(names, values)), **options)
            knobs = getattr(triton, "knobs", None)
            ok = (knobs is not None and tuple(getattr(kernel, "arg_names", ())) == names
                  and all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata", "launch_metadata")))
            self.kept[key] = (compiled, knobs.runtime) if ok else False
            return
        if got is False:
            kernel[grid](**dict(zip(names, values)), **options)
            return
        compiled, runtime = got
        driver = triton.runtime.driver.active
        stream = driver.get_current_stream(driver.get_current_device())
        compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata,
                     compiled.launch_metadata(grid, stream, *values), runtime.launch_enter_hook,
                     runtime.launch_exit_hook, *values)
