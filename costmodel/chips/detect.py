"""Which hardware a trace ran on, from its device plane stats, as a Hardware value.

The trace's own numbers win over the catalog where it states them (source `trace`):
TPU planes carry `peak_teraflops_per_second` and `peak_hbm_bw_gigabytes_per_second`;
GPU planes carry `memory_bandwidth` (B/s), `memory_size` (B), `clock_rate` (kHz),
`core_count` and the compute capability. Everything else comes from the catalog
entry the device matches. An unrecognised device still yields a Hardware, with what
the trace states and notes saying what is unknown; detection never raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .calibration import cached_cpu_hardware
from .. import units as qty
from .catalog import chips
from .gpu_identity import GPU_NAME_STATS as _GPU_NAME_STATS
from .gpu_identity import capability as _capability
from .gpu_identity import gpu_match as _gpu_match
from .gpu_identity import gpu_vendor as _gpu_vendor
from .gpu_identity import num as _num
from .gpu_identity import provenance as _provenance
from .hardware import Achievable, Hardware, Interconnect, Quantity

# Dense bf16 FLOPs per SM or CU per clock of GPU families with no chip in the catalog (datasheet
# peak / (units x boost clock)); every other family's figure is derived from its catalog chips.
_UNLISTED_FAMILIES: dict[tuple[str | int, ...], tuple[float, str]] = {
    ("nvidia", 7): (1024, "V100: 125e12 / (80 SMs x 1.53 GHz)"),
    ("amd", 9, 0): (1024, "MI250X: 383e12 / (220 CUs x 1.7 GHz)"),
}


def _per_unit_clock(hw: Hardware, family: bool = False) -> tuple[float, str] | None:
    """A catalog GPU's dense bf16 FLOPs per SM/CU per clock: its datasheet peak over its units and
    boost clock; for its `family`, to the power of two full tensor units run at (the datasheet
    peaks are rounded, and a cut-down variant is no guide to an unlisted sibling)."""
    clock, prints = hw.detection.boost_clock_hz, hw.detection.fingerprints
    if clock is None or not prints or "bf16" not in hw.peak_flops or clock.value <= 0:
        return None
    units = prints[0][3]
    peak = hw.peak_flops["bf16"].value
    exact = peak / (units * clock.value)
    if not math.isfinite(exact) or exact <= 0:
        return None
    rate = float(2 ** round(math.log2(exact))) if family else exact
    label = "SMs" if hw.vendor.lower() == "nvidia" else "CUs"
    return rate, f"{hw.name}: {qty.flops_per_s(peak)} / ({units} {label} x {qty.si(clock.value, 'Hz')})"


def _family_rates() -> dict[tuple[str | int, ...], tuple[float, str]]:
    """(vendor, major[, minor]) -> (bf16 FLOPs per unit per clock, how), highest of each family's
    catalog chips: a roof is an upper bound, so a cut-down variant does not lower it."""
    out = dict(_UNLISTED_FAMILIES)
    for hw in chips():
        rate = _per_unit_clock(hw, family=True)
        if rate is None:
            continue
        vendor, major, minor, _ = hw.detection.fingerprints[0]
        key: tuple[str | int, ...] = (vendor, major) if vendor == "nvidia" else (vendor, major, minor)
        if key not in out or rate[0] > out[key][0] or key in _UNLISTED_FAMILIES:
            out[key] = rate
    return out
_BW_DISAGREEMENT = 0.2  # relative difference from the datasheet worth a note
# TensorCores in one megacore device (TPU v4, v5p): XProf's TensorCore plane states one core's peaks.
_MEGACORE_CORES = 2
# Below this fraction of the datasheet, a trace's memory_bandwidth is not a ceiling: no SKU of
# a catalog chip is that much slower. ROCm states 2 x memory clock x bus width, half of what
# HBM3 moves (4 transfers per clock): MI300X traces say 2.66e12 B/s, and their own kernels
# reach over 4e12 B/s. A roof is an upper bound on speed, so the higher datasheet figure is
# used there, with a note; within this range the trace's figure (a slower SKU) wins.
_BW_IMPLAUSIBLE = 0.6


def hardware_from_trace(platform: str, device_stats: dict[str, dict[str, Any]], *,
                        cpu: Callable[[], Hardware | None] = cached_cpu_hardware) -> Hardware:
    """The Hardware a profile ran on.

    **Arguments:**
    - `platform`: "tpu", "gpu" or "cpu" as the profile reader decided.
    - `device_stats`: plane name -> {stat name: value}, as in `HostProfile.device_stats`.
    - `cpu`: for CPU, this machine's Hardware: by default its calibration record, if it has one; a
      caller that may measure passes the function that does.

    **Returns:** a Hardware whose `source` is "trace" when any number came from the trace.
    """
    stats = _device_planes(device_stats)
    kind = (platform or "").strip().lower()
    if kind not in ("tpu", "gpu", "cpu"):
        kind = _guess_platform(stats)
    if kind == "tpu":
        return _tpu(stats)
    if kind == "gpu":
        return _gpu(stats)
    if kind == "cpu":
        return _cpu(cpu)
    return _unknown("accelerator", "unknown", (f"platform {platform!r} not recognised and no device "
                                               "plane says what it is",))


def _device_planes(device_stats: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Device planes that carry stats, in device order; SparseCore planes describe no chip."""
    planes = [(name, s) for name, s in (device_stats or {}).items()
              if isinstance(s, dict) and s and "sparsecore" not in name.lower()]
    return sorted(planes, key=lambda item: _natural_key(item[0]))


def _natural_key(name: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _guess_platform(planes: list[tuple[str, dict[str, Any]]]) -> str:
    for name, stats in planes:
        if "TPU" in name or "device_type_string" in stats:
            return "tpu"
        if "GPU" in name or "core_count" in stats:
            return "gpu"
    return ""


def _trace(value: float, unit: str, note: str) -> Quantity:
    return Quantity(value, unit, "trace", note)


def _mixed_note(planes: list[tuple[str, dict[str, Any]]], keys: tuple[str, ...]) -> tuple[str, ...]:
    """A note when device planes disagree (a heterogeneous host); the first plane is used."""
    if len(planes) < 2:
        return ()
    first = {k: planes[0][1].get(k) for k in keys}
    others = [name for name, s in planes[1:] if {k: s.get(k) for k in keys} != first]
    if not others:
        return ()
    return (f"device planes differ ({', '.join(others[:3])} vs {planes[0][0]}); using {planes[0][0]}",)


# --- TPU -------------------------------------------------------------------------------------

def _tpu(planes: list[tuple[str, dict[str, Any]]]) -> Hardware:
    plane, stats = planes[0] if planes else ("", {})
    type_string = str(stats.get("device_type_string", "")).strip()
    name = _tpu_name(type_string)
    if name is None:
        what = f"TPU type {type_string!r}" if type_string else "TPU type (no device_type_string)"
        hw = _unknown("tpu", "Google", (f"{what} is not in the catalog",))
    else:
        hw = replace(_per_device(_chip(name)), identified_by=f"device_type_string {type_string!r} (device plane {plane})")
    hw = _tpu_trace_overrides(hw, stats, plane)
    return replace(hw, notes=hw.notes + _mixed_note(planes, ("device_type_string",)))


def _tpu_name(type_string: str) -> str | None:
    squashed = re.sub(r"[\s_-]+", "", type_string.lower()).removeprefix("tpu")
    for hw in chips():
        if hw.kind == "tpu" and any(re.match(p, squashed) for p in hw.detection.trace_names):
            return hw.name
    return None


def _per_device(hw: Hardware) -> Hardware:
    """TPU v2/v3 planes are cores, each half a chip: scale the per-chip catalog numbers."""
    k = hw.devices_per_chip
    if k == 1:
        return hw
    peaks = {d: _split(q, k) for d, q in hw.peak_flops.items()}
    hbm = None if hw.hbm_bytes is None else _split(hw.hbm_bytes, k)
    return replace(hw, peak_flops=peaks, hbm_bytes_per_s=_split(hw.hbm_bytes_per_s, k), hbm_bytes=hbm,
                   devices_per_chip=1,
                   notes=hw.notes + ("numbers are per TensorCore, the device the trace shows",))


def _split(q: Quantity, cores: int) -> Quantity:
    return replace(q, value=q.value / cores, note=f"{q.note}; catalog per-chip value / {cores} cores per chip")


def _tpu_trace_overrides(hw: Hardware, stats: dict[str, Any], plane: str) -> Hardware:
    """The trace's peak stats over the catalog's, in the unit the HLO ops run on: a megacore
    device (v4, v5p: `has_megacore`) is two TensorCores that one program drives as one, and the
    plane states each TensorCore's peaks, so they are doubled."""
    tflops = _num(stats, "peak_teraflops_per_second")
    hbm_gbs = _num(stats, "peak_hbm_bw_gigabytes_per_second")
    if tflops is None and hbm_gbs is None:
        return hw
    cores = _MEGACORE_CORES if _flag(stats.get("has_megacore")) else 1
    per_core = f" x {cores} TensorCores per megacore device" if cores > 1 else ""
    peaks, bandwidth = dict(hw.peak_flops), hw.hbm_bytes_per_s
    if tflops is not None:
        peaks["bf16"] = _trace(tflops * 1e12 * cores, "FLOP/s",
                               f"{plane}: peak_teraflops_per_second = {qty.count(tflops)}{per_core}")
    if hbm_gbs is not None:
        bandwidth = _trace(hbm_gbs * 1e9 * cores, "B/s",
                           f"{plane}: peak_hbm_bw_gigabytes_per_second = {qty.count(hbm_gbs)}{per_core}")
    stated = " and ".join(n for n, v in (("peak bf16 FLOP/s", tflops), ("HBM bandwidth", hbm_gbs)) if v)
    note = f"{stated} from the trace's {plane} stats, over the catalog"
    if cores > 1:
        note += (f"; the plane states one TensorCore's (has_megacore), the device the HLO ops run on is "
                 f"{cores}: doubled")
    return replace(hw, peak_flops=peaks, hbm_bytes_per_s=bandwidth, source="trace", notes=hw.notes + (note,))


def _flag(value: Any) -> bool:
    """An integer or boolean stat that is set (1, True); anything else, malformed included, is not."""
    try:
        return bool(int(value))
    except (TypeError, ValueError, OverflowError):
        return False


def _chip(name: str) -> Hardware:
    return next(hw for hw in chips() if hw.name == name)


# --- GPU -------------------------------------------------------------------------------------

def _gpu(planes: list[tuple[str, dict[str, Any]]]) -> Hardware:
    plane, stats = planes[0] if planes else ("", {})
    where, said = _provenance(plane, stats)
    vendor = _gpu_vendor(stats)
    name, how = _gpu_match(stats, vendor)
    if name is None:
        hw = _derived_gpu(stats, vendor, where, said)
    else:
        chip = _chip(name)
        hw = replace(chip, notes=chip.notes + (f"identified as {name} by {how} ({where})",),
                     identified_by=f"{how} ({said})")
        hw = _check_peak(hw, stats, vendor, where)
    hw = _gpu_memory_overrides(hw, stats, where)
    keys = ("clock_rate", "core_count", "compute_cap_major", "compute_cap_minor", "memory_size")
    return replace(hw, notes=hw.notes + _mixed_note(planes, keys))


def _clock_peak(stats: dict[str, Any], vendor: str, chip: Hardware | None = None) -> tuple[float, str] | None:
    """bf16 FLOP/s from clock_rate (kHz) x core_count x FLOPs per unit per clock: the matched
    `chip`'s own where its catalog entry gives its clock, else its family's."""
    cap, cores, khz = _capability(stats), _num(stats, "core_count"), _num(stats, "clock_rate")
    rates = _family_rates()
    rate = (rates.get((vendor, *cap)) or rates.get((vendor, cap[0]))) if cap else None
    rate = (_per_unit_clock(chip) if chip is not None else None) or rate
    if rate is None or cores is None or khz is None:
        return None
    per_clock, basis = rate
    how = (f"clock_rate {qty.si(khz * 1e3, 'Hz')} x core_count {qty.count(cores)} x {qty.number(per_clock)} bf16 "
           f"FLOPs per unit per clock ({basis})")
    return khz * 1e3 * cores * per_clock, how


def _check_peak(hw: Hardware, stats: dict[str, Any], vendor: str, plane: str) -> Hardware:
    derived = _clock_peak(stats, vendor, hw)
    if derived is None:
        return hw
    value, how = derived
    datasheet = hw.peak_flops["bf16"].value
    ratio = value / datasheet
    verdict = "agrees with" if abs(ratio - 1) < 0.05 else f"is {qty.ratio(ratio)}"
    note = f"{plane}: {how} = {qty.flops_per_s(value)} {verdict} the datasheet bf16 peak; the datasheet is used"
    return replace(hw, notes=hw.notes + (note,))


def _derived_gpu(stats: dict[str, Any], vendor: str, plane: str, said: str) -> Hardware:
    cap = _capability(stats)
    label = f"{vendor} GPU" + (f" with compute capability {cap[0]}.{cap[1]}" if cap else "")
    derived = _clock_peak(stats, vendor)
    if derived is None:
        stated = f" ({said})" if stats else ""
        return _unknown("gpu", vendor, (f"{label}{stated} is not in the catalog and its peak FLOP/s cannot be "
                                        "derived from the trace",))
    value, how = derived
    peaks = {"bf16": _trace(value, "FLOP/s", f"{plane}: derived: {how}")}
    name = f"gpu-{vendor}-cc{cap[0]}.{cap[1]}" if cap else f"gpu-{vendor}"
    return Hardware(name=name, kind="gpu", vendor=vendor, peak_flops=peaks,
                    hbm_bytes_per_s=_nan_quantity("B/s", "memory_bandwidth not in the trace"),
                    interconnect=Interconnect(kind="none"), source="trace",
                    identified_by=f"compute capability, clock and SM/CU count ({said})",
                    notes=(f"{label} is not in the catalog: peak derived from the trace's clock and core "
                           "count; other dtypes fall back to the bf16 rate, interconnect unknown",))


def _gpu_memory_overrides(hw: Hardware, stats: dict[str, Any], plane: str) -> Hardware:
    bandwidth, size = _num(stats, "memory_bandwidth"), _num(stats, "memory_size")
    if bandwidth is None and size is None:
        return hw
    notes = list(hw.notes)
    changes: dict[str, Any] = {"source": "trace"}
    if bandwidth is not None:
        old = hw.hbm_bytes_per_s
        ratio = bandwidth / old.value if old.source == "catalog" and math.isfinite(old.value) else 1.0
        part = _other_part(hw, size)
        stated = (f"trace memory_bandwidth {qty.bytes_per_s(bandwidth)} is {qty.ratio(ratio)} the datasheet's "
                  f"{qty.bytes_per_s(old.value)}" + (f" for the {part}" if part else ""))
        if ratio < _BW_IMPLAUSIBLE:
            changes["hbm_bytes_per_s"] = replace(old, note=f"{old.note}; above the trace's memory_bandwidth "
                                                 f"{qty.bytes_per_s(bandwidth)} ({plane}), which real kernels exceed")
            notes.append(f"{stated}, too low to be a ceiling (counted at 2 transfers per memory clock; "
                         "real kernels exceed it): ops are judged against the higher datasheet figure")
        else:
            changes["hbm_bytes_per_s"] = _trace(bandwidth, "B/s", f"{plane}: memory_bandwidth")
            if abs(ratio - 1) > _BW_DISAGREEMENT:
                notes.append(f"{stated}; the trace's value is used")
                if hw.achievable is not None:
                    changes["achievable"] = _scaled_memory(hw.achievable, ratio, stated)
    if size is not None:
        changes["hbm_bytes"] = _trace(size, "B", f"{plane}: memory_size")
        if part := _other_part(hw, size):
            notes.append(f"trace memory_size {qty.nbytes(size)}: another part of {hw.name} than the catalog entry's "
                         f"{part}; its memory figures are the trace's, not that part's datasheet")
    return replace(hw, notes=tuple(notes), **changes)


_OTHER_PART = 0.15  # a memory size this far from the entry's is another part of the chip (A100 40 GB vs 80 GB)


def _other_part(hw: Hardware, size: float | None) -> str:
    """The catalog entry's part ("80.0 GB part") where the trace's memory size says the chip is another one."""
    stated = hw.hbm_bytes
    if size is None or stated is None or not stated.value or abs(size / stated.value - 1) <= _OTHER_PART:
        return ""
    return f"{qty.nbytes(stated.value)} part"


def _scaled_memory(ach: Achievable, ratio: float, why: str) -> Achievable:
    """Achievable streaming bandwidth for a part whose HBM differs from the catalog entry's (an
    A100 40GB detected as the 80GB entry): the measured figure at the same fraction of the peak."""
    q = ach.memory_bytes_per_s
    note = f"estimate: {q.note}, scaled by {qty.ratio(ratio)} ({why}): the same fraction of this part's peak"
    return replace(ach, memory_bytes_per_s=Quantity(q.value * ratio, q.unit, q.source, note, "estimate"))


# --- CPU and unknown -------------------------------------------------------------------------

def _cpu(cpu: Callable[[], Hardware | None]) -> Hardware:
    hw = cpu()
    if hw is not None:
        return hw
    return _unknown("cpu", "unknown", ("CPU not calibrated (calibration was turned off and no cached "
                                       "measurement exists): ceilings unknown",))


def _nan_quantity(unit: str, why: str) -> Quantity:
    return Quantity(math.nan, unit, "catalog", f"unknown: {why}")


def _unknown(kind: str, vendor: str, notes: tuple[str, ...]) -> Hardware:
    """A Hardware whose ceilings are unknown (NaN, shown as null); the trace may fill some in."""
    return Hardware(name=f"unknown-{kind}", kind=kind if kind in ("tpu", "gpu", "cpu") else "unknown",
                    vendor=vendor, peak_flops={"bf16": _nan_quantity("FLOP/s", "device not recognised")},
                    hbm_bytes_per_s=_nan_quantity("B/s", "device not recognised"),
                    interconnect=Interconnect(kind="none"), notes=notes)


def priceable(hw: Hardware) -> bool:
    """Whether `hw` states the two ceilings every op is priced on: a bf16 peak and a main-memory bandwidth."""
    peak = hw.peak_flops.get("bf16") or next(iter(hw.peak_flops.values()), None)
    return peak is not None and math.isfinite(peak.value) and math.isfinite(hw.hbm_bytes_per_s.value)


def device_facts(device_stats: dict[str, dict[str, Any]] | Any) -> tuple[str, str, tuple[int, int] | None]:
    """(what the first device plane states that could identify a chip, in words; its GPU vendor,
    "nvidia" or "amd" or ""; its compute capability or gfx version), for a message when the chip
    is not identified."""
    planes = _device_planes(dict(device_stats or {}))
    if not planes:
        return "", "", None
    plane, stats = planes[0]
    _, said = _provenance(plane, stats)
    cap = _capability(stats)
    vendor = _gpu_vendor(stats) if "device_vendor" in stats or cap else ""
    parts = [f"{stats[k]!r}" for k in _GPU_NAME_STATS if str(stats.get(k, "")).strip()]
    if cap is not None:
        parts.append(f"{'gfx target' if vendor == 'amd' else 'compute capability'} {cap[0]}.{cap[1]}")
    if (cores := _num(stats, "core_count")) is not None:
        parts.append(f"{int(cores)} {'CUs' if vendor == 'amd' else 'SMs'}")
    if not parts:
        return "", vendor if vendor in ("nvidia", "amd") else "", cap
    return (f"all it carries is {', '.join(parts)}, from {said}, which does not tell which chip it is",
            vendor if vendor in ("nvidia", "amd") else "", cap)
