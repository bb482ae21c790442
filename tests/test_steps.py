"""Series read a block of steps at a time (climnb.io.steps): every step once, in order, with the
values of the step, in as few dask computes as the block size allows."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from dask.callbacks import Callback

from climnb.io.steps import iter_steps


class _Computes(Callback):
    def __init__(self):
        super().__init__()
        self.n = 0

    def _start(self, dsk):
        self.n += 1


def _series(n=10, chunks=1):
    data = np.arange(n * 3 * 4, dtype=np.float32).reshape(n, 3, 4)
    da = xr.DataArray(data, dims=("time", "lat", "lon")).chunk(time=chunks)
    lab = xr.DataArray((data % 3).astype(np.int8), dims=("time", "lat", "lon")).chunk(time=chunks)
    return data, da, lab


@pytest.mark.parametrize("load_bytes, computes", [(10**9, 1), (3 * 48 + 3 * 12, 4), (1, 10)])
def test_every_step_in_order_in_blocks_of_the_bytes_given(load_bytes, computes):
    data, da, lab = _series()
    with _Computes() as counted:
        got = list(iter_steps([da, None, lab], load_bytes=load_bytes))
    assert [i for i, _ in got] == list(range(10))
    for i, (x, none, y) in got:
        np.testing.assert_array_equal(x, data[i])
        np.testing.assert_array_equal(y, (data[i] % 3).astype(np.int8))
        assert none is None
    assert counted.n == computes


def test_chosen_steps_of_a_dataset_with_time_not_first():
    data, da, lab = _series(n=6)
    ds = xr.Dataset({"a": da.transpose("lat", "time", "lon"), "b": lab})
    got = dict(iter_steps([ds], [5, 1, 3]))
    assert list(got) == [5, 1, 3]
    for i, (step,) in got.items():
        assert set(step) == {"a", "b"}
        np.testing.assert_array_equal(step["a"], data[i])  # (lat, lon), whatever the order
        np.testing.assert_array_equal(step["b"], data[i] % 3)


def test_numpy_backed_arrays_need_no_dask():
    data, da, _ = _series(n=3)
    loaded = da.load()
    with _Computes() as counted:
        got = [x for _, (x,) in iter_steps([loaded])]
    np.testing.assert_array_equal(np.stack(got), data)
    assert counted.n == 0
