"""The `Hardware` value: a chip's ceilings, each number with its unit and where it came from."""

from __future__ import annotations

from typing import Any

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass, replace

from ...parsers.hlo.dtypes import real_part

# A TPU has no f64 units: XLA's X64 rewrite computes an f64 with a pair of f32s. An f64 product is
# then at least three f32 products of the halves (hi*hi, hi*lo, lo*hi), each six bf16 MXU passes
# as true f32 is: 18 bf16 passes, an estimate and a floor (the rewrite adds the error terms' work).
F64_EMULATION_PASSES = 18

@dataclass(frozen=True)
class Quantity:
    """A number with its unit and provenance (`trace`, `catalog`, `calibrated` or `user`).

    `note` says where the figure comes from (a datasheet, a paper, a measurement); `kind` says
    what sort of figure it is: `datasheet` (published by the vendor or the book), `measured`,
    or `estimate` (inferred, not published), or empty where nobody said.
    """

    value: float
    unit: str
    source: str = "catalog"
    note: str = ""
    kind: str = ""

    @property
    def estimate(self) -> bool:
        """An inferred figure rather than a published or measured one: reports say so."""
        return self.kind == "estimate"

    @property
    def may_be_zero(self) -> bool:
        """A time or a size can be zero; a rate or a count of units cannot (every op would take forever)."""
        return self.unit in ("s", "B")

    def to_json(self) -> dict[str, Any]:
        out = {"value": _finite(self.value), "unit": self.unit, "source": self.source}
        if self.note:
            out["note"] = self.note
        if self.kind:
            out["kind"] = self.kind
        return out


LINK_NAMES = {"ici": "ICI", "nvlink": "NVLink", "xgmi": "Infinity Fabric (xGMI)"}


@dataclass(frozen=True)
class Interconnect:
    """Chip-to-chip links. Bandwidths are per chip, bytes/s; latencies in s.

    TPU: `link_bytes_per_s` is the one-way bandwidth of one ICI link; a chip has
    `links_per_axis` links (2 = one each way) on each of `torus_axes` axes.
    `wraparound_min` is the smallest axis size that has a wraparound link
    (v5e/v6e: 16, i.e. only full 16-long axes; v4/v5p: 4 on full cube faces).
    GPU: `link_bytes_per_s` is the per-GPU one-way NVLink bandwidth within a
    domain of `domain_size` GPUs; `dcn_bytes_per_s` is per-GPU inter-node bandwidth.
    """

    kind: str  # "ici", "nvlink", "xgmi", "none"
    link_bytes_per_s: Quantity | None = None
    links_per_axis: int = 2
    torus_axes: int = 0
    max_torus: tuple[int, ...] = ()
    wraparound_min: int = 0
    domain_size: int = 1
    pcie_bytes_per_s: Quantity | None = None
    dcn_bytes_per_s: Quantity | None = None
    hop_latency_s: Quantity | None = None
    collective_latency_s: Quantity | None = None
    # "full-axis": an axis wraps only when it is at least `wraparound_min` long (v5e/v6e: 16).
    # "cube": every axis wraps when all axes are multiples of `wraparound_min` (v4/v5p optical
    # cubes), none otherwise. "": no torus.
    wraparound_rule: str = ""
    # The scale-out network as built: `node_size` devices share `nics_per_node` NICs of
    # `nic_bytes_per_s` each (one-way); `dcn_bytes_per_s` is what one device gets of it.
    node_size: int = 0
    nics_per_node: int = 0
    nic_bytes_per_s: Quantity | None = None

    @property
    def link_name(self) -> str:
        """The vendor's name for the scale-up links: ICI (TPU), NVLink (NVIDIA), Infinity Fabric (AMD)."""
        return LINK_NAMES.get(self.kind, self.kind or "interconnect")

    @property
    def scale_out_name(self) -> str:
        """What joins slices or nodes: DCN between TPU slices, the inter-node network between GPU nodes."""
        return "DCN" if self.kind == "ici" else "inter-node network"

    def wraparound(self, topology: tuple[int, ...]) -> tuple[bool, ...]:
        """Which axes of a slice shape have a wraparound link, by this chip's torus rules."""
        if self.wraparound_rule == "full-axis":
            return tuple(n >= self.wraparound_min > 1 for n in topology)
        if self.wraparound_rule == "cube":
            dims = tuple(topology) + (1,) * max(0, self.torus_axes - len(topology))
            whole = bool(dims) and all(n % self.wraparound_min == 0 for n in dims)
            return tuple(whole for _ in topology)
        return tuple(False for _ in topology)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.link_name, "scale_out": self.scale_out_name}
        for name in ("link_bytes_per_s", "pcie_bytes_per_s", "dcn_bytes_per_s",
                     "hop_latency_s", "collective_latency_s", "nic_bytes_per_s"):
            q = getattr(self, name)
            if q is not None:
                out[name] = q.to_json()
        out.update(links_per_axis=self.links_per_axis, torus_axes=self.torus_axes,
                   max_torus=list(self.max_torus), wraparound_min=self.wraparound_min,
                   domain_size=self.domain_size)
        if self.node_size or self.nics_per_node:
            out.update(node_size=self.node_size, nics_per_node=self.nics_per_node)
        if self.wraparound_rule:
            out["wraparound_rule"] = self.wraparound_rule
        return out


@dataclass(frozen=True)
class MemoryLevel:
    """An on-chip memory level in front of HBM (a cache, or on-chip memory the program fills):
    how much it holds and how fast it streams, each with provenance. The bytes an op's schedule
    lets this level serve (costmodel.residency) are judged at its bandwidth, the fastest it could go."""

    name: str  # "L1", "L2", "L3", "Infinity Cache"
    capacity_bytes: Quantity
    bytes_per_s: Quantity

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "capacity_bytes": self.capacity_bytes.to_json(),
                "bytes_per_s": self.bytes_per_s.to_json()}


# The keys each attention table of `Achievable` takes: the pass, and whether a causal or window
# mask leaves blocks partly masked.
ATTENTION_KEYS = {"attention_flops_per_s": ("forward", "backward", "forward_causal", "backward_causal"),
                  "attention_half_rate_keys": ("forward", "backward")}


@dataclass(frozen=True)
class Achievable:
    """What good kernels reach on a chip, the second ceiling beside the datasheet peaks: each
    figure a measurement (vendor-published, a public microbenchmark, or this tool's CPU
    calibration) or an estimate that says how it was derived. Never taken from a trace being judged.

    `matmul_flops_per_s`: large, well-shaped dense matmuls by the peak key they run on (`bf16`,
    `tf32`, `fp8`, ...), per chip. `memory_bytes_per_s`: streaming main memory (HBM or DRAM).
    `cache_bytes_per_s`: by cache level name, data resident in that level. `collective_bytes_per_s`:
    bus bandwidth per chip by link level, `scale_up` (NVLink, xGMI, ICI) and `scale_out` (the
    network between nodes or slices); `collective_latency_s` the fixed time of one message.
    `launch_s`: the shortest time an op that runs anything takes on the device timeline (a GPU
    kernel; a TPU op of the program, its fixed cost). `compute_units` (SMs, CUs) and
    `gemm_tile_rows` x `gemm_tile_columns` (the largest output tile a matmul library schedules
    per unit) set GPU wave and tile quantization; `gemm_k_step_s` is the least time one 64-deep
    step of a GPU matmul's K loop takes, however small its tile (the loop runs on one unit, step
    after step), and `gemm_fill_s` what starting and ending the loop adds. `pipeline_block_bytes`
    (TPU): the operands of one pipeline step; the first block's load and the last's store do not
    overlap the matrix unit (its pipeline fill). `attention_flops_per_s`: fused (flash) attention at
    long sequences with 16-bit inputs, by pass and mask (`forward`, `backward`, `forward_causal`,
    `backward_causal`: see `ATTENTION_KEYS`); `attention_half_rate_keys`: by pass (`forward`,
    `backward`), the mean keys per query at which those kernels reach half that rate.
    `small_stream_bytes_per_s` up to `small_stream_bytes`: the rate a GPU kernel too small to fill the
    memory pipeline streams main memory at (its memory time is at least its bytes, up to that size,
    at that rate). `output_stream_s`: what each output of a fusion beyond the first adds to a kernel's
    fixed cost (one more write stream to drain). `atomic_updates_per_s`: by element type, the
    read-modify-write updates per second a scatter with a combiner (scatter-add) reaches.
    `reduce_step_s`: the least time one step of a reduce's sequential loop takes (one dependent add).
    """

    matmul_flops_per_s: dict[str, Quantity]
    memory_bytes_per_s: Quantity
    cache_bytes_per_s: dict[str, Quantity] = field(default_factory=dict)
    collective_bytes_per_s: dict[str, Quantity] = field(default_factory=dict)
    collective_latency_s: Quantity | None = None
    launch_s: Quantity | None = None
    compute_units: Quantity | None = None
    gemm_tile_rows: Quantity | None = None
    gemm_tile_columns: Quantity | None = None
    gemm_k_step_s: Quantity | None = None
    gemm_fill_s: Quantity | None = None
    pipeline_block_bytes: Quantity | None = None
    attention_flops_per_s: dict[str, Quantity] = field(default_factory=dict)
    attention_half_rate_keys: dict[str, Quantity] = field(default_factory=dict)
    small_stream_bytes_per_s: Quantity | None = None
    small_stream_bytes: Quantity | None = None
    output_stream_s: Quantity | None = None
    atomic_updates_per_s: dict[str, Quantity] = field(default_factory=dict)
    reduce_step_s: Quantity | None = None

    def quantities(self) -> dict[str, Quantity]:
        """Every figure, by dotted name under `achievable.`."""
        out = {f"achievable.matmul_flops_per_s.{k}": q for k, q in self.matmul_flops_per_s.items()}
        out["achievable.memory_bytes_per_s"] = self.memory_bytes_per_s
        out.update({f"achievable.cache_bytes_per_s.{k}": q for k, q in self.cache_bytes_per_s.items()})
        out.update({f"achievable.collective_bytes_per_s.{k}": q for k, q in self.collective_bytes_per_s.items()})
        for name in ("collective_latency_s", "launch_s", "compute_units", "gemm_tile_rows", "gemm_tile_columns",
                     "gemm_k_step_s", "gemm_fill_s", "pipeline_block_bytes", "small_stream_bytes_per_s",
                     "small_stream_bytes", "output_stream_s", "reduce_step_s"):
            q = getattr(self, name)
            if q is not None:
                out[f"achievable.{name}"] = q
        for table in ("attention_flops_per_s", "attention_half_rate_keys", "atomic_updates_per_s"):
            out.update({f"achievable.{table}.{k}": q for k, q in getattr(self, table).items()})
        return out

    def to_json(self) -> dict[str, Any]:
        return {name.removeprefix("achievable."): q.to_json() for name, q in self.quantities().items()}


@dataclass(frozen=True)
class Detection:
    """How traces and compilers name a chip, so that adding a chip is one catalog entry.

    `trace_names`: for a GPU, fragments of its marketing name (lower case, no spaces,
    dashes or underscores; the longest match wins); for a TPU, regular expressions matched
    at the start of its `device_type_string` squashed the same way, less a leading `tpu`.
    `fingerprints`: (vendor, compute capability major, minor, SMs or CUs) of GPU planes
    that state no name; where chips share one, the HBM size the trace states decides.
    `libtpu_prefix`: libtpu's topology name prefix, for ahead-of-time compiles.
    `boost_clock_hz`: the clock the datasheet peaks are stated at, so that a trace's clock and
    SM/CU count can be checked against them (and an unlisted chip of the same family priced).
    """

    trace_names: tuple[str, ...] = ()
    fingerprints: tuple[tuple[str, int, int, int], ...] = ()
    libtpu_prefix: str = ""
    boost_clock_hz: Quantity | None = None


@dataclass(frozen=True)
class Hardware:
    """One accelerator chip (or the host CPU), per chip.

    `peak_flops` maps a dtype name (`bf16`, `f16`, `f32`, `tf32`, `int8`, `fp8`, ...)
    to dense peak FLOP/s. `topology` is the slice or node shape the user named
    (e.g. (8, 4) for `tpu-v5e:8x4`, (8,) for `h100:8`), empty if none.
    """

    name: str
    kind: str  # "tpu", "gpu", "cpu"
    vendor: str
    peak_flops: dict[str, Quantity]
    hbm_bytes_per_s: Quantity
    hbm_bytes: Quantity | None = None
    # On-chip memory that is not one of `caches` (TPU VMEM); `onchip_capacity` falls back to them.
    onchip_bytes: Quantity | None = None
    interconnect: Interconnect = field(default_factory=lambda: Interconnect(kind="none"))
    mxu_tile: tuple[int, int] | None = None
    op_overhead_s: Quantity | None = None
    topology: tuple[int, ...] = ()
    source: str = "catalog"
    notes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    # TPU v2/v3 chips hold two cores that JAX sees as two devices; the numbers above are per chip.
    devices_per_chip: int = 1
    detection: Detection = field(default_factory=Detection)
    # Faster memory levels in front of HBM/DRAM, smallest first; empty where none is known.
    caches: tuple[MemoryLevel, ...] = ()
    # What good kernels reach on this chip (None: no figures, ops are judged on the roofline alone).
    achievable: Achievable | None = None
    # What in the input identified the chip, in words ("" when the user named it or nothing did).
    identified_by: str = ""

    @property
    def main_memory(self) -> str:
        """What the last memory level is called: DRAM on a CPU, HBM on an accelerator."""
        return "DRAM" if self.kind == "cpu" else "HBM"

    def memory_level(self, working_set_bytes: float | None) -> tuple[str, Quantity]:
        """(name, bandwidth) of the memory level that judges an op priced without a history whose
        reads and writes come to `working_set_bytes`: the fastest level that holds it (the smallest, on any
        real hierarchy), else main memory, which is also the answer when the size is unknown.
        A roof is an upper bound on speed, so a level is never chosen where it would be
        slower than a larger one; and a larger working set never gets a faster roof."""
        best = (self.main_memory, self.hbm_bytes_per_s)
        if working_set_bytes is None:
            return best
        for level in self.caches:
            if working_set_bytes <= level.capacity_bytes.value and level.bytes_per_s.value > best[1].value:
                best = (level.name, level.bytes_per_s)
        return best

    def onchip_capacity(self) -> Quantity | None:
        """On-chip memory: what `onchip_bytes` states (memory the program fills, TPU VMEM), else the
        largest cache's capacity, which a file states once, in its `[[caches]]`."""
        if self.onchip_bytes is not None:
            return self.onchip_bytes
        return self.caches[-1].capacity_bytes if self.caches else None

    def peak(self, dtype: str) -> Quantity:
        """Peak FLOP/s for an HLO dtype, falling back to the nearest the chip states. A complex
        type runs on the units of its parts' type (c64 on f32's, c128 on f64's); f64 on a chip
        that states no f64 rate is an estimate (`f64_without_rate`), never another type's peak."""
        dtype = real_part(dtype)
        if dtype == "f64" and "f64" not in self.peak_flops:
            return self.f64_without_rate()
        return self.peak_flops[self.peak_key(dtype)]

    def peak_key(self, dtype: str) -> str:
        """The `peak_flops` key that prices `dtype`: its own (a complex type's parts'), or the nearest the chip
        states."""
        dtype = real_part(dtype)
        for key in _PEAK_KEYS.get(dtype, (dtype,)) + ("bf16", "f32"):
            if key in self.peak_flops:
                return key
        return next(iter(self.peak_flops))

    @staticmethod
    def own_peak_key(dtype: str) -> str:
        """The `peak_flops` key a chip would state for `dtype` itself (fp8 for f8e4m3fn)."""
        return _PEAK_KEYS.get(dtype, (dtype,))[0]

    def f64_without_rate(self) -> Quantity:
        """An f64 rate for a chip that states none, marked an estimate. A TPU has no f64 units:
        XLA rewrites f64 into pairs of f32 (double-word arithmetic) on its bf16 matrix units, here
        `F64_EMULATION_PASSES` bf16 passes per f64 product. Elsewhere (a CPU, a file without the
        figure): half the f32 rate, the same vector units at half the lanes."""
        if self.kind == "tpu" and "bf16" in self.peak_flops:
            bf16 = self.peak_flops["bf16"]
            return Quantity(bf16.value / F64_EMULATION_PASSES, bf16.unit, "catalog, derived",
                            f"estimate: {self.name} has no f64 units; XLA emulates f64 with pairs of f32, "
                            f"at least three f32 products of {F64_EMULATION_PASSES // 3} bf16 passes each "
                            f"(bf16 peak / {F64_EMULATION_PASSES})", kind="estimate")
        f32 = self.peak("f32")
        return Quantity(f32.value / 2, f32.unit, f"{f32.source}, derived",
                        f"estimate: {self.name} states no f64 rate; half its f32 rate", kind="estimate")

    def ridge(self, dtype: str = "bf16") -> float:
        """Arithmetic intensity (FLOPs/byte) where compute and HBM time are equal."""
        return self.peak(dtype).value / self.hbm_bytes_per_s.value

    def with_topology(self, topology: tuple[int, ...]) -> "Hardware":
        return replace(self, topology=topology)

    def quantities(self) -> dict[str, Quantity]:
        """Every number this value states, by dotted field name, with unit and provenance: any
        Quantity at any depth (a field added to Hardware or to what it holds is listed too);
        memory levels by name (`caches.L2.bytes_per_s`); peaks as `peak_flops_per_s.DTYPE`."""
        return dict(_walk_quantities(self, ""))

    def estimates(self) -> list[str]:
        """The `quantities` keys of figures that are estimates, not published or measured: the
        catalog's, and a hardware file's that its author marked so (a `--set` value states no kind)."""
        return [k for k, q in self.quantities().items() if q.estimate]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "vendor": self.vendor,
            "source": self.source,
            "peak_flops_per_s": {k: _finite(q.value) for k, q in self.peak_flops.items()},
            "peak_flops_source": {k: q.source for k, q in self.peak_flops.items()},
            "hbm_bytes_per_s": _finite(self.hbm_bytes_per_s.value),
            "hbm_bytes_per_s_source": self.hbm_bytes_per_s.source,
            "hbm_bytes": None if self.hbm_bytes is None else _finite(self.hbm_bytes.value),
            "main_memory": self.main_memory,  # what hbm_bytes_per_s is the bandwidth of: HBM, or DRAM on a CPU
            "interconnect": self.interconnect.to_json(),
            "topology": list(self.topology),
            "notes": list(self.notes),
        }
        if self.identified_by:
            out["identified_by"] = self.identified_by
        onchip = self.onchip_capacity()
        if onchip is not None:
            out["onchip_bytes"] = onchip.value
        if self.mxu_tile is not None:
            out["mxu_tile"] = list(self.mxu_tile)
        if self.op_overhead_s is not None:
            out["op_overhead_s"] = self.op_overhead_s.value
            out["op_overhead_s_source"] = self.op_overhead_s.source
        if self.devices_per_chip != 1:
            out["devices_per_chip"] = self.devices_per_chip
        if self.caches:
            out["caches"] = [level.to_json() for level in self.caches]
        # Keys (as in `quantities`) of the figures that are estimates; reports mark them so.
        out["estimates"] = self.estimates()
        if self.achievable is not None:
            out["achievable"] = self.achievable.to_json()
        return out


_QUANTITY_NAMES = {"peak_flops": "peak_flops_per_s"}  # the JSON names of fields named otherwise in Python


def _walk_quantities(obj: object, prefix: str) -> Iterator[tuple[str, Quantity]]:
    for f in fields(obj):  # type: ignore[arg-type]
        yield from _walk_value(getattr(obj, f.name), prefix + _QUANTITY_NAMES.get(f.name, f.name))


def _walk_value(value: object, key: str) -> Iterator[tuple[str, Quantity]]:
    """Quantities in a field's value: itself, a dict's (by key), a dataclass's, a tuple's (by item
    name where items have one, else by position)."""
    if isinstance(value, Quantity):
        yield key, value
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from _walk_value(item, f"{key}.{k}")
    elif is_dataclass(value) and not isinstance(value, type):
        yield from _walk_quantities(value, f"{key}.")
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _walk_value(item, f"{key}.{getattr(item, 'name', i)}")


def _finite(value: float) -> float | None:
    """A number JSON can carry; an unknown (NaN) ceiling becomes null."""
    return value if math.isfinite(value) else None


# HLO dtype -> catalog peak keys, most specific first.
_PEAK_KEYS: dict[str, tuple[str, ...]] = {
    "bf16": ("bf16",), "f16": ("f16", "bf16"), "f32": ("f32",), "f64": ("f64", "f32"),
    "s8": ("int8",), "u8": ("int8",), "s4": ("int4", "int8"), "u4": ("int4", "int8"),
    "f8e4m3fn": ("fp8", "int8"), "f8e5m2": ("fp8", "int8"), "f8e4m3": ("fp8", "int8"),
    "f8e4m3fnuz": ("fp8", "int8"), "f8e5m2fnuz": ("fp8", "int8"), "f8e3m4": ("fp8", "int8"),
    "f4e2m1fn": ("fp4", "fp8", "int8"),
    "s32": ("int32", "f32"), "tf32": ("tf32", "f32"),
}
