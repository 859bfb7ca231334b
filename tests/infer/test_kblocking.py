

SGEMV = "if n <= 3: seq else: tail(4, pad(8, lanes(8, seq, lanes(4, seq, pairwise))), split(1, seq, seq))"


def test_gemv_order_with_a_padded_partial_vector():
    ns = sorted({*range(1, 49), 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 511, 512, 513, 700, 1000, 1024})
    obs = [Obs(n, openblas_sgemv_t(n)) for n in ns]
    order = Fitter(name="sgemv", pool={o.n: o.tree for o in obs}).fit_root(obs)
    assert str(order) == SGEMV
    spec = parse(f"n in 1..\norder blocks(4096, {SGEMV}, seq)\n")
    for n in (*range(1, 40), 4095, 4096, 4100, 9000):
        assert expand(spec, n) == openblas_sgemv_t(n), n
    rng = np.random.default_rng(1)
    for n in (12, 20, 4100):   # l(i, j) through the phantoms
        index = LcaIndex(openblas_sgemv_t(n))
        pairs = np.sort(np.array([rng.choice(n, 2, replace=False) for _ in range(300)]), axis=1)
        assert spec_l_many(spec, n, pairs).tolist() == [index.l(int(i), int(j)) for i, j in pairs]
