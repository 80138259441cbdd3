"""The step diagnosis of each capture beside XProf's overview page on the same file.

    python bench/diagnosis_vs_xprof.py PROFILE [PROFILE ...]

For each `.xplane.pb` (or run dir): audit's top findings (cause, time per step, share) and XProf's
overview-page step-time breakdown (average step, device compute, host compute, kernel launch,
input, all others) and its input-bound conclusion, printed as markdown table rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def xprof_overview(path: Path) -> dict[str, str]:
    import shutil
    import tempfile

    from xprof.convert import raw_to_tool_data as r

    # XProf writes its op stats beside the file it reads: it reads a copy, so the corpus stays as it is.
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        data, _ = r.xspace_to_tool_data([str(copy)], "overview_page", {"use_saved_result": False})
    tables = json.loads(data)
    p = tables[1]["p"] if len(tables) > 1 else {}
    return {k: str(p.get(k, "")) for k in ("steptime_ms_average", "device_compute_time_ms_avg",
                                           "host_compute_time_ms_avg", "kernel_launch_time_ms_avg",
                                           "infeed_time_ms_avg", "other_time_ms_avg", "input_conclusion")}


def audit_findings(path: Path, top: int = 3) -> list[str]:
    from audit.orchestration.pipeline import analyse_profile
    from audit.costmodel import units as qty

    report = analyse_profile(path)
    return [f"{f['cause']} {qty.seconds(f['time_per_step_s'])}"
            + (f" ({qty.percent(f['share'])})" if f["share"] is not None else "")
            for f in (report.part("findings") or [])[:top]]


def main() -> int:
    print("| capture | audit: top findings per step | XProf: step / device compute / host compute / launch / "
          "input / other (ms) | XProf's conclusion |")
    print("|---|---|---|---|")
    for arg in sys.argv[1:]:
        path = Path(arg)
        x = xprof_overview(next(path.rglob("*.xplane.pb")) if path.is_dir() else path)
        times = " / ".join(x[k] or "-" for k in ("steptime_ms_average", "device_compute_time_ms_avg",
                                                 "host_compute_time_ms_avg", "kernel_launch_time_ms_avg",
                                                 "infeed_time_ms_avg", "other_time_ms_avg"))
        print(f"| {path.name} | {'; '.join(audit_findings(path))} | {times} | {x['input_conclusion'][:160]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
