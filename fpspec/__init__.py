"""fpspec: reveal, specify, replicate and verify floating-point accumulation orders.

Pipeline (one module per stage, data flowing one way):
    tree      summation trees (the order)
    formats   floating-point formats and exact rounding
    arith     the arithmetic model: products, FMA, fused (Tensor Core) sums, probes
    reveal    target -> tree (FPRev-style revelation)
    spec      .fps language: parse, print, expand (spec -> tree), lower (tree -> spec)
    infer     trees at many n -> one parametric spec
    compile   spec -> kernel IR -> replica source (numpy, numba, triton)
    verify    replica vs spec vs original: trees, probes and bits
    cli       the `fpspec` command
"""
__version__ = "0.1.0"
