"""The per-op table as CSV: one row per (program, op), per-device quantities, SI units in headers."""

from __future__ import annotations

import csv
import io

COLUMNS = [
    ("program_id", "program_id"), ("module", "module"), ("name", "name"), ("opcode", "opcode"),
    ("category", "category"), ("framework_op", "framework_op"), ("source", "source"),
    ("devices", "devices"), ("occurrences", "occurrences"),
    ("measured_s", "measured_s"), ("measured_s_max", "measured_s_max"), ("self_s", "self_s"),
    ("flops", "flops"), ("bytes", "bytes"), ("comm_bytes", "comm_bytes"), ("dtype", "dtype"),
    ("compute_s", "compute_s"), ("memory_s", "memory_s"), ("comm_s", "comm_s"),
    ("expected_s", "expected_s"), ("exposed_s", "exposed_s"), ("hidden_s", "hidden_s"),
    ("bound_by", "bound_by"), ("memory_level", "memory_level"), ("efficiency", "efficiency"),
    ("flagged", "flagged"), ("flops_source", None), ("bytes_source", None), ("reasons", None),
]


def render_csv(report: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([name for name, _ in COLUMNS])
    for op in report["ops"]:
        row = []
        for name, key in COLUMNS:
            if key is not None:
                value = op.get(key)
            elif name == "flops_source":
                value = op["provenance"]["flops"]
            elif name == "bytes_source":
                value = op["provenance"]["bytes"]
            else:
                value = "; ".join(op.get("reasons") or [])
            row.append("" if value is None else value)
        writer.writerow(row)
    return out.getvalue()
