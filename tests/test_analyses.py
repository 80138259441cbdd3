"""Idle time and step tables: vectorised interval arithmetic checked against brute force."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from audit.analyses.steps import _busy_in_windows

intervals = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=30)
windows = st.lists(st.tuples(st.integers(0, 220), st.integers(1, 80)), min_size=1, max_size=8)


def _brute(ivs, win):
    covered = np.zeros(400, bool)
    for s, d in ivs:
        covered[s:s + d] = True
    return [int(covered[s:s + d].sum()) for s, d in win]


@settings(max_examples=300, deadline=None)
@given(ivs=intervals, win=windows)
def test_busy_time_in_each_window_is_the_union_of_op_intervals(ivs, win):
    starts = np.array([s for s, _ in ivs], np.int64)
    ends = np.array([s + d for s, d in ivs], np.int64)
    ws = np.array([s for s, _ in win], np.int64)
    we = np.array([s + d for s, d in win], np.int64)
    assert list(_busy_in_windows(starts, ends, ws, we)) == _brute(ivs, win)
