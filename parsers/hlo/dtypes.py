"""Element types: the one table of sizes, and the names people type for them.

HLO spells element types `bf16`, `s8`, `f8e4m3fn`...; users, JAX and the planner write
`bfloat16`, `int8`, `fp8`. Every layer reads sizes from `DTYPE_BITS` and names through
`canonical_dtype`, so a new type is one line here.
"""

from __future__ import annotations

# Bits per element. Sub-byte types are packed; pred is one byte in memory.
DTYPE_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4,
    "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64,
    "f4e2m1fn": 4, "f8e8m0fnu": 8,
    "f8e5m2": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8, "f8e4m3fnuz": 8,
    "f8e4m3": 8, "f8e3m4": 8,
    "bf16": 16, "f16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "token": 0, "opaque": 0, "tuple": 0,
}


# Complex element types and the real type of each of their two parts: a c64 is two f32s, so its
# arithmetic runs on the f32 units (TF32 tensor cores for a matmul where JAX allows them) and a
# c128's on the f64 ones.
COMPLEX_PARTS: dict[str, str] = {"c64": "f32", "c128": "f64"}


def real_part(dtype: str) -> str:
    """The real type a dtype's arithmetic runs in: its parts' type for a complex one, else itself."""
    return COMPLEX_PARTS.get(dtype, dtype)


# Names people type -> HLO element types. `tf32` is stored as f32 (TF32 is a compute mode).
DTYPE_ALIASES: dict[str, str] = {
    "bfloat16": "bf16", "float16": "f16", "fp16": "f16", "half": "f16",
    "float32": "f32", "fp32": "f32", "float": "f32", "tf32": "f32", "float64": "f64", "double": "f64",
    "complex64": "c64", "complex128": "c128", "cfloat": "c64", "cdouble": "c128",
    "int8": "s8", "uint8": "u8", "int4": "s4", "uint4": "u4", "int16": "s16", "int32": "s32", "int64": "s64",
    "fp8": "f8e4m3fn", "f8": "f8e4m3fn", "e4m3": "f8e4m3fn", "e5m2": "f8e5m2", "fp4": "f4e2m1fn",
    "bool": "pred",
}


def canonical_dtype(text: str) -> str | None:
    """The HLO element type for `text` ("bf16", "int8", "float32", ...), or None if it has no size."""
    name = text.strip().lower()
    name = DTYPE_ALIASES.get(name, name)
    return name if DTYPE_BITS.get(name, 0) > 0 else None


def element_bytes(text: str) -> float | None:
    """Bytes per stored element (sub-byte types packed), or None for an unknown type."""
    name = canonical_dtype(text)
    return None if name is None else DTYPE_BITS[name] / 8
