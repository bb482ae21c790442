"""Inference in bounded memory: the receptive field, longitude tiles and the memory budget.

A tile carries ``receptive_radius`` columns of its neighbours on each side, so its own
columns must come out as in the whole step: exactly in float32, within bfloat16's rounding in
mixed_bfloat16 (oneDNN sums a narrower map in another order). A halo narrower than the field
must change them, or the equality would prove nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

import climnb.accessor  # noqa: F401  (registers ds.climnb)
from climnb.bundle import BundleError, load_bundle, save_bundle
from climnb.data.synthetic import make_dataset
from climnb.inference.predict import _plan, forward_bytes, predict, predict_batch, tile_plan
from climnb.io.channels import CHANNEL_NAMES

keras = pytest.importorskip(
    "keras", reason="inference needs TensorFlow/Keras: pip install 'climnb[train]'"
)

SHAPE = (96, 144)
#: a Tiramisu of the toy preset with one layer a block and three blocks: a receptive radius
#: (23 columns) that leaves room for several tiles across 144 columns
SMALL = {"blocks": (1, 1, 1), "latitude_channel": True}


def _bundle(tmp_path_factory, name="tiramisu", precision=False, **overrides):
    from climnb.models import build_model

    model = build_model(name, (*SHAPE, 16), preset="toy", mixed_precision=precision, **overrides)
    return load_bundle(
        save_bundle(
            model,
            tmp_path_factory.mktemp("bundles") / f"{name}-{precision}",
            channels=CHANNEL_NAMES,
            minval=np.zeros(16),
            maxval=np.ones(16),
            name=name,
            preset="toy",
            overrides={k: list(v) if isinstance(v, tuple) else v for k, v in overrides.items()},
        )
    )


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return _bundle(tmp_path_factory, **SMALL)


@pytest.fixture(scope="module")
def fields():
    return np.random.default_rng(0).random((2, *SHAPE, 16), dtype=np.float32)


def _tiling(bundle, fraction=0.6):
    """A per-worker budget (GB) that makes a single step run in tiles."""
    return forward_bytes(bundle, *SHAPE) * fraction / 1e9


def test_tile_plan_covers_every_column_once_away_from_tile_edges():
    for width, window, halo in [(144, 64, 24), (144, 144, 0), (96, 48, 16), (160, 112, 48)]:
        tiles = tile_plan(width, window, halo)
        into = np.zeros(width, int)
        for cols, keep, out in tiles:
            assert cols.stop - cols.start == min(window, width)  # one width: one network
            assert keep.stop - keep.start == out.stop - out.start
            assert out.start - cols.start == keep.start
            assert keep.start >= halo or cols.start == 0
            assert cols.stop - out.stop >= halo or cols.stop == width
            into[out] += 1
        assert (into == 1).all()
    with pytest.raises(ValueError, match="keeps none"):
        tile_plan(144, 48, 24)


def _reach(model, column=72):
    """Columns either side of ``column`` whose output changes when that input column does."""
    x = np.random.default_rng(1).random((1, *SHAPE, 16), dtype=np.float32)
    bumped = x.copy()
    bumped[:, :, column] += 3.0
    diff = np.abs(np.asarray(model(bumped)) - np.asarray(model(x))).max(axis=(0, 1, 3))
    changed = np.nonzero(diff > 0)[0]
    return column - changed.min(), changed.max() - column


def _layers(*layers):
    inp = keras.Input((*SHAPE, 16))
    x = inp
    for layer in layers:
        x = layer(x)
    return keras.Model(inp, x)


@pytest.mark.parametrize(
    "kind",
    ["conv5", "conv3-dilated3", "strided-then-transposed", "small-tiramisu"],
)
def test_receptive_radius_bounds_what_a_column_changes(small, kind):
    from climnb.models.footprint import receptive_radius

    L = keras.layers
    model = {
        "conv5": lambda: _layers(L.Conv2D(3, 5, padding="same")),
        "conv3-dilated3": lambda: _layers(L.Conv2D(3, 3, dilation_rate=3, padding="same")),
        "strided-then-transposed": lambda: _layers(
            L.Conv2D(4, 3, strides=2, padding="same"),
            L.Conv2DTranspose(3, 3, strides=2, padding="same"),
        ),
        "small-tiramisu": lambda: small.model(),
    }[kind]()
    radius = receptive_radius(model)
    left, right = _reach(model)
    assert max(left, right) <= radius
    if kind.startswith("conv"):  # one stride-1 convolution: the bound is exact
        assert left == right == radius


def test_global_pooling_has_no_finite_receptive_radius(tmp_path_factory):
    from climnb.models.footprint import receptive_radius

    deeplab = _bundle(tmp_path_factory, "deeplab")
    assert receptive_radius(deeplab.model()) is None
    with pytest.raises(BundleError, match="sees the whole width.*--memory"):
        predict_batch(deeplab, np.zeros((1, *SHAPE, 16), np.float32), memory=1e-4)


def test_tiles_give_the_whole_steps_output_in_float32(small, fields):
    whole = predict_batch(small, fields, probabilities=True, check_range=False)
    memory = _tiling(small)
    per_pass, window, halo = _plan(small, fields.shape, memory * 1e9)
    assert per_pass == 1 and window < SHAPE[1] and halo >= 23, "the budget must force tiles"
    tiled = predict_batch(small, fields, probabilities=True, check_range=False, memory=memory)
    np.testing.assert_array_equal(tiled, whole)


def test_a_halo_narrower_than_the_field_changes_the_output(small, fields):
    """The equality above is not trivial: with no halo, tiles' edges differ."""
    from climnb.inference.predict import _footprint

    model = small.model()
    whole = predict_batch(small, fields, probabilities=True, check_range=False)
    radius, per_pixel = _footprint(model)  # worked out here, whichever test ran first
    model._climnb_footprint = (0, per_pixel)
    try:
        tiled = predict_batch(
            small, fields, probabilities=True, check_range=False, memory=_tiling(small)
        )
    finally:
        model._climnb_footprint = (radius, per_pixel)
    # the probabilities: an untrained network may give one class everywhere either way
    assert np.abs(tiled - whole).max() > 1e-3


def test_a_batch_that_does_not_fit_runs_a_step_at_a_time(small, fields):
    memory = 1.5 * forward_bytes(small, *SHAPE) / 1e9  # one step fits, two do not
    assert _plan(small, fields.shape, memory * 1e9) == (1, SHAPE[1], 0)
    whole = predict_batch(small, fields, check_range=False)
    np.testing.assert_array_equal(
        predict_batch(small, fields, check_range=False, memory=memory), whole
    )


def test_tiles_within_bfloat16_rounding(tmp_path_factory, fields):
    from climnb.models.precision import cpu_bf16_flags

    if not cpu_bf16_flags():
        pytest.skip("no native bfloat16 on this CPU (TensorFlow would emulate it)")
    bf16 = _bundle(tmp_path_factory, precision="mixed_bfloat16", **SMALL)
    whole = predict_batch(bf16, fields, probabilities=True, check_range=False)
    tiled = predict_batch(bf16, fields, probabilities=True, check_range=False, memory=_tiling(bf16))
    # bfloat16 keeps 8 significant bits: probabilities agree to about 2^-7, and only pixels
    # whose two best classes are that close may change class
    assert np.abs(tiled - whole).max() < 2**-6
    changed = tiled.argmax(-1) != whole.argmax(-1)
    top2 = np.sort(whole, axis=-1)[..., -2:]
    assert (top2[..., 1] - top2[..., 0])[changed].max(initial=0) < 2**-6


def test_too_little_memory_is_refused_before_any_work(small):
    ds, _ = make_dataset(n_time=2, seed=0)
    with pytest.raises(BundleError, match=r"too little.*narrowest tile.*raise --memory"):
        predict(small, ds, memory=1e-6, check_range=False)
    with pytest.raises(ValueError, match="memory must be a positive number of GB"):
        predict(small, ds, memory=0)
    within = ds.assign({name: ds[name] * 0 + 0.5 for name in CHANNEL_NAMES})  # training range
    with pytest.raises(BundleError, match=r"too little.*raise --memory"):
        within.climnb.predict(small, memory=1e-6)  # the accessor passes the budget on


def test_predict_with_a_budget_streams_the_same_classes(small):
    ds, _ = make_dataset(n_time=3, seed=0)
    whole = predict(small, ds, check_range=False, batch_size=2).values
    tiled = predict(small, ds, check_range=False, batch_size=2, memory=_tiling(small)).values
    np.testing.assert_array_equal(tiled, whole)


def test_a_network_rebuilt_for_another_grid_keeps_its_precision(tmp_path_factory):
    """Tiles and other grids run a rebuilt network: in the saved precision, not float32
    (which took the memory of a float32 pass for a bfloat16 bundle's tiles)."""
    bf16 = _bundle(tmp_path_factory, precision="mixed_bfloat16", **SMALL)
    rebuilt = bf16.model(SHAPE[0], 64)
    assert rebuilt is not bf16.model()
    assert {layer.compute_dtype for layer in rebuilt.layers if hasattr(layer, "kernel")} == {
        "bfloat16"
    }
