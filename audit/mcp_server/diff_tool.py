"""The diff tool: `audit diff BASE HEAD --json` through the library's `diff`, each side read first
so that the call can say which side it is reading."""

from __future__ import annotations

from typing import Any

from ..base.errors import UsageError
from ..library import diff
from ..library.calls import side_reports
from .progress import CallProgress

JSON = dict[str, Any]
OP_LISTS = ("changed_ops", "added_ops", "removed_ops")
"""The compile-time op lists a reply cuts to `rows` rows (a program's every op may be in one)."""


def diff_doc(base: str, head: str, hardware: str | None, rows: int, progress: CallProgress, *,
             slowdown_percent: float | None = None, strict: bool = False, fail_on_flops: bool = False,
             fail_on_comm_bytes: bool = False) -> JSON:
    """`audit diff`'s document, its op lists cut to `rows`; `slowdown_percent` as --fail-on-slowdown takes it."""
    if slowdown_percent is not None and slowdown_percent < 0:
        raise UsageError("--fail-on-slowdown must not be negative")
    progress.phase(f"reading the base side {base}")
    base_runs = side_reports(base, hardware)
    progress.phase(f"reading the head side {head}")
    head_runs = side_reports(head, hardware)
    progress.phase("comparing")
    slowdown = None if slowdown_percent is None else slowdown_percent / 100.0
    result = diff(base_runs, head_runs, fail_on_slowdown=slowdown, strict=strict, fail_on_flops=fail_on_flops,
                  fail_on_comm_bytes=fail_on_comm_bytes)
    doc = dict(result.data)
    compile_time = dict(doc.get("compile_time") or {})
    lists = {}
    for name in OP_LISTS:
        full = compile_time.get(name) or []
        compile_time[name] = full[:rows]
        lists[name] = {"offset": 0, "shown": len(compile_time[name]), "total": len(full)}
    doc["compile_time"] = compile_time
    return {"verdict": result.verdict, "regression": result.regression, "tripped": result.tripped, "diff": doc,
            "lists": lists}
