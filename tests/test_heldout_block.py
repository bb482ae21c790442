"""The held-out block the demo scores its network on: the sample set's test steps, a time block
training and validation never saw, at least the split's gap away (write_heldout)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from climnb.data.synthetic import make_dataset
from climnb.io.sampleset import SampleSet, write_heldout, write_sample_set

GAP = np.timedelta64(24, "h")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("heldout")
    ds = make_dataset(n_time=48, seed=3)[0]
    labelled = ds.assign(labels=(ds.truth > 0).astype("uint8"))  # a teacher unlike the truth
    labelled.to_netcdf(root / "labelled.nc")
    ss = write_sample_set(labelled, "labels", root / "set")
    return root, labelled, ss


def test_the_test_block_is_a_gap_away_from_what_training_saw(written):
    root, labelled, ss = written
    out = write_heldout(ss.root, root / "labelled.nc", root / "h.nc", labels_out=root / "t.nc")
    with xr.open_dataset(out) as held, xr.open_dataset(root / "t.nc") as teacher:
        times = held.time.values
        assert "truth" in held and "labels" not in held  # the fields and the truth only
        assert times.size == len(ss.files("test")) > 0
        np.testing.assert_array_equal(held.truth, labelled.truth.sel(time=times))
        np.testing.assert_array_equal(held.TMQ, labelled.TMQ.sel(time=times))
        np.testing.assert_array_equal(teacher.labels, labelled.labels.sel(time=times))
        assert not np.array_equal(teacher.labels, held.truth)  # the teacher's, not the truth
    seen = np.concatenate([ss.times("train"), ss.times("validation")]).astype("datetime64[ns]")
    nearest = np.abs(times[:, None] - seen[None, :]).min()
    assert nearest >= GAP


def test_fields_that_lack_the_steps_are_refused_naming_the_file(written, tmp_path):
    root, labelled, ss = written
    other = tmp_path / "other.nc"
    labelled.isel(time=slice(0, 20)).to_netcdf(other)  # the test block is at the end
    with pytest.raises(ValueError, match=r"other\.nc lacks .* test steps"):
        write_heldout(ss.root, other, tmp_path / "h.nc")
    assert not (tmp_path / "h.nc").exists()


def test_a_set_without_a_test_split_is_refused(written, tmp_path):
    root, labelled, _ = written
    flat = SampleSet.open(root / "set" / "train")  # a flat folder of sample files
    with pytest.raises(ValueError, match="no 'test' split"):
        write_heldout(flat, root / "labelled.nc", tmp_path / "h.nc")
