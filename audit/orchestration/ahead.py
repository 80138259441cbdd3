"""What an analysis can start before it reads its input: this machine's CPU calibration."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def calibrate_ahead(path: str | Path) -> bool:
    """Start this machine's CPU calibration now when the input will be judged on its CPU and none is
    cached (a CPU profile, or an HLO dump judged without --hardware): its kernels compile beside the
    reading, and only their timing (under a second on a quiet machine) waits for the analysis to
    need it. Whether it started. Imports nothing heavy: it runs before the analysis loads."""
    from .calibrate import start_ahead
    from ..parsers.xplane import SUFFIX, find_profile_files, plane_names

    p = Path(path)
    if p.is_file() and not p.name.lower().endswith((SUFFIX, ".zip", ".sqlite", ".json")):
        return start_ahead()  # an HLO dump: one for an accelerator is refused without --hardware, which stops it
    try:
        first = p if p.is_file() else find_profile_files(p).paths[0]
    except (InputError, IndexError, OSError):
        return False
    names = plane_names(first) or []
    if "/host:CPU" in names and not any(n.startswith("/device:") for n in names):
        return start_ahead()
    return False
