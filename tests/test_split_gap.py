"""``climnb samples --gap-hours 0``: sets that touch, without sharing a step (the help
documents gaps >= 0; a gap of 0 put the last validation step in the test set too)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from climnb.io.split import split_steps


@pytest.mark.parametrize("gap", [0.0, 1.0, 3.0, 24.0])
def test_sets_are_disjoint_and_gap_apart(gap):
    times = pd.date_range("2000-01-01", periods=40, freq="3h").values
    train, val, test = split_steps(times, gap_hours=gap)
    assert len(set(train) | set(val) | set(test)) == train.size + val.size + test.size
    hours = [
        (times[b.min()] - times[a.max()]) / np.timedelta64(1, "h")
        for a, b in ((train, val), (val, test))
    ]
    assert min(hours) >= max(gap, 3.0)  # at least the gap, and another step
    if gap == 0.0:
        assert train.size + val.size + test.size == 40  # nothing left out
