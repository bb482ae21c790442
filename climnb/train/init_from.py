"""Start a training run from another run's weights: fine-tuning (``climnb train --init-from``).

The parent is a model bundle (:mod:`climnb.bundle`) or the run folder holding one
(``RUN/model``), as ``climnb predict --model`` takes. The new run

* builds the parent's architecture for the new grid size: its model and preset where the run
  names none (:func:`parent_architecture`), its model overrides where the run gives none; a run
  that names another model or preset is refused, naming both. The networks are fully
  convolutional, so the weights fit any multiple of the stride;
* takes every weight of the parent by layer name; the layers that read the input fields (the
  first convolution, DeepLab's input skip) get the parent's kernels of the run's channels,
  picked by channel name, so a run on a subset or another order of the parent's channels starts
  where the parent was;
* normalises its channels as the parent did (the parent's min-max), so those kernels see the
  values they were trained on;
* may freeze its first ``freeze_blocks`` blocks (a block: the layers up to and including a
  downsampling of the encoder);
* records the parent (path, SHA-256 of its files, architecture, channels) in its own bundle's
  metadata (``extra["parent"]``).

Checks come before anything is written: a channel the parent lacks, or another model type,
is one line naming it and the option to fix it (:class:`InitFromError`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from climnb.bundle import META_FILE, Bundle, BundleError, load_bundle
from climnb.io.manifest import sha256_file
from climnb.io.sampleset import SampleSet
from climnb.io.stats import Stats
from climnb.models.presets import get_config
from climnb.train.config import TrainConfig

__all__ = [
    "InitFromError",
    "Parent",
    "open_parent",
    "parent_architecture",
    "check_parent",
    "inherit",
    "parent_stats",
    "init_weights",
    "freeze_blocks",
    "channel_index",
    "with_parent",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


class InitFromError(ValueError):
    """A parent whose weights cannot start this run (another model, a channel it lacks)."""


@dataclass(frozen=True)
class Parent:
    """The bundle a run starts from, and its identity.

    Attributes
    ----------
    bundle : the parent :class:`climnb.bundle.Bundle`.
    sha256 : SHA-256 over the bundle's files: of the lines ``NAME SHA256`` of each file
        (``climnb.json``, ``model.keras``), in name order.
    given : the path as given (a run folder or the bundle itself).
    """

    bundle: Bundle
    sha256: str
    given: str

    def record(self) -> dict:
        """What the new bundle keeps of its parent (``extra["parent"]``)."""
        b = self.bundle
        return {
            "path": str(Path(b.path).resolve()),
            "given": self.given,
            "sha256": self.sha256,
            "model": b.name,
            "preset": b.preset,
            "channels": list(b.channels),
            "steps": b.extra.get("steps"),
            "weights_step": b.extra.get("weights_step"),
        }


def open_parent(path: PathLike) -> Parent:
    """The bundle at ``path``: a bundle folder, or a run folder holding ``model/``."""
    p = Path(path)
    if not (p / META_FILE).is_file() and (p / "model" / META_FILE).is_file():
        p = p / "model"
    try:
        bundle = load_bundle(p)
    except BundleError as err:
        raise InitFromError(f"--init-from {path}: {err}") from None
    digest = hashlib.sha256()
    for f in sorted(q for q in p.iterdir() if q.is_file()):
        digest.update(f"{f.name} {sha256_file(f)}\n".encode())
    return Parent(bundle, digest.hexdigest(), str(path))


def parent_architecture(settings: dict) -> dict:
    """``settings`` (:class:`climnb.train.config.TrainConfig` fields, as typed) with the
    parent's ``model`` and ``preset`` where they name none: a fine-tune builds its parent's
    network unless told otherwise (a different one is then refused by :func:`check_parent`).

    Without ``init_from``, or with both named, ``settings`` come back as given.
    """
    if not settings.get("init_from") or {"model", "preset"} <= settings.keys():
        return settings
    b = open_parent(settings["init_from"]).bundle
    return {"model": b.name, "preset": b.preset, **settings}


def _canonical(name: str) -> str:
    return type(get_config(name, "toy")).__name__


def check_parent(parent: Parent, model: str, preset: str, channels: Sequence[str]) -> None:
    """Refuse a parent of another model type or preset, or one that lacks a channel of the
    run's (each in one line naming the option that fixes it)."""
    b = parent.bundle
    try:
        same = _canonical(b.name) == _canonical(model)
    except (ValueError, TypeError):
        same = False
    if not same:
        raise InitFromError(
            f"--init-from {parent.given}: the parent is a {b.name} network, this run trains a "
            f"{model} (--model): give --model {b.name}, or another parent"
        )
    if b.preset != preset:
        raise InitFromError(
            f"--init-from {parent.given}: the parent is {b.name} preset {b.preset!r}, this run "
            f"asks for {preset!r} (--preset): its weights fit only its own preset; give "
            f"--preset {b.preset}"
        )
    channel_index(parent, channels)


def channel_index(parent: Parent, channels: Sequence[str]) -> list[int]:
    """Where each of ``channels`` is among the parent's input channels (by name)."""
    known = list(parent.bundle.channels)
    missing = [c for c in channels if c not in known]
    if missing:
        raise InitFromError(
            f"--init-from {parent.given}: channel(s) {', '.join(missing)} of this run cannot be "
            f"mapped: the parent was trained on {', '.join(known)}; train on a subset of "
            "those (channels)"
        )
    return [known.index(c) for c in channels]


def inherit(config, parent: Parent):
    """``config`` with the parent's model overrides where it gives none (the architecture's
    settings beyond the preset: the parent's weights fit only them)."""
    if config.model_overrides:
        return config
    recorded = parent.bundle.extra.get("train_config", {}).get("model_overrides")
    if recorded is None:  # a bundle written outside training: its resolved overrides
        recorded = parent.bundle.overrides
    return config.replace(model_overrides=dict(recorded or {}))


def with_parent(config: TrainConfig) -> tuple[TrainConfig, Parent | None]:
    """The bundle ``init_from`` names, checked against the run's model and channels, and the
    run's settings with what it inherits from it; ``(config, None)`` without ``init_from``."""
    if not config.init_from:
        return config, None
    parent = open_parent(config.init_from)
    channels = config.channels or SampleSet.open(config.data_dir).channels
    check_parent(parent, config.model, config.preset, channels)
    return inherit(config, parent), parent


def parent_stats(stats: Stats, parent: Parent) -> Stats:
    """``stats`` with the parent's min-max normalisation for the channels the parent knows
    (the run's inputs then reach the parent's kernels as they did in its training)."""
    minval, maxval = stats.minval.copy(), stats.maxval.copy()
    known = list(parent.bundle.channels)
    for i, name in enumerate(stats.channels):
        if name in known:
            j = known.index(name)
            minval[i], maxval[i] = parent.bundle.minval[j], parent.bundle.maxval[j]
    return dataclasses.replace(stats, minval=minval, maxval=maxval)


def init_weights(model, parent: Parent, channels: Sequence[str]) -> int:
    """Give ``model`` the parent's weights, layer by layer (by name); returns how many layers.

    A kernel that differs from the parent's only along its input axis reads the input fields
    (and the channels the network computes from them, appended after them): its slices are
    picked by channel name. Any other difference is an :class:`InitFromError` naming the layer.
    """
    source = parent.bundle.model()
    index = channel_index(parent, channels)
    n_parent = len(parent.bundle.channels)
    by_name = {layer.name: layer for layer in source.layers if layer.weights}
    copied = 0
    for layer in model.layers:
        if not layer.weights:
            continue
        theirs = by_name.get(layer.name)
        if theirs is None or len(theirs.weights) != len(layer.weights):
            raise InitFromError(
                f"--init-from {parent.given}: layer {layer.name} has no counterpart in the "
                "parent: its model overrides differ (model_overrides)"
            )
        values = [
            _fit(np.asarray(w), tuple(v.shape), index, n_parent, layer.name, parent)
            for w, v in zip(theirs.get_weights(), layer.weights, strict=True)
        ]
        layer.set_weights(values)
        copied += 1
    log.info("%d layers initialised from %s", copied, parent.bundle.path)
    return copied


def _fit(w, shape, index, n_parent, name, parent) -> np.ndarray:
    if w.shape == shape:
        return w
    extra = w.shape[-2] - n_parent  # channels the network computes from its inputs
    same_rest = w.ndim == len(shape) and w.shape[:-2] + w.shape[-1:] == shape[:-2] + shape[-1:]
    if w.ndim >= 2 and same_rest and extra >= 0 and shape[-2] == len(index) + extra:
        picked = list(index) + list(range(n_parent, n_parent + extra))
        return np.take(w, picked, axis=-2)
    raise InitFromError(
        f"--init-from {parent.given}: layer {name}'s weights are {w.shape} in the parent, "
        f"{shape} here: the architecture differs (model_overrides)"
    )


def freeze_blocks(model, n: int) -> list[str]:
    """Freeze the first ``n`` blocks of the encoder: every layer up to and including its
    ``n``-th downsampling (a strided convolution or pooling); returns the frozen layers' names."""
    if n <= 0:
        return []
    frozen, seen = [], 0
    for layer in model.layers:
        if seen >= n:
            break
        if layer.weights:
            layer.trainable = False
            frozen.append(layer.name)
        strides = getattr(layer, "strides", None)
        transposed = "Transpose" in type(layer).__name__
        if strides is not None and not transposed and max(np.atleast_1d(strides)) > 1:
            seen += 1
    if seen < n:
        raise InitFromError(
            f"freeze_blocks (--freeze-blocks) {n}: the network has only {seen} blocks before "
            "its bottleneck; give fewer"
        )
    return frozen
