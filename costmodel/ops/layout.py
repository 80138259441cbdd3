"""Bytes an array occupies in memory, including TPU tile padding.

A TPU layout such as `bf16[5,100]{1,0:T(8,128)(2,1)}` stores the array in
8x128 tiles, so the minor two dimensions (in physical, major-to-minor order)
are padded up to multiples of 8 and 128 and the array occupies 8x128 bf16
elements. Later tiles, e.g. `(2,1)`, subdivide the first tile to pack
sub-32-bit elements; they never pad beyond the first tile, so only the first
tile sets the footprint. A tile with more dimensions than the shape applies
to the shape padded with leading 1s (a scalar `f32[]{:T(128)}` occupies 128
elements), as in XLA's `Tile` semantics.
"""

from __future__ import annotations

from functools import lru_cache

from ...parsers.hlo.model import Shape

# Memory space 0 is device HBM (or host/GPU global memory); 5 is host memory (XLA's
# Layout::kHostMemorySpace, where host offloading puts buffers: pinned host memory on GPU);
# others are on-chip (TPU VMEM, SMEM...).
HBM_MEMORY_SPACE = 0
HOST_MEMORY_SPACE = 5


def _ceil_to(value: int, multiple: int) -> int:
    if multiple <= 1:
        return value
    return -(-value // multiple) * multiple


def physical_dims(shape: Shape) -> tuple[int, ...]:
    """Dimensions in physical order, major to minor (layout is minor-to-major)."""
    dims = shape.dims
    if shape.layout is None or len(shape.layout) != len(dims):
        return dims
    return tuple(dims[i] for i in reversed(shape.layout))


def padded_elements(shape: Shape) -> int:
    """Elements an array shape occupies once its minor dims are padded to the first tile."""
    dims = physical_dims(shape)
    if not shape.tiles:
        n = 1
        for d in dims:
            n *= d
        return n
    tile = shape.tiles[0]
    if len(tile) > len(dims):
        dims = (1,) * (len(tile) - len(dims)) + dims
    offset = len(dims) - len(tile)
    n = 1
    for i, d in enumerate(dims):
        t = tile[i - offset] if i >= offset else 1
        n *= _ceil_to(d, t) if t > 0 else d
    return n


def leaf_bytes(shape: Shape) -> int:
    """Bytes one array (not a tuple) occupies, tile padding included, sub-byte types packed."""
    if shape.dtype in ("token", "opaque") or shape.bits == 0:
        return 0
    return (padded_elements(shape) * shape.bits + 7) // 8


@lru_cache(maxsize=1 << 16)  # a program has few distinct shapes, priced once per instruction that has them
def shape_bytes(shape: Shape, *, hbm_only: bool = True) -> int:
    """Bytes of all array leaves of a shape; with `hbm_only`, leaves in on-chip memory spaces
    (TPU `S(1)` VMEM and the like) are left out because they cost no HBM bandwidth."""
    total = 0
    for leaf in shape.leaves():
        if hbm_only and leaf.memory_space != HBM_MEMORY_SPACE:
            continue
        total += leaf_bytes(leaf)
    return total


def on_chip_bytes(shape: Shape) -> int:
    """Bytes of the leaves of a shape that live on chip (neither HBM nor host memory)."""
    return sum(leaf_bytes(leaf) for leaf in shape.leaves()
               if leaf.memory_space not in (HBM_MEMORY_SPACE, HOST_MEMORY_SPACE))


def host_bytes(shape: Shape) -> int:
    """Bytes of the leaves of a shape that live in host memory (`S(5)`): they cross the host link."""
    return sum(leaf_bytes(leaf) for leaf in shape.leaves() if leaf.memory_space == HOST_MEMORY_SPACE)
