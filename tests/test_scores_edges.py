"""Storm scores where they decide: a found centre counts only at its own time, and only the
storms of the event table (class 1) are scored as storms."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from climnb.data.synthetic import make_dataset
from climnb.labels.scores import score, storm_scores

T0, T1 = pd.Timestamp("2000-01-01 00:00"), pd.Timestamp("2000-01-01 03:00")


def _table(rows, class_id=1):
    t = pd.DataFrame(rows, columns=["time", "lat", "lon"])
    return t.assign(class_id=class_id, radius_km=300.0)


def test_a_storm_found_at_another_time_is_no_hit():
    true = _table([(T0, 20.0, 100.0)])
    same_place_later = _table([(T1, 20.0, 100.0)])
    assert storm_scores(same_place_later, true) == {
        "recall": 0.0,
        "precision": 0.0,
        "n_true": 1,
        "n_found": 1,
    }
    at_its_time = _table([(T0, 21.0, 101.0)])  # 150 km away
    assert storm_scores(at_its_time, true)["recall"] == 1.0


def test_score_takes_the_storms_of_the_event_tables_only():
    ds, events = make_dataset(n_time=1, n_tc=1, n_ar=0, seed=4)
    storms = events[events.class_id == 1]
    assert len(storms) == 1
    rivers_there = storms.assign(class_id=2)  # a river's row where the storm is
    table = score(ds.truth, ds.truth, rivers_there, events)
    assert table.loc["tropical_cyclone", "recall"] == 0.0
    table = score(ds.truth, ds.truth, storms, events)
    assert table.loc["tropical_cyclone", "recall"] == pytest.approx(1.0)


def test_recall_strong_counts_the_strong_reference_rivers_we_cover_half_of():
    """Two strong reference rivers (IVT 300 >= 250) and a weak one: ours covers all of the
    first and 4 of 10 cells of the second: recall_strong 1 / 2, one weak river in three."""
    from climnb.labels.scores import agreement

    lon = np.arange(144) * 2.5
    ref = np.zeros((1, 96, 144), bool)
    ivt = np.zeros((1, 96, 144))
    for row, strength in ((60, 300.0), (70, 300.0), (30, 200.0)):
        ref[0, row, 10:20] = True
        ivt[0, row, 10:20] = strength
    ours = np.zeros((1, 96, 144), np.uint8)
    ours[0, 60, 10:20] = 2
    ours[0, 70, 10:14] = 2
    a = agreement(ours, ref, ivt, lon)
    assert a["recall_strong"] == 0.5
    assert a["reference_weak_rivers"] == pytest.approx(1 / 3)
