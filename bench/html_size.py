"""HTML report size and load time for a 10,000-op profile.

Builds a report dict shaped as the analysis writes it (10,000 ops over 12
modules, 60 flagged, 300 collectives, two timeline strips of 10,000 events),
renders it, and opens the page in Debian's headless Chromium five times.
Prints the file size (target < 5 MB) and the median load time, from
navigation start to the end of the load event, which includes building the
table and chart (target < 2 s).

    .venv/bin/python bench/html_size.py [--ops 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from audit.reports.html import render_html
from audit.reports.model.report import ReportModel

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
BOUNDS = ("compute", "memory", "collective", "latency", "unknown")
PEAK, HBM = 9.89e14, 3.35e12


def _op(i: int, rnd: random.Random) -> dict:
    bound = rnd.choice(BOUNDS)
    flops = 0.0 if bound == "collective" else 10 ** rnd.uniform(5, 12)
    nbytes = 10 ** rnd.uniform(4, 9)
    expected = max(flops / PEAK, nbytes / HBM, 1e-6)
    measured = expected * 10 ** rnd.uniform(0, 1.2)
    module = f"jit_train_step_{i % 12}"
    return dict(
        key=f"{i % 12}/fusion.{i}", program_id=i % 12, module=module, name=f"fusion.{i}",
        opcode=rnd.choice(("fusion", "custom-call", "all-gather", "copy")), category="loop fusion",
        framework_op=f"jit(train_step)/transformer/layer_{i % 48}/mlp/dot_general",
        source=f"/src/model/layers.py:{100 + i % 400}", devices=8, occurrences=4, measured_s=measured,
        measured_s_max=measured * 1.05, self_s=measured, flops=flops, transcendentals=0.0, bytes=nbytes,
        comm_bytes=nbytes if bound == "collective" else 0.0, dtype="bf16", compute_s=flops / PEAK,
        memory_s=nbytes / HBM, comm_s=None, expected_s=expected, bound_by=bound, efficiency=expected / measured,
        flagged=False, reasons=[f"took {measured / expected:.1f}x its roofline time"],
        provenance={"flops": "model", "bytes": "model", "time": "measured"}, share=None,
        wasted_s=measured - expected, intensity=flops / nbytes, achieved_flops_per_s=flops / measured,
        achieved_bytes_per_s=nbytes / measured, suggestion="")


def build_report(n_ops: int, seed: int = 0) -> dict:
    rnd = random.Random(seed)
    ops = [_op(i, rnd) for i in range(n_ops)]
    total = sum(o["measured_s"] for o in ops)
    for o in ops:
        o["share"] = o["measured_s"] / total
    worst = sorted(ops, key=lambda o: -o["wasted_s"])[:60]
    for o in worst:
        o.update(flagged=True, suggestion="Fuse this op with its producer so its operands stay on chip.")
    events, t = [], 0.0
    for o in ops:
        events.append({"name": o["name"], "kind": o["bound_by"], "start_s": t, "dur_s": o["measured_s"] / 4})
        t += o["measured_s"] / 4
    return {
        "schema": "audit.report/v1", "tool": {"name": "audit", "version": "bench"},
        "source": {"kind": "xplane", "paths": ["bench.xplane.pb"], "workload": None, "command": None,
                   "jax_version": None, "created": "bench"},
        "hardware": {"name": "h100", "source": "catalog", "peak_flops_per_s": {"bf16": PEAK, "f32": 6.7e13},
                     "peak_flops_source": {"bf16": "catalog", "f32": "catalog"}, "hbm_bytes_per_s": HBM,
                     "hbm_bytes_per_s_source": "catalog", "hbm_bytes": 80e9, "interconnect": {"kind": "nvlink"},
                     "notes": []},
        "summary": {"devices": 8, "hosts": 1, "steps": 4, "step_time_s": {"min": t, "median": t, "max": t},
                    "measured_s": total, "expected_s": sum(o["expected_s"] for o in ops),
                    "roofline_fraction": sum(o["expected_s"] for o in ops) / total,
                    "time_by_bound_s": {b: sum(o["measured_s"] for o in ops if o["bound_by"] == b) for b in BOUNDS},
                    "idle_s": 0.0, "flagged_ops": len(worst), "unmodeled_ops": 0, "predicted": False},
        "ops": ops,
        "flagged": [{k: o[k] for k in ("key", "name", "module", "wasted_s", "reasons", "suggestion")}
                    for o in worst],
        "collectives": [{"name": f"all-gather.{i}", "kind": "all-gather", "bytes": 2e7, "group_size": 8,
                         "groups": [list(range(8))], "axes": ["fsdp"], "hops": 4, "wraparound": False,
                         "expected_s": 5e-5, "measured_s": 8e-5, "achieved_bytes_per_s": 2.5e11,
                         "peak_bytes_per_s": 4.5e11, "overlapped": bool(i % 2)} for i in range(300)],
        "timeline": [{"device_class": cls, "device": 0, "step": 1, "start_s": 0.0, "end_s": t, "events": events}
                     for cls in ("GPU", "GPU (host 2)")],
        "warnings": [],
    }


def load_times(path: Path, runs: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.goto(path.as_uri(), wait_until="load")
            ms = page.evaluate("(() => { const n = performance.getEntriesByType('navigation')[0];"
                               " return n.loadEventEnd - n.startTime; })()")
            out.append(ms / 1000.0)
            page.close()
        version = browser.version
        browser.close()
    print(f"chromium {version}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    report = ReportModel.from_json(build_report(args.ops))  # as a report read back from its JSON
    t0 = time.perf_counter()
    page = render_html(report)
    render_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(page, encoding="utf-8")
        size = path.stat().st_size
        loads = load_times(path, args.runs)
    print(f"machine: {platform.machine()}, {platform.system()}, python {platform.python_version()}")
    print("| ops | HTML size | render (Python) | load in Chromium, median of {} | max |".format(len(loads)))
    print("|---|---|---|---|---|")
    print(f"| {args.ops:,} | {size / 1e6:.2f} MB | {render_s:.2f} s | {statistics.median(loads):.2f} s "
          f"| {max(loads):.2f} s |")
    if size >= 5e6:
        raise SystemExit(f"HTML is {size / 1e6:.2f} MB, over the 5 MB target")


if __name__ == "__main__":
    main()
