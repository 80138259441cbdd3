"""Which catalog GPU a device's stats describe, by one rule: a device name naming a catalog chip
decides (the longest name in it, so an H200 is not an H20); else the vendor, architecture and SM/CU
count select the chips of that fingerprint, the nearest HBM size among them and then the nearest
bandwidth (second, as ROCm states half of what HBM3 moves) pick one, and chips the stated figures
still cannot tell apart are named, with --hardware to choose. Stats come from a device plane,
nsys-jax's device metadata or XLA's gpu_target_config, named alike (`parsers.hlo.gpu_target`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..units import bytes_per_s, nbytes
from .catalog import chips
from .hardware import Hardware, Quantity

GPU_NAME_STATS = ("gpu_device_name", "device_name", "device_type_string", "device_model", "product_name")


# What a real device can state, per stat: (least, most, whole). A figure outside (a denormal memory_size, a
# fractional SM count, a clock of a femtohertz) is a damaged or crafted trace: left out, the chip named
# from the rest, never priced.
PLAUSIBLE: dict[str, tuple[float, float, bool]] = {
    "memory_size": (1 << 20, 1 << 50, True),  # B
    "memory_bandwidth": (1e9, 1e16, False),  # B/s
    "clock_rate": (1e3, 1e8, False),  # kHz
    "core_count": (1, 1 << 20, True),  # SMs, CUs
    "peak_teraflops_per_second": (1e-3, 1e7, False),
    "peak_hbm_bw_gigabytes_per_second": (1e-3, 1e7, False),
}


def num(stats: dict[str, Any], key: str) -> float | None:
    """A stat as a positive finite number within what a device can state (`PLAUSIBLE`), or None when
    absent or unusable."""
    try:
        value = float(stats[key])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    low, high, whole = PLAUSIBLE.get(key, (0.0, math.inf, False))
    return value if low <= value <= high and (not whole or value.is_integer()) else None


def provenance(plane: str, stats: dict[str, Any]) -> tuple[str, str]:
    """(the file or plane the stats come from, what that is in words): a device plane, nsys-jax's
    device metadata, XLA's gpu_target_config in the dump, or the dump's file names."""
    where = str(stats.get("described_in") or plane or "the trace")
    return where, str(stats.get("described_by") or f"device plane {plane}")


def gpu_vendor(stats: dict[str, Any]) -> str:
    vendor = str(stats.get("device_vendor", "")).strip().lower()
    if "amd" in vendor or "advanced micro" in vendor:
        return "amd"
    # CUDA traces from older profilers carry no vendor stat.
    return "nvidia" if not vendor or "nvidia" in vendor else vendor


def capability(stats: dict[str, Any]) -> tuple[int, int] | None:
    major, minor = stats.get("compute_cap_major"), stats.get("compute_cap_minor")
    if major is None:
        return None
    try:
        cap = int(major), int(minor or 0)
    except (TypeError, ValueError, OverflowError):  # missing, malformed or infinite
        return None
    return cap if all(0 <= c < 1000 for c in cap) else None  # no architecture numbers past a few dozen


def gpu_match(stats: dict[str, Any], vendor: str) -> tuple[str | None, str]:
    """The catalog GPU a plane names, else the one its fingerprint (and HBM size) matches."""
    known = chips()
    fragments = sorted(((f, hw.name) for hw in known if hw.kind == "gpu"
                        for f in hw.detection.trace_names), key=lambda item: -len(item[0]))
    for key in GPU_NAME_STATS:
        label = re.sub(r"[\s_-]+", "", str(stats.get(key, "")).lower())
        for fragment, name in fragments:
            if label and fragment in label:
                return name, f"{key} {stats[key]!r}"
    cap, cores = capability(stats), num(stats, "core_count")
    if cap is None or cores is None:
        return None, ""
    print_ = (vendor, cap[0], cap[1], int(cores))
    candidates = [hw for hw in known if print_ in hw.detection.fingerprints]
    if not candidates:
        return None, ""
    memory, bandwidth = num(stats, "memory_size"), num(stats, "memory_bandwidth")
    # Variants sharing a fingerprint: the nearest HBM size decides, then the nearest bandwidth
    # (second, as ROCm states half what HBM3 moves); chips still level are named in the note.
    candidates.sort(key=lambda hw: (_distance(hw.hbm_bytes, memory), _distance(hw.hbm_bytes_per_s, bandwidth)))
    unit = "CUs" if vendor == "amd" else "SMs"
    how = f"vendor {vendor}, compute capability {cap[0]}.{cap[1]}, {int(cores)} {unit}"
    if len(candidates) > 1 and memory is not None:
        how += f", {nbytes(memory)} of memory"
    if len(candidates) > 1 and bandwidth is not None and memory is not None \
            and _distance(candidates[0].hbm_bytes, memory) == _distance(candidates[1].hbm_bytes, memory):
        how += f", {bytes_per_s(bandwidth)}"
    level = [hw.name for hw in candidates[1:] if _same_figures(hw, candidates[0], memory, bandwidth)]
    if level:
        one = len(level) == 1
        how += (f"; {', '.join(level)} {'matches' if one else 'match'} these figures as well and "
                f"{'differs' if one else 'differ'} elsewhere (pass --hardware to choose)")
    return candidates[0].name, how


def _distance(q: Quantity | None, stated: float | None) -> float:
    """How far a catalog figure is from what the device states (0 when it states none)."""
    if stated is None:
        return 0.0
    if q is None or not q.value > 0:
        return math.inf
    return abs(math.log(stated / q.value))


def _same_figures(a: Hardware, b: Hardware, memory: float | None, bandwidth: float | None) -> bool:
    return (_distance(a.hbm_bytes, memory), _distance(a.hbm_bytes_per_s, bandwidth)) == \
        (_distance(b.hbm_bytes, memory), _distance(b.hbm_bytes_per_s, bandwidth))
