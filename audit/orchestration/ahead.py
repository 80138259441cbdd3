"""What an analysis can start before it reads its input: this machine's CPU calibration."""

from __future__ import annotations

from pathlib import Path


def calibrate_ahead(path: str | Path) -> bool:
    """Start this machine's CPU calibration now when the input will be judged on its CPU and none is
    cached (a CPU profile, or an HLO dump judged without --hardware): its kernels compile beside the
    reading, and only their timing (under a second on a quiet machine) waits for the analysis to
    need it. Whether it started. Imports nothing heavy: it runs before the analysis loads. An HLO
    dump for an accelerator is refused without --hardware, which stops the calibration unasked."""
    from ..parsers.input_glance import priced_on_this_cpu
    from .calibrate import start_ahead

    return priced_on_this_cpu(path) and start_ahead()
