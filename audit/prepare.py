"""`python -m audit.prepare`: do at install time what the first analysis would otherwise pay for.

`make install` runs it. It byte-compiles audit's modules, warms each profile reader up (the trace
decoder: nothing where pip built its C version, else numba's machine code compiled into the
install where numba is installed) and calibrates this machine's CPU into the install's own folder
(`<sys.prefix>/share/audit/calibration`), so the first `audit inspect` after an install, even
with a fresh home directory as on a CI runner, runs as fast as the next. Safe to run again; a
later `audit hardware show cpu --recalibrate` measures anew into the user's cache. A step that
cannot be done here (no decoder build, calibration timing out on an overloaded machine) is left to
the first run, with a line saying so; the install still succeeds.
"""

from __future__ import annotations

import argparse
import sys
import time

from .costmodel.units import seconds


def compile_bytecode() -> bool:
    """Byte-compile audit's own modules (an editable install leaves that to the first import)."""
    import compileall
    import importlib

    packages = ("audit", "audit.parsers", "audit.costmodel", "audit.reports", "audit.workloads")
    folders = {path for name in packages for path in importlib.import_module(name).__path__}
    return all(compileall.compile_dir(folder, quiet=1) for folder in sorted(folders))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit.prepare", description=__doc__.splitlines()[0])
    parser.add_argument("--no-calibrate", action="store_true", help="Only warm the readers up.")
    args = parser.parse_args(argv)
    compile_bytecode()
    from .parsers.readers import warm_up_all

    for said, took in warm_up_all():
        print(f"audit: {said} in {seconds(took)}", file=sys.stderr)
    if args.no_calibrate:
        return 0
    from .orchestration.calibrate import calibrate_install
    from .base.errors import AuditError

    start = time.perf_counter()
    try:
        path = calibrate_install()
    except AuditError as exc:  # an install must not fail on a busy machine: the first run measures instead
        print(f"audit: CPU not calibrated now ({exc}); the first analysis of a CPU profile will measure it",
              file=sys.stderr)
        return 0
    if not path.exists():
        print(f"audit: could not write the CPU calibration to {path}; the first analysis of a CPU profile will "
              "measure it", file=sys.stderr)
        return 0
    print(f"audit: CPU calibrated in {seconds(time.perf_counter() - start)} ({path})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
