"""HLO opcodes by what they do: the one list the parsers and the cost model classify from.

Spellings are XLA's text names (`cosine`, not `cos`; `count-leading-zeros`, not `clz`); a
test parses each with XLA's own HLO parser from jaxlib, so a misspelling cannot creep in.
"""

from __future__ import annotations

# One transcendental per output element (XLA's HloCostAnalysis counts these apart from flops).
TRANSCENDENTAL: tuple[str, ...] = (
    "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power",
    "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine", "tan", "atan2", "erf",
    "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh",
)
# One flop per output element.
ARITHMETIC: tuple[str, ...] = (
    "abs", "add", "and", "ceil", "clamp", "compare", "complex", "convert", "count-leading-zeros",
    "divide", "floor", "imag", "is-finite", "maximum", "minimum", "mulhi", "multiply", "negate",
    "not", "or", "popcnt", "real", "reduce-precision", "remainder", "round-nearest-afz",
    "round-nearest-even", "select", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "sign", "stochastic-convert", "subtract", "xor",
)
# Elementwise in XProf's categories: the arithmetic and transcendental ops, and a same-size
# reinterpretation of bits.
ELEMENTWISE: frozenset[str] = frozenset(TRANSCENDENTAL + ARITHMETIC + ("bitcast-convert",))

# Collectives, in their synchronous spelling; XLA may also write `X-start`/`X-done` or wrap
# them in `async-start(calls=...)`.
COLLECTIVES: tuple[str, ...] = (
    "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "ragged-all-to-all",
)

# Opcodes that run other computations as ops of their own (not fused into them, not applied per element):
# a loop's body and condition, a conditional's branches, what a call calls.
CONTROL_FLOW: tuple[str, ...] = ("while", "conditional", "call")
# What a walk over the program's ops follows (`Module.running`, `Module.run_by`): control flow, and the
# async start whose wrapped computation's ops run as ops of their own on another stream.
RUNS_OTHERS: tuple[str, ...] = CONTROL_FLOW + ("async-start",)
# Ops whose time is their children's, not their own: control flow, and the async update and done that
# only wait for a start. An async-start is not one: it carries the cost of the ops it wraps, which cost
# nothing themselves, so it counts once in every total like any other op.
CONTAINERS: frozenset[str] = frozenset(CONTROL_FLOW + ("async-update", "async-done"))
