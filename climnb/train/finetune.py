"""The expert loop's last step: fine-tune a network on expert labels, score before and after.

A network pretrained on the heuristic teacher (notebook 04) learnt the teacher's defects with
its skill. A few steps labelled by a person (:mod:`climnb.viz.annotate`, in the ClimateNet
layout) are the usual way to spend scarce expert labels: fine-tune from the pretrained weights
(:mod:`climnb.train.init_from`) on them, then compare, on held-out steps and against the expert
reference, the teacher, the network before and the network after, each with a spread from a
bootstrap over the steps (steps are the unit that events come in).

On the synthetic world the generator's truth stands in for the expert
(:func:`expert_stand_in`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from climnb.bundle import META_FILE, load_bundle
from climnb.data import synthetic
from climnb.inference.postprocess import teacher_config
from climnb.io.sampleset import SampleSet, write_sample_set
from climnb.labels import LabelConfig, compute, label_dataset
from climnb.labels.expert import write_expert_folder, write_expert_set
from climnb.labels.scores import class_iou
from climnb.train.config import TrainConfig
from climnb.train.loop import train

__all__ = [
    "FineTune",
    "expert_stand_in",
    "fine_tune",
    "heldout_series",
    "pretrained",
    "scores_with_spread",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


@dataclass(frozen=True)
class FineTune:
    """Settings of a fine-tuning run from a parent bundle.

    Attributes
    ----------
    epochs : passes over the expert steps' training split.
    learning_rate : of the fine-tuning (lower than pretraining's: it starts trained).
    freeze_blocks : encoder blocks whose weights stay the parent's.
    batch_size : samples per step.
    seed : of the weights' shuffling and the split.
    validation : fraction of the expert steps kept for choosing the best epoch.
    warmup_steps : linear warm-up of the learning rate.
    class_weighting : of the cross entropy (:class:`climnb.train.config.TrainConfig`).
    dice_weight : of the soft-Dice term added to it.
    """

    epochs: int = 12
    learning_rate: float = 1e-3
    freeze_blocks: int = 0
    batch_size: int = 2
    seed: int = 0
    validation: float = 0.25
    warmup_steps: int = 4
    class_weighting: str = "deepcam"
    dice_weight: float = 1.0


def expert_stand_in(
    folder: PathLike, *, n_time: int = 16, seed: int = 2000, every: int = 1, **grid
) -> list[Path]:
    """``n_time`` synthetic steps (generator ``seed``, a series no other notebook uses)
    labelled with the generator's truth as labeller 0, in the ClimateNet layout: the stand-in
    for a person's corrections. ``every``: take every so many steps of a series that long
    (a person labels steps days apart, which hold more distinct storms than neighbours do)."""
    skip = [(t, 0) for t in range(n_time * every) if t % every]
    return write_expert_folder(
        folder, labellers=("truth",), n_time=n_time * every, seed=seed, skip=skip, **grid
    )


def fine_tune(
    parent: PathLike,
    expert: PathLike,
    out_dir: PathLike,
    settings: FineTune = FineTune(),
) -> Path:
    """Fine-tune the bundle (or run folder) ``parent`` on the ClimateNet-layout files
    ``expert`` (the consensus of their labellers); returns the new bundle (``out_dir/model``).

    The sample set goes to ``out_dir/samples``; the run's model and preset are the parent's.
    """
    out = Path(out_dir)
    bundle = load_bundle(_bundle_dir(parent))
    fractions = (1.0 - settings.validation, settings.validation, 0.0)
    write_expert_set(
        expert,
        out / "samples",
        labellers="majority",
        method="random",
        fractions=fractions,
        seed=settings.seed,
        overwrite=True,
    )
    config = TrainConfig(
        data_dir=str(out / "samples"),
        out_dir=str(out / "run"),
        model=bundle.name,
        preset=bundle.preset,
        channels=bundle.channels,
        init_from=str(parent),
        freeze_blocks=settings.freeze_blocks,
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        seed=settings.seed,
        resume=False,
        augment="roll",
        class_weighting=settings.class_weighting,
        dice_weight=settings.dice_weight,
        optimizer={"learning_rate": settings.learning_rate, "warmup_steps": settings.warmup_steps},
        read_workers=0,
    )
    result = train(config)
    return Path(result.bundle)


def _bundle_dir(path: PathLike) -> Path:
    """A bundle folder, from itself or from the run folder holding it."""
    p = Path(path)
    return p / "model" if (p / "model" / META_FILE).exists() else p


def pretrained(model_path: PathLike, *, max_steps: int = 200, samples: PathLike = "") -> Path:
    """The bundle at ``model_path`` (notebook 04's); where there is none, a toy network is
    trained there first for ``max_steps`` steps on toy sample files (``samples``: 64 steps
    with the generator's truth, made if missing), so that the expert loop also runs alone."""
    bundle = _bundle_dir(model_path)
    if (bundle / META_FILE).exists():
        return bundle
    run = bundle.parent
    log.info("no model bundle at %s: training a toy network there (%d steps)", bundle, max_steps)
    data = Path(samples or run.parent / "pretrain-samples")
    if not (data / "stats.h5").exists() or not SampleSet.open(data).files("train"):
        ds, _ = synthetic.make_dataset(n_time=64, seed=0)  # the toy truth as labels
        write_sample_set(ds, "truth", data, seed=0, overwrite=True)
    config = TrainConfig(
        data_dir=str(data),
        out_dir=str(run),
        max_steps=max_steps,
        epochs=100,
        read_workers=0,
        class_weighting="deepcam",
        optimizer={"learning_rate": 2.5e-3, "warmup_steps": 10},
    )
    return Path(train(config).bundle)


def heldout_series(
    model_path: PathLike, *, n_time: int = 32, seed: int = 1000, **grid
) -> tuple[xr.Dataset, xr.DataArray]:
    """Held-out steps with their truth (generator ``seed``: the independent series of notebook
    05, which no training series shares) and the heuristic teacher's labels of them, made with
    the teacher's settings the bundle records (else the labeller's defaults)."""
    ds, _ = synthetic.make_dataset(n_time=n_time, seed=seed, **grid)
    config = teacher_config(load_bundle(_bundle_dir(model_path))) or LabelConfig()
    teacher, _ = compute(*label_dataset(ds, config))
    return ds, teacher


def scores_with_spread(
    truth: xr.DataArray,
    masks: dict[str, xr.DataArray],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    interval: tuple[float, float] = (5, 95),
) -> pd.DataFrame:
    """IoU of each mask against ``truth`` per class over all steps, with a bootstrap interval
    over the steps (``n_boot`` resamples of the steps with replacement, IoU of each resample
    from its summed counts).

    Returns one row per mask, columns ``TC``, ``TC low``, ``TC high``, ``AR``, ``AR low``,
    ``AR high``.

    >>> t = xr.DataArray(np.array([[[0, 1]], [[2, 2]]]), dims=("time", "lat", "lon"))
    >>> scores_with_spread(t, {"same": t}, n_boot=10).loc["same", ["TC", "AR"]].tolist()
    [1.0, 1.0]
    """
    rng = np.random.default_rng(seed)
    ref = truth.transpose("time", ...).values
    n = ref.shape[0]
    draws = rng.integers(0, n, size=(n_boot, n))
    rows = {}
    for name, mask in masks.items():
        given = mask.sel(time=truth.time).transpose("time", ...).values
        counts = _counts(given, ref)  # (time, class, [intersection, union])
        row = {}
        whole = class_iou(given, ref)[0]
        boot = counts[draws].sum(axis=1)  # (n_boot, class, 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            ious = boot[..., 0] / boot[..., 1]
        for k, label in ((1, "TC"), (2, "AR")):
            low, high = np.nanpercentile(ious[:, k], interval) if n else (np.nan, np.nan)
            row.update({label: whole[k], f"{label} low": low, f"{label} high": high})
        rows[name] = row
    return pd.DataFrame(rows).T


def _counts(given: np.ndarray, ref: np.ndarray) -> np.ndarray:
    out = np.zeros((given.shape[0], 3, 2), np.int64)
    for k in (1, 2):
        a, b = given == k, ref == k
        out[:, k, 0] = (a & b).sum(axis=(1, 2))
        out[:, k, 1] = (a | b).sum(axis=(1, 2))
    return out
