"""The coast of the landfall counts where it decides: which cells lie beside the ocean (all
eight neighbours, no farther), and a storm's first step from the sea onto land."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from climnb.stats.events import _Coast

LAT = np.linspace(-30.0, 30.0, 25)  # 2.5 degrees
LON = np.arange(0.0, 60.0, 2.5)  # a regional grid: no seam


def _coast(land: np.ndarray) -> _Coast:
    return _Coast(land, land[None], LAT, LON)


OFFSETS = [(dr, dc) for dr in range(-2, 3) for dc in range(-2, 3) if (dr, dc) != (0, 0)]


@pytest.mark.parametrize("dr, dc", OFFSETS, ids=str)
def test_a_cell_is_beside_the_ocean_when_one_of_its_eight_neighbours_is(dr, dc):
    land = np.ones((LAT.size, LON.size), bool)
    coast = _coast(land)
    cell = 12 * LON.size + 10
    other = (12 + dr) * LON.size + (10 + dc)
    beside = coast._beside(np.array([cell]), np.array([other]))
    assert bool(beside[0]) is (max(abs(dr), abs(dc)) == 1)


def test_a_storm_makes_landfall_on_its_first_step_from_the_sea():
    """Two centres, the first over the sea and the second inland: one landfall, at the second
    centre's time."""
    land = np.zeros((LAT.size, LON.size), bool)
    land[:, LON >= 30.0] = True
    obs = pd.DataFrame(
        {
            "track_id": [7, 7],
            "time": pd.to_datetime(["2000-01-01 00:00", "2000-01-01 06:00"]),
            "class_id": [1, 1],
            "lat": [10.0, 10.0],
            "lon": [25.0, 35.0],
        }
    )
    assert _coast(land).storm_landfalls(obs) == [
        (7, pd.Timestamp("2000-01-01 06:00"), "tropical_cyclone", 0)
    ]


@pytest.mark.parametrize(
    "cell, other, beside",
    [
        ((1, 1), (0, 0), True),
        ((0, 0), (1, 1), True),
        ((23, 22), (24, 23), True),
        ((24, 23), (23, 22), True),
        ((0, 5), (24, 5), False),  # never across the poles
        ((5, 0), (5, 23), False),  # a regional grid has no seam
    ],
    ids=str,
)
def test_beside_at_the_grids_edges(cell, other, beside):
    coast = _coast(np.ones((LAT.size, LON.size), bool))
    flat = [r * LON.size + c for r, c in (cell, other)]
    assert bool(coast._beside(np.array(flat[:1]), np.array(flat[1:]))[0]) is beside


def test_the_tracks_error_names_the_first_step_that_matches_no_region():
    """Tracks moved 3 degrees north of their masks: the error names the first of them, the
    storm at the first time (storms are matched before rivers)."""
    from test_events_edges import _case

    from climnb.stats.events import event_steps
    from climnb.tracks import track_events

    mask, fields = _case()
    moved = track_events(mask).assign(lat=lambda t: t.lat + 3.0)
    first = moved.sort_values(["time", "class_id"], kind="stable").iloc[0]
    assert first.class_id == 1 and (moved.time == first.time).sum() > 1
    with pytest.raises(ValueError) as err:
        event_steps(mask, moved, fields=fields)
    assert f"(first: track {first.track_id} at {first.time})" in str(err.value)
