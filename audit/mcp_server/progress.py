"""Progress of a tool call that takes a while: MCP progress notifications while it works.

The work runs in a worker thread; it names each phase it enters (`phase`), and a beat on the
event loop reports every `BEAT_S` seconds. The progress figure is the seconds elapsed (the spec
asks that it only grow, and no analysis knows its total ahead), the message the phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from anyio.from_thread import run as run_on_loop
from mcp.server.mcpserver import Context

from ..costmodel.units import seconds

T = TypeVar("T")
BEAT_S = 2.0  # how often a long call says it is still working


class CallProgress:
    """What one call reports: the phase it is in and the time since it began."""

    def __init__(self, ctx: Context[Any, Any], what: str) -> None:
        self._ctx = ctx
        self._phase = what
        self._start = time.monotonic()
        self._last = -1.0

    def phase(self, text: str) -> None:
        """Enter a phase (from the worker thread): report it now."""
        self._phase = text
        run_on_loop(self.report)

    async def report(self) -> None:
        elapsed = time.monotonic() - self._start
        progress = max(elapsed, self._last + 1e-3)  # strictly increasing, as the spec requires
        self._last = progress
        await self._ctx.report_progress(progress, None, f"{self._phase} ({seconds(elapsed)} elapsed)")

    async def run(self, work: Callable[[CallProgress], T]) -> T:
        """`work(self)` in a worker thread, beating until it returns."""
        failed: Exception | None = None
        async with anyio.create_task_group() as beats:
            beats.start_soon(self._beat)
            try:
                result = await anyio.to_thread.run_sync(work, self)
            except Exception as exc:  # raised as it is below, not inside the task group's exception group
                failed = exc
            finally:
                beats.cancel_scope.cancel()
        if failed is not None:
            raise failed
        return result

    async def _beat(self) -> None:
        while True:
            await self.report()
            await anyio.sleep(BEAT_S)
