"""The IPART adapter (climnb.labels.reference), the agreement scores and their map."""

from __future__ import annotations

import logging
import sys

import holoviews as hv
import numpy as np
import pytest
import xarray as xr

from climnb.data.synthetic import make_dataset
from climnb.labels import reference
from climnb.labels.scores import agreement
from climnb.viz.labels import river_agreement

needs_ipart = pytest.mark.skipif(
    not reference.available(), reason=f"IPART is an optional extra: {reference.INSTALL}"
)


def test_thr_kernel_follows_time_step_and_grid():
    ds, _ = make_dataset(n_time=2, n_lat=96, n_lon=144, ivt=True, freq="6h")
    assert reference.thr_kernel(ds) == (16, 2)  # IPART's 16 steps of 6 h
    fine, _ = make_dataset(n_time=2, n_lat=241, n_lon=480, n_tc=1, n_ar=1, ivt=True)
    assert reference.thr_kernel(fine) == (32, 6)  # 3-hourly, 0.75 degree: IPART's 6 cells


def test_missing_ipart_names_the_install_command(monkeypatch):
    for name in [m for m in sys.modules if m == "ipart" or m.startswith("ipart.")] + ["ipart"]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"pip install --no-deps ipart"):
        reference.load_ipart()
    assert not reference.available()
    ds, _ = make_dataset(n_time=2, ivt=True)
    with pytest.raises(ImportError, match="IPART"):
        reference.ipart_detect(ds)


@needs_ipart
def test_ipart_finds_rivers_where_transport_is_high(caplog):
    ds, _ = make_dataset(n_time=10, seed=3, ivt=True)
    with caplog.at_level(logging.WARNING, logger="climnb.labels.reference"):
        found = reference.ipart_detect(ds)
    assert "THR kernel spans 65 steps but the series has 10" in caplog.text
    rivers = found.rivers
    assert rivers.dtype == bool and rivers.shape == ds.IVT.shape
    assert rivers.dims == ("time", "lat", "lon")
    np.testing.assert_array_equal(rivers.lat, ds.lat)
    assert int(rivers.sum()) > 50  # rivers are found ...
    ivt = ds.IVT.values
    # ... where the transport stands out: their IVT is well above the rest of the world's
    assert ivt[rivers.values].mean() > 2.5 * ivt[~rivers.values].mean()
    # ... mostly in the extratropics (IPART keeps rivers whose centroid is at 20-80 degrees)
    lat = np.broadcast_to(ds.lat.values[None, :, None], ivt.shape)
    assert (np.abs(lat[rivers.values]) >= 20).mean() > 0.8
    np.testing.assert_allclose(found.anomaly + found.reconstruction, ivt, rtol=1e-5, atol=1e-3)
    assert found.attrs["kernel_steps"] == 32 and found.attrs["kernel_cells"] == 2
    assert found.threshold.dims == ("time",) and (found.threshold == 1.0).all()


@needs_ipart
def test_ipart_automatic_threshold_is_recorded_per_step():
    ds, _ = make_dataset(n_time=4, seed=3, ivt=True)
    fixed = reference.ipart_detect(ds, kernel=(2, 2))
    auto = reference.ipart_detect(ds, kernel=(2, 2), thres_low=None)
    assert auto.threshold.shape == (4,) and (auto.threshold > 1.0).all()
    # a higher candidate threshold can only shrink the candidates IPART drops as too large
    big_fixed = reference.oversized_candidates(fixed.anomaly, thres_low=fixed.threshold.values)
    big_auto = reference.oversized_candidates(auto.anomaly, thres_low=auto.threshold.values)
    assert int(big_auto.sum()) <= int(big_fixed.sum())


@needs_ipart
def test_ipart_needs_the_components():
    ds, _ = make_dataset(n_time=2, ivt=True)
    with pytest.raises(KeyError, match=r"missing \['IVTU'\]"):
        reference.ipart_detect(ds.drop_vars("IVTU"))


def _masks():
    """Ours: one river (rows 2-4, cols 2-9); the reference: a wider one overlapping it
    (rows 2-5, cols 5-14) and a weak one (row 8, cols 0-4). IVT is 300 in rows 2-4."""
    ours = np.zeros((1, 10, 20), np.uint8)
    ours[0, 2:5, 2:10] = 2
    ref = np.zeros((1, 10, 20), bool)
    ref[0, 2:6, 5:15] = True
    ref[0, 8, 0:5] = True
    ivt = np.full((1, 10, 20), 100.0)
    ivt[0, 2:5] = 300.0
    return ours, ref, ivt, np.linspace(0.0, 100.0, 20)


def test_agreement_on_hand_made_masks():
    ours, ref, ivt, lon = _masks()
    anomaly = np.full(ivt.shape, 5.0)
    anomaly[0, 2:5, 2:4] = 0.0  # 6 of our 9 own pixels have no anomaly in the reference
    a = agreement(ours, ref, ivt, lon, anomaly=anomaly)
    assert a["iou"] == pytest.approx(15 / 54)  # 24 ours + 45 reference - 15 shared
    assert a["iou_strong"] == pytest.approx(15 / 39)  # rows 2-4 only: 24 + 30 - 15
    assert a["only_ours"] == pytest.approx(9 / 54)
    assert a["only_reference"] == pytest.approx(30 / 54)
    assert a["only_reference_weak"] == pytest.approx(15 / 30)  # row 5 and the weak river
    assert (a["n_reference"], a["n_ours"]) == (2, 1)
    assert a["recall"] == 0.0  # neither reference river is half covered by ours
    assert a["precision"] == 1.0  # 15 of our 24 pixels are the reference's
    assert a["reference_weak_rivers"] == pytest.approx(0.5)
    assert a["recall_strong"] == 0.0
    assert a["only_ours_absorbed"] == pytest.approx(6 / 9)
    same = agreement(ours, ours == 2, ivt, lon)
    assert same["iou"] == 1.0 and same["recall"] == same["precision"] == 1.0
    assert np.isnan(same["only_ours_absorbed"])


def test_agreement_refuses_other_shapes():
    ours, ref, ivt, lon = _masks()
    with pytest.raises(ValueError, match=r"same \(time, lat, lon\) shape"):
        agreement(ours, ref[:, :5], ivt, lon)


def test_river_agreement_map_colours_the_overlap():
    ours, ref, ivt, lon = _masks()
    coords = {"time": [0], "lat": np.linspace(-45.0, 45.0, 10), "lon": lon}
    da = {
        k: xr.DataArray(v, coords, ("time", "lat", "lon"))
        for k, v in (("ours", ours), ("ref", ref), ("ivt", ivt))
    }
    layout = river_agreement(da["ivt"], da["ours"], da["ref"])
    assert isinstance(layout, hv.Layout) and len(layout) == 2
    overlap = [e for e in layout[1] if isinstance(e, hv.Image)][0]
    values = overlap.data["agreement"].values
    assert values[2, 3] == 1 and values[5, 10] == 2 and values[3, 7] == 3  # ours, ref, both
    assert np.isnan(values[0, 0])
    anomaly = da["ivt"] - 100.0
    three = river_agreement(da["ivt"], da["ours"], da["ref"], anomaly=anomaly, dropped=da["ref"])
    assert len(three) == 3
    kinds = [type(e).__name__ for e in three[2]]
    assert kinds == ["Image", "Contours", "Contours"]  # anomaly, IVT = 250, the dropped outline
    assert three[2].get(0).vdims[0].name == "anomaly"


def test_oversized_candidates_are_those_over_the_area_bound():
    lat, lon = np.linspace(-90.0, 90.0, 96), np.arange(144) * 2.5
    anomaly = np.zeros((1, 96, 144))
    anomaly[0, 60:64, 10:20] = 50.0  # about 4 x 10 cells of 210 x 250 km: ~2 million km2
    anomaly[0, 20:50, 0:144] = 5.0  # a band around the globe: far over 18 million km2
    da = xr.DataArray(anomaly, {"time": [0], "lat": lat, "lon": lon}, ("time", "lat", "lon"))
    big = reference.oversized_candidates(da)
    assert big.values[0, 20:50].all() and not big.values[0, 60:64].any()
    assert not big.values[0, :20].any()
    assert reference.oversized_candidates(da, max_area=1e12).values.sum() == 0


@needs_ipart
def test_ipart_reads_north_to_south_latitudes():
    ds, _ = make_dataset(n_time=4, seed=5, ivt=True)
    kernel = (2, 2)
    found = reference.ipart_detect(ds, kernel=kernel)
    flipped = reference.ipart_detect(ds.isel(lat=slice(None, None, -1)), kernel=kernel)
    np.testing.assert_array_equal(flipped.rivers.values, found.rivers.values)
    assert found.rivers.values.any()
