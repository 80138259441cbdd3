"""What XLA says about the GPU it compiled for: `*.gpu_target_config.pbtxt`, and the dump's file names.

XLA writes `module_NNNN.NAME.gpu_target_config.pbtxt` beside a GPU program's HLO dump (nsys-jax
archives keep it, xz-compressed, in `dump/`): protobuf text with `device_description_str`
("NVIDIA H100 80GB HBM3") and `gpu_device_info` (`core_count` SMs or CUs, `clock_rate_ghz`,
`device_memory_size` and `memory_bandwidth` in bytes and bytes/s, `cuda_compute_capability`
or `rocm_compute_capability.gcn_arch_name`). Read here into the stats an XPlane device plane
carries under the same names (`hardware_from_trace` reads both alike), with `described_by` and
`described_in` saying where they came from. A file that is not such a config yields None: the
chip is then identified by the next evidence, never guessed.
"""

from __future__ import annotations

import lzma
import re
from pathlib import Path
from typing import Any

from ...base.errors import InputError
from ..wire.input_files import read_input

CONFIG_SUFFIX = "gpu_target_config.pbtxt"
MAX_CONFIG_BYTES = 1 << 20  # a real config is about 5 kB
_MAX_DEPTH = 16
_MAX_FIGURE = 2**64
_TOKEN = re.compile(r'\s+|#[^\n]*|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|[{}<>:;,\[\]]|[^\s{}<>:;,\[\]"\']+')
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_SM = re.compile(r"(?<![a-z0-9])sm_(\d+)\.(\d+)([a-z]?)(?![0-9])")
_GFX = re.compile(r"(?<![a-z0-9])gfx(\d{1,2})([0-9a-f])([0-9a-f])(?![0-9a-z])")


class _Malformed(ValueError):
    pass


def parse_text_proto(text: str) -> dict[str, Any]:
    """Protobuf text format as nested dicts; a field seen twice becomes a list.

    **Raises:** ValueError for text that is not protobuf text format (or nests too deep).
    """
    tokens = [t for t in _TOKEN.findall(text) if not t.isspace() and not t.startswith("#")]
    message, end = _message(tokens, 0, 0)
    if end != len(tokens):
        raise _Malformed(f"unexpected {tokens[end]!r}")
    return message


def _message(tokens: list[str], i: int, depth: int) -> tuple[dict[str, Any], int]:
    if depth > _MAX_DEPTH:
        raise _Malformed("nested too deep")
    out: dict[str, Any] = {}
    while i < len(tokens) and tokens[i] not in ("}", ">"):
        name = tokens[i]
        if not re.match(r"^[A-Za-z_][\w.]*$", name) or i + 1 >= len(tokens):
            raise _Malformed(f"unexpected {name!r}")
        i += 1
        if tokens[i] == ":":
            i += 1
        if i < len(tokens) and tokens[i] in ("{", "<"):
            value, i = _message(tokens, i + 1, depth + 1)
            if i >= len(tokens):
                raise _Malformed(f"{name} is not closed")
            i += 1
        elif i < len(tokens):
            value, i = _scalar(tokens[i]), i + 1
        else:
            raise _Malformed(f"{name} has no value")
        if name in out:
            out[name] = (out[name] if isinstance(out[name], list) else [out[name]]) + [value]
        else:
            out[name] = value
        if i < len(tokens) and tokens[i] in (";", ","):
            i += 1
    return out, i


def _scalar(token: str) -> Any:
    if token[:1] in "\"'":
        return token[1:-1].replace("\\\"", "\"").replace("\\'", "'").replace("\\\\", "\\")
    if _NUMBER.match(token):  # an integer as written: a float of 400 digits is infinite, and no int
        return int(token) if re.match(r"^[+-]?\d+$", token) else float(token)
    if token in ("{", "}", "<", ">", ":", "[", "]"):
        raise _Malformed(f"unexpected {token!r}")
    return {"true": True, "false": False}.get(token, token)


def target_stats(text: str, where: str) -> dict[str, Any] | None:
    """The device stats a gpu_target_config states, named as XPlane GPU planes name them (None
    when `text` is not one): `device_name`, `device_vendor`, `core_count`, `clock_rate` (kHz),
    `memory_size` (B), `memory_bandwidth` (B/s), `compute_cap_major`/`_minor`."""
    try:
        config = parse_text_proto(text)
    except ValueError:
        return None
    info = config.get("gpu_device_info")
    if not isinstance(info, dict):
        return None
    stats: dict[str, Any] = {"described_by": "the dump's gpu_target_config", "described_in": where}
    name = config.get("device_description_str") or info.get("name")
    if isinstance(name, str) and name.strip():
        stats["device_name"] = name.strip()
    platform = str(config.get("platform_name", "")).upper()
    vendor = info.get("device_vendor")
    stats["device_vendor"] = vendor if isinstance(vendor, str) and vendor else (
        "AMD" if platform == "ROCM" or "rocm_compute_capability" in info else "NVIDIA")
    for key, stat, scale in (("core_count", "core_count", 1), ("clock_rate_ghz", "clock_rate", 1e6),
                             ("device_memory_size", "memory_size", 1), ("memory_bandwidth", "memory_bandwidth", 1)):
        value = info.get(key)
        # Past 2^64 no chip (and the infinities of 1e400): the figure is left for other evidence.
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < _MAX_FIGURE:
            stats[stat] = value * scale
    stats.update(_capability(info))
    return stats


def _capability(info: dict[str, Any]) -> dict[str, int]:
    cuda, rocm = info.get("cuda_compute_capability"), info.get("rocm_compute_capability")
    if isinstance(cuda, dict) and isinstance(cuda.get("major"), int):
        minor = cuda.get("minor", 0)
        return {"compute_cap_major": cuda["major"], "compute_cap_minor": minor if isinstance(minor, int) else 0}
    if isinstance(rocm, dict):
        arch = gfx_version(str(rocm.get("gcn_arch_name", "")))
        if arch is not None:
            return {"compute_cap_major": arch[0], "compute_cap_minor": arch[1]}
    return {}


def gfx_version(name: str) -> tuple[int, int, str] | None:
    """An AMD gfx target as (major, minor, the marker), the way ROCm traces state it: gfx942 -> (9, 4, "gfx942")."""
    hit = _GFX.search(name.lower())
    return (int(hit[1]), int(hit[2], 16), hit[0]) if hit else None


def sm_version(name: str) -> tuple[int, int, str] | None:
    """An NVIDIA target in a file name as (major, minor, the marker as written): sm_9.0a -> (9, 0, "sm_9.0a")."""
    hit = _SM.search(name.lower())
    return (int(hit[1]), int(hit[2]), hit[0]) if hit else None


def marker_stats(names: list[str]) -> dict[str, Any] | None:
    """What the dump's file names say of the target (`sm_9.0a`, `gfx942`): a vendor and an
    architecture, which narrow the chip but never name it."""
    for name in names:
        sm = sm_version(name)
        if sm is not None:
            return {"device_vendor": "NVIDIA", "compute_cap_major": sm[0], "compute_cap_minor": sm[1],
                    "described_by": f"the dump's file names ({sm[2]})", "described_in": name}
        gfx = gfx_version(name)
        if gfx is not None:
            return {"device_vendor": "AMD", "compute_cap_major": gfx[0], "compute_cap_minor": gfx[1],
                    "described_by": f"the dump's file names ({gfx[2]})", "described_in": name}
    return None


def config_bytes_to_stats(data: bytes, where: str) -> dict[str, Any] | None:
    """`target_stats` of a config file's bytes, xz-compressed (as nsys-jax keeps them) or not."""
    if data[:6] == b"\xfd7zXZ\x00":
        decompressor = lzma.LZMADecompressor()
        try:
            data = decompressor.decompress(data, max_length=MAX_CONFIG_BYTES)
        except lzma.LZMAError:
            return None
        if not decompressor.eof:
            return None  # far larger than any config: not one
    try:
        return target_stats(data.decode("utf-8"), where)
    except UnicodeDecodeError:
        return None


def config_beside(path: Path) -> Path | None:
    """The gpu_target_config XLA wrote for the module dumped at `path` (same `module_NNNN.`
    prefix), else the only one in its folder (one process, one kind of GPU), else None."""
    try:
        configs = sorted(p for p in path.parent.iterdir() if p.name.endswith((CONFIG_SUFFIX, CONFIG_SUFFIX + ".xz")))
    except OSError:
        return None
    prefix = re.match(r"(module_\d+\.)", path.name)
    same = [p for p in configs if prefix and p.name.startswith(prefix[1])]
    return same[0] if same else configs[0] if configs else None


def stats_beside(path: Path) -> dict[str, Any] | None:
    """The target stats of the config beside an HLO dump (see `config_beside`), or None."""
    config = config_beside(path)
    if config is None or not config.is_file():
        return None
    try:
        data = read_input(config, MAX_CONFIG_BYTES, "a gpu_target_config")
    except InputError:
        return None
    return config_bytes_to_stats(data, config.name)
