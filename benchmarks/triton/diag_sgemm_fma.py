import sys, importlib.util, tempfile, numpy as np, torch
sys.path.insert(0, "tests/compile")
from test_chunks_replicas import SGEMM, _inputs
from fpspec.compile import compile_spec
def load(src, name):
    d = tempfile.mkdtemp(); p = f"{d}/{name}.py"; open(p, "w").write(src)
    spec = importlib.util.spec_from_file_location(name, p); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
tri = load(compile_spec(SGEMM, "triton"), "tri"); npy = load(compile_spec(SGEMM, "numpy"), "npy")
rng = np.random.default_rng(8)
for k in [2, 3, 7, 8, 9, 10, 12, 15, 16, 17, 24, 100]:
    a, b = _inputs(8, k, 8, rng)
    want = np.matmul(a, b); ref = np.asarray(npy.gemm(a, b), np.float32)
    got = tri.gemm(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()).cpu().numpy()
    print(k, "path", getattr(tri.REPLICA, "last_path", "?"), "diff vs numpy.matmul", int((got.view(np.int32) != want.view(np.int32)).sum()), "numpy replica vs matmul", int((ref.view(np.int32) != want.view(np.int32)).sum()))
p = tri.REPLICA.plan(15)
print(p.segs.tolist()); print(p.steps.tolist())
