"""The hardware catalog: per-chip ceilings of TPUs and GPUs, and `--hardware NAME[:TOPOLOGY]`.

TPU numbers are the book's chapter 2 tables ("How to Scale Your Model"); GPU numbers are
the vendors' datasheets, dense (not structured-sparse) peaks. GB = 1e9 bytes. Each number
carries a note naming its source; numbers that are estimates say so. `cpu` is not a
fixed entry: it is measured on this machine (see `calibrate.py`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ...errors import UsageError
from .hardware import Detection, Hardware, Interconnect, MemoryLevel, Quantity

BOOK = "How to Scale Your Model, ch. 2 table"
_MAX_DEVICES = 1 << 20  # a topology beyond a million chips is a typo, not a machine


# Per-op overhead: it is added to every op that launches work, so it must never exceed what the
# shortest real kernel takes, or the expected time stops being a lower bound.
_GPU_OVERHEAD = ("XLA's GPU performance model (kKernelLaunchOverhead = 1 us, gpu_performance_model_base.h); "
                 "below every kernel in the real MI300X captures (shortest 1.9 us)")
_TPU_OVERHEAD = ("none charged: a TPU runs the whole XLA program as one executable, with no per-op "
                 "launch, and no measured or published per-op figure exists to charge")


def _q(value: float, unit: str, note: str) -> Quantity:
    return Quantity(value, unit, "catalog", note)


def _peaks(note: str, **values: float) -> dict[str, Quantity]:
    return {dtype: _q(v, "FLOP/s", note) for dtype, v in values.items()}


def _tpu(name: str, *, bf16: float, int8: float | None, hbm_bw: float, hbm: float, ici: float,
         axes: int, max_torus: tuple[int, ...], rule: str, wrap_min: int, chips_per_host: int,
         pcie: float, pcie_note: str = "book: typically ~1.5e10 B/s per chip",
         src: str = BOOK, mxu: int = 128, **extra: Any) -> Hardware:
    peaks = _peaks(f"{src}, dense", bf16=bf16)
    peaks["f32"] = _q(bf16, "FLOP/s", "default precision runs f32 dots as one bf16 MXU pass "
                      "(precision=HIGHEST takes ~6 passes)")
    if int8 is not None:
        peaks["int8"] = _q(int8, "FLOP/s", f"{src}, int8 OP/s")
    peaks["fp8"] = _q(bf16, "FLOP/s", "no fp8 MXU mode stated for this generation: fp8 dots "
                      "are taken to run at the bf16 rate")
    link = Interconnect(
        kind="ici",
        link_bytes_per_s=_q(ici, "B/s", f"{src}: ICI one-way per link (bidirectional {2 * ici:.2g})"),
        links_per_axis=2, torus_axes=axes, max_torus=max_torus, wraparound_min=wrap_min,
        wraparound_rule=rule, domain_size=math.prod(max_torus),
        pcie_bytes_per_s=_q(pcie, "B/s", pcie_note),
        dcn_bytes_per_s=_q(2.5e10 / chips_per_host, "B/s",
                           f"book: ~2.5e10 B/s DCN egress per host / {chips_per_host} chips per host"),
        hop_latency_s=_q(1e-6, "s", "book ch. 3: each ICI hop costs ~1 us"),
    )
    return Hardware(
        name=name, kind="tpu", vendor="Google", peak_flops=peaks,
        hbm_bytes_per_s=_q(hbm_bw, "B/s", src), hbm_bytes=_q(hbm, "B", f"{src} (GB = 1e9)"),
        interconnect=link, mxu_tile=(mxu, mxu),
        op_overhead_s=_q(0.0, "s", _TPU_OVERHEAD),
        **extra)


def _gpu(name: str, vendor: str, *, datasheet: str, peaks: dict[str, float], hbm_bw: float,
         hbm: float, link_kind: str, link: float, link_note: str, domain: int, pcie: float,
         dcn: float, dcn_note: str, tile: tuple[int, int], overhead: float, onchip: float | None = None,
         onchip_note: str = "", cache_bw: float | None = None, cache_bw_note: str = "",
         cache_name: str = "L2", **extra: Any) -> Hardware:
    net = Interconnect(
        kind=link_kind, link_bytes_per_s=_q(link, "B/s", link_note), links_per_axis=1,
        domain_size=domain,
        pcie_bytes_per_s=_q(pcie, "B/s", "host link one-way (PCIe x16)"),
        dcn_bytes_per_s=_q(dcn, "B/s", dcn_note),
        collective_latency_s=_q(1e-5, "s", "estimate: a small-message all-reduce within one "
                                "switch domain takes ~10 us (NCCL/RCCL)"),
    )
    return Hardware(
        name=name, kind="gpu", vendor=vendor, peak_flops=_peaks(f"{datasheet}, dense", **peaks),
        hbm_bytes_per_s=_q(hbm_bw, "B/s", datasheet), hbm_bytes=_q(hbm, "B", f"{datasheet} (GB = 1e9)"),
        onchip_bytes=None if onchip is None else _q(onchip, "B", onchip_note),
        caches=() if onchip is None or cache_bw is None else (
            MemoryLevel(cache_name, _q(onchip, "B", onchip_note), _q(cache_bw, "B/s", cache_bw_note)),),
        interconnect=net, mxu_tile=tile,
        op_overhead_s=_q(overhead, "s", _GPU_OVERHEAD),
        **extra)


_NV_TILE = (16, 8)  # mma.sync m16n8k16, the bf16 tensor-core instruction shape since Ampere
_AMD_TILE = (16, 16)  # MFMA 16x16x16 bf16 (32x32x8 also exists)
# NVIDIA states L2 read bandwidth per clock for A100 (5120 B/clk) and none for Hopper; Hopper's
# is taken to be at least A100's per clock, at its own boost clock.
_A100_L2 = "A100 whitepaper: L2 read bandwidth 5120 B/clk, at the 1410 MHz boost clock"
_H100_L2 = ("estimate: A100's 5120 B/clk L2 read bandwidth (A100 whitepaper) at the {mhz} MHz boost "
            "clock; Chips and Cheese measured about 5.5e12 B/s on H100 PCIe, so this bounds it from above")
_NV_NOTE = "estimate: 8 x 400 Gb/s NICs per 8-GPU node (DGX system datasheet), per GPU one-way"

_ENTRIES: tuple[Hardware, ...] = (
    _tpu("tpu-v2", bf16=4.6e13, int8=None, hbm_bw=7.0e11, hbm=16e9, ici=6e10, axes=2,
         max_torus=(16, 16), rule="full-axis", wrap_min=16, chips_per_host=4, pcie=1.5e10,
         src="book ch. 9 (23e12 FLOP/s per core, 2 cores; ICI 1.2e11 B/s bidirectional); "
             "HBM from Jouppi et al., CACM 2020", devices_per_chip=2, aliases=("v2",),
         notes=("2 TensorCores per chip, each a separate JAX device with half these numbers",
                "wraparound assumed only on full-pod axes"),
         detection=Detection(trace_names=(r"v2$",), libtpu_prefix="v2")),
    _tpu("tpu-v3", bf16=1.4e14, int8=1.4e14, hbm_bw=9.0e11, hbm=32e9, ici=1e11, axes=2,
         max_torus=(32, 32), rule="full-axis", wrap_min=32, chips_per_host=4, pcie=1.5e10,
         devices_per_chip=2, aliases=("v3",),
         notes=("2 TensorCores per chip, each a separate JAX device with half these numbers",
                "wraparound assumed only on full-pod axes"),
         detection=Detection(trace_names=(r"v3$",), libtpu_prefix="v3")),
    _tpu("tpu-v4", bf16=2.75e14, int8=2.75e14, hbm_bw=1.2e12, hbm=32e9, ici=4.5e10, axes=3,
         max_torus=(16, 16, 16), rule="cube", wrap_min=4, chips_per_host=4, pcie=1.6e10,
         pcie_note="book: 16 GB/s each way", aliases=("tpu-v4p", "v4", "v4p"),
         notes=("3D torus; slices made of whole 4x4x4 cubes wrap on every axis, smaller ones never",),
         detection=Detection(trace_names=(r"v4p?$",), libtpu_prefix="v4")),
    _tpu("tpu-v5p", bf16=4.59e14, int8=9.18e14, hbm_bw=2.8e12, hbm=96e9, ici=9e10, axes=3,
         max_torus=(16, 20, 28), rule="cube", wrap_min=4, chips_per_host=4, pcie=1.5e10,
         aliases=("v5p", "tpu-v5"),
         notes=("3D torus; slices made of whole 4x4x4 cubes wrap on every axis, smaller ones never",),
         detection=Detection(trace_names=(r"v5p?$",), libtpu_prefix="v5p")),
    _tpu("tpu-v5e", bf16=1.97e14, int8=3.94e14, hbm_bw=8.1e11, hbm=16e9, ici=4.5e10, axes=2,
         max_torus=(16, 16), rule="full-axis", wrap_min=16, chips_per_host=8, pcie=1.5e10,
         onchip_bytes=_q(128 * 2**20, "B", "book ch. 2: 128 MiB VMEM"),
         aliases=("v5e", "tpu-v5-lite", "tpu-v5litepod", "v5litepod"),
         notes=("2D torus, at most 16x16; only axes of length 16 wrap",),
         detection=Detection(trace_names=(r"v5(lite|e)",), libtpu_prefix="v5e")),
    _tpu("tpu-v6e", bf16=9.20e14, int8=1.84e15, hbm_bw=1.6e12, hbm=32e9, ici=9e10, axes=2,
         max_torus=(16, 16), rule="full-axis", wrap_min=16, chips_per_host=8, pcie=3.2e10,
         pcie_note="book ch. 2 footnote: Trillium has 32 GB/s", mxu=256,
         aliases=("v6e", "trillium", "tpu-v6-lite"),
         notes=("2D torus, at most 16x16; only axes of length 16 wrap", "256x256 MXU"),
         detection=Detection(trace_names=(r"v6(lite|e)",), libtpu_prefix="v6e")),
    _gpu("a100", "NVIDIA", datasheet="NVIDIA A100 datasheet (SXM4 80GB)",
         peaks=dict(bf16=3.12e14, f16=3.12e14, tf32=1.56e14, f32=1.95e13, int8=6.24e14),
         hbm_bw=2.039e12, hbm=80e9, link_kind="nvlink", link=3e11,
         link_note="NVLink 3: 600 GB/s per GPU bidirectional, so 300 GB/s one-way", domain=8,
         pcie=3.2e10, dcn=2.5e10, dcn_note="estimate: 200 Gb/s HDR NIC per GPU (DGX A100 datasheet)",
         tile=_NV_TILE, overhead=1e-6, onchip=40e6, onchip_note="A100 datasheet: 40 MB L2 cache",
         cache_bw=5120 * 1.41e9, cache_bw_note=_A100_L2,
         aliases=("a100-sxm", "a100-80gb", "a100-sxm4"), notes=("no fp8 tensor cores",),
         detection=Detection(trace_names=("a100",), fingerprints=(("nvidia", 8, 0, 108),))),
    _gpu("h100", "NVIDIA", datasheet="NVIDIA H100 datasheet (SXM5)",
         peaks=dict(bf16=9.894e14, f16=9.894e14, tf32=4.947e14, f32=6.69e13, fp8=1.979e15, int8=1.979e15),
         hbm_bw=3.35e12, hbm=80e9, link_kind="nvlink", link=4.5e11,
         link_note="NVLink 4: 900 GB/s per GPU bidirectional, so 450 GB/s one-way", domain=8,
         pcie=6.4e10, dcn=5e10, dcn_note=_NV_NOTE, tile=_NV_TILE, overhead=1e-6,
         onchip=50e6, onchip_note="H100 datasheet: 50 MB L2 cache", aliases=("h100-sxm", "h100-sxm5"),
         cache_bw=5120 * 1.98e9, cache_bw_note=_H100_L2.format(mhz=1980),
         detection=Detection(trace_names=("h100",), fingerprints=(("nvidia", 9, 0, 132),))),
    _gpu("h100-pcie", "NVIDIA", datasheet="NVIDIA H100 datasheet (PCIe)",
         peaks=dict(bf16=7.56e14, f16=7.56e14, tf32=3.78e14, f32=5.12e13, fp8=1.513e15, int8=1.513e15),
         hbm_bw=2.0e12, hbm=80e9, link_kind="nvlink", link=3e11,
         link_note="NVLink bridge: 600 GB/s per pair bidirectional, so 300 GB/s one-way", domain=2,
         pcie=6.4e10, dcn=5e10, dcn_note="estimate: one 400 Gb/s NIC per GPU", tile=_NV_TILE,
         overhead=1e-6, onchip=50e6, onchip_note="H100 datasheet: 50 MB L2 cache",
         cache_bw=5120 * 1.755e9, cache_bw_note=_H100_L2.format(mhz=1755),
         detection=Detection(trace_names=("h100pcie",), fingerprints=(("nvidia", 9, 0, 114),))),
    _gpu("h200", "NVIDIA", datasheet="NVIDIA H200 datasheet (SXM)",
         peaks=dict(bf16=9.894e14, f16=9.894e14, tf32=4.947e14, f32=6.69e13, fp8=1.979e15, int8=1.979e15),
         hbm_bw=4.8e12, hbm=141e9, link_kind="nvlink", link=4.5e11,
         link_note="NVLink 4: 900 GB/s per GPU bidirectional, so 450 GB/s one-way", domain=8,
         pcie=6.4e10, dcn=5e10, dcn_note=_NV_NOTE, tile=_NV_TILE, overhead=1e-6,
         onchip=50e6, onchip_note="H100/H200: 50 MB L2 cache", aliases=("h200-sxm",),
         cache_bw=5120 * 1.98e9, cache_bw_note=_H100_L2.format(mhz=1980),
         detection=Detection(trace_names=("h200",), fingerprints=(("nvidia", 9, 0, 132),))),
    _gpu("b200", "NVIDIA", datasheet="NVIDIA HGX B200 datasheet (per GPU = 1/8, dense = sparse / 2)",
         peaks=dict(bf16=2.25e15, f16=2.25e15, tf32=1.125e15, f32=7.5e13, fp8=4.5e15, int8=4.5e15,
                    fp4=9e15),
         hbm_bw=8e12, hbm=180e9, link_kind="nvlink", link=9e11,
         link_note="NVLink 5: 1.8 TB/s per GPU bidirectional, so 900 GB/s one-way", domain=8,
         pcie=6.4e10, dcn=5e10, dcn_note=_NV_NOTE, tile=_NV_TILE, overhead=1e-6,
         aliases=("hgx-b200", "dgx-b200"), notes=("HGX B200: 8 GPUs per NVLink domain (GB200 NVL72: 72)",),
         detection=Detection(trace_names=("b200",), fingerprints=(("nvidia", 10, 0, 148),))),
    _gpu("mi300x", "AMD", datasheet="AMD Instinct MI300X datasheet",
         peaks=dict(bf16=1.3074e15, f16=1.3074e15, tf32=6.537e14, f32=1.634e14, fp8=2.6149e15,
                    int8=2.6149e15),
         hbm_bw=5.3e12, hbm=192e9, link_kind="xgmi", link=4.48e11,
         link_note="Infinity Fabric: 7 links x 128 GB/s bidirectional, so 448 GB/s one-way per GPU",
         domain=8, pcie=6.4e10, dcn=5e10, dcn_note="estimate: one 400 Gb/s NIC per GPU",
         tile=_AMD_TILE, overhead=1e-6, onchip=256e6, onchip_note="MI300X datasheet: 256 MB Infinity Cache",
         cache_name="Infinity Cache", cache_bw=17.2e12,
         cache_bw_note="AMD CDNA 3 architecture whitepaper: 17.2 TB/s peak Infinity Cache bandwidth",
         aliases=("mi300", "instinct-mi300x"),
         detection=Detection(trace_names=("mi300x",), fingerprints=(("amd", 9, 4, 304),))),
    _gpu("mi355x", "AMD", datasheet="AMD Instinct MI355X datasheet",
         peaks=dict(bf16=2.5166e15, f16=2.5166e15, f32=1.573e14, fp8=5.0332e15, int8=5.0332e15,
                    fp4=1.00663e16),
         hbm_bw=8e12, hbm=288e9, link_kind="xgmi", link=5.376e11,
         link_note="Infinity Fabric: 7 links x 153.6 GB/s bidirectional, so 537.6 GB/s one-way per GPU",
         domain=8, pcie=6.4e10, dcn=5e10, dcn_note="estimate: one 400 Gb/s NIC per GPU",
         tile=_AMD_TILE, overhead=1e-6, onchip=256e6, onchip_note="MI355X datasheet: 256 MB Infinity Cache",
         aliases=("mi355", "instinct-mi355x"), notes=("no TF32 matrix mode: f32 dots run at the f32 rate",),
         detection=Detection(trace_names=("mi355",), fingerprints=(("amd", 9, 5, 256),))),
)

CATALOG: dict[str, Hardware] = {hw.name: hw for hw in _ENTRIES}
_ALIASES: dict[str, str] = {a: hw.name for hw in _ENTRIES for a in hw.aliases}
_VENDOR_PREFIXES = ("nvidia-", "amd-", "google-")


def names() -> list[str]:
    """Every name `lookup` accepts as canonical, `cpu` included."""
    return sorted(CATALOG) + ["cpu"]


def candidates(kind: str, vendor: str = "", arch: tuple[int, int] | None = None) -> list[str]:
    """Catalog names of the `kind` ("gpu" or "tpu") chips a compiled program could be for: those
    whose compute capability (NVIDIA) or gfx target (AMD) is `arch` when it is known."""
    out = []
    for hw in _ENTRIES:
        if hw.kind != kind or (vendor and hw.vendor.lower() != vendor):
            continue
        prints = hw.detection.fingerprints
        if arch is not None and prints and not any((v, major, minor) == (vendor or v, *arch)
                                                   for v, major, minor, _ in prints):
            continue
        out.append(hw.name)
    return out


def canonical_name(name: str) -> str:
    """The catalog name for a name or alias (case-insensitive), or raise UsageError."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    for prefix in _VENDOR_PREFIXES:
        if key.startswith(prefix) and key[len(prefix):]:
            key = key[len(prefix):]
    key = _ALIASES.get(key, key)
    if key in CATALOG or key == "cpu":
        return key
    raise UsageError(f"unknown hardware {name!r}", hint=f"choose one of: {', '.join(names())}")


def parse_topology(text: str, spec: str = "") -> tuple[int, ...]:
    """"8x4" -> (8, 4), "8" -> (8,); UsageError for anything else."""
    # Spaces only: `\s` would also admit control characters that int() then refuses.
    if not re.fullmatch(r" *[1-9][0-9]*( *[xX] *[1-9][0-9]*){0,2} *", text or ""):
        raise UsageError(f"malformed topology {text!r} in --hardware {spec or text!r}",
                         hint="expected N, NxM or NxMxK with positive sizes, e.g. tpu-v5e:8x4, h100:8")
    dims = tuple(int(part) for part in re.split(r"[xX]", text.replace(" ", "")))
    if math.prod(dims) > _MAX_DEVICES:
        raise UsageError(f"topology {text!r} has {math.prod(dims)} devices, more than any machine",
                         hint=f"at most {_MAX_DEVICES}")
    return dims


def lookup(spec: str) -> Hardware:
    """Resolve `NAME[:TOPOLOGY]` (e.g. `tpu-v5e:8x4`, `h100:8`, `v5p:4x4x8`, `cpu`) to a Hardware.

    `cpu` is measured on this machine once and cached (see `calibrate.cpu_hardware`).
    Raises UsageError naming the valid choices for an unknown name, and for a topology
    that is malformed or larger than the chip's pod or switch domain allows.
    """
    name, sep, topo_text = (spec or "").partition(":")
    canonical = canonical_name(name)
    topology = parse_topology(topo_text, spec) if sep else ()
    if canonical == "cpu":
        from .calibrate import cpu_hardware

        hw = cpu_hardware()
    else:
        hw = CATALOG[canonical]
    _check_topology(hw, topology, spec)
    return hw.with_topology(topology) if topology else hw


def _check_topology(hw: Hardware, topology: tuple[int, ...], spec: str) -> None:
    if not topology:
        return
    net = hw.interconnect
    if hw.kind == "tpu":
        if len(topology) > net.torus_axes:
            raise UsageError(f"{hw.name} is a {net.torus_axes}D torus; topology {_shape(topology)} "
                             f"has {len(topology)} axes", hint=f"--hardware {spec}")
        limits = sorted(net.max_torus, reverse=True)
        if any(n > m for n, m in zip(sorted(topology, reverse=True), limits)):
            raise UsageError(f"topology {_shape(topology)} does not fit in a {hw.name} pod "
                             f"({_shape(net.max_torus)})", hint=f"--hardware {spec}")
    elif hw.kind == "gpu" and len(topology) == 2 and topology[1] > net.domain_size:
        raise UsageError(f"{topology[1]} GPUs per node exceeds the {hw.name} NVLink/xGMI domain "
                         f"of {net.domain_size}", hint="write NODESxGPUS_PER_NODE, e.g. h100:4x8")
    elif hw.kind != "tpu" and len(topology) > 2:
        raise UsageError(f"{hw.name} topology is N (devices) or NODESxPER_NODE, not {_shape(topology)}",
                         hint=f"--hardware {spec}")


def _shape(dims: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in dims)
