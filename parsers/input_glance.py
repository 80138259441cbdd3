"""What an input is at a glance, decided before the analysis loads pandas, numpy or protobuf:
enough to start work ahead of reading it (the CPU calibration, `audit.orchestration.ahead`)."""

from __future__ import annotations

from pathlib import Path

from ..base.errors import InputError
from .wire.input_files import is_special, is_url
from .profile.files import SUFFIX, find_profile_files, plane_names


def priced_on_this_cpu(path: str | Path) -> bool:
    """Whether an input is judged on this machine's CPU unless --hardware names a chip: a file that
    is no profile (an HLO dump), or an XPlane profile of host CPU planes and no device planes. A
    glance at names only, for starting work ahead; `audit.parsers.inputs.open_input` is what reads
    and checks it."""
    if is_url(str(path)) or is_special(path):  # never read ahead: a FIFO would block until written
        return False
    p = Path(path)
    if p.is_file() and not p.name.lower().endswith((SUFFIX, ".zip", ".sqlite", ".json")):
        return True
    try:
        first = p if p.is_file() else find_profile_files(p).paths[0]
    except (InputError, IndexError, OSError):
        return False
    names = plane_names(first) or []
    return "/host:CPU" in names and not any(n.startswith("/device:") for n in names)
