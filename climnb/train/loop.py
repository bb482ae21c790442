"""The data-parallel training loop that every rank runs.

One function, :func:`train`, runs unchanged on ipyparallel engines, under
``mpirun -np N python -m climnb train ...``, ``srun`` and ``horovodrun``: Horovod tells it its rank
and the number of ranks. Without Horovod it trains in one process (a laptop, Binder).

Per step: read this rank's shard of the training files (:mod:`climnb.pipeline`), compute the
gradients with a plain ``tf.GradientTape``, average them over the ranks with
``hvd.grouped_allreduce`` (Keras 3 breaks Horovod's ``DistributedGradientTape``), and apply them
with the paper's optimiser (:mod:`climnb.train.optim`). The initial weights and the optimiser's
state are broadcast from rank 0, the learning rate is scaled with the number of ranks after a
warm-up, validation IoU is computed from confusion matrices summed over the ranks, and rank 0
writes checkpoints (atomically) and, at the end, the model bundle used by :mod:`climnb.predict`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from climnb.atomic import atomic_path
from climnb.train.config import TrainConfig

log = logging.getLogger(__name__)

__all__ = ["train", "plan", "TrainResult", "weights_checksum"]

Record = dict
OnRecord = Callable[[Record], None]


@dataclass
class TrainResult:
    """What one rank returns: its history, validation results and final state."""

    rank: int
    size: int
    history: pd.DataFrame
    validation: pd.DataFrame
    checksum: str
    stopped: bool
    checkpoint: str | None
    bundle: str | None


# ---------------------------------------------------------------------------------------------
# Horovod, or one process without it
# ---------------------------------------------------------------------------------------------


class _OneProcess:
    """The few Horovod calls the loop makes, for a single process without Horovod."""

    Sum = Average = None

    def init(self):
        pass

    def rank(self):
        return 0

    def size(self):
        return 1

    def allreduce(self, tensor, op=None):
        return tensor

    def grouped_allreduce(self, tensors, op=None):
        return tensors

    def broadcast_variables(self, variables, root_rank=0):
        pass

    def broadcast_object(self, obj, root_rank=0):
        return obj


def _horovod():
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        log.warning("Horovod is not installed: training in one process (make setup builds it)")
        return _OneProcess()
    hvd.init()
    return hvd


def _set_threads(tf, threads: int | None) -> None:
    if not threads:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
    except RuntimeError:  # TensorFlow already running in this process (an engine re-used)
        pass


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Data:
    train: tuple[Path, ...]
    validation: tuple[Path, ...]
    stats: object
    shape: tuple[int, int, int]
    class_weights: np.ndarray

    @classmethod
    def prepare(cls, config: TrainConfig) -> _Data:
        from climnb.io.samples import inspect_sample
        from climnb.io.split import split_files
        from climnb.io.stats import read_stats
        from climnb.models.losses import (
            PAPER_FREQUENCIES,
            class_weights,
            frequencies_from_counts,
        )

        folder = Path(config.data_dir)
        if (folder / "train").is_dir():  # already split (DeepCAM layout, climnb samples)
            split = _presplit(folder)
        else:
            files = sorted(folder.glob("data-*.h5"))
            if not files:
                raise FileNotFoundError(
                    f"no sample files data-*.h5 in {folder} (nor a train/ folder)"
                )
            split = split_files(files, fractions=config.split, seed=config.split_seed)
        stats_path = folder / "stats.h5"
        if not stats_path.exists():
            raise FileNotFoundError(
                f"{stats_path} is missing: compute it with "
                "`climnb samples` or climnb.io.stats.compute_stats"
            )
        stats = read_stats(stats_path)
        if not split.train or not split.validation:
            raise ValueError(
                f"the sample files in {folder} are too few for a train/validation "
                f"split (train {len(split.train)}, validation "
                f"{len(split.validation)})"
            )
        info = inspect_sample(split.train[0])
        n_channels = len(config.channels) if config.channels else len(info.channels)
        if config.class_weighting == "none":
            weights = np.ones(3)
        else:
            counts = stats.class_counts
            freq = (
                frequencies_from_counts(np.maximum(counts, 1))
                if counts is not None and np.sum(counts) > 0
                else PAPER_FREQUENCIES
            )
            weights = class_weights(freq, config.class_weighting)
        return cls(
            tuple(split.train),
            tuple(split.validation),
            stats,
            (*info.shape, n_channels),
            np.asarray(weights, np.float64),
        )


def _presplit(folder: Path):
    from climnb.io.split import Split

    def files(part):
        return tuple(sorted((folder / part).glob("data-*.h5")))

    return Split(files("train"), files("validation"), files("test"))


def _steps_per_epoch(n_files: int, size: int, batch: int) -> int:
    """Every rank must take the same number of steps (else the allreduce waits forever)."""
    steps = (n_files // size) // batch
    if steps < 1:
        raise ValueError(
            f"{n_files} training files cannot give every one of {size} ranks a "
            f"batch of {batch}: use a smaller batch, fewer ranks or more data"
        )
    return steps


def _total_steps(config: TrainConfig, steps_per_epoch: int) -> int:
    """All epochs' steps, capped at ``config.max_steps``."""
    total = steps_per_epoch * config.epochs
    return min(total, config.max_steps) if config.max_steps else total


def plan(config: TrainConfig, size: int) -> dict[str, int]:
    """Files and steps a run of ``config`` on ``size`` ranks will take (for progress bars)."""
    data = _Data.prepare(config)
    steps = _steps_per_epoch(len(data.train), size, config.batch_size)
    total = _total_steps(config, steps)
    return {
        "train_files": len(data.train),
        "validation_files": len(data.validation),
        "steps_per_epoch": steps,
        "total_steps": total,
    }


def _batches(files, stats, config: TrainConfig, rank, size, epoch, *, shuffle=True):
    from climnb.pipeline import PipelineConfig, make_dataset

    pipe = PipelineConfig(
        batch_size=config.batch_size,
        seed=config.seed,
        shuffle=shuffle,
        channels=config.channels,
        drop_remainder=shuffle,
        workers=config.read_workers,
        autotune=config.data_autotune,
    )
    return make_dataset(
        files, stats, rank=rank, size=size, epochs=1, start_epoch=epoch, config=pipe
    )


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def train(config: TrainConfig, *, on_record: OnRecord | None = None) -> TrainResult:
    """Train on this rank; call it on every rank (engines, mpirun, srun, horovodrun).

    Parameters
    ----------
    config : the run's settings (identical on all ranks).
    on_record : called with each record as it is made: ``{"kind": "step", ...}`` after every
        step and ``{"kind": "validation", ...}`` after every validation (the dashboard uses it).

    Returns
    -------
    TrainResult with this rank's history; rank 0 also wrote ``history.csv``, the checkpoints and
    the model bundle ``out_dir/model`` (:func:`climnb.bundle.load_bundle` reads it).
    """
    if config.threads:  # oneDNN's OpenMP pool: must be sized before TensorFlow loads it
        os.environ.setdefault("OMP_NUM_THREADS", str(config.threads))
    import tensorflow as tf

    _set_threads(tf, config.threads)
    hvd = _horovod()
    rank, size = hvd.rank(), hvd.size()
    emit = on_record or (lambda record: None)
    data = _Data.prepare(config)
    steps = _steps_per_epoch(len(data.train), size, config.batch_size)
    run = _Run(config, data, hvd, tf, total_steps=_total_steps(config, steps))
    log.info(
        "rank %d/%d: %d training files, %d steps per epoch", rank, size, len(data.train), steps
    )
    stopped = False
    for epoch in range(run.epoch, config.epochs):
        skip, run.step_in_epoch = run.step_in_epoch, 0
        batches = _batches(data.train, data.stats, config, rank, size, epoch).take(steps)
        for x, y, _ in batches.skip(skip):
            record, stop = run.step(x, y, epoch)
            emit(record)
            if stop or run.reached_max:
                stopped = stop
                break
        else:
            run.step_in_epoch, run.epoch = 0, epoch + 1
        last = run.epoch >= config.epochs or stopped or run.reached_max
        if last or (epoch + 1) % config.validate_every == 0:
            emit(run.validate(epoch))
        if stopped or run.reached_max:
            break
    checkpoint, bundle = run.finish()
    return TrainResult(
        rank,
        size,
        pd.DataFrame(run.records),
        pd.DataFrame(run.validations),
        weights_checksum(run.model),
        stopped,
        checkpoint,
        bundle,
    )


class _Run:
    """State of one rank's run: model, optimiser, counters, records."""

    def __init__(self, config: TrainConfig, data: _Data, hvd, tf, total_steps: int):
        from climnb.models import build_model, count_flops
        from climnb.models.losses import weighted_cross_entropy
        from climnb.train.optim import make_optimizer

        self.config, self.data, self.hvd, self.tf = config, data, hvd, tf
        self.rank, self.size = hvd.rank(), hvd.size()
        tf.keras.utils.set_random_seed(config.seed)
        opt_config = config.optimizer
        if config.scale_lr and self.size > 1:
            opt_config = dataclasses.replace(
                opt_config, learning_rate=opt_config.learning_rate * self.size
            )
        if config.lr_decay == "linear":  # to zero at the run's last step
            opt_config = dataclasses.replace(
                opt_config,
                schedule="poly",
                power=1.0,
                end_learning_rate=0.0,
                decay_steps=max(total_steps - opt_config.warmup_steps, 1),
            )
        self.model = build_model(
            config.model,
            data.shape,
            3,
            config.preset,
            mixed_precision=config.precision,
            **config.model_overrides,
        )
        self.optimizer = make_optimizer(opt_config)
        self.optimizer.build(self.model.trainable_variables)
        weights = data.class_weights
        self.loss_fn = lambda y, logits: weighted_cross_entropy(y, logits, weights)
        self.flop_per_sample = count_flops(self.model).training
        self.records, self.validations = [], []
        self.global_step, self.epoch, self.step_in_epoch = 0, 0, 0
        self.checkpoints = Path(config.out_dir) / "checkpoints"
        self._resume_and_broadcast()
        self._step_fn = self._compile_step()
        self._last_time = None

    # --- start ---------------------------------------------------------------------------------

    def _resume_and_broadcast(self) -> None:
        from climnb.train.checkpoint import latest, load_checkpoint, restore

        state = None
        if self.rank == 0:  # a STOP left by an earlier run must not end this one
            self.config.stop_file.unlink(missing_ok=True)
        if self.rank == 0 and self.config.resume and latest(self.checkpoints):
            ckpt = load_checkpoint(latest(self.checkpoints))
            state = restore(ckpt, self.model, self.optimizer)
            log.info("resuming from %s (step %d)", ckpt.path, state["step"])
        state = self.hvd.broadcast_object(state, root_rank=0)
        if state:
            self.global_step, self.epoch = state["step"], state["epoch"]
            self.step_in_epoch = state["step_in_epoch"]
            self.records = [r for r in state.get("records", []) if r["step"] <= state["step"]]
        # identical start on every rank: weights and optimiser state from rank 0
        self.hvd.broadcast_variables([v.value for v in self.model.variables], root_rank=0)
        self.hvd.broadcast_variables([v.value for v in self.optimizer.variables], root_rank=0)

    def _compile_step(self):
        from climnb.train.optim import train_step

        hvd, tf = self.hvd, self.tf

        def allreduce(grads):
            return hvd.grouped_allreduce(grads, op=hvd.Average)

        @tf.function
        def step(x, y):
            return train_step(
                self.model,
                self.optimizer,
                self.loss_fn,
                x,
                y,
                allreduce=allreduce if self.size > 1 else None,
            )

        return step

    # --- steps ---------------------------------------------------------------------------------

    def step(self, x, y, epoch: int) -> tuple[Record, bool]:
        tf = self.tf
        start = time.perf_counter()
        loss = self._step_fn(x, y)
        stop_here = float(self.config.stop_file.exists())
        both = self.hvd.allreduce(tf.stack([tf.cast(loss, tf.float32), stop_here]), op=self.hvd.Sum)
        loss_sum, stop = (float(v) for v in np.asarray(both))
        seconds = time.perf_counter() - start
        self.global_step += 1
        self.step_in_epoch += 1
        samples = self.config.batch_size * self.size
        record = {
            "kind": "step",
            "rank": self.rank,
            "step": self.global_step,
            "epoch": epoch,
            "loss": float(loss),
            "loss_avg": loss_sum / self.size,
            "lr": float(np.asarray(self.optimizer.learning_rate)),
            "seconds": seconds,
            "samples_per_s": samples / seconds,
            "gflops": self.flop_per_sample * samples / seconds / 1e9,
            "time": time.time(),
        }
        self.records.append(record)
        if self.global_step % self.config.checkpoint_every == 0:
            self.save(epoch)
        return record, stop > 0

    @property
    def reached_max(self) -> bool:
        return bool(self.config.max_steps and self.global_step >= self.config.max_steps)

    def sync_statistics(self) -> None:
        """Average the non-trainable variables (batch-norm moving statistics) over the ranks.

        Gradients are averaged every step, so the trainable weights agree already; each rank's
        batch-norm statistics, however, have seen only its own shard of the data.
        """
        variables = self.model.non_trainable_variables
        if self.size > 1 and variables:
            averaged = self.hvd.grouped_allreduce([v.value for v in variables], op=self.hvd.Average)
            for var, value in zip(variables, averaged, strict=True):
                var.assign(value)

    def validate(self, epoch: int) -> Record:
        from climnb.models.metrics import ConfusionMatrix
        from climnb.pipeline import shard_files

        tf = self.tf
        self.sync_statistics()
        cm = ConfusionMatrix(3)
        sample = None
        if shard_files(self.data.validation, self.rank, self.size):
            batches = _batches(
                self.data.validation,
                self.data.stats,
                self.config,
                self.rank,
                self.size,
                0,
                shuffle=False,
            )
            for x, y, _ in batches:
                pred = tf.argmax(self.model(x, training=False), axis=-1)
                cm.update(y, pred)
                if sample is None and self.rank == 0:
                    sample = {
                        "label": np.asarray(y[0], np.uint8),
                        "prediction": np.asarray(pred[0], np.uint8),
                    }
        total = self.hvd.allreduce(cm.state, op=self.hvd.Sum)
        per_class, mean_iou = cm.result(total)
        record = {
            "kind": "validation",
            "rank": self.rank,
            "step": self.global_step,
            "epoch": epoch,
            "mean_iou": float(mean_iou),
            **{f"iou_{k}": float(v) for k, v in enumerate(per_class)},
        }
        self.validations.append(record)
        log.info(
            "rank %d epoch %d step %d: validation mean IoU %.3f",
            self.rank,
            epoch,
            self.global_step,
            mean_iou,
        )
        return {**record, "sample": sample} if sample is not None else record

    # --- saving --------------------------------------------------------------------------------

    def save(self, epoch: int) -> str | None:
        from climnb.train.checkpoint import save_checkpoint

        if self.rank != 0:
            return None
        state = {
            "epoch": self.epoch if self.step_in_epoch == 0 else epoch,
            "step_in_epoch": self.step_in_epoch,
            "records": self.records,
        }
        path = save_checkpoint(
            self.checkpoints,
            self.global_step,
            self.model,
            self.optimizer,
            state,
            keep=self.config.keep_checkpoints,
        )
        self._write_history()
        return str(path)

    def _write_history(self) -> None:
        out = Path(self.config.out_dir)
        for name, rows in (("history.csv", self.records), ("validation.csv", self.validations)):
            if rows:
                with atomic_path(out / name) as tmp:
                    pd.DataFrame(rows).to_csv(tmp, index=False)

    def finish(self) -> tuple[str | None, str | None]:
        self.sync_statistics()
        checkpoint = self.save(self.epoch)
        if self.rank != 0:
            return None, None
        from climnb.bundle import save_bundle

        stats, channels = self.data.stats, self.config.channels or tuple(self.data.stats.channels)
        chosen = stats.select([list(stats.channels).index(c) for c in channels])
        bundle = save_bundle(
            self.model,
            Path(self.config.out_dir) / "model",
            channels=channels,
            minval=chosen.minval,
            maxval=chosen.maxval,
            name=self.config.model,
            preset=self.config.preset,
            extra={"train_config": self.config.to_dict(), "steps": self.global_step},
        )
        return checkpoint, str(bundle)


def weights_checksum(model) -> str:
    """SHA-256 of all weights' bytes: equal on two ranks only if the weights are identical."""
    digest = hashlib.sha256()
    for w in model.get_weights():
        digest.update(np.ascontiguousarray(w).tobytes())
    return digest.hexdigest()
