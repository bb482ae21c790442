"""The settings of a training run: frozen dataclasses, loaded the same way from Python, the
command line and notebooks (:class:`TrainConfig`, with its :class:`OptimizerConfig`); the one
place their defaults live. No TensorFlow here."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from climnb.models.precision import resolve_precision
from climnb.models.presets import get_config

__all__ = ["TrainConfig", "OptimizerConfig", "SCHEDULES", "LARC_MODES", "config_from_args"]


SCHEDULES = ("constant", "poly", "piecewise")
LARC_MODES = ("clip", "scale")


@dataclass(frozen=True)
class OptimizerConfig:
    """Settings of the optimiser and its learning-rate schedule.

    Attributes
    ----------
    learning_rate : base learning rate (reached at the end of the warm-up).
    beta_1, beta_2, epsilon : Adam's; epsilon as TensorFlow 1's Adam (1e-8).
    schedule : ``"constant"``; ``"poly"``: ``lr * (1 - t / decay_steps) ** power`` down to
        ``end_learning_rate``; ``"piecewise"``: ``lr`` until ``boundaries[0]``, then
        ``lr * factors[0]`` until ``boundaries[1]``, ... (the paper code's ``piece:`` mode).
        ``t`` counts steps after the warm-up, as do ``decay_steps`` and ``boundaries``.
    warmup_steps : linear warm-up ``lr * (step + 1) / warmup_steps`` over the first steps
        (0 for none).
    decay_steps, power, end_learning_rate : of the polynomial decay.
    boundaries, factors : of the piecewise decay; same length.
    larc : rescale each variable's gradient by LARC before Adam.
    larc_eta : LARC trust coefficient (the paper: 0.002).
    larc_mode : ``"clip"`` (the paper) or ``"scale"``.
    larc_epsilon : LARC's local rate when a variable or its gradient is all zero.
    gradient_lag : apply the previous step's gradient (the paper's "gradient lag").
    mixed_precision : dynamic loss scaling for float16 compute (build the model with
        ``mixed_precision=True`` too: float16 compute, float32 master weights).
    initial_loss_scale, loss_scale_growth_steps : of the dynamic loss scaling.
    """

    learning_rate: float = 1e-3
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8
    schedule: str = "constant"
    warmup_steps: int = 0
    decay_steps: int = 10_000
    power: float = 1.0
    end_learning_rate: float = 0.0
    boundaries: tuple[int, ...] = ()
    factors: tuple[float, ...] = ()
    larc: bool = False
    larc_eta: float = 0.002
    larc_mode: str = "clip"
    larc_epsilon: float = 1.0 / 16000.0
    gradient_lag: bool = False
    mixed_precision: bool = False
    initial_loss_scale: float = 2.0**15
    loss_scale_growth_steps: int = 2000

    def __post_init__(self):
        check_types(self, "optimizer.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.larc_mode not in LARC_MODES:
            raise ValueError(f"larc_mode must be one of {LARC_MODES}, got {self.larc_mode!r}")
        if len(self.boundaries) != len(self.factors):
            raise ValueError("boundaries and factors must have the same length")
        if list(self.boundaries) != sorted(self.boundaries):
            raise ValueError(f"boundaries must increase, got {self.boundaries}")
        if self.learning_rate <= 0:
            raise ValueError(f"need learning_rate > 0 (--lr), got {self.learning_rate!r}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps (--warmup-steps) must be >= 0, got {self.warmup_steps}")
        if self.decay_steps < 1:
            raise ValueError(f"decay_steps must be at least 1, got {self.decay_steps}")
        object.__setattr__(self, "boundaries", tuple(int(b) for b in self.boundaries))
        object.__setattr__(self, "factors", tuple(float(f) for f in self.factors))


@dataclass(frozen=True)
class TrainConfig:
    """Everything a data-parallel training run needs; the same on every rank.

    Attributes
    ----------
    data_dir : the shared sample set (:class:`climnb.io.sampleset.SampleSet`): ``stats.h5``
        and ``train/`` and ``validation/`` folders (as ``climnb samples`` writes them), or a
        flat folder of sample files, split here with ``split`` and ``split_seed``.
    staged_dir : train from node-local staged copies instead (``climnb stage`` or
        :func:`climnb.data.staging.stage_on_engines` wrote them): a folder pattern with ``{node}``
        and ``{local_rank}`` placeholders, e.g. ``"/local/scratch/{node}"``. Each rank then
        opens only its node's staged set and its own files in it, never ``data_dir``.
    ranks_per_node : training ranks per node, to find a rank's node (``rank //
        ranks_per_node``) and local rank in ``staged_dir``; ``None``: Horovod's local size.
        Set 1 where one machine simulates one node per rank.
    stage_first : stage ``data_dir`` into ``staged_dir`` at the start of the run, on the ranks
        themselves (one process per node reads, over MPI; :func:`climnb.data.staging.stage`), then
        train from the staged copies. A rerun restages only what changed.
    samples_per_rank : training files drawn (with replacement) per rank when staging first.
    draw : how staging first gives the ranks their files
        (:class:`climnb.data.staging.StagingConfig`):
        ``"replacement"`` (the paper's random draws) or ``"shard"`` (every training file to one
        rank, once: the whole training split is trained on).
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
    dice_weight : weight of a soft-Dice term over TC and AR
        (:func:`climnb.models.losses.soft_dice_loss`) added to the weighted cross entropy;
        0: the cross entropy alone. The default 1 scored the demo's held-out TC against the
        truth 0.927-0.939 instead of 0.863-0.872 over 3 seeds (docs/network_quality.md,
        "a soft-Dice term in the loss").
    split, split_method, split_seed : for a flat ``data_dir`` only: the train/validation/test
        fractions; ``"blocks"`` (contiguous time blocks a day apart, the default) or
        ``"random"`` (seeded with ``split_seed``); see :meth:`climnb.io.sampleset.SampleSet.split`.
    seed : seed of weights and shuffling.
    validate_every : epochs between validations (the last epoch is always validated).
    checkpoint_every : steps between checkpoints (rank 0 writes; also at the end).
    keep_checkpoints : how many recent checkpoints to keep.
    resume : continue from the latest checkpoint in ``out_dir`` if there is one.
    channels : channel subset to train on (``None``: all 16).
    threads : compute threads per rank (``None``: TensorFlow's default).
    read_workers : reader processes of the input pipeline per rank (0: read in-process).
    data_autotune : tf.data's autotuner in the input pipeline (off: see
        :class:`climnb.train.pipeline.PipelineConfig`).
    precision : compute precision, float32 master weights: ``"auto"`` (the default:
        ``"mixed_bfloat16"`` on a CPU with AVX512_BF16/AMX, else ``"float32"``; see
        :func:`climnb.models.precision.resolve_precision`), ``"float32"``, ``"mixed_bfloat16"``
        (no loss scaling) or ``"mixed_float16"`` (turns on ``optimizer.mixed_precision``, its
        loss scaling). The config holds the resolved name once made.
    precision_reason : why that precision (filled in when the config is made).
    keep_best : the model bundle holds the weights of the best validation (the mean IoU of the
        event classes, TC and AR) rather than those of the last step; rank 0 keeps them in
        ``out_dir/best`` and the bundle records the step and epoch they come from. The last
        checkpoint still holds the last step (a resumed run goes on from there).
    patience : stop after this many validations in a row without a better one (early
        stopping); ``None``: run all epochs.
    augment : ``"roll"``: roll each training sample (fields and labels together) by a random
        number of longitude columns, exact on a periodic global grid; ``"mirror"``: mirror half
        the samples north to south with the meridional winds negated; ``"roll+mirror"``: both
        (:class:`climnb.train.pipeline.PipelineConfig`); validation is never augmented.
        ``None``: off.
    init_from : start from a trained network's weights (fine-tuning): a model bundle or the
        run folder holding one (``RUN/model``). Its model and preset must be the run's
        (``climnb train --init-from`` without ``--model``/``--preset`` takes the parent's:
        :func:`climnb.train.init_from.parent_architecture`); its model overrides are taken
        when ``model_overrides`` is empty; the run's channels may be any subset of its
        channels, in any order (mapped by name), on any grid size; the channels are normalised
        as in the parent's training; the new bundle records the parent
        (:mod:`climnb.train.init_from`). A checkpoint in ``out_dir`` still wins (resume).
    freeze_blocks : with ``init_from``, keep the parent's weights of the first blocks of the
        encoder fixed (a block ends at a downsampling); 0: train all.
    """

    data_dir: str
    staged_dir: str | None = None
    ranks_per_node: int | None = None
    stage_first: bool = False
    samples_per_rank: int = 250
    draw: str = "replacement"
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
    dice_weight: float = 1.0
    split_seed: int = 0
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)
    split_method: str = "blocks"
    seed: int = 0
    validate_every: int = 1
    checkpoint_every: int = 50
    keep_checkpoints: int = 2
    resume: bool = True
    channels: tuple[str, ...] | None = None
    threads: int | None = None
    read_workers: int = 1
    data_autotune: bool = False
    precision: str = "auto"
    precision_reason: str = ""
    augment: str | None = None
    keep_best: bool = True
    patience: int | None = None
    init_from: str | None = None
    freeze_blocks: int = 0

    def __post_init__(self):
        if isinstance(self.optimizer, Mapping):
            object.__setattr__(self, "optimizer", _optimizer(self.optimizer))
        for name, kind in (("optimizer", OptimizerConfig), ("model_overrides", Mapping)):
            if not isinstance(getattr(self, name), kind):
                value = getattr(self, name)
                raise ValueError(
                    f"{name} must be a JSON object of settings, got {value!r} "
                    f"({type(value).__name__})"
                )
        object.__setattr__(self, "model_overrides", dict(self.model_overrides))
        for name in _POSITIVE:
            value = getattr(self, name)
            if name in _OPTIONAL and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be at least 1 (a whole number), got {value!r}")
        check_types(self)
        if not isinstance(self.read_workers, int) or self.read_workers < 0:
            raise ValueError(f"read_workers must be 0 or more, got {self.read_workers!r}")
        if self.stage_first and not self.staged_dir:
            raise ValueError("stage_first needs staged_dir, the node-local folder to stage into")
        _choice("lr_decay", self.lr_decay, ("linear", "none"))
        _choice("split_method", self.split_method, ("blocks", "random"))
        _choice("class_weighting", self.class_weighting, CLASS_WEIGHTINGS)
        from climnb.data.staging import DRAWS
        from climnb.train.pipeline import AUGMENTS  # here: these load h5py, the CLI stays light

        _choice("draw", self.draw, DRAWS)
        if self.freeze_blocks < 0:
            raise ValueError(
                f"freeze_blocks (--freeze-blocks) must be 0 or more, got {self.freeze_blocks}"
            )
        if self.freeze_blocks and not self.init_from:
            raise ValueError(
                "freeze_blocks (--freeze-blocks) keeps trained weights fixed: give init_from "
                "(--init-from RUN_OR_BUNDLE) too"
            )
        if self.dice_weight < 0:
            raise ValueError(f"dice_weight must be 0 or more, got {self.dice_weight!r}")
        if len(self.split) != 3 or min(self.split) < 0 or not 0.99 < sum(self.split) < 1.01:
            raise ValueError(f"split must be 3 fractions >= 0 adding up to 1, got {self.split}")
        try:  # model, preset and overrides: fail here, not after the data is read
            check_overrides(get_config(self.model, self.preset), self.model_overrides)
            get_config(self.model, self.preset, **self.model_overrides)
        except TypeError as err:
            raise ValueError(f"model_overrides: {err}") from err
        if self.augment not in (None, *AUGMENTS):
            raise ValueError(
                f"augment must be one of {', '.join(AUGMENTS)} or null, got {self.augment!r}"
            )
        auto = str(self.precision).lower() == "auto"
        precision, why = resolve_precision(self.precision)
        scaled = self.optimizer.mixed_precision
        if scaled and precision == "mixed_bfloat16" and not auto:
            raise ValueError(
                "precision mixed_bfloat16 needs no loss scaling: unset mixed_precision"
            )
        if scaled and auto:  # the older float16 switch wins over what "auto" would pick
            why = "loss scaling asked for (optimizer.mixed_precision): float16"
        if not self.precision_reason or auto:
            object.__setattr__(self, "precision_reason", why)
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

    @property
    def checkpoint_dir(self) -> Path:
        """Where rank 0 writes the checkpoints (a resumed run reads the newest)."""
        return self.out / "checkpoints"

    @property
    def best_dir(self) -> Path:
        """Where rank 0 keeps the best validation's weights (``keep_best``)."""
        return self.out / "best"

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
            if isinstance(d.get(key), (list, tuple)):
                d[key] = tuple(d[key])
        if "data_dir" not in d:
            raise ValueError("training settings need data_dir (the sample set folder)")
        return cls(**d)

    @classmethod
    def from_args(cls, args) -> TrainConfig:
        """The run's settings from ``climnb train``'s parsed flags (:func:`config_from_args`)."""
        return config_from_args(args)


_POSITIVE = (
    "batch_size",
    "epochs",
    "validate_every",
    "checkpoint_every",
    "keep_checkpoints",
    "max_steps",
    "threads",
    "ranks_per_node",
    "samples_per_rank",
    "patience",
)
_OPTIONAL = ("max_steps", "threads", "ranks_per_node", "patience")
CLASS_WEIGHTINGS = ("inverse_sqrt", "deepcam", "inverse", "none")


_KINDS = {
    "bool": ((bool,), "true or false"),
    "int": ((int,), "a whole number"),
    "float": ((int, float), "a number"),
    "str": ((str,), "text"),
}


def _kind(value, base: str) -> tuple[bool, str]:
    """Whether ``value`` is of the kind ``base`` names, and the kind in words."""
    if base.startswith(("tuple", "Sequence", "list")):
        return isinstance(value, (tuple, list)), "a list"
    types, words = _KINDS.get(base, ((object,), base))
    ok = isinstance(value, types) and (base == "bool" or not isinstance(value, bool))
    return ok, words


def check_types(obj, prefix: str = "") -> None:
    """Refuse a field of dataclass ``obj`` whose value is of the wrong type (``"6"`` for a
    number, a number for a switch) or a non-finite number, naming the field."""
    for f in dataclasses.fields(obj):
        value, text = getattr(obj, f.name), str(f.type)
        if value is None and "None" in text:
            continue
        ok, words = _kind(value, text.split("|")[0].strip())
        if not ok:
            raise ValueError(
                f"{prefix}{f.name} must be {words}, got {value!r} ({type(value).__name__})"
            )
        if isinstance(value, float) and not math.isfinite(value):
            flag = " (--lr)" if f.name == "learning_rate" else ""
            raise ValueError(f"{prefix}{f.name}{flag} must be a finite number, got {value!r}")


def check_overrides(defaults, overrides: Mapping[str, Any]) -> None:
    """Refuse ``model_overrides`` values whose type differs from the architecture's field
    (``{"growth_rate": "6"}``), naming the key; unknown keys are left to ``get_config``."""
    for key, value in overrides.items():
        if not hasattr(defaults, key):
            continue
        default = getattr(defaults, key)
        base = type(default).__name__ if default is not None else None
        if base is None:
            continue
        ok, words = _kind(value, base)
        if ok and isinstance(value, float) and not math.isfinite(value):
            ok, words = False, "a finite number"
        if not ok:
            raise ValueError(
                f"model_overrides: {key} must be {words} (like {default!r}), got {value!r} "
                f"({type(value).__name__})"
            )


def _choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _optimizer(settings: Mapping[str, Any]) -> OptimizerConfig:
    opt = dict(settings)
    for key in ("boundaries", "factors"):
        if key in opt:
            opt[key] = tuple(opt[key])
    try:
        return OptimizerConfig(**opt)
    except TypeError as err:  # an unknown field or a value of the wrong type
        raise ValueError(f"optimizer settings {opt}: {err}") from err


# ``climnb train``'s flag destinations -> TrainConfig field (or "optimizer.<field>")
FLAG_FIELDS = {
    "data": "data_dir",
    "staged": "staged_dir",
    "ranks_per_node": "ranks_per_node",
    "stage_first": "stage_first",
    "samples_per_rank": "samples_per_rank",
    "draw": "draw",
    "out": "out_dir",
    "model": "model",
    "preset": "preset",
    "epochs": "epochs",
    "batch_size": "batch_size",
    "max_steps": "max_steps",
    "checkpoint_every": "checkpoint_every",
    "keep_checkpoints": "keep_checkpoints",
    "resume": "resume",
    "threads": "threads",
    "seed": "seed",
    "lr_decay": "lr_decay",
    "lr": "optimizer.learning_rate",
    "warmup_steps": "optimizer.warmup_steps",
    "larc": "optimizer.larc",
    "gradient_lag": "optimizer.gradient_lag",
    "mixed_precision": "optimizer.mixed_precision",
    "precision": "precision",
    "augment": "augment",
    "class_weighting": "class_weighting",
    "init_from": "init_from",
    "freeze_blocks": "freeze_blocks",
}


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's :class:`TrainConfig` from ``climnb train``'s parsed flags: typed flags >
    ``--config`` file > dataclass defaults (a flag not typed is absent from ``args``)."""
    settings = _read_config_file(args.config) if "config" in args else {}
    optimizer = dict(settings.pop("optimizer", None) or {})
    for dest, name in FLAG_FIELDS.items():
        if dest not in args:
            continue
        value = getattr(args, dest)
        if name.startswith("optimizer."):
            optimizer[name.removeprefix("optimizer.")] = value
        else:
            settings[name] = value
    if optimizer:
        settings["optimizer"] = optimizer
    if "data_dir" not in settings:
        raise ValueError("no sample set: give --data DIR (or data_dir in the --config file)")
    if "init_from" in settings:  # the parent's network unless one is named
        from climnb.train.init_from import parent_architecture  # numpy, h5py: not for --help

        settings = parent_architecture(settings)
    return TrainConfig.from_dict(settings)


def _read_config_file(path: str) -> dict:
    try:
        settings = json.loads(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"config file {path}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"config file {path} is not valid JSON: {err}") from err
    if not isinstance(settings, dict):
        raise ValueError(f"config file {path} must hold a JSON object of TrainConfig fields")
    try:  # the file's own mistakes are named as the file's
        TrainConfig.from_dict({"data_dir": ".", **settings})
    except ValueError as err:
        raise ValueError(f"config file {path}: {err}") from err
    return settings
