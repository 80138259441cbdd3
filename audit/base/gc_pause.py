"""Python's cycle collector paused while a big HLO model (or its costs) is built.

The collector runs after every few hundred new container objects and, now and then, walks every
object the process holds; building a model of 400,000 instructions (or its 400,000 costs) would
set it off hundreds of times over a heap that only grows, a third of the time of reading. The
models hold no reference cycles, so nothing is left for it to find.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside the block (as it was before, after it; nested blocks keep it off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
