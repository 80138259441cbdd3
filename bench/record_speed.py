"""`make bench`: the speed benchmarks one after another, their tables written into bench/RESULTS.md
between its speed markers, with the date, the machine, and its load before and after each.

    python bench/record_speed.py [--print]

`--print` prints the section instead of writing it. The inputs are made first where missing
(a fresh clone): the big CPU profile, the 50 MB HLO programs, the 100-host NVIDIA pod.
Wall times are only comparable on a quiet machine; CPU times move less on a busy one.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from measure import load_average  # noqa: E402

RESULTS = HERE / "RESULTS.md"
START, END = "<!-- speed:start -->", "<!-- speed:end -->"
RUNS = [
    ("`audit inspect` beside XProf on the big CPU profile: first run after a bare install, in a fresh "
     "home, and warm", ["run_inspect_vs_xprof.py", "--unprepared"]),
    ("The same with two CPU-bound processes beside both tools", ["run_inspect_vs_xprof.py", "--busy", "2",
                                                                  "--repeats", "2"]),
    ("50 MB HLO programs, text and proto, beside XLA's own parser", ["run_big_hlo.py"]),
    ("The NVIDIA path (nsys-jax archives) against the time to read its inputs",
     ["run_nvidia.py"]),
]


def run_all() -> tuple[str, bool]:
    """The section's markdown, and whether every benchmark ran."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%d %b %Y %H:%M UTC")
    lines = [f"Made by `make bench` on {when}: {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}.", ""]
    ok = True
    for title, (script, *args) in RUNS:
        before = load_average()
        done = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True)
        ok = ok and done.returncode == 0
        status = "" if done.returncode == 0 else f" **failed ({done.returncode})**"
        lines += [f"### {title}{status}", "",
                  f"`python bench/{' '.join([script, *args])}`; load average (1, 5, 15 min) {before} before, "
                  f"{load_average()} after.", "", "```", done.stdout.strip(), *(
                      [done.stderr.strip()[-2000:]] if done.returncode else []), "```", ""]
        print(f"{script} {' '.join(args)}: {'ok' if done.returncode == 0 else 'failed'}", flush=True)
    return "\n".join(lines), ok


def write(markdown: str) -> None:
    """Put the section between the speed markers of bench/RESULTS.md."""
    text = RESULTS.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{RESULTS} has no {START} ... {END} section")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    RESULTS.write_text(f"{before}{START}\n{markdown}\n{END}{after}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--print", action="store_true", help="print the section, leave RESULTS.md alone")
    args = parser.parse_args()
    markdown, ok = run_all()
    if args.print:
        print(markdown)
    else:
        write(markdown)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
