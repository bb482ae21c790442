"""Segmentation networks: faithfulness to the paper (counted, never run at full size), shapes,
input-size checks, FLOP arithmetic by hand, and the lazy TensorFlow import."""

from __future__ import annotations

import doctest
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="the models need TensorFlow: pip install 'climnb[train]'")

from climnb.models import (  # noqa: E402
    PAPER_FIGURES,
    build_model,
    count_flops,
    count_params,
    get_config,
)
from climnb.models.flops import conv_flops  # noqa: E402

FULL = (768, 1152, 16)
TOY = (96, 144, 16)


@pytest.fixture(scope="module")
def paper_models():
    """Both paper-preset networks at full size, built (not run): about 5 s and 1 GB."""
    return {name: build_model(name, FULL, preset="paper") for name in ("tiramisu", "deeplab")}


@pytest.fixture(scope="module")
def toy_models():
    return {name: build_model(name, TOY, preset="toy") for name in ("tiramisu", "deeplab")}


# --- faithfulness to the paper -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["tiramisu", "deeplab"])
def test_paper_preset_matches_paper_figures(paper_models, name):
    model = paper_models[name]
    params = count_params(model)
    train_flop = count_flops(model).training
    paper = PAPER_FIGURES[name]
    assert params == pytest.approx(paper["params"], rel=0.05), f"{params / 1e6:.2f} M params"
    assert train_flop == pytest.approx(paper["train_flop"], rel=0.10), (
        f"{train_flop / 1e12:.2f} TFLOP per training sample"
    )


def test_measured_figures_are_stable(paper_models):
    """Pin the exact counts so that a change to either network is noticed and documented."""
    tira, deep = paper_models["tiramisu"], paper_models["deeplab"]
    assert count_params(tira) == 7_506_659
    assert count_params(deep) == 43_720_099
    assert count_flops(tira).training / 1e12 == pytest.approx(4.188, abs=5e-4)
    assert count_flops(deep).training / 1e12 == pytest.approx(14.409, abs=5e-4)
    # exact arithmetic: dilation costs nothing extra, so only DeepLab changes
    assert count_flops(tira, "exact").training == count_flops(tira).training
    assert count_flops(deep, "exact").training / 1e12 == pytest.approx(13.024, abs=5e-4)


def test_tiramisu_paper_topology(paper_models):
    model = paper_models["tiramisu"]
    flops = count_flops(model)
    assert len(flops.layers) == 35  # stem + 10 down + 4 TD + 5 bottleneck + 4 TU + 10 up + 1x1
    kinds = flops.by_kind()
    assert set(kinds) == {"Conv2D", "Conv2DTranspose"}
    layer = model.get_layer
    assert layer("stem_conv").kernel.shape == (5, 5, 16, 64)
    assert layer("down1_l1_conv").kernel.shape == (5, 5, 64, 32)
    # transition down: 1x1, stride 2, keeps the 64 + 2 * 32 = 128 maps; built as the
    # subsampling it is, then the 1x1 convolution (oneDNN's strided 1x1 weight gradient crashes)
    assert layer("td1_conv").kernel.shape == (1, 1, 128, 128)
    assert layer("td1_conv_sub").strides == (2, 2) and layer("td1_conv").strides == (1, 1)
    assert layer("td1_conv").output.shape[1:3] == (384, 576)
    # transition up upsamples only the bottleneck's 5 x 32 = 160 new maps, 3x3 stride 2
    assert layer("tu1").kernel.shape == (3, 3, 160, 160)
    assert layer("tu1").strides == (2, 2)
    # ... and then the 4-layer up block sees 160 + the skip (64 + 2*32*3 + 4*32 = 384) maps
    assert layer("up1_l1_conv").kernel.shape == (5, 5, 544, 32)
    assert layer("bottleneck_l1_conv").output.shape[1:3] == (48, 72)
    assert model.output_shape == (None, 768, 1152, 3)


def test_deeplab_paper_topology(paper_models):
    model = paper_models["deeplab"]
    layer = model.get_layer
    assert layer("postnorm_relu").output.shape[1:] == (96, 144, 2048)  # output stride 8
    rates = {layer(f"aspp_r{r}_conv").dilation_rate for r in (12, 24, 36)}
    assert rates == {(12, 12), (24, 24), (36, 36)}
    assert layer("aspp_proj_conv").kernel.shape == (1, 1, 5 * 256, 256)
    # stage 3 dilated by 2, stage 4 by 4, neither strided
    assert layer("s3u1_conv2_conv").dilation_rate == (2, 2)
    assert layer("s4u3_conv2_conv").dilation_rate == (4, 4)
    # low-level features: 48-channel projection joined at 1/4 resolution
    assert layer("dec_low_conv").output.shape[1:] == (192, 288, 48)
    assert layer("dec_low_cat").output.shape[-1] == 256 + 48
    for name in ("dec_up1_deconv", "dec_up_half_deconv", "dec_up_full_deconv"):
        assert layer(name).strides == (2, 2)
    assert model.output_shape == (None, 768, 1152, 3)


def test_deeplab_without_input_skip_misses_the_paper():
    """The paper's figures include the full-resolution skip of the 'deconv1x' decoder."""
    model = build_model("deeplab", FULL, preset="paper", input_skip=())
    assert count_params(model) == pytest.approx(42.16e6, rel=0.001)
    assert count_flops(model, "exact").training == pytest.approx(4.76e12, rel=0.01)
    assert count_flops(model).training == pytest.approx(6.14e12, rel=0.01)


# --- FLOP arithmetic by hand ---------------------------------------------------------------------


def test_flop_counter_by_hand():
    import keras

    inputs = keras.Input((8, 12, 2))
    a = keras.layers.Conv2D(4, 3, padding="same", name="a")(inputs)  # 2*96*9*2*4
    b = keras.layers.Conv2D(4, 3, strides=2, padding="same", name="b")(a)  # 4x6 out
    c = keras.layers.Conv2DTranspose(3, 3, strides=2, padding="same", name="c")(b)  # 4x6 in
    d = keras.layers.Conv2D(2, 3, dilation_rate=3, padding="same", name="d")(c)
    e = keras.layers.Dense(5, name="e")(d)  # per pixel 2 -> 5
    model = keras.Model(inputs, e)
    per_layer = {lf.name: lf.flop for lf in count_flops(model).layers}
    assert per_layer["a"] == 2 * 96 * 9 * 2 * 4
    assert per_layer["b"] == 2 * 24 * 9 * 4 * 4
    assert per_layer["c"] == 2 * 24 * 9 * 4 * 3
    # paper convention: 8 + 2*3 = 14 -> 15 and 12 + 6 = 18 rows/cols after SpaceToBatch padding
    assert per_layer["d"] == 2 * 15 * 18 * 9 * 3 * 2
    assert count_flops(model, "exact").layers[3].flop == 2 * 96 * 9 * 3 * 2
    assert per_layer["e"] == 2 * 96 * 2 * 5
    total = count_flops(model)
    assert total.forward == sum(per_layer.values())
    assert total.training == 3 * total.forward
    assert conv_flops((5, 5), (5, 5), (1, 1), 1, 1) == 50.0


def test_flop_convention_validated():
    with pytest.raises(ValueError, match="convention"):
        conv_flops((1, 1), (1, 1), (1, 1), 1, 1, convention="tf2")


# --- sizes, presets, overrides -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name, shape, stride",
    [("tiramisu", (100, 144, 16), 16), ("deeplab", (96, 150, 16), 8)],
    ids=["tiramisu-height", "deeplab-width"],
)
def test_bad_input_size_names_sizes_that_work(name, shape, stride):
    with pytest.raises(ValueError, match=f"multiples of {stride}") as err:
        build_model(name, shape, preset="toy")
    message = str(err.value)
    bad = shape[0] if shape[0] % stride else shape[1]
    below = bad // stride * stride
    assert f"try {below} or {below + stride}" in message


@pytest.mark.parametrize(
    "name, shape",
    [("tiramisu", (32, 48, 16)), ("tiramisu", (64, 16, 4)), ("deeplab", (40, 56, 16))],
    ids=["tiramisu-32x48", "tiramisu-64x16x4", "deeplab-40x56"],
)
def test_any_divisible_size_works(name, shape):
    model = build_model(name, shape, preset="toy", n_classes=5)
    x = np.random.default_rng(0).random((1, *shape), dtype=np.float32)
    assert model(x).shape == (1, shape[0], shape[1], 5)


def test_toy_presets_are_small_and_full_resolution(toy_models):
    for name, model in toy_models.items():
        assert 2e4 < count_params(model) < 1e6, name
        assert model.output_shape == (None, 96, 144, 3)


def test_toy_tiramisu_is_sized_to_the_toy_grid(toy_models):
    """Well under a GFLOP per training sample (3.5 with the earlier toy preset), batch norm
    whose statistics follow a run of a few hundred steps, and the override still works."""
    from climnb.models import count_flops

    model = toy_models["tiramisu"]
    assert 0.3e9 < count_flops(model).training < 1e9
    norms = [layer for layer in model.layers if layer.name.endswith("_bn")]
    assert norms and {layer.momentum for layer in norms} == {0.9}
    slow = build_model("tiramisu", (32, 48, 16), preset="toy", batch_norm_momentum=0.99)
    assert slow.get_layer("stem_bn").momentum == 0.99
    with pytest.raises(ValueError, match=r"batch_norm_momentum must be in \[0, 1\), got 1.0"):
        get_config("tiramisu", "toy", batch_norm_momentum=1.0)


def test_toy_forward_gives_class_probabilities(toy_models):
    import keras

    x = np.random.default_rng(1).random((2, *TOY), dtype=np.float32)
    for model in toy_models.values():
        logits = model(x, training=False)
        assert logits.dtype == "float32"
        probs = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
        np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-5)


def test_mixed_precision_model():
    model = build_model("tiramisu", (32, 48, 16), preset="toy", mixed_precision=True)
    assert model.get_layer("stem_conv").compute_dtype == "float16"
    assert all(w.dtype == "float32" for w in model.trainable_weights)  # master weights
    out = model(np.zeros((1, 32, 48, 16), np.float32))
    assert out.dtype == "float32"  # logits cast back for a stable loss


def test_latitude_channel_knows_the_hemisphere_on_any_global_grid(tmp_path):
    from climnb.bundle import load_bundle, save_bundle

    model = build_model("tiramisu", (32, 48, 16), preset="toy", latitude_channel=True)
    x = np.zeros((2, 32, 48, 16), np.float32)
    lat = np.asarray(model.get_layer("latitude")(x))[..., -1]
    assert lat.shape == (2, 32, 48)
    rows = np.deg2rad(-90 + (np.arange(32) + 0.5) * 180 / 32)  # ascending, cell centres
    np.testing.assert_allclose(lat[1, :, 7], np.sin(rows), atol=1e-6)
    assert (lat[:, :16] < 0).all() and (lat[:, 16:] > 0).all()  # south, then north
    assert model.get_layer("stem_conv").kernel.shape[-2] == 17  # the stem sees 16 + 1
    # the bundle rebuilds it at another grid: the same weights, the map of that grid
    bundle = save_bundle(
        model,
        tmp_path / "m",
        channels=[f"c{i}" for i in range(16)],
        minval=np.zeros(16),
        maxval=np.ones(16),
        name="tiramisu",
        preset="toy",
        overrides={"latitude_channel": True},
    )
    bigger = load_bundle(bundle).model(64, 96)
    assert np.asarray(
        bigger.get_layer("latitude")(np.zeros((1, 64, 96, 16), np.float32))
    ).shape == (1, 64, 96, 17)
    np.testing.assert_array_equal(
        bigger.get_layer("stem_conv").kernel.numpy(), model.get_layer("stem_conv").kernel.numpy()
    )


def test_overrides_and_unknown_fields():
    small = build_model("tiramisu", TOY, preset="toy", growth_rate=6)
    assert count_params(small) < count_params(build_model("tiramisu", TOY, preset="toy"))
    assert get_config("deeplab", "toy", aspp_rates=[1, 2, 3]).aspp_rates == (1, 2, 3)
    with pytest.raises(TypeError, match="no field"):
        get_config("tiramisu", "toy", growth=6)
    with pytest.raises(ValueError, match="unknown preset"):
        get_config("deeplab", "huge")
    with pytest.raises(ValueError, match="unknown model"):
        build_model("unet", TOY)


def test_weight_decay_penalties_in_model_losses(toy_models):
    assert len(toy_models["deeplab"].losses) > 0
    wd = build_model("tiramisu", (32, 48, 16), preset="toy", weight_decay=1e-4)
    assert len(wd.losses) > 0
    assert len(toy_models["tiramisu"].losses) == 0  # the toy Tiramisu has none by default


# --- packaging --------------------------------------------------------------------------------


def test_import_climnb_does_not_import_tensorflow():
    code = textwrap.dedent(
        """
        import sys
        import climnb, climnb.models, climnb.models.presets, climnb.train
        from climnb.models import get_config, PAPER_FIGURES
        assert "tensorflow" not in sys.modules and "keras" not in sys.modules, "TF imported"
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_tensorflow_says_what_to_install():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["tensorflow"] = None  # as if not installed
        from climnb.models import build_model
        try:
            build_model("tiramisu", (96, 144, 16), preset="toy")
        except ImportError as err:
            assert "pip install 'climnb[train]'" in str(err), err
        else:
            raise SystemExit("no ImportError")
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "module",
    ["presets", "flops", "losses", "metrics"],
)
def test_docstring_examples(module):
    import importlib

    mod = importlib.import_module(f"climnb.models.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
