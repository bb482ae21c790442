"""The settings of a training run: one frozen dataclass, loaded the same way from Python, the
command line and notebooks."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from climnb.models.precision import policy_name
from climnb.train.optim import OptimizerConfig

__all__ = ["TrainConfig"]


@dataclass(frozen=True)
class TrainConfig:
    """Everything a data-parallel training run needs; the same on every rank.

    Attributes
    ----------
    data_dir : folder with ``stats.h5`` and either ``train/`` and ``validation/`` folders of
        sample files (``data-*.h5``, as ``climnb samples`` writes them), or the sample files
        themselves, split here with ``split`` and ``split_seed``.
    out_dir : run folder: checkpoints, ``history.csv``, the trained model bundle ``model/``,
        and the ``STOP`` file that ends training cleanly after the current step.
    model, preset, model_overrides : network (``"tiramisu"`` or ``"deeplab"``), its preset
        (``"toy"``, ``"small"``, ``"paper"``) and field overrides (see :mod:`climnb.models`).
    batch_size : samples per rank per step (the global batch is ``batch_size * ranks``).
    epochs : passes over the training split.
    max_steps : stop after this many steps in all (``None``: run all epochs).
    optimizer : Adam/LARC/lag/schedule/mixed-precision settings; ``learning_rate`` is per rank.
    scale_lr : multiply the learning rate by the number of ranks (with ``warmup_steps``
        of linear warm-up, Goyal et al.), as the paper did.
    lr_decay : ``"linear"``: after the warm-up, decay the learning rate linearly to zero at the
        run's last step (overrides the optimizer's schedule); ``"none"``: the optimizer's
        ``schedule`` as given.
    class_weighting : ``"inverse_sqrt"`` (the paper's code), ``"deepcam"`` (freq^-0.125),
        ``"inverse"`` or ``"none"``; frequencies from ``stats.h5`` class counts when present.
    split_seed, split : seeded train/validation/test split of the files (fractions).
    seed : seed of weights and shuffling.
    validate_every : epochs between validations (the last epoch is always validated).
    checkpoint_every : steps between checkpoints (rank 0 writes; also at the end).
    keep_checkpoints : how many recent checkpoints to keep.
    resume : continue from the latest checkpoint in ``out_dir`` if there is one.
    channels : channel subset to train on (``None``: all 16).
    threads : compute threads per rank (``None``: TensorFlow's default).
    read_workers : reader processes of the input pipeline per rank (0: read in-process).
    data_autotune : tf.data's autotuner in the input pipeline (off: see
        :class:`climnb.pipeline.PipelineConfig`).
    precision : compute precision, float32 master weights: ``"float32"``, ``"mixed_bfloat16"``
        (fast on CPUs with AVX512_BF16/AMX; no loss scaling) or ``"mixed_float16"`` (turns on
        ``optimizer.mixed_precision``, its loss scaling); see :mod:`climnb.models.precision`.
    """

    data_dir: str
    out_dir: str = "runs/toy"
    model: str = "tiramisu"
    preset: str = "toy"
    model_overrides: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 2
    epochs: int = 4
    max_steps: int | None = None
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    scale_lr: bool = True
    lr_decay: str = "linear"
    class_weighting: str = "inverse_sqrt"
    split_seed: int = 0
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)
    seed: int = 0
    validate_every: int = 1
    checkpoint_every: int = 50
    keep_checkpoints: int = 2
    resume: bool = True
    channels: tuple[str, ...] | None = None
    threads: int | None = None
    read_workers: int = 1
    data_autotune: bool = False
    precision: str = "float32"

    def __post_init__(self):
        for name in (
            "batch_size",
            "epochs",
            "validate_every",
            "checkpoint_every",
            "keep_checkpoints",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.lr_decay not in ("linear", "none"):
            raise ValueError(f"lr_decay must be 'linear' or 'none', got {self.lr_decay!r}")
        if self.class_weighting not in ("inverse_sqrt", "deepcam", "inverse", "none"):
            raise ValueError(
                f"class_weighting must be inverse_sqrt, deepcam, inverse or none, "
                f"got {self.class_weighting!r}"
            )
        if isinstance(self.optimizer, Mapping):
            object.__setattr__(self, "optimizer", _optimizer(self.optimizer))
        object.__setattr__(self, "model_overrides", dict(self.model_overrides))
        precision, scaled = policy_name(self.precision), self.optimizer.mixed_precision
        if scaled and precision == "mixed_bfloat16":
            raise ValueError(
                "precision mixed_bfloat16 needs no loss scaling: unset mixed_precision"
            )
        if scaled or precision == "mixed_float16":  # float16 always with loss scaling
            precision = "mixed_float16"
            object.__setattr__(
                self, "optimizer", dataclasses.replace(self.optimizer, mixed_precision=True)
            )
        object.__setattr__(self, "precision", precision)

    @property
    def out(self) -> Path:
        return Path(self.out_dir)

    @property
    def stop_file(self) -> Path:
        """Create this file to end training after the current step (checkpoint kept)."""
        return self.out / "STOP"

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self), default=list))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown training settings {sorted(unknown)}; known: {sorted(names)}")
        d = dict(d)
        for key in ("split", "channels"):
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        return cls(**d)


def _optimizer(settings: Mapping[str, Any]) -> OptimizerConfig:
    opt = dict(settings)
    for key in ("boundaries", "factors"):
        if key in opt:
            opt[key] = tuple(opt[key])
    return OptimizerConfig(**opt)
