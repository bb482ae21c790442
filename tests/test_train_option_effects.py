"""What the training options of ``climnb train`` do, seen in what a run writes.

Each run goes through the command line (``climnb.cli.main``) on the same toy sample set, with
the same seed, one thread, batch 1 and float32 compute, so that two runs differ only by the
option under test: the first step's loss is that of the same initial weights on the same
sample, and the second step's loss shows whatever the first update did. The flags' effects
are read from the run's ``history.csv`` (loss and learning rate after each step) and from the
model bundle's saved Keras network (its layers, their dtype policy and settings).
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter

import pandas as pd
import pytest
from _training import TINY, write_toy_samples

from climnb.cli import main
from climnb.models.presets import PRESETS

pytestmark = pytest.mark.slow

LR = 0.01
#: what every run shares; the tests add the option under test
COMMON = [
    "--batch-size", "1", "--threads", "1", "--seed", "0", "--precision", "float32",
    "--lr", str(LR), "--lr-decay", "none", "--no-resume",
]  # fmt: skip


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The sample set (6 steps: 4 for training) and two ``--config`` files: the smallest
    Tiramisu, and no model settings at all (for another network)."""
    root = tmp_path_factory.mktemp("train-options")
    data = write_toy_samples(root / "samples", n_time=6, seed=3)
    tiny = root / "tiny.json"
    tiny.write_text(json.dumps({"model_overrides": TINY, "split_method": "random"}))
    plain = root / "plain.json"
    plain.write_text(json.dumps({"split_method": "random"}))
    return {"root": root, "data": data, "tiny": tiny, "plain": plain}


def _train(toy, name, *flags, steps=2, config="tiny"):
    """Run ``climnb train`` with ``flags``; its history (one row a step) and run folder."""
    out = toy["root"] / name
    argv = ["train", "--data", str(toy["data"]), "--out", str(out), "--config", str(toy[config])]
    assert main([*argv, *COMMON, "--max-steps", str(steps), *flags]) == 0
    history = pd.read_csv(out / "history.csv")
    assert history.step.tolist() == list(range(1, steps + 1))
    return history, out


def _network(run) -> dict:
    """The saved Keras network's configuration (``config.json`` inside ``model.keras``)."""
    with zipfile.ZipFile(run / "model" / "model.keras") as z:
        return json.loads(z.read("config.json"))


def _layers(run) -> list[dict]:
    return _network(run)["config"]["layers"]


@pytest.fixture(scope="module")
def plain_run(toy):
    """Two steps with none of the options under test."""
    return _train(toy, "plain")


def test_lr_decay_none_keeps_the_rate(plain_run):
    plain, _ = plain_run
    # the default, linear decay, would give 1/2 and 0 of LR after the two steps
    assert plain.lr.tolist() == pytest.approx([LR, LR], abs=1e-9)


def test_larc_changes_the_first_update_not_the_first_loss(toy, plain_run):
    plain, _ = plain_run
    larc, _ = _train(toy, "larc", "--larc")
    assert larc.loss[0] == plain.loss[0]  # the same weights on the same sample
    # LARC clips each layer's step to eta |w| / |g| of the learning rate: another update
    assert abs(larc.loss[1] - plain.loss[1]) > 1e-5


def test_gradient_lag_applies_no_update_at_the_first_step(toy, plain_run):
    plain, _ = plain_run
    lag, _ = _train(toy, "lag", "--gradient-lag")
    assert lag.loss[0] == plain.loss[0]
    # the first step applies the stored (zero) gradient: the second loss is still the initial
    # weights', higher than after the plain run's first update on the same sample
    assert lag.loss[1] > plain.loss[1] + 1e-4


def test_augment_changes_the_training_samples(toy, plain_run):
    plain, _ = plain_run
    rolled, _ = _train(toy, "augment", "--augment", "roll+mirror", steps=1)
    # the same initial weights on the same sample, rolled and maybe mirrored: another loss
    assert abs(rolled.loss[0] - plain.loss[0]) > 1e-6


def test_warmup_and_linear_decay_shape_the_learning_rate_and_preset_and_float16_the_network(
    toy,
):
    """One run for three independent effects: the schedule in the history, the preset's
    settings and the float16 compute in the saved network."""
    history, run = _train(
        toy,
        "schedule",
        *("--warmup-steps", "3", "--lr-decay", "linear", "--preset", "small"),
        "--mixed-precision",
        steps=4,
    )
    # the rate for the next step, after each step: up linearly over the 3 warm-up steps, then
    # linearly down to 0 after the run's last (without warm-up: 3/4, 1/2, 1/4, 0 of LR; without
    # decay: LR from the third step on)
    assert history.lr.tolist() == pytest.approx([LR * 2 / 3, LR, LR, 0.0], abs=1e-9)

    layers = _layers(run)
    small, toy_preset = PRESETS["tiramisu"]["small"], PRESETS["tiramisu"]["toy"]
    assert small.dropout > 0 == toy_preset.dropout  # what tells the two presets apart here
    dropout = [x["config"]["rate"] for x in layers if "Dropout" in x["class_name"]]
    assert dropout and set(dropout) == {small.dropout}
    norms = [x["config"] for x in layers if "BatchNormalization" in x["class_name"]]
    assert norms and {n["momentum"] for n in norms} == {small.batch_norm_momentum}
    convs = [x["config"] for x in layers if x["class_name"] == "Conv2D"]
    assert {c["kernel_regularizer"]["config"]["l2"] for c in convs} == {small.weight_decay}
    # --mixed-precision: float16 compute, float32 weights, in every layer with weights
    policies = Counter(
        x["config"]["dtype"]["config"]["name"]
        for x in layers
        if x["class_name"] in ("Conv2D", "Conv2DTranspose")
    )
    assert set(policies) == {"mixed_float16"}


def test_model_deeplab_trains_and_saves_a_deeplab_network(toy, plain_run):
    _, tiramisu = plain_run
    _, run = _train(toy, "deeplab", "--model", "deeplab", steps=1, config="plain")
    assert _network(tiramisu)["config"]["name"] == "tiramisu"
    net = _network(run)["config"]
    assert net["name"] == "deeplabv3plus"
    names = [x["config"]["name"] for x in net["layers"]]
    assert any("aspp" in n for n in names)  # the atrous spatial pyramid pooling
    toy_deeplab = PRESETS["deeplab"]["toy"]
    stem = [x for x in net["layers"] if x["class_name"] == "Conv2D"][0]
    assert stem["config"]["filters"] == toy_deeplab.root_filters
