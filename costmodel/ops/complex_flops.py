"""Real FLOPs of complex arithmetic: what the units that run it do.

XLA's HloCostAnalysis counts one FLOP per element and two per multiply-add whatever the element
type; a complex element is two reals, and its arithmetic is several real operations. A complex
multiply-add (a dot's, a convolution's) is 8 real FLOPs: 4 multiplies and 4 adds. The 3M method
(three real products instead of four) does it in 6 plus O(MN) additions; cuBLAS offers it as
`cublasCgemm3m`, but XLA calls the plain CGEMM/ZGEMM, so 8 is what runs.
"""

from __future__ import annotations

from ...parsers.hlo.dtypes import COMPLEX_PARTS

COMPLEX_MAC_FLOPS = 8
"""Real FLOPs of one complex multiply-add: (a+bi)(c+di) + (e+fi) is 4 multiplies and 4 adds."""

# Real (FLOPs, transcendentals) per complex element, by opcode. add/subtract: two real adds;
# multiply: 4 multiplies, 2 adds; divide (Smith's): 6 multiplies, 3 adds, 2 divides; abs: |z| =
# sqrt(a^2+b^2); exp: e^a (cos b + i sin b); log: log|z| + i atan2(b, a).
_ELEMENTWISE: dict[str, tuple[int, int]] = {
    "add": (2, 0), "subtract": (2, 0), "negate": (2, 0), "multiply": (6, 0), "divide": (11, 0),
    "abs": (3, 1), "compare": (2, 0), "sign": (3, 1), "exponential": (2, 3), "log": (3, 3),
    "sqrt": (8, 2), "rsqrt": (10, 2), "power": (12, 6),
    # Taking or moving parts: XLA's one per element.
    "real": (1, 0), "imag": (1, 0), "convert": (1, 0), "select": (1, 0), "reduce-precision": (1, 0),
}
_DEFAULT_ARITHMETIC = (2, 0)  # the same operation on both parts
_DEFAULT_TRANSCENDENTAL = (4, 4)  # estimate: a complex function as a few real ones on both parts


def is_complex(dtype: str) -> bool:
    return dtype in COMPLEX_PARTS


def contraction_factor(dtype: str) -> int:
    """How many times 2 real FLOPs one multiply-add of `dtype` operands is (4 for complex)."""
    return COMPLEX_MAC_FLOPS // 2 if is_complex(dtype) else 1


def complex_elementwise(opcode: str, transcendental: bool) -> tuple[int, int]:
    """(real FLOPs, transcendentals) of one complex element of an elementwise op."""
    default = _DEFAULT_TRANSCENDENTAL if transcendental else _DEFAULT_ARITHMETIC
    return _ELEMENTWISE.get(opcode, default)


CONTRACTION_NOTE = (f"complex multiply-add counted as {COMPLEX_MAC_FLOPS} real FLOPs (4 multiplies, 4 adds; "
                    "a 3M method would do 6)")
