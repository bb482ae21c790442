"""Expert labelling: outlines from masks and back, ClimateNet files of one labeller, a session."""

from __future__ import annotations

import numpy as np
import pytest

from climnb.labels.expert import open_expert
from climnb.labels.scores import class_iou
from climnb.viz.annotate import (
    AR,
    TC,
    AnnotateError,
    Annotator,
    Outline,
    outlines_from_mask,
    rasterise,
    save_step,
    saved_steps,
)


@pytest.fixture(scope="module")
def grid(toy):
    ds, _ = toy
    return ds.lat.values, ds.lon.values


def test_outlines_give_the_mask_back(toy, grid):
    ds, _ = toy
    for t in range(ds.sizes["time"]):
        truth = ds.truth.values[t]
        outlines = outlines_from_mask(truth, *grid)
        assert {o.cls for o in outlines} == {TC, AR}
        per_class, _ = class_iou(rasterise(outlines, *grid), truth)
        assert per_class[TC] > 0.97 and per_class[AR] > 0.97, (t, per_class)


def test_an_event_across_the_seam_is_one_outline_wrapped_back(grid):
    mask = np.zeros((grid[0].size, grid[1].size), np.int8)
    mask[40:44, -5:] = mask[40:44, :4] = TC
    (storm,) = outlines_from_mask(mask, *grid)
    assert max(storm.lon) > 360  # continuous longitudes past the seam
    np.testing.assert_array_equal(rasterise([storm], *grid), mask)


def test_a_drawn_polygon_fills_the_points_inside(grid):
    lat, lon = grid
    box = Outline.make([100, 120, 120, 100], [10, 10, 20, 20], AR)
    got = rasterise([box], lat, lon)
    inside = (lat[:, None] > 10) & (lat[:, None] < 20) & (lon > 100) & (lon < 120)
    np.testing.assert_array_equal(got == AR, inside)
    storm = Outline.make([105, 110, 110, 105], [12, 12, 16, 16], TC)
    assert (rasterise([storm, box], lat, lon) == TC).sum() > 0  # storms over rivers


@pytest.mark.parametrize(
    "lon, lat, said",
    [
        ([100, 120, 100, 120], [10, 20, 20, 10], "is not a simple polygon (Self-intersection"),
        ([170, -170, -170, 170], [10, 10, 20, 20], "crosses the dateline"),
        ([100, 120, 120, 100], [80, 80, 95, 95], "outside the grid"),
        ([100.1, 100.4, 100.4], [10.1, 10.1, 10.3], "covers no grid point"),
        ([100, 120], [10, 20], "at least 3"),
    ],
    ids=["self-intersecting", "dateline", "beyond the pole", "between points", "two vertices"],
)
def test_bad_outlines_are_one_line_naming_them(toy, grid, tmp_path, lon, lat, said):
    good = Outline.make([0, 20, 20, 0], [0, 0, 10, 10], AR)
    with pytest.raises(AnnotateError) as err:
        rasterise([good, Outline.make(lon, lat, TC)], *grid)
    assert said in str(err.value) and "outline 1" in str(err.value)
    assert "\n" not in str(err.value)
    step, out = toy[0].isel(time=[0]), tmp_path / "expert"
    with pytest.raises(AnnotateError, match="outline 1"):  # saved: nothing written
        save_step(out, step, [good, Outline.make(lon, lat, TC)], labeller=0, name="ana")
    assert not out.exists()


def test_saved_in_the_climatenet_layout_and_read_as_a_labeller(toy, tmp_path):
    ds, _ = toy
    step = ds.isel(time=[2])
    outlines = outlines_from_mask(step.truth.values[0], ds.lat.values, ds.lon.values)
    path = save_step(tmp_path, step, outlines, labeller=3, name="ana")
    assert path.name == "data-2000-01-01-06-1_3.nc"
    expert = open_expert(tmp_path, channels=True)
    assert list(expert.labeller.values) == [3] and expert.sizes["time"] == 1
    np.testing.assert_array_equal(
        expert.LABELS.values[0, 0], rasterise(outlines, ds.lat.values, ds.lon.values)
    )
    np.testing.assert_allclose(expert.TMQ.values[0], step.TMQ.values[0])
    (saved,) = saved_steps(tmp_path, 3, "ana").values()
    assert saved == outlines  # the outlines as drawn, not only their raster


def test_another_labellers_file_is_never_overwritten(toy, tmp_path):
    ds, _ = toy
    step = ds.isel(time=[0])
    box = [Outline.make([100, 120, 120, 100], [10, 10, 20, 20], AR)]
    path = save_step(tmp_path, step, box, labeller=0, name="ana")
    before = path.read_bytes()
    with pytest.raises(AnnotateError, match="saved by 'ana', not 'ben'.*labeller="):
        save_step(tmp_path, step, [], labeller=0, name="ben")
    assert path.read_bytes() == before
    save_step(tmp_path, step, [], labeller=0, name="ana")  # one's own: saved again
    assert path.read_bytes() != before


def test_a_session_edits_undoes_saves_and_resumes(toy, tmp_path):
    ds, _ = toy
    fields = ds.isel(time=slice(0, 3))
    ann = Annotator(fields, {"teacher": fields.truth}, tmp_path, labeller=1, name="ana")
    first = list(ann.current)
    rivers = [o for o in first if o.cls == AR]
    smallest = ann.smallest(AR)
    assert ann.current[smallest].area == min(o.area for o in rivers)
    ann.delete(smallest)
    ann.draw([100, 120, 120, 100], [10, 10, 20, 20], TC)
    ann.set_class(len(ann.current) - 1, AR)
    assert ann.current[-1].cls == AR and len(ann.current) == len(first)
    for _ in range(3):
        assert ann.undo()
    assert ann.current == first and not ann.undo()
    ann.delete(smallest)
    ann.accept()
    assert {o.source for o in ann.current} == {"accepted"}
    ann.save()
    ann.goto(1)
    ann.carry()
    assert [o.lon for o in ann.current] == [o.lon for o in ann.outlines[0]]
    again = Annotator(fields, {"teacher": fields.truth}, tmp_path, labeller=1, name="ana")
    assert again.step == 1 and again.saved == {0}  # resumes at the first step not saved
    assert again.outlines[0] == ann.outlines[0]
    other = Annotator(fields, {"teacher": fields.truth}, tmp_path, labeller=1, name="ben")
    assert other.outlines[0] == first and not other.saved
    with pytest.raises(AnnotateError, match="not 'ben'"):
        other.save(0)


def test_the_drawing_tools_data_becomes_the_steps_outlines(toy, tmp_path):
    ds, _ = toy
    ann = Annotator(ds.isel(time=[0]), {"teacher": ds.truth}, tmp_path, name="ana")
    kept = ann.current[0]
    ann.new_class = TC
    ann.sync(
        {
            "xs": [list(kept.lon), [100, 120, 120, 100]],
            "ys": [list(kept.lat), [10, 10, 20, 20]],
            "class": [kept.cls, float("nan")],  # PolyDraw's empty value of a new outline
        }
    )
    assert ann.current[0] == kept and ann.current[1].cls == TC
    assert ann.current[1].source == "drawn"


def test_the_view_needs_a_live_kernel_and_shows_editable_outlines(toy, tmp_path):
    import holoviews as hv
    import panel as pn

    ds, _ = toy
    ann = Annotator(ds.isel(time=[0, 1]), {"teacher": ds.truth}, tmp_path, name="ana")
    note = ann.view(live=False)
    assert isinstance(note, pn.pane.Markdown) and "running kernel" in note.object
    overlay, draw, edit, _ = ann.element()
    image, polys, wrapped = overlay.values()
    assert isinstance(image, hv.Image) and isinstance(polys, hv.Polygons)
    seam = [o for o in ann.current if max(o.lon) > 360]  # a river across the seam
    assert len(seam) == 1 and len(wrapped.split()) == 1  # drawn again west of 0, dashed
    assert len(polys.split()) == len(ann.current)
    assert isinstance(draw, hv.streams.PolyDraw) and isinstance(edit, hv.streams.PolyEdit)
    layout = ann.view(live=True)
    assert isinstance(layout, pn.Column)


def test_a_truth_storm_replaces_the_proposals_outline_of_it(toy, tmp_path):
    ds, _ = toy
    ann = Annotator(ds.isel(time=[0]), {"teacher": ds.truth}, tmp_path, name="ana")
    truth = outlines_from_mask(ds.truth.values[0], ds.lat.values, ds.lon.values)
    storm = next(o for o in truth if o.cls == TC)
    (same,) = ann.overlapping(storm)  # the proposal of that storm, and only it
    assert ann.current[same].lon == storm.lon
    far = Outline.make([100, 120, 120, 100], [-70, -70, -60, -60], TC)
    assert ann.overlapping(far) == []
    assert ann.missing(ds.truth, TC) == []  # the proposals are the truth: nothing missed
    ann.delete(same)
    assert [o.lon for o in ann.missing(ds.truth, TC)] == [storm.lon]


@pytest.mark.parametrize("field", ["IVT", "PSL"])
def test_rivers_over_the_transport_and_storms_over_pressure(toy, tmp_path, field):
    ds, _ = toy
    ann = Annotator(ds.isel(time=[0]), {"teacher": ds.truth}, tmp_path, name="ana", field=field)
    image = ann.element()[0].values()[0]
    assert image.vdims[0].name == field and np.isfinite(image.dimension_values(2)).all()


def test_outlines_are_drawn_in_their_class_colour(toy, tmp_path):
    """Storms' edges red, rivers' blue, on the map and where a river is drawn again across
    the seam (Bokeh draws an edge black unless told)."""
    import holoviews as hv

    from climnb.viz.annotate import COLOURS

    ds, _ = toy
    ann = Annotator(ds.isel(time=[0, 1]), {"teacher": ds.truth}, tmp_path, name="ana")
    overlay = ann.element()[0]
    _, polys, wrapped = overlay.values()
    plot = hv.renderer("bokeh").get_plot(overlay)
    want = [COLOURS[o.cls] for o in ann.current]
    for element, classes in ((polys, want), (wrapped, None)):
        handles = plot.subplots[next(k for k, v in overlay.items() if v is element)].handles
        spec = handles["glyph"].line_color  # one colour, or a column of the data, per outline
        colours = [spec] if isinstance(spec, str) else list(handles["source"].data[spec.field])
        assert set(colours) <= {COLOURS[TC], COLOURS[AR]} and len(colours) >= 1
        if classes is not None:
            assert colours == classes and {COLOURS[TC], COLOURS[AR]} <= set(colours)
