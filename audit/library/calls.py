"""The calls the CLI and notebooks share: `inspect`, `load` and `diff`."""

from __future__ import annotations

import glob
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ..base.errors import InputError, UsageError
from ..base.options import DEFAULTS
from .diff import Diff
from .report import Report

if TYPE_CHECKING:
    from ..orchestration.analysis import Options

Side = Union[str, Path, Report, dict[str, Any], Sequence[Union[str, Path, Report, dict[str, Any]]]]
"""One side of a diff: a report, a path (JSON report, profile, HLO dump; comma-separated paths,
a glob, or a directory of JSON reports for repeated runs), or a list of those."""


def inspect(path: str | Path, hardware: str | None = None, *, run: str | None = None,
            min_efficiency: float = DEFAULTS.thresholds.min_efficiency,
            min_share: float = DEFAULTS.thresholds.min_share, allow_smaller: bool = False,
            cache: str | None = None, scheduler: str | None = None, workers: int | None = None,
            skip_bad_hosts: bool = False, progress: bool = False, command: str | None = None,
            overrides: Mapping[str, object] | None = None, hlo: str | None = None) -> Report:
    """Analyse a profile or an HLO dump, as `audit inspect` does.

    **Arguments:**
    - `path`: a `.xplane.pb`, a profile run dir, a TensorBoard logdir (latest run, or `run`),
      an nsys-jax archive (zip or folder; a folder of them is one multi-process profile), an
      Nsight Systems SQLite export (with `hlo`), an HLO dump (`.hlo.pb`, `.txt`, `.hlo`), or an
      fsspec URL (`gs://`, `s3://`).
    - `hardware`: the chip to judge against, `NAME[:TOPOLOGY]` or `FILE.toml[:TOPOLOGY]` (default:
      detected from the trace).
    - `overrides`: figures of that chip changed for this analysis, as `--set` takes them, e.g.
      `{"scale_out_bytes_per_s": 12.5e9}`; the report marks each one `user`.
    - `min_efficiency`, `min_share`: an op is flagged when expected/measured is below the first
      and its share of op time above the second.
    - `allow_smaller`: accept a topology with fewer devices than the program spans.
    - `cache`: folder for per-host summaries (default: the user cache; "" for none).
    - `scheduler`, `workers`, `skip_bad_hosts`: how several hosts are read (docs/inputs.md).
    - `hlo`: the HLO dump folder of an Nsight Systems SQLite export, which holds no HLO.

    **Returns:** the `Report`. **Raises:** `audit.base.errors.InputError` for an input it cannot read.
    """
    if hardware is None:  # first, so its compile runs while the analysis loads and reads (a URL starts nothing)
        from ..orchestration.ahead import calibrate_ahead

        calibrate_ahead(path)
    from ..orchestration.pipeline import analyse_profile
    from ..parsers.wire.input_files import is_url
    from ..pod.reduce import PodSettings

    if not is_url(str(path)) and not Path(path).exists():
        raise InputError("no such file or directory", path=path)

    settings = PodSettings(cache=cache, scheduler=scheduler, workers=workers, skip_bad_hosts=skip_bad_hosts,
                           progress=progress, hlo=hlo)
    model = analyse_profile(path, run=run, hardware=hardware, source={"command": command},
                            options=_options(min_efficiency, min_share, allow_smaller, overrides), pod=settings)
    return Report(model)


def _options(min_efficiency: float, min_share: float, allow_smaller: bool,
             overrides: Mapping[str, object] | None = None) -> Options:
    from ..orchestration.analysis import Options

    return Options.from_flags({"min_efficiency": min_efficiency, "min_share": min_share,
                               "allow_smaller": allow_smaller, "overrides": _pairs(overrides)})


def _pairs(overrides: Mapping[str, object] | None) -> tuple[tuple[str, str], ...]:
    """`--set` figures as (key, value text), the form the analysis options carry."""
    return tuple((str(k), str(v)) for k, v in (overrides or {}).items())


def load(source: str | Path | dict[str, Any]) -> Report:
    """A JSON report (schema audit.report/v1) read back: a file `audit --json` or `Report.save`
    wrote, or the parsed document. **Raises:** `InputError` when it is not such a report."""
    from ..reports.model.read import check_report
    from ..reports.model.report import ReportModel

    doc = check_report(source) if isinstance(source, dict) else _read_report(Path(source))
    return Report(ReportModel.from_json(doc))


def _read_report(path: Path) -> dict[str, Any]:
    from ..parsers.inputs import open_input
    from ..reports.model.read import read_report

    return read_report(open_input(path, accept=("report",)).path)


def diff(base: Side, head: Side, *, fail_on_slowdown: float | None = None, strict: bool = False,
         fail_on_flops: bool = False, fail_on_comm_bytes: bool = False, hardware: str | None = None,
         overrides: Mapping[str, object] | None = None, fail_on: float | None = None) -> Diff:
    """Compare two sides, as `audit diff` does: what changed in the program, and whether the
    step time changed beyond run-to-run noise.

    **Arguments:**
    - `base`, `head`: each one run or several repeated runs of the same code (see `Side`).
    - `fail_on_slowdown`: the step-time change that counts, as a fraction (0.05 = 5%, the default);
      `fail_on` is its old name (a DeprecationWarning).
    - `strict`: an inconclusive verdict also trips the gate.
    - `fail_on_flops`, `fail_on_comm_bytes`: any increase trips the gate.
    - `hardware`: the chip for sides that are profiles or HLO dumps rather than reports.
    - `overrides`: figures of that chip changed, as for `inspect`.
    """
    from ..analyses.diff_verdict import diff_reports
    from ..reports.model.diff import Gates

    if fail_on is not None:
        if fail_on_slowdown is not None:
            raise UsageError("give fail_on_slowdown only (fail_on is its old name)")
        warnings.warn("audit.diff(fail_on=...) is now fail_on_slowdown=...", DeprecationWarning, stacklevel=2)
        fail_on_slowdown = fail_on
    if fail_on_slowdown is not None and fail_on_slowdown < 0:
        raise UsageError("fail_on_slowdown must not be negative")
    gates = Gates(fail_on_slowdown=fail_on_slowdown, fail_on_flops=fail_on_flops,
                  fail_on_comm_bytes=fail_on_comm_bytes, strict=strict)
    return Diff(diff_reports(side_reports(base, hardware, overrides), side_reports(head, hardware, overrides), gates))


def side_reports(side: Side, hardware: str | None = None,
                 overrides: Mapping[str, object] | None = None) -> list[dict[str, Any]]:
    """Every run of one side as the JSON report the diff compares."""
    items: Sequence[Any] = side if isinstance(side, (list, tuple)) else [side]
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Report):
            out.append(item.to_json())
        elif isinstance(item, dict):
            from ..reports.model.read import check_report

            out.append(check_report(item))
        else:
            out += [_run_report(p, hardware, overrides) for p in side_paths(str(item))]
    if not out:
        raise UsageError("a diff side holds no runs")
    return out


def side_paths(spec: str) -> list[Path]:
    """One side's runs: a file or profile, a directory of JSON reports, a glob, or several joined by commas."""
    paths: list[Path] = []
    for part in (p for p in spec.split(",") if p):
        path = Path(part)
        if any(ch in part for ch in "*?[") and not path.exists():
            found = sorted(Path(m) for m in glob.glob(part))
            if not found:
                raise InputError("no file matches this pattern", path=part)
            paths += found
        elif path.is_dir() and sorted(path.glob("*.json")):
            paths += sorted(path.glob("*.json"))  # repeated runs' reports; a profile directory has none
        else:
            paths.append(path)
    if not paths:
        raise UsageError(f"no runs given in {spec!r}")
    return paths


def _run_report(path: Path, hardware: str | None, overrides: Mapping[str, object] | None = None) -> dict[str, Any]:
    """One run as a JSON report: a report this tool wrote, or anything `inspect` accepts, analysed
    now. (The diff reads the JSON contract, so a report written by an earlier version compares the same.)"""
    from ..orchestration.pipeline import analyse_hlo, analyse_profile
    from ..orchestration.analysis import Options
    from ..parsers.inputs import open_input
    from ..reports.model.read import read_report

    opened = open_input(path)
    if opened.kind == "report":
        return {**read_report(opened.path), "run_source": str(path)}
    options = Options(overrides=_pairs(overrides))
    if opened.module is not None:
        return analyse_hlo(path, hardware=hardware, module=opened.module, options=options).to_json()
    return analyse_profile(path, hardware=hardware, options=options).attach("run_source", str(path)).to_json()
