"""Fine-tuning from another run's weights: ``climnb train --init-from`` and ``init_from=``."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
from _training import TINY, toy_config, write_toy_samples

from climnb.bundle import load_bundle, save_bundle
from climnb.cli import main
from climnb.commands.train import config_from_args
from climnb.io.stats import read_stats
from climnb.models import build_model
from climnb.train.init_from import InitFromError, freeze_blocks, init_weights, open_parent
from climnb.train.loop import train

PARENT_CHANNELS = ("TMQ", "U850", "V850", "PSL", "T200", "T500")


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """A run trained 2 steps on 6 channels of toy samples: its folder."""
    root = tmp_path_factory.mktemp("parent")
    data = write_toy_samples(root / "samples", n_time=10, seed=3)
    out = root / "run"
    train(toy_config(data, out, channels=PARENT_CHANNELS, max_steps=2))
    return out


@pytest.fixture(scope="module")
def other_grid(tmp_path_factory):
    """Sample files on another grid (128 x 192) than the parent's."""
    return write_toy_samples(
        tmp_path_factory.mktemp("small"), n_time=10, seed=5, n_lat=128, n_lon=192
    )


def _by_name(model) -> dict[str, list[np.ndarray]]:
    return {layer.name: layer.get_weights() for layer in model.layers if layer.weights}


def _tiny(shape):
    return build_model("tiramisu", shape, preset="toy", **TINY)


def test_weights_equal_the_parents_after_init_on_another_grid(parent):
    p = open_parent(parent)  # the run folder: its model/ bundle
    model = _tiny((64, 96, len(PARENT_CHANNELS)))
    assert init_weights(model, p, PARENT_CHANNELS) == len(_by_name(model))
    theirs = _by_name(p.bundle.model())
    for name, weights in _by_name(model).items():
        for a, b in zip(weights, theirs[name], strict=True):
            np.testing.assert_array_equal(a, b)


def test_channel_subset_is_mapped_by_name(parent):
    p = open_parent(parent / "model")
    subset = ("PSL", "TMQ")  # another order than the parent's
    model = _tiny((96, 144, len(subset)))
    init_weights(model, p, subset)
    mine, theirs = _by_name(model), _by_name(p.bundle.model())
    np.testing.assert_array_equal(mine["stem_conv"][0], theirs["stem_conv"][0][:, :, [3, 0], :])
    np.testing.assert_array_equal(mine["logits"][0], theirs["logits"][0])


def test_freeze_blocks_freezes_the_first_encoder_block():
    model = _tiny((64, 96, 2))
    frozen = freeze_blocks(model, 1)
    assert frozen[0].startswith("stem") and any(n.startswith("down1") for n in frozen)
    assert not any(n.startswith(("bottleneck", "up", "logits")) for n in frozen)
    with pytest.raises(InitFromError, match="only 1 blocks"):
        freeze_blocks(_tiny((64, 96, 2)), 2)


def test_fine_tuned_run_records_its_parent_on_another_grid(parent, other_grid, tmp_path):
    out = tmp_path / "tuned"
    config = toy_config(
        other_grid,
        out,
        channels=("PSL", "TMQ"),
        init_from=str(parent),
        freeze_blocks=1,
        max_steps=2,
        model_overrides={},  # the parent's are taken
        optimizer={"learning_rate": 1e-2},
    )
    train(config)
    bundle, p = load_bundle(out / "model"), open_parent(parent)
    record = bundle.extra["parent"]
    assert record["sha256"] == p.sha256 and Path(record["path"]) == (parent / "model").resolve()
    assert record["channels"] == list(PARENT_CHANNELS)
    assert bundle.input_shape[:2] == (128, 192) and bundle.channels == ("PSL", "TMQ")
    np.testing.assert_array_equal(bundle.minval, p.bundle.minval[[3, 0]])  # its normalisation
    mine, theirs = _by_name(bundle.model()), _by_name(p.bundle.model())
    np.testing.assert_array_equal(mine["stem_conv"][0], theirs["stem_conv"][0][:, :, [3, 0], :])
    assert not np.array_equal(mine["logits"][0], theirs["logits"][0])  # trained


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--model", "deeplab"], "the parent is a tiramisu network, this run trains a deeplab"),
        (["--preset", "small"], "give --preset toy"),
    ],
    ids=["model type", "preset"],
)
def test_another_model_is_one_line_and_writes_nothing(
    parent, other_grid, tmp_path, capsys, flags, said
):
    out = tmp_path / "tuned"
    argv = ["train", "--data", str(other_grid), "--out", str(out), "--init-from", str(parent)]
    assert main([*argv, *flags]) != 0
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_unmappable_channel_is_one_line_and_writes_nothing(parent, other_grid, tmp_path, capsys):
    out = tmp_path / "tuned"
    config = tmp_path / "c.json"
    config.write_text('{"channels": ["TMQ", "ZBOT"], "split_method": "random"}')
    argv = ["train", "--data", str(other_grid), "--out", str(out), "--init-from", str(parent)]
    assert main([*argv, "--config", str(config)]) != 0
    err = capsys.readouterr().err.strip()
    assert "ZBOT" in err and "cannot be mapped" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_freeze_blocks_needs_init_from(other_grid, tmp_path, capsys):
    argv = [
        "train",
        "--data",
        str(other_grid),
        "--out",
        str(tmp_path / "x"),
        "--freeze-blocks",
        "1",
    ]
    assert main(argv) != 0
    assert "give init_from" in capsys.readouterr().err


def _bundle_of(folder, stats, model, preset, overrides) -> Path:
    """An untrained ``model`` network saved as a bundle for the sample set's channels."""
    net = build_model(model, (128, 192, len(stats.channels)), preset=preset, **overrides)
    return save_bundle(
        net,
        folder,
        channels=stats.channels,
        minval=stats.minval,
        maxval=stats.maxval,
        name=model,
        preset=preset,
        overrides=overrides,
    )


def test_cli_fine_tune_builds_the_parents_preset(other_grid, tmp_path, capsys):
    stats = read_stats(other_grid / "stats.h5")
    parent = _bundle_of(tmp_path / "parent", stats, "tiramisu", "small", TINY)
    out = tmp_path / "tuned"
    config = tmp_path / "c.json"
    config.write_text('{"split_method": "random", "max_steps": 1, "threads": 1}')
    argv = ["train", "--data", str(other_grid), "--init-from", str(parent), "--config", str(config)]
    assert main([*argv, "--out", str(out)]) == 0  # no --preset: the parent's
    bundle = load_bundle(out / "model")
    assert (bundle.name, bundle.preset, bundle.overrides) == ("tiramisu", "small", TINY)
    assert main([*argv, "--out", str(tmp_path / "x"), "--preset", "toy"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert "the parent is tiramisu preset 'small', this run asks for 'toy'" in err[-1]
    assert not (tmp_path / "x").exists()


def test_cli_fine_tune_takes_the_parents_model(other_grid, tmp_path, capsys):
    stats = read_stats(other_grid / "stats.h5")
    parent = _bundle_of(tmp_path / "parent", stats, "deeplab", "toy", {})
    args = Namespace(data=str(other_grid), init_from=str(parent))  # no --model: the parent's
    assert config_from_args(args).model == "deeplab"
    argv = ["train", "--data", str(other_grid), "--init-from", str(parent)]
    assert main([*argv, "--out", str(tmp_path / "x"), "--model", "tiramisu"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert "the parent is a deeplab network, this run trains a tiramisu" in err[-1]
    assert not (tmp_path / "x").exists()
