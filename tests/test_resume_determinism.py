"""A run resumed from a checkpoint ends with the same bytes as an uninterrupted one: the same
weights, optimiser state and dropout seed states (Keras keeps the seed generators' states out of
``get_weights``; before checkpoints held them, a run resumed with dropout on drew other masks
than an uninterrupted one, and ended with other weights)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from _training import TINY, config_file, write_toy_samples

pytest.importorskip("keras", reason="training needs TensorFlow/Keras: pip install 'climnb[train]'")

from climnb.cli import main  # noqa: E402
from climnb.train.checkpoint import latest, load_checkpoint  # noqa: E402

STEPS = 4


def _arrays(path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files if k != "state"}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Four steps (two epochs), a checkpoint every two, dropout on (the toy preset's 0.2)."""
    root = tmp_path_factory.mktemp("resume")
    data = write_toy_samples(root / "samples", n_time=10, seed=5)
    config = config_file(root / "config.json", model_overrides={**TINY, "dropout": 0.2})

    def argv(out):
        return [
            "train", "--data", str(data), "--out", str(out), "--config", str(config),
            "--max-steps", str(STEPS), "--epochs", str(STEPS), "--batch-size", "2",
            "--threads", "1", "--checkpoint-every", "2", "--seed", "0",
        ]  # fmt: skip

    out = root / "run"
    assert main(argv(out)) == 0
    return out, argv


def test_checkpoints_hold_the_dropout_seed_states(uninterrupted):
    out, _ = uninterrupted
    ckpt = load_checkpoint(latest(out / "checkpoints"))
    assert ckpt.seed_states, "no seed generator state in the checkpoint"
    start = load_checkpoint(sorted((out / "checkpoints").glob("ckpt-*.npz"))[0])
    # the generators moved on between the two checkpoints: their state is worth keeping
    assert any(
        not np.array_equal(a, b) for a, b in zip(start.seed_states, ckpt.seed_states, strict=True)
    )


def test_a_run_resumed_from_a_checkpoint_ends_with_the_same_bytes(uninterrupted, tmp_path):
    out, argv = uninterrupted
    resumed = tmp_path / "run"
    shutil.copytree(out, resumed)
    # as if killed after the checkpoint of step 2: the last checkpoint and the bundle are gone
    last = latest(resumed / "checkpoints")
    assert last.name == f"ckpt-{STEPS:08d}.npz"
    last.unlink()
    shutil.rmtree(resumed / "model")
    assert latest(resumed / "checkpoints").name == "ckpt-00000002.npz"
    assert main(argv(resumed)) == 0
    want, got = _arrays(latest(out / "checkpoints")), _arrays(latest(resumed / "checkpoints"))
    assert sorted(want) == sorted(got)
    differ = [k for k in want if not np.array_equal(want[k], got[k])]
    assert not differ, f"{len(differ)} of {len(want)} arrays differ after the resume: {differ[:5]}"
