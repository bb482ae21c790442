"""The toy training set-up the training tests share: sample files with their statistics, a
network as small as the Tiramisu allows, and a :class:`TrainConfig` (or a ``--config`` file) for
a short run on one thread.

Most of a test run's cost is TensorFlow tracing the training step, which grows with the number
of layers, not with the grid: :data:`TINY` keeps the Tiramisu's topology (stem, a dense block,
a transition down, the bottleneck, a transition up, a dense block, the classifier) with one
layer in each dense block, about half the toy preset's layers.
"""

from __future__ import annotations

import json
from pathlib import Path

from climnb.data.synthetic import make_dataset
from climnb.io.samples import write_samples
from climnb.io.stats import compute_stats, write_stats
from climnb.train.config import TrainConfig

# the smallest Tiramisu: one dense-block layer down, one in the bottleneck; a list, as a JSON
# --config file and a bundle's recorded overrides give it back
TINY = {"growth_rate": 4, "initial_filters": 8, "blocks": [1, 1]}


def write_toy_samples(folder, n_time: int, seed: int, **grid) -> Path:
    """``n_time`` toy sample files in ``folder`` (synthetic data drawn with ``seed``, on the toy
    grid unless ``n_lat``/``n_lon`` say otherwise) and their ``stats.h5``; returns ``folder``."""
    folder = Path(folder)
    ds, _ = make_dataset(n_time=n_time, seed=seed, **grid)
    write_stats(compute_stats(write_samples(ds, "truth", folder)), folder / "stats.h5")
    return folder


def toy_settings(**kw) -> dict:
    """The settings of a toy run: :data:`TINY`, batch 2, one epoch, one thread, a random split
    (so that 20 files give 16 for training, 2 for validation); ``kw`` overrides them."""
    base = dict(
        model_overrides=TINY,
        batch_size=2,
        epochs=1,
        threads=1,
        split_method="random",
    )
    return {**base, **kw}


def toy_config(data, out, **kw) -> TrainConfig:
    """A :class:`TrainConfig` reading ``data`` and writing ``out``, with :func:`toy_settings`."""
    return TrainConfig(**toy_settings(data_dir=str(data), out_dir=str(out), **kw))


def config_file(path, **settings) -> Path:
    """A ``--config`` JSON file at ``path`` with :data:`TINY` and a random split, plus
    ``settings`` (the command line gives the rest)."""
    path = Path(path)
    path.write_text(json.dumps({"model_overrides": TINY, "split_method": "random", **settings}))
    return path
