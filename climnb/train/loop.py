"""The data-parallel training loop that every rank runs.

One function, :func:`train`, runs unchanged on ipyparallel engines, under
``mpirun -np N python -m climnb train ...``, ``srun`` and ``horovodrun``: Horovod tells it its rank
and the number of ranks. Without Horovod it trains in one process (a laptop, Binder).

Per step: read this rank's shard of the training files (:mod:`climnb.train.pipeline`), compute the
gradients with a plain ``tf.GradientTape``, average them over the ranks with
``hvd.grouped_allreduce`` (Keras 3 breaks Horovod's ``DistributedGradientTape``), and apply them
with the paper's optimiser (:mod:`climnb.train.optim`). The initial weights and the optimiser's
state are broadcast from rank 0, the learning rate is scaled with the number of ranks after a
warm-up, validation IoU is computed from confusion matrices summed over the ranks, and rank 0
writes checkpoints (atomically) and, at the end, the model bundle used by
:mod:`climnb.inference.predict`.

:func:`train` reads top-down; each step is a module of its own:

1. the parent network's settings when fine-tuning (:mod:`climnb.train.init_from`);
2. the run folder checked and claimed (:mod:`climnb.train.run_folder`);
3. TensorFlow and Horovod, or one process without it (:mod:`climnb.train.ranks`);
4. this rank's files, statistics and steps per epoch (:mod:`climnb.train.inputs`);
5. the network, resumed or started fresh (:mod:`climnb.train.network`,
   :mod:`climnb.train.save`);
6. the epochs: steps (:mod:`climnb.train.step`), validations (:mod:`climnb.train.validate`),
   checkpoints; at the end the model bundle (:mod:`climnb.train.save`) and the
   :class:`TrainResult` (:mod:`climnb.train.result`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import pandas as pd

from climnb.models.backend import import_tf
from climnb.train.checkpoint import latest
from climnb.train.config import TrainConfig
from climnb.train.init_from import Parent, with_parent
from climnb.train.inputs import RankData, batches, plan, prepare, reading, total_steps
from climnb.train.network import Network
from climnb.train.progress import Progress, Record
from climnb.train.ranks import horovod, rank_hint, set_threads
from climnb.train.result import TrainResult, summarize, weights_checksum
from climnb.train.run_folder import check_out_dir, claim_out_dir
from climnb.train.save import Saver
from climnb.train.step import NonFiniteError, Steps
from climnb.train.together import abort_on_failure
from climnb.train.validate import Validation

log = logging.getLogger(__name__)

__all__ = ["train", "plan", "summarize", "TrainResult", "NonFiniteError", "weights_checksum"]

OnRecord = Callable[[Record], None]


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
    with abort_on_failure():  # one rank's error stops every rank (climnb.train.together)
        config, parent = with_parent(config)  # before anything is written
        check_out_dir(config)
        with claim_out_dir(config, rank_hint()):
            hvd, tf = _start(config)
            data, steps = prepare(config, hvd, parent)
            run = _Run(config, data, hvd, tf, total_steps(config, steps), parent)
            log.info(
                "rank %d/%d: %d training files from %s, %d steps per epoch",
                run.net.rank,
                run.net.size,
                len(data.train),
                data.source,
                steps,
            )
            if run.finished:  # a rerun of a finished run: its results stay as they are
                return run.result_as_is()
            stopped = _epochs(run, steps, on_record or (lambda record: None))
            return run.finish(stopped)


def _start(config: TrainConfig):
    """TensorFlow with its threads sized, then Horovod (or one process): ``(hvd, tf)``."""
    if config.threads:  # oneDNN's OpenMP pool: must be sized before TensorFlow loads it
        os.environ.setdefault("OMP_NUM_THREADS", str(config.threads))
    tf = import_tf()
    set_threads(tf, config.threads)
    return horovod(), tf


def _epochs(run: _Run, steps: int, emit: OnRecord) -> bool:
    """Train from where ``run`` stands to the last epoch, ``max_steps``, an early stop or a
    ``STOP`` file; validate every ``validate_every`` epochs and at the end. Returns whether a
    ``STOP`` file ended it."""
    config, data, progress = run.config, run.data, run.progress
    stopped = False
    for epoch in range(progress.epoch, config.epochs):
        skip = progress.step_in_epoch  # resumed inside this epoch: its batches done so far
        epoch_batches = batches(data.train, data.stats, config, epoch).take(steps)
        for x, y, _ in reading(epoch_batches.skip(skip), run.net.tf):
            record, stop = run.step(x, y, epoch)
            emit(record)
            if stop or run.reached_max:
                stopped = stop
                break
        else:
            progress.step_in_epoch, progress.epoch = 0, epoch + 1
        last = progress.epoch >= config.epochs or stopped or run.reached_max
        if last or (epoch + 1) % config.validate_every == 0:
            emit(run.validation.validate(epoch))
        if stopped or run.reached_max or progress.early_stopped:
            break
    return stopped


class _Run:
    """One rank's run: its network, steps, validations and saves, over one shared
    :class:`~climnb.train.progress.Progress`."""

    def __init__(
        self,
        config: TrainConfig,
        data: RankData,
        hvd,
        tf,
        total_steps: int,
        parent: Parent | None = None,
    ):
        self.config, self.data = config, data
        self.net = Network(config, data, hvd, tf, total_steps, parent)
        self.progress = Progress()
        self.saver = Saver(config, self.net, self.progress, parent)
        self.saver.start()  # resumed from a checkpoint, or fresh; the same on every rank
        self.net.compile()
        self.steps = Steps(config, data, self.net, self.progress)
        self.validation = Validation(config, data, self.net, self.progress)

    @property
    def finished(self) -> bool:
        return self.progress.finished(self.config)

    @property
    def reached_max(self) -> bool:
        return self.progress.reached_max(self.config)

    def step(self, x, y, epoch: int) -> tuple[Record, bool]:
        """A step, and a checkpoint every ``checkpoint_every`` steps."""
        record, stop = self.steps.step(x, y, epoch)
        if self.progress.global_step % self.config.checkpoint_every == 0:
            self.save(epoch)
        return record, stop

    def save(self, epoch: int) -> str | None:
        """A checkpoint of finite weights (a non-finite one stops the run, saving nothing)."""
        self.steps.check_weights(epoch)
        return self.saver.save(epoch)

    def finish(self, stopped: bool) -> TrainResult:
        """The last checkpoint and (rank 0) the model bundle."""
        checkpoint = self.save(self.progress.epoch)  # the statistics averaged over the ranks
        bundle = self.saver.write_bundle() if self.net.rank == 0 else None
        return self._result(stopped, checkpoint, bundle)

    def result_as_is(self) -> TrainResult:
        """The result of a finished run, without training (:meth:`Saver.keep_finished`)."""
        self.saver.keep_finished()
        rank0 = self.net.rank == 0
        good = latest(self.config.checkpoint_dir)
        checkpoint = str(good) if good and rank0 else None
        bundle = str(self.saver.bundle) if rank0 else None
        return self._result(False, checkpoint, bundle, finished_before=True)

    def _result(self, stopped, checkpoint, bundle, finished_before=False) -> TrainResult:
        return TrainResult(
            self.net.rank,
            self.net.size,
            pd.DataFrame(self.progress.records),
            pd.DataFrame(self.progress.validations),
            weights_checksum(self.net.model),
            stopped,
            checkpoint,
            bundle,
            finished_before=finished_before,
        )
