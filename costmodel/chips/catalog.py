"""The hardware catalog: per-chip ceilings of TPUs and GPUs, and `--hardware NAME[:TOPOLOGY]`.

Every entry is a hardware file in `data/` (one per chip, the format `hwfile` reads and writes),
so adding a chip needs no Python. TPU numbers are the book's chapter 2 tables ("How to Scale
Your Model") and Google's Cloud TPU pages; GPU numbers are the vendors' datasheets, dense (not
structured-sparse) peaks. GB = 1e9 bytes. Each number carries its source and its kind; those
that are estimates say so. `cpu` is not a fixed entry: it is this machine, measured once and
read from its calibration record (`calibration.py`). Users add their own chips as files in the directories `AUDIT_HARDWARE_PATH`
names, or name one file with `--hardware FILE.toml[:TOPOLOGY]`.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ...base.errors import UsageError
from . import hwfile
from .calibration import cached_cpu_hardware
from .hardware import Hardware

_MAX_DEVICES = 1 << 20  # a topology beyond a million chips is a typo, not a machine
SITE_PATH_VAR = "AUDIT_HARDWARE_PATH"


@dataclass(frozen=True)
class Entry:
    """A chip `lookup` can resolve by name, and the file it came from."""

    hardware: Hardware
    path: str  # the package's own data file, or a user's
    site: bool  # from a directory named in AUDIT_HARDWARE_PATH


def _kind_order(hw: Hardware) -> tuple[int, int, str, str]:
    """TPUs, then NVIDIA and AMD GPUs, then others; by name within each (older chips first)."""
    vendor = hw.vendor.lower()
    return ({"tpu": 0, "gpu": 1}.get(hw.kind, 2), {"nvidia": 0, "amd": 1}.get(vendor, 2), vendor, hw.name)


def _load_catalog() -> dict[str, Hardware]:
    """The package's own entries, TPUs first, then GPUs by vendor, each by name."""
    folder = resources.files(__package__).joinpath("data")
    entries = [hwfile.loads(item.read_text(encoding="utf-8"), f"{__package__}/data/{item.name}", "catalog")
               for item in folder.iterdir() if item.name.endswith(".toml")]
    return {hw.name: hw for hw in sorted(entries, key=_kind_order)}


@functools.cache
def _catalog() -> dict[str, Hardware]:
    """The package's entries, read on first use: a CPU profile never needs them (20 files of TOML,
    a third of a second of start-up)."""
    return _load_catalog()


def __getattr__(name: str) -> dict[str, Hardware]:
    """`CATALOG`, the package's own entries by name, read when first asked for."""
    if name == "CATALOG":
        return _catalog()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_VENDOR_PREFIXES = ("nvidia-", "amd-", "google-")


def site_entries() -> dict[str, Entry]:
    """The chips in the directories `AUDIT_HARDWARE_PATH` names (os.pathsep-separated), by name.

    Read on each call, so a file added or edited is seen at once; the first directory that
    has a name wins. A bad file is an InputError naming it, its key and line.
    """
    out: dict[str, Entry] = {}
    for folder in filter(None, os.environ.get(SITE_PATH_VAR, "").split(os.pathsep)):
        directory = Path(folder).expanduser()
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            hw = hwfile.load(path, "user")
            out.setdefault(hw.name, Entry(hw, str(path), site=True))
    return out


def entries() -> dict[str, Entry]:
    """Every chip a name resolves to: site files over the package's own entries of the same name."""
    out = {name: Entry(hw, f"{__package__}/data/{name}.toml", site=False) for name, hw in _catalog().items()}
    out.update(site_entries())
    return out


def chips() -> list[Hardware]:
    """Every resolvable chip (the catalog and site files), in catalog order: what detection searches."""
    return sorted((e.hardware for e in entries().values()), key=_kind_order)


def names() -> list[str]:
    """Every name `lookup` accepts as canonical, `cpu` included."""
    return sorted(entries()) + ["cpu"]


def candidates(kind: str, vendor: str = "", arch: tuple[int, int] | None = None) -> list[str]:
    """Catalog names of the `kind` ("gpu" or "tpu") chips a compiled program could be for: those
    whose compute capability (NVIDIA) or gfx target (AMD) is `arch` when it is known (a chip whose
    entry states none is then left out: nothing says it could be)."""
    out = []
    for hw in chips():
        if hw.kind != kind or (vendor and hw.vendor.lower() != vendor):
            continue
        prints = hw.detection.fingerprints
        if arch is not None and not any((v, major, minor) == (vendor or v, *arch) for v, major, minor, _ in prints):
            continue
        out.append(hw.name)
    return out


def canonical_name(name: str) -> str:
    """The catalog name for a name or alias (case-insensitive), or raise UsageError."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    for prefix in _VENDOR_PREFIXES:
        if key.startswith(prefix) and key[len(prefix):]:
            key = key[len(prefix):]
    known = entries()
    aliases = {a: e.hardware.name for e in known.values() for a in e.hardware.aliases}
    key = key if key in known else aliases.get(key, key)
    if key in known or key == "cpu":
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


_FILE_SPEC = re.compile(r"(?P<file>.+\.toml)(?::(?P<topology>[^:/\\]*))?", re.IGNORECASE)


def spec_file(spec: str) -> str | None:
    """The hardware file `--hardware FILE.toml[:TOPOLOGY]` names, or None for a chip name."""
    match = _FILE_SPEC.fullmatch((spec or "").strip())
    return match.group("file") if match else None


def lookup(spec: str, *, cpu: Callable[[], Hardware | None] = cached_cpu_hardware) -> Hardware:
    """Resolve `NAME[:TOPOLOGY]` (e.g. `tpu-v5e:8x4`, `h100:8`, `v5p:4x4x8`, `cpu`) or
    `FILE.toml[:TOPOLOGY]` (a user's hardware file) to a Hardware.

    `cpu` is this machine as `cpu()` gives it: by default its calibration record, None when it
    has none; a caller that may measure passes the function that does. Raises UsageError naming the valid choices for an unknown name, and for a topology
    that is malformed or larger than the chip's pod or switch domain allows; InputError
    (file, key and line) for a hardware file that is not valid.
    """
    spec = spec or ""
    as_file = _FILE_SPEC.fullmatch(spec.strip())
    if as_file:
        path = Path(as_file.group("file")).expanduser()
        if not path.is_file():
            raise UsageError(f"no hardware file {str(path)!r}", hint="write one with: audit hardware show h100 --toml FILE")
        hw = hwfile.load(path, "user")
        topo_text = as_file.group("topology")
        topology = parse_topology(topo_text, spec) if topo_text is not None else ()
        _check_topology(hw, topology, spec)
        return hw.with_topology(topology) if topology else hw
    name, sep, topo_text = spec.partition(":")
    canonical = canonical_name(name)
    topology = parse_topology(topo_text, spec) if sep else ()
    if canonical == "cpu":
        found = cpu()
        if found is None:
            raise UsageError("this machine's CPU is not calibrated yet",
                             hint="audit hardware show cpu measures it (a few seconds)")
        hw = found
    else:
        hw = entries()[canonical].hardware
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
