"""What a person reads: tables with times to the minute, units and whole names, and views no
wider than a notebook cell at 1280 px (tests/test_browser.py checks them in JupyterLab)."""

from __future__ import annotations

import re

import holoviews as hv
import numpy as np
import pandas as pd
import pytest

from climnb.data.synthetic import make_dataset
from climnb.tracks import track_events, track_summary
from climnb.viz import dashboard, events, explorer, fastexplorer, fields, labels, stats
from climnb.viz.notebook import MAX_WIDTH
from climnb.viz.tables import bokeh_columns, header, readable

hv.extension("bokeh")


@pytest.fixture(scope="module")
def toy():
    ds, truth_events = make_dataset(n_time=6, seed=3)
    return ds, truth_events, track_events(ds.truth)


def _cells(styler) -> list[list[str]]:
    html = styler.to_html()
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)
    return [re.findall(r"<t[dh][^>]*>([^<]*)</t[dh]>", row) for row in rows]


def test_readable_times_units_precision_and_names(toy):
    _, truth_events, tracks = toy
    summary = track_summary(tracks)
    shown = ["class_name", "start", "distance_km"]
    head, *rows = _cells(readable(summary, columns=shown, index=False))
    assert head == ["class", "start", "distance (km)"]
    first = rows[0]
    assert first[0] in ("tropical cyclone", "atmospheric river")  # whole, may wrap
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", first[1])
    assert re.fullmatch(r"[\d,]+", first[2])  # to the km
    frame = pd.DataFrame({"min_psl": [98295.85], "lat": [-12.5644], "x_y": [0.017167]})
    [row] = _cells(readable(frame))[1:]
    assert row == ["983.0", "-12.6", "0.0172"]
    assert [header(c) for c in frame] == ["min psl (hPa)", "lat (°N)", "x y"]


def test_readable_lists_of_regions_keep_each_name_whole():
    frame = pd.DataFrame({"landfall_regions": ["california us_west_coast", ""]})
    assert [row[0] for row in _cells(readable(frame))[1:]] == ["california, us west coast", ""]


def test_readable_keeps_a_named_multiindex_and_spells_its_names():
    from climnb.viz.heldout import heldout_confusion

    table = heldout_confusion(np.array([0, 1, 1, 2]), {"truth": np.array([0, 1, 0, 2])})
    text = " ".join(" ".join(row) for row in _cells(readable(table)))
    assert "truth" in text and "tropical cyclone" in text and "tropical_cyclone" not in text


def test_readable_small_numbers_keep_three_significant_digits():
    """A channel's statistics span 1e-11 (precipitation in m/s) to 1e5 (pressure in Pa)."""
    frame = pd.DataFrame({"mean": [3.5318e-08, 6.0105e-04, 17.678, 101899.0]})
    assert [row[0] for row in _cells(readable(frame))[1:]] == [
        "3.53e-08",
        "0.000601",
        "17.7",
        "101,899",
    ]


def test_readable_leaves_out_empty_columns_and_keeps_the_frame(toy):
    _, truth_events, _ = toy
    before = truth_events.copy()
    storms = truth_events[truth_events.class_name == "tropical_cyclone"]
    head = _cells(readable(storms))[0]
    assert "length (km)" not in head and "radius (km)" in head
    pd.testing.assert_frame_equal(truth_events, before)


def test_bokeh_table_columns_are_as_wide_as_their_text(toy):
    ds, _, tracks = toy
    from bokeh.models import DataTable

    [data_table] = hv.render(events.event_table(tracks)).select({"type": DataTable})
    titles = [c.title for c in data_table.columns]
    assert "time" in titles and "area (km²)" in titles and "class" in titles
    frame = pd.DataFrame(data_table.source.data)
    for column in data_table.columns:  # "2000-01-01 03:00" and "tropical_cyclone" whole
        if column.field in ("time", "class_name"):
            longest = max(len(str(v)) for v in frame[column.field])
            assert longest >= 16 and column.width >= 7 * longest, column.field
    assert data_table.autosize_mode == "none"
    width = bokeh_columns(data_table, frame)
    assert width == sum(c.width for c in data_table.columns) <= MAX_WIDTH
    # the tracks' table under the event view: every column whole beside the row scroll bar
    [track_table] = hv.render(events.track_table(tracks)).select({"type": DataTable})
    assert sum(c.width for c in track_table.columns) <= track_table.width - 20


def _row_widths(model) -> list[int]:
    """Total width of each row of a rendered layout (a GridPlot, or a single plot)."""
    from bokeh.models import Column, GridPlot, Row

    if isinstance(model, GridPlot):
        rows: dict[int, int] = {}
        for child, row, *_ in model.children:
            rows[row] = rows.get(row, 0) + max(_row_widths(child))
        return list(rows.values())
    if isinstance(model, Row):
        return [sum(max(_row_widths(c)) for c in model.children)]
    if isinstance(model, Column):
        return [w for c in model.children for w in _row_widths(c)]
    return [model.width or getattr(model, "frame_width", None) or 0]


def _views(ds, tracks):
    prediction = ds.truth.where(ds.lon > 30, 0)
    steps = pd.DataFrame(
        [{"step": s, "rank": r, "loss": 1 / s, "loss_avg": 1 / s, "samples_per_s": 9.0}
         for s in range(1, 9) for r in range(4)]
    )  # fmt: skip
    vals = pd.DataFrame([{"step": 4, "rank": 0, "mean_iou": 0.5, "iou_0": 0.9, "iou_1": 0.2}])
    mask = np.zeros((96, 144), np.uint8)
    from climnb.stats import class_mask, frequency

    freq = frequency(class_mask(ds)).compute()
    maps = xr_change(freq)
    return {
        "channel_grid": fields.channel_grid(ds),
        "explorer": explorer.segmentation_explorer(ds, ds.truth, prediction),
        "event_view": events.event_view(ds, prediction, tracks, live=True),
        "training_figures": dashboard.training_figures(
            steps, vals, {"label": mask, "prediction": mask}
        ),
        "frequency_maps": stats.frequency_maps(freq, freq, names=("a", "b")),
        "change_maps": stats.change_maps(maps),
        "river_agreement": labels.river_agreement(
            ds.TMQ, ds.truth, ds.truth == 2, anomaly=ds.TMQ, dropped=ds.truth == 2
        ),
    }


def xr_change(freq):
    """A change Dataset of the shape :func:`climnb.viz.stats.change_map` draws."""
    change = freq.frequency.rename("change")
    return change.to_dataset().assign(significant=change > change.mean())


def test_every_view_fits_a_notebook_cell(toy):
    ds, _, tracks = toy
    for name, view in _views(ds, tracks).items():
        model = hv.render(view)
        widths = _row_widths(model)
        assert max(widths) <= MAX_WIDTH, f"{name}: rows {widths} px, more than {MAX_WIDTH}"


def test_fast_explorer_and_live_dashboard_fit(toy):
    ds, _, _ = toy
    app = fastexplorer.explorer_app(ds, ds.truth, ds.truth)
    frames = [f.frame_width + 90 for f in (app.map_fig, app.dis_fig)]
    assert frames[0] + 70 + frames[1] <= MAX_WIDTH
    pipes = {"curves": hv.streams.Pipe(data=(pd.DataFrame(), pd.DataFrame())),
             "sample": hv.streams.Pipe(data=None)}  # fmt: skip
    assert max(_row_widths(hv.render(dashboard.live_figures(pipes)))) <= MAX_WIDTH


def test_all_ranks_have_one_legend_entry(toy):
    steps = pd.DataFrame(
        [{"step": s, "rank": r, "loss": 1 / s + r, "loss_avg": 1 / s, "samples_per_s": 9.0}
         for s in range(1, 5) for r in range(8)]
    )  # fmt: skip
    live = dashboard._live_loss(steps)
    assert [el.label for el in live] == ["each rank", "average"]
    report = dashboard._loss(steps)
    assert [el.label for el in report if el.label] == ["each rank", "average"]


def test_maps_keep_their_frames_whatever_the_channel(toy):
    """In a column Bokeh gives every plot the same margins: the label under the channel map is
    as wide as the map, so its frame does not shrink by the colour bar; pressures' colour bars
    tick "102000", not "1.020e+5"; the loss is on a linear axis, whose ticks do not crowd."""
    from bokeh.models import ColorBar, LinearScale, Plot, PrintfTickFormatter

    ds, _, _ = toy
    layout = explorer.segmentation_explorer(ds, ds.truth, ds.truth, label_name="truth")
    key = ("PSL", np.datetime64(ds.time.values[0], "ns"))
    main, dis, label, pred = (hv.render(dm[key]) for dm in list(layout)[:4])
    assert label.width == main.width and pred.width == dis.width
    [bar] = main.select({"type": ColorBar})
    assert isinstance(bar.formatter, PrintfTickFormatter) and bar.formatter.format == "%.6g"
    app = fastexplorer.explorer_app(ds, ds.truth, ds.truth)
    assert app.colorbar.formatter.format == "%.6g"
    steps = pd.DataFrame(
        [{"step": s, "rank": 0, "loss": 2.3 - s / 10, "loss_avg": 2.3 - s / 10,
          "samples_per_s": 9.0} for s in range(1, 9)]
    )  # fmt: skip
    loss = hv.render(dashboard.training_figures(steps, pd.DataFrame()))
    [fig] = [f for f in loss.select({"type": Plot})
             if f.title is not None and f.title.text == "training loss"]  # fmt: skip
    assert isinstance(fig.y_scale, LinearScale)
