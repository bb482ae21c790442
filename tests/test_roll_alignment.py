"""Rolled batches go to TensorFlow by DLPack without a copy, so their memory must meet
TensorFlow's alignment; a misaligned buffer aborted a training run with augment="roll"
("Check failed: IsAligned()")."""

from __future__ import annotations

import numpy as np
import pytest

from climnb.train.pipeline import TENSOR_ALIGNMENT, aligned_empty, roll_batch


@pytest.mark.parametrize(
    "shape, dtype",
    [((2, 96, 144, 16), np.float32), ((2, 96, 144), np.int32), ((3, 5, 7), np.float32)],
)
def test_rolled_batches_are_aligned_for_tensorflow(shape, dtype):
    for attempt in range(20):  # many allocations: a 16-byte aligned one would show
        a = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
        (rolled,) = roll_batch([a], np.arange(shape[0]) + attempt)
        assert rolled.ctypes.data % TENSOR_ALIGNMENT == 0
        assert rolled.flags.c_contiguous and rolled.dtype == dtype
        for i in range(shape[0]):
            np.testing.assert_array_equal(rolled[i], np.roll(a[i], i + attempt, axis=1))


def test_aligned_empty_of_any_size():
    for n in (0, 1, 3, 1000):
        a = aligned_empty((n,), np.float64)
        assert a.shape == (n,) and a.ctypes.data % TENSOR_ALIGNMENT == 0
