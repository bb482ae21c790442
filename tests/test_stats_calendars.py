"""Model calendars in ``climnb stats``: durations and dates in the file's own calendar (cftime),
never converted to the standard one, across 28 February -> 1 March where the calendars differ
(the standard 2000 has a 29 February; ``noleap`` has none, ``360_day`` a 29 and a 30,
``all_leap`` a 29 in every year)."""

from __future__ import annotations

import contextlib
import io

import pandas as pd
import pytest
import xarray as xr

from climnb.cli import main
from climnb.data.synthetic import make_dataset
from climnb.stats.events import event_steps, event_table

#: each calendar from the day before its last day of February, 12:00: the 3 days of 3-hourly
#: steps run over the days where the calendars part (28 Feb -> 1 Mar in noleap)
CALENDARS = {"noleap": "2000-02-27T12", "360_day": "2000-02-29T12", "all_leap": "2000-02-28T12"}
N_TIME = 24


@pytest.fixture(scope="module")
def toy():
    ds, _ = make_dataset(n_time=N_TIME, seed=4, n_tc=3, n_ar=2)
    return ds


def _in_calendar(ds: xr.Dataset, calendar: str, start: str = "2001-02-27T12") -> xr.Dataset:
    time = xr.date_range(
        start,
        periods=ds.sizes["time"],
        freq="3h",
        calendar=calendar,
        use_cftime=calendar != "standard",
    )
    return ds.assign_coords(time=time)


def _table(ds: xr.Dataset) -> pd.DataFrame:
    return event_table(event_steps(ds.truth, fields=ds))


@pytest.mark.parametrize("calendar", list(CALENDARS))
def test_lifetimes_and_dates_are_those_of_the_files_calendar(toy, calendar):
    reference = _table(_in_calendar(toy, "standard", "2001-01-10T12"))  # no 29 Feb to cross
    ds = _in_calendar(toy, calendar, CALENDARS[calendar])
    table = _table(ds)
    assert len(table) == len(reference) > 0
    # the same steps: the same lifetimes, 3 h a step, whatever days the calendar has
    assert table.lifetime_h.tolist() == reference.lifetime_h.tolist()
    assert (table.lifetime_h == 3.0 * (table.steps - 1)).all()
    crossing = table[
        [(s.month, e.month) == (2, 3) for s, e in zip(table.start, table.end, strict=True)]
    ]
    assert len(crossing) > 0  # some events run over the end of February
    times = list(ds.time.values)
    assert set(table.start) | set(table.end) <= set(times)  # dated as the data are
    assert max(table.end) <= times[-1]
    assert {getattr(t, "calendar", None) for t in table.end} == {calendar}


def test_stats_events_of_a_noleap_file(toy, tmp_path):
    """Through the command: a CAM5-like noleap file, written and read back."""
    ds = _in_calendar(toy, "noleap", "2000-02-27T12")
    path = tmp_path / "noleap.nc"
    ds.to_netcdf(path)
    events = tmp_path / "events.csv"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["stats", str(path), "--events", str(events)]) == 0
    table = pd.read_csv(events)
    assert (table.lifetime_h == 3.0 * (table.steps - 1)).all()
    assert table.end.max() <= "2000-03-02 09:00:00"  # the data's last step; no 29 February
    assert not table.start.str.startswith("2000-02-29").any()
