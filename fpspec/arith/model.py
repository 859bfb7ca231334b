"""The arithmetic of an accumulation: everything besides the order that fixes the bits.

An `Arithmetic` says how the terms of a tree are formed and added:

    input        format of x (and y)                     fp32, fp16, bf16, ...
    product      how a term x_k * y_k is formed          exact | rounded | fma | fma_first | none (sums)
    product_format  (rounded only) products rounded to   default: the accumulator
    accumulator  format of every binary node's result    fp32, fp64, fp16, ...
    init         an initial value in the accumulation    none | +0.0
    output       format of the returned result           fp32, fp16, ...
    fused        FusedParams of the fused nodes, if any
    binned       the fold K of a binned accumulator (`accumulator = binned(fold = K)`), else None:
                 an order-independent sum (fpspec.arith.binned), valid with any tree
    bias         where a bias vector enters a gemm (torch.nn.functional.linear): none | after | inside
                 (note [bias])

In a spec it is the `arithmetic { ... }` section, ordered key = value entries
(`to_entries` / `from_entries`).

Note [init +0.0]: under round-to-nearest, x + (+0.0) == x for every x except
-0.0 (which becomes +0.0).  So a +0.0 initial value, wherever the library
adds it, changes the result only when every term is -0.0, and is the same as
adding +0.0 to the final result: the model applies it there.

Note [product modes]: "rounded": each product is rounded to `product_format`
(default: the accumulator format) before it is added; OpenBLAS's sdot on x86
rounds fp32 products to fp32 and adds them in fp64.  "fma": a binary node with a product leaf child is
one FMA, round(x_k*y_k + other); see fpspec.arith.evaluate for which child.
"fma_first": the same, except that a node of two leaves fuses the first
(smaller index) and rounds the second: C's `a[0]*x[0] + a[1]*x[1]` as GCC
contracts it, fma(a0, x0, a1*x1) (OpenBLAS dgemv's scalar path for K < 4).
"exact": the product enters the node exactly, and the node rounds once (for
fp16/bf16 inputs in an fp32 accumulator the three modes agree, because the
product is representable).  "none": a sum; the terms are x itself.

Note [fused output]: a fused node writes its own format (`fused { output = F }`,
default the accumulator); where that is wider than the accumulator (a
`using` region with a narrower accumulator around fused nodes, which
inherits the main section's fused block and so its output), the node's
result is then rounded to nearest even into the accumulator, as a kernel
stores its fp32 Tensor Core result in a bf16 or fp16 buffer: cuBLAS's
split-K with output-format partials (bf16 16x16x50 on an H100:
`blocks(8, using(partials, fused), seq)` with `arithmetic partials
{ accumulator = bf16 }`).  The single-rounding form (an fp16-accumulating
Tensor Core) is a fused block whose output is the accumulator.

Note [bias]: `bias = after` (the cuBLAS epilogue): the accumulation's result in
the accumulator format, plus the bias of its output column, rounded once to
the accumulator, then cast to the output format (nearest even).  `bias =
inside`: the bias is the accumulation's initial value, operand 0 of n + 1:
the order is applied to the bias (as the term bias * 1) followed by the n
terms, so `seq` gives (((b + t0) + t1) + ...).  Its trees, seen with a zero
bias, are the order at n + 1 without operand 0.  `none`: no bias.
"""
from __future__ import annotations

from dataclasses import dataclass

from fpspec.arith.fused import _FORMATS as _FUSED_FORMATS
from fpspec.arith.fused import ALIGNED, COMBINES, ROUNDINGS, FusedParams
from fpspec.errors import SpecError
from fpspec.formats import FORMATS, get_format

PRODUCTS = ("exact", "rounded", "fma", "fma_first", "none")
FMA_PRODUCTS = ("fma", "fma_first")   # a binary node fuses one of its leaf products
INITS = ("none", "+0.0")
BIASES = ("none", "after", "inside")   # note [bias]

# fused-block entries, in the order they are written: (key, FusedParams field, kind)
_FUSED_KEYS = (
    ("w", "w", int),
    ("extra_bits", "extra_bits", int),
    ("aligned", "aligned", ALIGNED),
    ("result", "result", ROUNDINGS),
    ("c_aligned", "c_aligned", bool),
    ("exponent_floor", "exponent_floor", "int-or-none"),
    ("subnormal_inputs", "subnormal_inputs", bool),
    ("subnormal_outputs", "subnormal_outputs", bool),
    ("output", "output", "format"),
    # written only when not the default (note [two conventions] in fpspec.arith.units)
    ("zero_exponent", "zero_exponent", "int-or-none"),
    ("c_emin", "c_emin", "int-or-none"),
    ("combine", "combine", COMBINES),
    ("interleave", "interleave", int),
    ("input_b", "input_b", tuple(_FUSED_FORMATS)),   # b's format in a node of two input formats (e4m3 x e5m2)
)
_FUSED_DEFAULTS = {"zero_exponent": None, "c_emin": None, "combine": "aligned", "interleave": 1, "input_b": None}
_FUSED_OUTPUTS = ("fp32", "fp16", "bf16")
_KEYS = ("input", "product", "product_format", "accumulator", "init", "output", "fused", "bias")


@dataclass(frozen=True)
class Arithmetic:
    input: str = "fp32"
    product: str = "none"
    accumulator: str = "fp32"
    init: str = "none"
    output: str = "fp32"
    fused: FusedParams | None = None
    product_format: str | None = None   # product = rounded: the format products are rounded to
    binned: int | None = None           # the fold of a binned accumulator (fpspec.arith.binned)
    bias: str = "none"                  # note [bias]

    def __post_init__(self):
        if self.binned is not None:
            _check_binned(self)
        for key in ("input", "accumulator", "output"):
            name = getattr(self, key)
            try:
                object.__setattr__(self, key, get_format(name).name)
            except ValueError:
                raise SpecError(f"arithmetic: {key} = {name}: unknown format; "
                                f"expected one of {', '.join(FORMATS)}") from None
        if self.product_format is not None:
            if self.product != "rounded":
                raise SpecError(f"arithmetic: product_format needs product = rounded, not {self.product}")
            try:
                object.__setattr__(self, "product_format", get_format(self.product_format).name)
            except ValueError:
                raise SpecError(f"arithmetic: product_format = {self.product_format}: unknown format") from None
            if self.product_format == get_format(self.accumulator).name:
                object.__setattr__(self, "product_format", None)   # the default: canonical form
        if self.product not in PRODUCTS:
            raise SpecError(f"arithmetic: product = {self.product}: expected one of {' | '.join(PRODUCTS)}")
        if self.init not in INITS:
            raise SpecError(f"arithmetic: init = {self.init}: expected one of {' | '.join(INITS)}")
        if self.bias not in BIASES:
            raise SpecError(f"arithmetic: bias = {self.bias}: expected one of {' | '.join(BIASES)}")
        if self.bias != "none" and self.binned is not None:
            raise SpecError("arithmetic: a binned accumulator takes no bias")
        if self.fused is not None:
            if self.fused.input != self.input and self.product != "none":
                raise SpecError(f"arithmetic: fused input {self.fused.input} differs from input = {self.input}")
            # note [fused output]: a node may write a wider format than the accumulator holds
            if get_format(self.fused.output).precision < get_format(self.accumulator).precision:
                raise SpecError(f"arithmetic: fused nodes write {self.fused.output}, narrower than "
                                f"accumulator = {self.accumulator}; expected the accumulator's format or a wider one")

    # ------------------------------------------------------------ spec entries

    def to_entries(self) -> tuple:
        """The spec's arithmetic section: a tuple of fpspec.spec.ast.Entry."""
        from fpspec.spec.ast import Block, Entry, Float, Ident   # spec is a later stage: import lazily

        out = [Entry("input", Ident(self.input)), Entry("product", Ident(self.product))]
        if self.product_format is not None:
            out.append(Entry("product_format", Ident(self.product_format)))
        from fpspec.spec.ast import Apply

        accumulator = Ident(self.accumulator) if self.binned is None else \
            Apply("binned", (Entry("fold", self.binned),))
        out += [Entry("accumulator", accumulator),
               Entry("init", Float("+0.0") if self.init == "+0.0" else Ident("none")),
               Entry("output", Ident(self.output))]
        if self.fused is not None:
            inner = []
            for key, attr, kind in _FUSED_KEYS:
                v = getattr(self.fused, attr)
                if key in _FUSED_DEFAULTS and v == _FUSED_DEFAULTS[key]:
                    continue
                if key == "output":
                    if v == self.accumulator:
                        continue            # the default
                    v = Ident(v)
                elif kind == "int-or-none":
                    v = Ident("none") if v is None else v
                elif isinstance(kind, tuple):
                    v = Ident(v)
                inner.append(Entry(key, v))
            out.append(Entry("fused", Block("fused", tuple(inner))))
        if self.bias != "none":
            out.append(Entry("bias", Ident(self.bias)))
        return tuple(out)

    @classmethod
    def from_entries(cls, entries) -> "Arithmetic":
        """Inverse of `to_entries`; accepts Entry objects or (key, value) pairs.

        Unknown keys, repeated keys and bad values raise SpecError naming the key.
        """
        given = _collect(entries, _KEYS, "arithmetic")
        kwargs = {}
        if type(given.get("accumulator")).__name__ == "Apply":
            kwargs["binned"] = _binned_fold(given.pop("accumulator"), given.get("__loc__"))
            kwargs["accumulator"] = _word(given.get("input", "fp32"), "arithmetic", "input")
        for key in ("input", "accumulator", "output", "product", "product_format", "bias"):
            if key in given:
                kwargs[key] = _word(given[key], "arithmetic", key)
        if "init" in given:
            kwargs["init"] = _init(given["init"])
        loc = given.get("__loc__")
        try:
            base = cls(**kwargs)
            if "fused" in given:
                fused = _fused_from(given["fused"], base)
                return cls(**kwargs, fused=fused)
            return base
        except SpecError as e:
            raise SpecError(e.message, loc) from None


def _check_binned(a: "Arithmetic") -> None:
    """fpspec.arith.binned's domain: fp64 or fp32 terms (sums, or products rounded to the input), the
    result in the input format, 2 <= fold <= the number of bins."""
    from fpspec.arith.binned import binned_format

    if a.input not in ("fp64", "fp32"):
        raise SpecError(f"arithmetic: a binned accumulator takes input = fp64 or fp32, not {a.input}")
    if a.output != a.input or a.accumulator != a.input:
        raise SpecError(f"arithmetic: a binned accumulator returns the input format: expected output = {a.input}")
    if a.product not in ("none", "rounded") or a.product_format is not None or a.fused is not None:
        raise SpecError("arithmetic: a binned accumulator takes product = none (sums) or rounded (products "
                        f"rounded to the input format), not {a.product}")
    top = binned_format(a.input).max_fold
    if isinstance(a.binned, bool) or not isinstance(a.binned, int) or not 2 <= a.binned <= top:
        raise SpecError(f"arithmetic: binned(fold = {a.binned!r}); expected an integer fold in 2..{top}")


def _binned_fold(v, loc) -> int:
    entries = {e.key: e.value for e in v.entries}
    if v.name != "binned" or set(entries) - {"fold"}:
        raise SpecError(f"arithmetic: accumulator = {v}; expected a format or binned(fold = K)", loc)
    return entries.get("fold", 3)


def _value(v):
    """Plain Python value of an AST value (Ident -> str, Float -> float)."""
    if hasattr(v, "entries"):
        return v
    if hasattr(v, "name") and type(v).__name__ == "Ident":
        return v.name
    if type(v).__name__ == "Float":
        return v.text
    return v


def _collect(entries, allowed, where) -> dict:
    given: dict = {}
    for e in entries:
        key, value = (e.key, e.value) if hasattr(e, "key") else e
        loc = getattr(e, "loc", None)
        if key not in allowed:
            raise SpecError(f"{where}: unknown key {key!r}; expected one of {', '.join(allowed)}", loc)
        if key in given:
            raise SpecError(f"{where}: {key} given twice", loc)
        given[key] = _value(value)
        given.setdefault("__loc__", loc)
    return given


def _word(v, where, key) -> str:
    if isinstance(v, bool) or not isinstance(v, str):
        raise SpecError(f"{where}: {key} = {v!r}: expected a name")
    return v


def _init(v) -> str:
    if isinstance(v, float) and v == 0.0 and str(v)[0] != "-":
        return "+0.0"
    text = str(v)
    if text in ("+0.0", "0.0", "none"):
        return "+0.0" if text != "none" else "none"
    raise SpecError(f"arithmetic: init = {text}: expected none or +0.0")


def _fused_from(block, arith: Arithmetic) -> FusedParams:
    entries = block.entries if hasattr(block, "entries") else block
    given = _collect(entries, tuple(k for k, _, _ in _FUSED_KEYS), "arithmetic.fused")
    given.pop("__loc__", None)
    kwargs = {}
    for key, attr, kind in _FUSED_KEYS:
        if key not in given:
            if key in ("w", "extra_bits"):
                raise SpecError(f"arithmetic.fused: {key} is required")
            continue
        v = given[key]
        if kind is int:
            ok = isinstance(v, int) and not isinstance(v, bool)
        elif kind is bool:
            ok = isinstance(v, bool)
        elif kind == "int-or-none":
            ok = (isinstance(v, int) and not isinstance(v, bool)) or v == "none"
            v = None if v == "none" else v
        elif kind == "format":
            ok = isinstance(v, str) and v in _FUSED_OUTPUTS
        else:
            ok = v in kind
        if not ok:
            expected = {int: "an integer", bool: "true or false", "int-or-none": "an integer or none",
                        "format": " | ".join(_FUSED_OUTPUTS)}.get(
                kind, " | ".join(kind) if isinstance(kind, tuple) else str(kind))
            raise SpecError(f"arithmetic.fused: {key} = {v!r}: expected {expected}")
        kwargs[attr] = v
    fused_input = arith.input if arith.input in ("fp16", "bf16", "tf32", "fp8e4m3", "fp8e5m2", "fp8e4m3fnuz",
                                                 "fp8e5m2fnuz", "fp6e2m3", "fp6e3m2", "fp4e2m1", "fp32") else "fp32"
    try:
        return FusedParams(input=fused_input, **{"output": arith.accumulator, **kwargs})
    except ValueError as e:
        raise SpecError(f"arithmetic.fused: {e}") from None
