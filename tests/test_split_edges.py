"""The split of time steps where it decides: a gap that leaves no training step is refused,
and samples that share a step (one per labeller) go to one set together."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from climnb.io.split import split_steps

TIMES = pd.date_range("2000-01-01", periods=6, freq="3h").to_numpy()


def test_a_gap_that_leaves_no_training_step_is_refused():
    """6 steps 3 h apart, one for validation and one for test: a 6 h gap leaves training 2
    steps; a 12 h gap none, with validation still whole."""
    train, val, test = split_steps(TIMES, fractions=(0.6, 0.2, 0.2), gap_hours=6.0)
    assert (train.tolist(), val.tolist(), test.tolist()) == ([0, 1], [3], [5])
    with pytest.raises(ValueError, match="too few for a block split"):
        split_steps(TIMES, fractions=(0.6, 0.2, 0.2), gap_hours=12.0)


def test_samples_sharing_a_step_go_to_one_set_together():
    times = np.repeat(TIMES, 3)  # three labellers' samples a step
    parts = split_steps(times, fractions=(0.6, 0.2, 0.2), gap_hours=0.0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(times.size))
    steps = [set(times[p].tolist()) for p in parts]
    assert all(len(p) % 3 == 0 and p.size for p in parts)
    assert not (steps[0] & steps[1] or steps[0] & steps[2] or steps[1] & steps[2])
