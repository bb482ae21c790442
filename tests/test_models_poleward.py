"""The transport input channels (poleward TMQ x V850 x sign(latitude) and the magnitude
TMQ x |wind850|, from normalised inputs) and the soft-Dice loss term: against numpy, through
a model.keras bundle in a fresh process, and in the training settings."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="the models need TensorFlow: pip install 'climnb[train]'")

from climnb.models import build_model  # noqa: E402
from climnb.models.losses import soft_dice_loss, weighted_cross_entropy  # noqa: E402
from climnb.models.presets import (  # noqa: E402
    POLEWARD_SCALE,
    get_config,
    resolve_channels,
    resolve_poleward,
)

CHANNELS = ["TMQ", "U850", "V850"]
MINVAL, MAXVAL = np.array([2.0, -30.0, -25.0]), np.array([70.0, 30.0, 35.0])


def _overrides(**more):
    return resolve_poleward({"poleward_channel": True, **more}, CHANNELS, MINVAL, MAXVAL)


def test_resolve_poleward_takes_the_two_channels_statistics():
    settings = _overrides()["poleward_channel"]
    assert settings == {
        "tmq": 0,
        "v850": 2,
        "minval": [2.0, -25.0],
        "maxval": [70.0, 35.0],
        "scale": POLEWARD_SCALE,
    }
    assert resolve_poleward({"growth_rate": 6}, CHANNELS, MINVAL, MAXVAL) == {"growth_rate": 6}
    with pytest.raises(ValueError, match="V850 not among channels"):
        resolve_poleward({"poleward_channel": True}, ["TMQ", "U850"], MINVAL, MAXVAL)
    with pytest.raises(ValueError, match="needs the normalisation"):
        build_model("tiramisu", (32, 48, 3), preset="toy", poleward_channel=True)
    with pytest.raises(ValueError, match="missing maxval"):
        get_config("tiramisu", "toy", poleward_channel={"tmq": 0, "v850": 2, "minval": [0, 0]})


def test_ivt_channel_is_the_transport_the_teacher_thresholds():
    from climnb.labels.ar import ivt_magnitude

    overrides = resolve_channels({"ivt_channel": True}, CHANNELS, MINVAL, MAXVAL)
    assert overrides["ivt_channel"] == {
        "tmq": 0,
        "v850": 2,
        "u850": 1,
        "minval": [2.0, -25.0, -30.0],
        "maxval": [70.0, 35.0, 30.0],
        "scale": POLEWARD_SCALE,
    }
    with pytest.raises(ValueError, match="U850 not among channels"):
        resolve_channels({"ivt_channel": True}, ["TMQ", "V850"], MINVAL, MAXVAL)
    with pytest.raises(ValueError, match="ivt_channel needs .*missing u850"):
        settings = {k: v for k, v in overrides["ivt_channel"].items() if k != "u850"}
        get_config("tiramisu", "toy", ivt_channel=settings)
    model = build_model("tiramisu", (32, 48, 3), preset="toy", **overrides)
    x = np.random.default_rng(1).random((2, 32, 48, 3)).astype(np.float32)
    out = np.asarray(model.get_layer("transport")(x))
    np.testing.assert_array_equal(out[..., :3], x)
    fields = {"TMQ": x[..., 0] * 68 + 2, "U850": x[..., 1] * 60 - 30, "V850": x[..., 2] * 60 - 25}
    np.testing.assert_allclose(out[..., 3], ivt_magnitude(fields) / POLEWARD_SCALE, rtol=1e-5)


def test_poleward_channel_is_the_physical_transport_towards_the_pole(tmp_path):
    from climnb.bundle import load_bundle, save_bundle

    model = build_model("tiramisu", (32, 48, 3), preset="toy", **_overrides(ivt_channel=True))
    assert model.get_layer("stem_conv").kernel.shape[-2] == 5  # the stem sees 3 + 2
    rng = np.random.default_rng(0)
    x = rng.random((2, 32, 48, 3)).astype(np.float32)  # min-max normalised fields
    out = np.asarray(model.get_layer("poleward")(x))
    np.testing.assert_array_equal(out[..., :3], x)  # the inputs pass unchanged
    tmq = x[..., 0] * 68.0 + 2.0  # the physical fields, undone by hand
    v850 = x[..., 2] * 60.0 - 25.0
    hemisphere = np.where(np.arange(32) < 16, -1.0, 1.0)[None, :, None]  # ascending rows
    np.testing.assert_allclose(out[..., 3], tmq * v850 * hemisphere / POLEWARD_SCALE, rtol=1e-5)
    # northward wind in the south is equatorward: negative there, positive in the north
    north = np.zeros((1, 32, 48, 3), np.float32)
    north[..., 0], north[..., 2] = 1.0, 1.0  # TMQ 70, V850 +35
    plane = np.asarray(model.get_layer("poleward")(north))[0, :, 5, 3]
    assert (plane[:16] < 0).all() and (plane[16:] > 0).all()

    bundle = save_bundle(
        model,
        tmp_path / "m",
        channels=CHANNELS,
        minval=MINVAL,
        maxval=MAXVAL,
        name="tiramisu",
        preset="toy",
        overrides=_overrides(ivt_channel=True),
    )
    expected = np.asarray(model(x))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", expected)
    # a fresh process loads model.keras (the layer registered on load) and rebuilds it for
    # another grid from the bundle's overrides
    script = textwrap.dedent(
        f"""
        import numpy as np
        from climnb.bundle import load_bundle
        b = load_bundle({str(bundle)!r})
        x = np.load({str(tmp_path / "x.npy")!r})
        m = b.model(32, 48)
        np.testing.assert_allclose(np.asarray(m(x)), np.load({str(tmp_path / "expected.npy")!r}),
                                   atol=1e-5)
        big = b.model(64, 96)
        assert big.get_layer("poleward").output.shape[-1] == 4
        assert big.get_layer("transport").output.shape[-1] == 5
        print("ok")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]
    assert load_bundle(bundle).overrides["poleward_channel"]["v850"] == 2


def test_soft_dice_falls_for_a_better_mask_and_stays_finite():
    labels = np.zeros((2, 16, 16), np.int32)
    labels[:, 4:8, 4:8] = 1  # a storm
    labels[:, 10:12, :] = 2  # a river
    onehot = np.eye(3, dtype=np.float32)[labels]
    good = 6.0 * onehot  # confident and right
    shifted = 6.0 * np.eye(3, dtype=np.float32)[np.roll(labels, 2, axis=2)]  # edges off
    losses = [float(soft_dice_loss(labels, logits)) for logits in (good, shifted)]
    assert 0 <= losses[0] < 0.02 < losses[1] <= 1  # a better mask, a lower loss
    assert float(soft_dice_loss(onehot, good)) == pytest.approx(losses[0], abs=1e-6)  # soft
    empty = np.zeros((1, 8, 8), np.int32)  # no event at all: finite, near 0 if none predicted
    value = float(soft_dice_loss(empty, np.zeros((1, 8, 8, 3), np.float32)))
    assert np.isfinite(value) and 0 < value < 1
    total = weighted_cross_entropy(labels, shifted, [1.0, 2.0, 2.0]) + soft_dice_loss(
        labels, shifted
    )
    assert np.isfinite(float(total))


def test_train_config_dice_weight_and_poleward_switch():
    from climnb.train.config import TrainConfig

    config = TrainConfig(data_dir="d", dice_weight=0.5, model_overrides={"poleward_channel": True})
    assert config.dice_weight == 0.5 and TrainConfig(data_dir="d").dice_weight == 1.0
    with pytest.raises(ValueError, match="dice_weight must be 0 or more"):
        TrainConfig(data_dir="d", dice_weight=-1.0)
    with pytest.raises(ValueError, match="poleward_channel must be true or false"):
        TrainConfig(data_dir="d", model_overrides={"poleward_channel": "yes"})
