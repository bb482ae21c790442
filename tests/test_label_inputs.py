"""What notebook 01 calls: the recipe, the fields to label, files as they come, IPART compared."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from climnb.data.synthetic import make_dataset, save_dataset
from climnb.labels import LabelConfig, reference
from climnb.labels.inputs import fields_to_label, label_as_they_come

DATA = Path(__file__).parent / "data"


def test_recipe_takes_the_river_percentile():
    assert LabelConfig.recipe("paper", ar_percentile=90).ar.percentile == 90.0
    assert LabelConfig.recipe("paper").ar == LabelConfig.paper().ar
    assert LabelConfig.recipe("default", ar_percentile=None) == LabelConfig()
    with pytest.raises(ValueError, match="unknown recipe 'nope'"):
        LabelConfig.recipe("nope", ar_percentile=90)


def test_fields_to_label_makes_toy_data_with_its_truth():
    ds, events = fields_to_label(n_time=2, n_lat=96, n_lon=144, seed=3)
    expected, truth = make_dataset(n_time=2, n_lat=96, n_lon=144, seed=3)
    np.testing.assert_array_equal(ds.TMQ.values, expected.TMQ.values)
    assert len(events) == len(truth)


def test_fields_to_label_reads_a_saved_file_and_its_events(tmp_path):
    made, truth = make_dataset(n_time=3, n_lat=96, n_lon=144, seed=1)
    path, _ = save_dataset(made, truth, tmp_path / "fields.nc")
    ds, events = fields_to_label(str(path), LabelConfig.paper())
    assert ds.sizes["time"] == 3 and "truth" in ds
    assert len(events) == len(truth)
    assert fields_to_label([path])[1] is not None  # a list: the events beside its first file


def test_fields_to_label_on_a_real_file_has_no_truth_and_names_what_is_missing():
    # ERA5 pressure and vorticity: enough for storms, not for the default recipe's rivers
    path = DATA / "era5_msl_vo850_2026-02_sh_2.5x2.5.nc"
    with pytest.raises(ValueError, match="TMQ"):
        fields_to_label(path)


def test_label_as_they_come_labels_each_source_on_the_canonical_grid(tmp_path):
    found = label_as_they_come(("era5", "merra2"), n_lat=96, n_lon=144, seed=0, folder=tmp_path)
    assert list(found.notes.index) == ["era5", "merra2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["era5.nc", "merra2.nc"]
    for source in ("era5", "merra2"):
        labels, ivt = found.labels[source], found.ivt[source]
        assert labels.dims == ("lat", "lon") and labels.shape == (96, 144)
        assert (np.diff(labels.lat) > 0).all() and float(labels.lon.min()) >= 0.0
        assert ivt.shape == labels.shape and ivt.attrs == {"units": "kg m-1 s-1"}
        assert (labels == 2).any()  # rivers from the transport both files hold
    # the same fields: the same rivers, whatever the file's names, order and longitudes
    np.testing.assert_array_equal(found.labels["era5"] == 2, found.labels["merra2"] == 2)
    assert "storm" in found.notes["merra2"].lower()  # MERRA-2 has no T200: said why


@pytest.mark.skipif(not reference.available(), reason=f"IPART: {reference.INSTALL}")
def test_compare_with_ipart_gives_the_three_pairs():
    found = reference.compare_with_ipart(n_time=6, n_lat=96, n_lon=144, seed=0)
    assert list(found.table.index) == ["climnb vs IPART", "truth vs IPART", "climnb vs truth"]
    assert list(found.table.columns) == list(reference.AGREEMENT_COLUMNS)
    assert ((found.table.iou >= 0) & (found.table.iou <= 1)).all()
    assert found.ours.shape == found.ipart.rivers.shape == found.dropped.shape


def test_label_as_they_come_without_a_folder_leaves_no_files(tmp_path, monkeypatch):
    """Notebook 01 gives no folder: the files go to a temporary folder that is removed (each
    run used to leave one in /tmp), and what it returns is in memory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    found = label_as_they_come(("merra2",), n_time=1, seed=0)
    assert list(tmp_path.iterdir()) == [] and found.files == {}
    assert float(found.ivt["merra2"].max()) > 0 and (found.labels["merra2"] == 2).any()
