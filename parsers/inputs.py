"""What a path given to `audit` is, decided in one place: a profile, an HLO dump, or a report.

`open_input` looks at the path once and returns what it found, already read where reading
was how it was recognised (an HLO module), so nothing is parsed twice. A JSON report is
recognised by its name and read by the report model (`audit.reports.model.read`), which owns
that format. A profile is recognised by the profile readers' registry (`readers`), and read by
the format's reader. The commands and the pipeline know no formats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..base.errors import InputError
from .hlo.files import dump_folder_files, load_hlo_file, read_hlo_if_module
from .hlo.model import Module
from .wire.input_files import is_special, is_url
from .readers import claimed
from .profile.files import refuse_xprof_cache

__all__ = ["InputKind", "OpenedInput", "open_input"]

InputKind = Literal["profile", "hlo", "report"]
_HLO_SUFFIXES = (".hlo.pb", ".txt", ".hlo")
_ACCEPTS_TEXT = {"profile": "a profile (.xplane.pb, run dir or logdir, nsys-jax archive, Nsight Systems SQLite)",
                 "hlo": "an HLO dump (.hlo.pb, .txt, .hlo, or an --xla_dump_to folder)",
                 "report": "an audit JSON report (.json)"}


@dataclass(frozen=True)
class OpenedInput:
    """A recognised input: `module` is set for an HLO file (a dump folder and a report are read by the caller)."""

    kind: InputKind
    path: Path | str  # a URL stays as given
    module: Module | None = None


def _is_dump_folder(p: Path) -> bool:
    """An `--xla_dump_to` folder: HLO after optimization, and no profile a reader claims."""
    return bool(dump_folder_files(p)) and not claimed(p)


def open_input(path: str | Path, accept: tuple[InputKind, ...] = ("profile", "hlo", "report")) -> OpenedInput:
    """Recognise and (for an HLO file) read `path`.

    A directory is a profile (a run dir or a logdir; the profile reader finds its files), or an
    HLO dump folder (`--xla_dump_to`: modules after optimization, no profile), read by the caller.
    A file is a report (`*.json`, read by the caller), an XPlane (`*.xplane.pb`), or an HLO dump (text by its
    `HloModule` header, binary by `*.hlo.pb` or by parsing as a module); any other `*.pb`
    is taken for an XPlane, whose reader says clearly if it is not one.

    **Raises:** `InputError` for a missing or unreadable path, or one of a kind not in `accept`.
    """
    if is_url(path):  # remote storage holds profiles only (of the format its files are listed by)
        opened = OpenedInput("profile", str(path))
    else:
        p = Path(path)
        if not p.exists():
            raise InputError("no such file or directory", path=p)
        opened = _recognise(p)
    if opened.kind not in accept:
        wanted = " or ".join(_ACCEPTS_TEXT[k] for k in accept)
        what = _json_kind(Path(path)) if opened.kind == "report" else _ACCEPTS_TEXT[opened.kind]
        if what == _TRACE_VIEWER:
            raise InputError(f"this is {what}; audit reads the XSpace profile written with it",
                             path=path, hint=_xplane_beside(Path(path)))
        raise InputError(f"this is {what}; expected {wanted}", path=path)
    return opened


_TRACE_VIEWER = "a Trace Viewer JSON (trace events, without the HLO that prices them)"
_SNIFF_BYTES = 1 << 26  # a report names its schema among its last keys; read at most this much to say what it is


def _json_kind(p: Path) -> str:
    """What a `.json` that was not wanted holds, read only to say so: a report, trace events, or other JSON."""
    try:
        with open(p, "rb") as f:
            data = f.read(_SNIFF_BYTES)
    except OSError:
        return _ACCEPTS_TEXT["report"]
    if b'"traceEvents"' in data[:1 << 20] or b'"traceEvents"' in data[-4096:]:
        return _TRACE_VIEWER
    if re.search(rb'"schema"\s*:\s*"audit\.report/', data):
        return _ACCEPTS_TEXT["report"]
    return "a JSON file that is not an audit report (no \"schema\": \"audit.report/...\")"


def _xplane_beside(p: Path) -> str:
    """Advice for a Trace Viewer file: the `.xplane.pb` jax.profiler wrote beside it, named where it is there."""
    stem = p.name.split(".trace.json")[0]
    sibling = p.with_name(f"{stem}.xplane.pb")
    if sibling.exists():
        return f"audit inspect {sibling}"
    return "audit inspect the .xplane.pb in the same run folder, or the run folder itself"


def _recognise(p: Path) -> OpenedInput:
    if p.is_dir():
        return OpenedInput("hlo", p) if _is_dump_folder(p) else OpenedInput("profile", p)
    name = p.name.lower()
    refuse_xprof_cache(p)
    if name.endswith(".json"):
        return OpenedInput("report", p)
    if name.endswith((".trace.json.gz", ".json.gz")):
        raise InputError(f"this is {_TRACE_VIEWER}; audit reads the XSpace profile written with it",
                         path=p, hint=_xplane_beside(p))
    if is_special(p):  # a FIFO or device: read once, by the reader its name chooses, never sniffed
        if name.endswith(_HLO_SUFFIXES):
            return OpenedInput("hlo", p, module=load_hlo_file(p))
        if name.endswith(".pb"):
            return OpenedInput("profile", p)
        raise InputError("not a regular file, and its name does not say what it holds", path=p,
                         hint="name it *.json, *.xplane.pb, *.hlo.pb, *.txt or *.hlo")
    if claimed(p):
        return OpenedInput("profile", p)
    module = read_hlo_if_module(p)
    if module is not None:
        return OpenedInput("hlo", p, module=module)
    if name.endswith(".pb"):
        return OpenedInput("profile", p)
    raise InputError("not a profile, an HLO dump or a report", path=p,
                     hint="expected a .xplane.pb, a profile directory, an nsys-jax .zip, an Nsight Systems .sqlite "
                          "export, an HLO dump (.hlo.pb, .txt, .hlo) or an audit JSON report")
