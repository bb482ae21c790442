"""The default class weights are those of the frequencies DeepCAM reports (background 98.63 %,
tropical cyclones 0.046 %, atmospheric rivers 1.33 %), worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from climnb.models.losses import class_weights


def test_default_weights_are_those_of_the_papers_frequencies():
    raw = np.array([0.9863, 0.00046, 0.0133]) ** -0.5  # 1.0069, 46.625, 8.6711
    np.testing.assert_allclose(class_weights(), raw / raw.sum())
    # rivers weigh sqrt(0.9863 / 0.0133) = 8.61 times the background
    assert class_weights()[2] / class_weights()[0] == pytest.approx(8.612, abs=1e-3)
