"""Below every layer: what any module of the project may use and that knows nothing of it.

Exit codes and error types (`errors`), what a person chooses about a report (`options`), the
trace's time base (`timebase`), the ranges a number read from an input may take (`ranges`), the
user's cache directory (`user_cache`), copies of a frozen record with a few fields changed
(`stamping`, in C where built) and the cycle collector paused around big builds (`gc_pause`).
"""
