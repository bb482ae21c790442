"""The river definition's object rules: one function for the labeller and for a network's
rivers (climnb.labels.ar.river_rules, climnb.inference.postprocess.apply_river_rules)."""

from __future__ import annotations

import json
from dataclasses import replace

import dask.array as dsa
import numpy as np
import pytest
import xarray as xr

from climnb.inference.postprocess import apply_river_rules, river_config
from climnb.labels import ARConfig, LabelConfig, compute, label_dataset
from climnb.labels.ar import ivt_magnitude, river_rules, transport_rivers
from climnb.labels.sphere import is_periodic

_TRANSPORT = ARConfig(method="transport")


@pytest.fixture(scope="module")
def teacher(toy):
    ds, _ = toy
    labels, _ = compute(*label_dataset(ds, LabelConfig()))
    return ds, labels


def test_labeller_rivers_are_the_rules_on_its_candidates(toy):
    """transport_rivers = threshold and tropics, then river_rules; and the rules change none
    of the rivers they drew (each river is a component of its own that passed them)."""
    ds, _ = toy
    lat, lon = ds.lat.values, ds.lon.values
    dropped = 0
    for k in range(4):
        fields = {n: ds[n].values[k] for n in ("TMQ", "U850", "V850")}
        mask, table = transport_rivers(fields, lat, lon, _TRANSPORT, periodic=is_periodic(lon))
        strength = ivt_magnitude(fields)
        above = strength >= _TRANSPORT.proxy_threshold
        above[np.abs(lat) < _TRANSPORT.exclude_tropics_deg] = False
        rivers, rules_table = river_rules(above, fields, lat, lon, _TRANSPORT, strength=strength)
        np.testing.assert_array_equal(rivers > 0, mask)
        assert rivers.max() == len(table) == len(rules_table)
        np.testing.assert_array_equal(table.length_km, rules_table.length_km)
        again, _ = river_rules(mask, fields, lat, lon, _TRANSPORT)
        np.testing.assert_array_equal(again, rivers)
        loose, _ = river_rules(above, fields, lat, lon, replace(_TRANSPORT, ivt_min_poleward=None))
        assert np.all(loose[mask] > 0)
        dropped += int((loose > 0).sum() - mask.sum())
    assert dropped > 0, "the poleward rule dropped no river: the test would not see it"


def test_the_teachers_own_labels_pass_the_rules_unchanged(teacher):
    """A network that copied its teacher exactly loses nothing to the rules."""
    ds, labels = teacher
    assert (labels.values == 2).sum() > 500 and (labels.values == 1).any()
    ruled = apply_river_rules(labels, ds, LabelConfig().ar)
    np.testing.assert_array_equal(ruled.values, labels.values)


def _bands(rows_north: slice, rows_south: slice):
    """Fields of uniform moisture and a prediction of four rivers of the same shape, two in
    each hemisphere, 2,300 km long: columns 10-21 carry vapour northward, 60-71 southward."""
    lat = np.linspace(-90, 90, 96)
    lon = np.arange(144) * 2.5
    pred = np.zeros((2, 96, 144), np.uint8)
    for rows in (rows_north, rows_south):
        pred[:, rows, 10:22] = pred[:, rows, 60:72] = 2
    v = np.zeros((2, 96, 144), np.float32)
    v[..., :40], v[..., 40:] = 8.0, -8.0
    coords = {"time": np.arange(2), "lat": lat, "lon": lon}
    dims = ("time", "lat", "lon")
    fields = xr.Dataset(
        {"TMQ": (dims, np.full(v.shape, 30.0, np.float32)), "V850": (dims, v)}, coords=coords
    )
    return xr.DataArray(pred, coords=coords, dims=dims, name="prediction"), fields


def test_equatorward_rivers_go_poleward_ones_stay():
    # rows 68-69 lie at 39-41 N, rows 26-27 at 39-41 S
    pred, fields = _bands(slice(68, 70), slice(26, 28))
    ruled = apply_river_rules(pred, fields).values
    north, south = ruled[:, 68:70], ruled[:, 26:28]
    assert (north[..., 10:22] == 2).all() and (north[..., 60:72] == 0).all()  # north: v > 0
    assert (south[..., 10:22] == 0).all() and (south[..., 60:72] == 2).all()  # south: v < 0
    assert ((ruled == 2) <= (pred.values == 2)).all()
    # without the poleward rule all four are rivers: the transport alone decided
    loose = apply_river_rules(pred, fields, ARConfig(ivt_min_poleward=None))
    np.testing.assert_array_equal(loose.values, pred.values)


def test_short_tropical_and_storm_side_rivers_go():
    pred, fields = _bands(slice(68, 70), slice(26, 28))
    pred = pred.copy()
    pred[:, 68:70, 60:72] = 0
    pred[:, 68:70, 100:104] = 2  # 400 km long: too short
    pred[:, 50:52, 10:30] = 2  # at the equator, northward
    pred[:, 70, 22] = 1  # a storm beside the first band's end: 3 pixels (500 km) around it go
    ruled = apply_river_rules(pred, fields).values
    assert (ruled[:, 68:70, 100:104] == 0).all() and (ruled[:, 50:52] == 0).all()
    assert (ruled[:, 68:70, 10:20] == 2).all() and (ruled[:, 68, 21] == 0).all()
    assert (ruled[:, 69, 20:22] == 0).all() and (ruled[:, 68, 20] == 2).all()
    assert (ruled[:, 70, 22] == 1).all()  # storms stay as predicted


def test_lazy_per_time_chunk_and_on_the_callers_grid():
    pred, fields = _bands(slice(68, 70), slice(26, 28))
    expected = apply_river_rules(pred, fields).values
    lazy = apply_river_rules(pred.chunk({"time": 1}), fields)
    assert isinstance(lazy.data, dsa.Array) and lazy.chunks[0] == (1, 1)
    assert lazy.attrs["river_rules"].startswith("river objects >= 2000 km")
    np.testing.assert_array_equal(lazy.values, expected)

    # latitude descending and longitude -180..180, as a caller's file may have them
    def flip(x):
        x = x.isel(lat=slice(None, None, -1))
        return x.assign_coords(lon=(x.lon + 180) % 360 - 180).sortby("lon")

    out = apply_river_rules(flip(pred), flip(fields).rename(lat="latitude"))
    assert out.dims == ("time", "lat", "lon") and out.lat.values[0] > 0
    np.testing.assert_array_equal(out.values, flip(xr.zeros_like(pred) + expected).values)


def test_missing_variables_and_steps_are_named():
    pred, fields = _bands(slice(68, 70), slice(26, 28))
    with pytest.raises(ValueError, match="IVTV, or TMQ and V850; missing V850"):
        apply_river_rules(pred, fields.drop_vars("V850"))
    ivtv = fields.assign(IVTV=fields.TMQ * fields.V850).drop_vars(["TMQ", "V850"])
    np.testing.assert_array_equal(
        apply_river_rules(pred, ivtv).values, apply_river_rules(pred, fields).values
    )
    with pytest.raises(ValueError, match="lack 1 of the prediction's 2 time steps"):
        apply_river_rules(pred, fields.isel(time=[0]))


def test_bundle_records_the_teachers_settings_or_defaults():
    class Bundle:
        extra = {}

    assert river_config(Bundle())[0] == ARConfig()
    Bundle.extra = {"label_config": LabelConfig(ar=ARConfig(ivt_lat_band=(25.0, 70.0))).to_dict()}
    config, where = river_config(Bundle())
    assert config.ivt_lat_band == (25.0, 70.0) and "recorded" in where
    Bundle.path = "runs/x/model"
    Bundle.extra = {"label_config": {"ar": {"method": "sideways"}}}
    with pytest.raises(ValueError, match="runs/x/model: the teacher's settings it records"):
        river_config(Bundle())


def test_the_teachers_settings_travel_from_labels_to_the_model_bundle(toy, tmp_path):
    """label_dataset records its settings on the labels; the sample set keeps them in
    stats.h5 (which staging copies); training writes them into the bundle, whose river rules
    then use them rather than the defaults."""
    pytest.importorskip("keras", reason="training needs TensorFlow/Keras")
    from _training import config_file

    from climnb.bundle import load_bundle
    from climnb.cli import main
    from climnb.io.sampleset import write_sample_set
    from climnb.io.stats import read_stats
    from climnb.labels import save_labelled

    ds, _ = toy
    teacher = LabelConfig(ar=ARConfig(ivt_lat_band=(25.0, 70.0)))
    labels, events = compute(*label_dataset(ds, teacher))
    path = save_labelled(ds, labels, events, tmp_path / "labelled.nc")
    with xr.open_dataset(path) as labelled:
        sset = write_sample_set(labelled, "labels", tmp_path / "set", method="random", seed=1)
    recorded = read_stats(sset.stats_path).label_config
    # what was used: the settings given, with "auto" resolved for these fields
    assert recorded["ar"]["ivt_lat_band"] == [25.0, 70.0]
    assert recorded["ar"]["method"] == "transport" and teacher.ar.method == "auto"
    assert recorded["tc"] == json.loads(json.dumps(teacher.to_dict()["tc"]))
    argv = ["train", "--data", str(tmp_path / "set"), "--out", str(tmp_path / "run"),
            "--config", str(config_file(tmp_path / "config.json")), "--max-steps", "1",
            "--batch-size", "2", "--threads", "1", "--epochs", "1"]  # fmt: skip
    assert main(argv) == 0
    config, where = river_config(load_bundle(tmp_path / "run" / "model"))
    assert config.ivt_lat_band == (25.0, 70.0) and "recorded" in where
