"""The resampling of ``stats compare`` where it decides: every point gets its p-value and
interval (the first one too), and the interval is the bootstrap's central ``1 - alpha``."""

from __future__ import annotations

import numpy as np

from climnb.stats.change import (
    CompareConfig,
    _bootstrap_weights,
    _permutation_weights,
    _resample,
)


def _blocks(seed):
    """Counts of 6 and 5 blocks (of 8 steps) at 3 points; the first two points alike."""
    rng = np.random.default_rng(seed)
    xa, xb = rng.integers(0, 8, (6, 1)), rng.integers(2, 8, (5, 1))
    xa = np.hstack([xa, xa, rng.integers(0, 8, (6, 1))]).astype(float)
    xb = np.hstack([xb, xb, rng.integers(0, 8, (5, 1))]).astype(float)
    return xa, np.full(6, 8.0), xb, np.full(5, 8.0)


def test_each_point_gets_the_interval_of_its_own_bootstrap():
    xa, sa, xb, sb = _blocks(1)
    config = CompareConfig(block=8, n_resamples=199, seed=3)
    out = _resample(xa, sa, xb, sb, config, np.random.default_rng(5))
    rng = np.random.default_rng(5)  # the same draws, in the same order
    _permutation_weights(sa, sb, 199, rng)
    boot_a, boot_b = _bootstrap_weights(sa, 199, rng), _bootstrap_weights(sb, 199, rng)
    boot = boot_b @ xb - boot_a @ xa
    lo, hi = np.percentile(boot, (2.5, 97.5), axis=0)  # alpha 0.05
    np.testing.assert_allclose(out["ci_low"], lo)
    np.testing.assert_allclose(out["ci_high"], hi)
    # the two alike points, the first and the second, agree
    assert out["p_value"][0] == out["p_value"][1] and 0 < out["p_value"][0] <= 1


def test_a_p_value_equal_to_alpha_is_not_significant():
    """Significant means p < alpha, as documented: with 19 resamples the smallest p-value is
    1 / 20 = 0.05, so nothing is significant at alpha 0.05, however large the change; with 39
    (smallest p 0.025) the same change is."""
    from climnb.data.synthetic import Future, make_dataset
    from climnb.stats.change import compare

    a, _ = make_dataset(n_time=48, seed=1, n_tc=0, n_ar=2)
    b, _ = make_dataset(n_time=48, seed=2, n_tc=0, n_ar=2, future=Future(more_rivers=3))
    rows, maps = {}, {}
    for n in (19, 39):
        result = compare(a.truth, b.truth, CompareConfig(block=8, n_resamples=n))
        rows[n] = result.table.set_index(["class_name", "region"]).loc[
            ("atmospheric_river", "global")
        ]
        maps[n] = result.maps
    assert rows[19].p_value == 0.05 and not rows[19].significant
    assert rows[39].p_value == 0.025 and rows[39].significant
    assert (maps[19].p_value == 0.05).any() and not maps[19].significant_local.any()
    assert maps[39].significant_local.any()
