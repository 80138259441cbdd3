"""audit: a profile analyzer and roofline auditor for JAX.

The public API: `inspect`, `load` and `diff` (the calls the CLI is built on, returning a
`Report` or a `Diff`), and `Workload`, `workload` and `Context` for structured workloads.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Context", "Diff", "Report", "Workload", "diff", "inspect", "load", "workload", "__version__"]

_LIBRARY = ("Diff", "Report", "diff", "inspect", "load")
_WORKLOAD = ("Context", "Workload", "workload")


def __getattr__(name: str) -> Any:
    # Lazy, so `import audit` stays cheap for the CLI and never imports JAX or pandas by itself.
    if name in _LIBRARY:
        from . import library

        return getattr(library, name)
    if name in _WORKLOAD:
        from . import workload_api

        return getattr(workload_api, name)
    raise AttributeError(f"module 'audit' has no attribute {name!r}")
