"""Revelation: a black-box accumulation -> its summation tree (FPRev, seed 000).

    targets.py    Target (callable + op kind + shapes + format), resolve_target(name, ...)
    masks.py      mask value M and unit u per format, derived from the accumulator
    oracle.py     LcaOracle: l(i, j) queries, batched where the target allows
    engine.py     reveal(target) -> Revelation: FPRev-basic, FPRev (multiway), modified
    synthetic.py  black boxes with known trees, for tests and benchmarks
"""
