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
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from climnb.bundle import BundleError, load_bundle, save_bundle
from climnb.data.staging import StagingConfig, files_per_rank, stage
from climnb.io.atomic import atomic_path, remove_leftovers, temp_path
from climnb.io.reader import SampleReader
from climnb.io.samples import SampleError
from climnb.io.sampleset import SampleSet, StagedSet
from climnb.io.stats import Stats
from climnb.models import build_model, count_flops
from climnb.models.backend import import_tf
from climnb.models.losses import (
    PAPER_FREQUENCIES,
    class_weights,
    frequencies_from_counts,
    soft_dice_loss,
    weighted_cross_entropy,
)
from climnb.models.metrics import ConfusionMatrix
from climnb.models.presets import resolve_channels
from climnb.train import optim
from climnb.train.checkpoint import (
    latest,
    load_checkpoint,
    load_latest,
    restore,
    save_checkpoint,
)
from climnb.train.config import TrainConfig
from climnb.train.init_from import (
    Parent,
    check_parent,
    freeze_blocks,
    inherit,
    init_weights,
    open_parent,
    parent_stats,
)
from climnb.train.pipeline import PipelineConfig, epoch_order, make_dataset, shard_files
from climnb.train.together import abort_on_failure, all_ok, one_process_only

log = logging.getLogger(__name__)

__all__ = ["train", "plan", "summarize", "TrainResult", "NonFiniteError", "weights_checksum"]

Record = dict
OnRecord = Callable[[Record], None]


class NonFiniteError(ValueError):
    """The loss or the weights stopped being finite; training stopped, nothing was saved."""

    collective = True  # every rank raises it at the same step (climnb.train.together)


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
    finished_before: bool = False  # the run had finished: nothing trained, nothing changed


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

    def local_size(self):
        return 1

    def allreduce(self, tensor, op=None):
        return tensor

    def grouped_allreduce(self, tensors, op=None):
        return tensors

    def broadcast_variables(self, variables, root_rank=0, inplace=False):
        pass

    def broadcast_object(self, obj, root_rank=0):
        return obj

    def allgather_object(self, obj):
        return [obj]


def _horovod():
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        one_process_only()
        log.debug("Horovod is not installed: training in one process without it")
        return _OneProcess()
    _yield_when_crowded()
    hvd.init()
    return hvd


def _yield_when_crowded() -> None:
    """As many ranks on this node as cores this rank may use: let OpenMPI yield while it
    waits (before MPI starts; an ``OMPI_MCA_mpi_yield_when_idle`` already set stands).
    mpirun gets it from :func:`climnb.runtime.cluster.mpi_settings` where climnb starts it, but
    a rank started by ``srun`` (the README's batch recipe) spins in Horovod's collectives on the
    core its peer computes on (measured under srun, 2 ranks on 2 cores, 2 toy steps: 22.8 s,
    15.4 s yielding)."""
    local = None
    for var in ("OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        found = re.match(r"\d+", os.environ.get(var, ""))  # Slurm: "2(x3)" or "2,1"
        if found:
            local = int(found.group())
            break
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if local and cores and local >= cores:
        os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")


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
    """This rank's training and validation files, the statistics and the class weights.

    From the shared sample set (``data_dir``) each rank takes ``files[rank::size]``; from a
    staged set (``staged_dir``) it takes its node's copies of its own files and opens nothing
    outside the node folder.
    """

    train: tuple[Path, ...]
    validation: tuple[Path, ...]
    stats: Stats
    shape: tuple[int, int, int]
    class_weights: np.ndarray
    source: str

    @classmethod
    def prepare(cls, config: TrainConfig, rank: int = 0, size: int = 1, local_size: int = 1):
        if config.staged_dir:
            sset = StagedSet.for_rank(
                config.staged_dir, rank=rank, local_size=config.ranks_per_node or local_size
            )
            train, validation = sset.files("train"), sset.files("validation")
        else:
            sset = SampleSet.open(config.data_dir)
            sset.check_complete()  # the files its manifest lists, all there, and no stray
            sset.check_disjoint()  # no step in two splits
            split = sset.split(
                fractions=config.split, seed=config.split_seed, method=config.split_method
            )
            if not split.train or not split.validation:
                raise ValueError(
                    f"the sample files in {config.data_dir} are too few for a train/validation "
                    f"split (train {len(split.train)}, validation {len(split.validation)})"
                )
            train = shard_files(split.train, rank, size)
            validation = shard_files(split.validation, rank, size)
        if not train:
            raise ValueError(f"{sset.root}: rank {rank} of {size} has no training files")
        stats = sset.stats()
        n_channels = len(config.channels) if config.channels else len(sset.channels)
        counts = sset.class_counts("train")
        if counts is not None and np.sum(counts) > 0 and np.sum(counts[1:]) == 0:
            raise ValueError(
                f"{sset.root}: its training labels are all background ({int(np.sum(counts))} "
                "pixels, no storm or river): a model would learn nothing else; label the "
                "fields first (climnb label) and make the samples of the labelled files"
            )
        return cls(
            tuple(train),
            tuple(validation),
            stats,
            (*sset.grid, n_channels),
            _class_weights(config, counts),
            str(sset.root),
        )


def _stage_first(config: TrainConfig, hvd, rank: int, size: int, local_size: int) -> None:
    """Stage ``data_dir`` into ``staged_dir``: the first rank of each node takes part (so node
    ``n``'s copies are written on node ``n``), the others wait. Without MPI (Horovod over Gloo
    on one machine) rank 0 stages every node's folder."""
    per_node = config.ranks_per_node or local_size
    staging = StagingConfig(
        source=config.data_dir,
        dest=config.staged_dir,
        n_nodes=max(size // per_node, 1),
        ranks_per_node=per_node,
        samples_per_rank=config.samples_per_rank,
        seed=config.seed,
        draw=config.draw,
    )
    if size == 1:
        stage(staging)
        return
    MPI = _mpi()
    world = MPI.COMM_WORLD if MPI is not None and MPI.COMM_WORLD.size == size else None
    if world is not None:
        heads = world.Split(0 if rank % per_node == 0 else MPI.UNDEFINED, rank)
        if heads != MPI.COMM_NULL:
            log.info("rank %d: %s", rank, stage(staging, heads).summary)
            heads.Free()
    elif rank == 0:
        log.info("rank 0 for every node: %s", stage(staging).summary)
    # everyone waits for the staging in the caller's all_ok, which also reports its errors


def _mpi():
    """mpi4py's ``MPI`` (initialised by Horovod when it runs over MPI), or ``None``."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI


def _class_weights(config: TrainConfig, counts) -> np.ndarray:
    if config.class_weighting == "none":
        return np.ones(3)
    freq = (
        frequencies_from_counts(np.maximum(counts, 1))
        if counts is not None and np.sum(counts) > 0
        else PAPER_FREQUENCIES
    )
    return np.asarray(class_weights(freq, config.class_weighting), np.float64)


def _steps_per_epoch(counts: list[int], batch: int) -> int:
    """Every rank must take the same number of steps (else the allreduce waits forever):
    the fewest any rank's files allow."""
    steps = min(counts) // batch
    if steps < 1:
        raise ValueError(
            f"training files per rank {sorted(set(counts))} cannot give every one of "
            f"{len(counts)} ranks a batch of {batch}: use a smaller batch, fewer ranks or "
            "more data"
        )
    return steps


def _total_steps(config: TrainConfig, steps_per_epoch: int) -> int:
    """All epochs' steps, capped at ``config.max_steps``."""
    total = steps_per_epoch * config.epochs
    return min(total, config.max_steps) if config.max_steps else total


def plan(config: TrainConfig, size: int, local_size: int | None = None) -> dict[str, int]:
    """Files and steps a run of ``config`` on ``size`` ranks will take (for progress bars).

    ``local_size``: ranks per node (default ``config.ranks_per_node``, else all on one node).
    """
    if config.stage_first:  # nothing staged yet: what each rank will get from data_dir
        shard = config.draw == "shard"  # a flat folder: all its files are training files
        n_files = len(SampleSet.open(config.data_dir).files("train")) if shard else 0
        counts = files_per_rank(n_files, size, config.samples_per_rank, config.draw)
        steps = _steps_per_epoch(counts, config.batch_size)
        return {
            "train_files": sum(counts),
            "steps_per_epoch": steps,
            "total_steps": _total_steps(config, steps),
        }
    local = local_size or config.ranks_per_node or size
    ranks = [_Data.prepare(config, r, size, local) for r in range(size)]
    steps = _steps_per_epoch([len(d.train) for d in ranks], config.batch_size)
    return {
        "train_files": sum(len(d.train) for d in ranks),
        "validation_files": sum(len(d.validation) for d in ranks),
        "steps_per_epoch": steps,
        "total_steps": _total_steps(config, steps),
    }


def _check_out_dir(config: TrainConfig) -> None:
    """Refuse, before any work, a run folder that is the sample set itself (a folder inside
    it is fine: the sample set reads only its own files), that is a file, or that cannot be
    written (a read-only file system, no permission): a probe file is written and removed in
    the run folder or, when it does not exist yet, in its nearest existing parent."""
    out = Path(config.out_dir)
    if out.resolve() == Path(config.data_dir).resolve():
        raise ValueError(
            f"the run folder {config.out_dir} (--out, out_dir) is the sample set "
            f"{config.data_dir} (--data, data_dir): the checkpoints, history and model would be "
            "written among the samples; give another folder"
        )
    where = out
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise ValueError(
            f"{where}: exists and is not a directory; the run folder {out} (--out, out_dir) "
            "cannot be made there"
        )
    probe = temp_path(where / ".climnb-write-probe")
    try:
        probe.write_bytes(b"\0" * 4096)  # a block of data: an empty file fits on a full disk
        probe.unlink()
    except OSError as err:
        with contextlib.suppress(OSError):
            probe.unlink()
        problem = f"cannot write the run folder (--out, out_dir) there: {err.strerror}"
        raise OSError(err.errno, problem, str(where)) from None


@contextlib.contextmanager
def _claim_out_dir(config: TrainConfig, rank: int):
    """Rank 0 marks the run folder as in use for the run (``.OUT.PID-XXXX.tmp`` beside it);
    a second live run into the same folder is refused at its start
    (:class:`climnb.io.atomic.OutputBusy`), and a dead run's mark is removed."""
    if rank != 0:
        yield
        return
    out = Path(config.out_dir).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(out.parent, out.name)  # raises while another live run holds it
    mark = temp_path(out)
    try:
        mark.write_text(str(os.getpid()))
    except OSError as err:  # a full disk: name it, leave no mark
        mark.unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror, str(out)) from None
    try:
        yield
    finally:
        mark.unlink(missing_ok=True)


def _reading(batches, tf):
    """Iterate over a pipeline's ``batches``; a sample file the reader refuses (a
    :class:`SampleError` naming the file, which reaches here wrapped in a TensorFlow error)
    is raised as itself, without TensorFlow's traceback."""
    it = iter(batches)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except tf.errors.OpError as err:
            found = re.search(r"SampleError: (.+)", err.message or "")
            if found is None:
                raise
            raise SampleError(found.group(1).strip()) from None
        yield batch


def _batches(files, stats, config: TrainConfig, epoch, *, shuffle=True):
    """This rank's batches of ``files`` (already this rank's own)."""
    pipe = PipelineConfig(
        batch_size=config.batch_size,
        seed=config.seed,
        shuffle=shuffle,
        channels=config.channels,
        drop_remainder=shuffle,
        workers=config.read_workers,
        autotune=config.data_autotune,
        augment=config.augment if shuffle else None,
    )
    return make_dataset(files, stats, epochs=1, start_epoch=epoch, config=pipe)


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
    with abort_on_failure():  # one rank's error stops every rank (climnb.train.together)
        return _train(config, on_record)


def _train(config: TrainConfig, on_record: OnRecord | None) -> TrainResult:
    parent = _parent(config)  # before anything is written: a parent that cannot start it
    if parent is not None:
        config = inherit(config, parent)
    _check_out_dir(config)
    with _claim_out_dir(config, _rank_hint()):
        return _train_claimed(config, on_record, parent)


def _parent(config: TrainConfig) -> Parent | None:
    """The bundle ``init_from`` names, checked against the run's model and channels."""
    if not config.init_from:
        return None
    parent = open_parent(config.init_from)
    channels = config.channels or SampleSet.open(config.data_dir).channels
    check_parent(parent, config.model, config.preset, channels)
    return parent


def _rank_hint() -> int:
    """This process's rank before Horovod starts (launchers set it in the environment)."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "HOROVOD_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def _train_claimed(
    config: TrainConfig, on_record: OnRecord | None, parent: Parent | None = None
) -> TrainResult:
    if config.threads:  # oneDNN's OpenMP pool: must be sized before TensorFlow loads it
        os.environ.setdefault("OMP_NUM_THREADS", str(config.threads))
    tf = import_tf()
    _set_threads(tf, config.threads)
    hvd = _horovod()
    rank, size = hvd.rank(), hvd.size()
    emit = on_record or (lambda record: None)
    if config.stage_first:
        all_ok(hvd, lambda: _stage_first(config, hvd, rank, size, hvd.local_size()))
    # every rank opens and verifies its files, then all go on, or all stop naming the file
    data = all_ok(hvd, lambda: _Data.prepare(config, rank, size, hvd.local_size()))
    if parent is not None:  # the parent's normalisation: its kernels see what they learnt on
        data = dataclasses.replace(data, stats=parent_stats(data.stats, parent))
    steps = _steps_per_epoch(hvd.allgather_object(len(data.train)), config.batch_size)
    _check_files(config, data)
    run = _Run(config, data, hvd, tf, total_steps=_total_steps(config, steps), parent=parent)
    log.info(
        "rank %d/%d: %d training files from %s, %d steps per epoch",
        rank,
        size,
        len(data.train),
        data.source,
        steps,
    )
    if run.finished:  # a rerun of a finished run: its results stay as they are
        return run.result_as_is()
    stopped = False
    for epoch in range(run.epoch, config.epochs):
        skip = run.step_in_epoch  # resumed inside this epoch: its batches done so far
        batches = _batches(data.train, data.stats, config, epoch).take(steps)
        for x, y, _ in _reading(batches.skip(skip), tf):
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
        if stopped or run.reached_max or run.early_stopped:
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


def _check_files(config: TrainConfig, data: _Data) -> None:
    """Before the model is built and its step traced (seconds, minutes for a large network):
    open every file this rank will read, as its readers do (header, grid, channels against
    the statistics, labels that are class indices), so that such a file stops the run here
    with the reader's own message, not at the batch that first holds it. The data's values
    are read by the steps (a non-finite value stops training there, naming step and file);
    reading them here would cost an epoch's reads. Out of :func:`all_ok`: as an error at a
    step, one rank's bad file aborts every rank (:mod:`climnb.train.together`)."""
    for files in (data.train, data.validation):
        if files:
            SampleReader(files, data.stats, channels=config.channels).check_labels()


class _Run:
    """State of one rank's run: model, optimiser, counters, records."""

    def __init__(self, config: TrainConfig, data: _Data, hvd, tf, total_steps: int, parent=None):
        self.config, self.data, self.hvd, self.tf = config, data, hvd, tf
        self.parent: Parent | None = parent
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
        if self.rank == 0:
            log.info("precision %s (%s)", config.precision, config.precision_reason)
        self.model_overrides = self._model_overrides()  # transport channels from the stats
        self.model = build_model(
            config.model,
            data.shape,
            3,
            config.preset,
            mixed_precision=config.precision,
            **self.model_overrides,
        )
        if parent is not None:  # before the optimiser sees the trainable variables
            freeze_blocks(self.model, config.freeze_blocks)
        self.optimizer = optim.make_optimizer(opt_config)
        self.optimizer.build(self.model.trainable_variables)
        weights, dice = data.class_weights, config.dice_weight

        def loss_fn(y, logits):  # no Dice ops in the graph when its weight is 0
            loss = weighted_cross_entropy(y, logits, weights)
            return loss + dice * soft_dice_loss(y, logits) if dice else loss

        self.loss_fn = loss_fn
        self.flop_per_sample = count_flops(self.model).training
        self.records, self.validations = [], []
        self.global_step, self.epoch, self.step_in_epoch = 0, 0, 0
        self.checkpoints = Path(config.out_dir) / "checkpoints"
        self.best_dir = Path(config.out_dir) / "best"  # the best validation's weights
        self.best: dict | None = None  # its step, epoch and validation IoU
        self.since_best = 0  # validations since the best one
        self.early_stopped = False
        self._resume_and_broadcast()
        self._step_fn = self._compile_step()
        # validation's forward pass, compiled once (the last batch may trace a second shape):
        # called eagerly it took 2-5 s of every epoch's turnover on the toy demo
        self._predict = tf.function(
            lambda x: tf.argmax(self.model(x, training=False), axis=-1),
            autograph=False,
            reduce_retracing=True,
        )
        self._last_time = None

    # --- start ---------------------------------------------------------------------------------

    def _resume_and_broadcast(self) -> None:
        state = None
        if self.rank == 0:  # a STOP left by an earlier run must not end this one
            self.config.stop_file.unlink(missing_ok=True)
            for folder in (self.checkpoints, Path(self.config.out_dir), self.best_dir):
                for p in remove_leftovers(folder):  # a killed run's half-written file
                    log.info("removed %s, left by an interrupted run", p)
        ckpt = load_latest(self.checkpoints) if self.rank == 0 and self.config.resume else None
        if ckpt is not None:
            state = restore(ckpt, self.model, self.optimizer)
            log.info("resuming from %s (step %d)", ckpt.path, state["step"])
        elif self.rank == 0:  # a fresh start: an earlier run's best weights are not this run's
            for old in self.best_dir.glob("ckpt-*.npz"):
                old.unlink()
            if self.parent is not None:  # the other ranks get them in the broadcast below
                init_weights(self.model, self.parent, self._input_stats()[0])
        state = self.hvd.broadcast_object(state, root_rank=0)
        if state:
            self.global_step, self.epoch = state["step"], state["epoch"]
            self.step_in_epoch = state["step_in_epoch"]
            self.records = [r for r in state.get("records", []) if r["step"] <= state["step"]]
            self.validations = [
                v for v in state.get("validations", []) if v["step"] <= state["step"]
            ]
            self.best = state.get("best")
            self.since_best = int(state.get("since_best", 0))
            self.early_stopped = bool(state.get("early_stopped", False))
        # identical start on every rank: weights and optimiser state from rank 0 (alone, there
        # is nothing to send). In place: a few broadcast ops, where the default traces a
        # tf.function assigning each variable (measured: 1.7 s of each rank's start, 0.08 s in
        # place; over MPI and Gloo, int64 and float32 variables alike)
        if self.size > 1:
            for variables in (self.model.variables, self.optimizer.variables):
                self.hvd.broadcast_variables([v.value for v in variables], 0, inplace=True)

    def _compile_step(self):
        hvd, tf = self.hvd, self.tf

        def allreduce(grads):
            return hvd.grouped_allreduce(grads, op=hvd.Average)

        # batch norm's moving means and variances (not, say, a dropout layer's seed state)
        statistics = [v for v in self.model.non_trainable_variables if "float" in str(v.dtype)]

        # no AutoGraph: the step has no Python control flow on tensors (the optimiser and the
        # schedules use ops.where/ops.cond), and converting its source cost ~0.7 s of CPU per
        # run, each rank (measured: identical losses with float16 loss scaling, LARC, gradient
        # lag, warm-up, piecewise and poly schedules, Tiramisu and DeepLab)
        @tf.function(autograph=False)
        def step(x, y):
            loss = optim.train_step(
                self.model,
                self.optimizer,
                self.loss_fn,
                x,
                y,
                allreduce=allreduce if self.size > 1 else None,
            )
            # The loss alone does not show a bad batch: in a compiled step oneDNN fuses batch
            # norm with the ReLU after it, whose max(NaN, 0) is 0, so a NaN or overflowing input
            # leaves the loss finite and only the moving statistics non-finite.
            finite = [tf.reduce_all(tf.math.is_finite(x))]
            finite += [tf.reduce_all(tf.math.is_finite(v)) for v in statistics]
            return loss, tf.reduce_all(tf.stack(finite))

        return step

    # --- steps ---------------------------------------------------------------------------------

    def step(self, x, y, epoch: int) -> tuple[Record, bool]:
        tf = self.tf
        start = time.perf_counter()
        loss, finite = self._step_fn(x, y)
        stop_here = float(self.config.stop_file.exists())
        flags = [tf.cast(loss, tf.float32), stop_here, 1.0 - tf.cast(finite, tf.float32)]
        summed = self.hvd.allreduce(tf.stack(flags), op=self.hvd.Sum)
        loss_sum, stop, not_finite = (float(v) for v in np.asarray(summed))
        seconds = time.perf_counter() - start
        self.global_step += 1
        self.step_in_epoch += 1
        if not np.isfinite(loss_sum):  # every rank sees the same sums: all stop here together
            self._stop_non_finite(float(loss), epoch)
        if not_finite:
            what = "batch (its inputs, or the batch-norm statistics they gave)"
            self._stop_non_finite(float(loss), epoch, what=what)
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

    def _batch_files(self, epoch: int) -> list[str]:
        """Names of the files of this rank's batch just taken (the pipeline's own order)."""
        if self.step_in_epoch < 1:
            return []
        shard = shard_files(self.data.train)  # the pipeline's order: sorted, then shuffled
        order = epoch_order(len(shard), seed=self.config.seed, epoch=epoch)
        b, n = self.step_in_epoch - 1, self.config.batch_size
        return [str(shard[i]) for i in order[b * n : (b + 1) * n]]

    def _stop_non_finite(self, loss: float, epoch: int, what: str = "loss") -> None:
        """Raise :class:`NonFiniteError` on every rank, naming the step and each rank's batch;
        nothing is saved, so the newest checkpoint on disk stays the last good one."""
        mine = {"rank": self.rank, "loss": loss, "files": self._batch_files(epoch)}
        ranks = self.hvd.allgather_object(mine)
        if self.rank == 0:
            self._write_history()
        good = latest(self.checkpoints)
        batches = "; ".join(
            f"rank {r['rank']} (loss {r['loss']:.4g}): {', '.join(r['files'])}" for r in ranks
        )
        raise NonFiniteError(
            f"the {what} is not finite at step {self.global_step} (epoch {epoch}); batch files: "
            f"{batches}. Stopped without saving: "
            + (f"the last good checkpoint is {good}" if good else "no checkpoint was written")
            + ", no model bundle. Fix or remove those files, then run again to resume."
        )

    def _check_weights(self, epoch: int) -> None:
        """The weights are the same on every rank, so every rank reaches the same verdict."""
        if not all(np.all(np.isfinite(w)) for w in self.model.get_weights()):
            self._stop_non_finite(float("nan"), epoch, what="model's weights")

    @property
    def finished(self) -> bool:
        """Resumed from the checkpoint a finished run wrote: all epochs, or ``max_steps``."""
        return self.global_step > 0 and (
            self.epoch >= self.config.epochs or self.reached_max or self.early_stopped
        )

    def result_as_is(self) -> TrainResult:
        """The result of a finished run, without training: its bundle is left as it is when
        it holds the last checkpoint's step, else (lost, or older) written again from it."""
        bundle = Path(self.config.out_dir) / "model"
        steps = _bundle_steps(bundle)
        if self.rank == 0 and steps != self.global_step:
            log.warning(
                "%s: the finished run's model bundle is %s: writing it from the checkpoint of "
                "step %d, without training",
                self.config.out_dir,
                "missing" if steps is None else f"of step {steps}",
                self.global_step,
            )
            self.write_bundle()
        elif self.rank == 0:
            log.warning(
                "%s: finished at step %d; left as it is (to train on, raise --max-steps or "
                "--epochs, or use another --out)",
                self.config.out_dir,
                self.global_step,
            )
        good = latest(self.checkpoints)
        return TrainResult(
            self.rank,
            self.size,
            pd.DataFrame(self.records),
            pd.DataFrame(self.validations),
            weights_checksum(self.model),
            False,
            str(good) if good and self.rank == 0 else None,
            str(bundle) if self.rank == 0 else None,
            finished_before=True,
        )

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
        tf = self.tf
        self.sync_statistics()
        cm = ConfusionMatrix(3)
        sample = None
        if self.data.validation:
            batches = _batches(self.data.validation, self.data.stats, self.config, 0, shuffle=False)
            for x, y, _ in _reading(batches, tf):
                pred = self._predict(x)
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
        record["score"] = _score(record)
        self._track_best(record, epoch)
        record["best"] = bool(self.best and self.best["step"] == self.global_step)
        self.validations.append(record)
        log.info(
            "rank %d epoch %d step %d: validation mean IoU %.3f, TC and AR %.3f%s",
            self.rank,
            epoch,
            self.global_step,
            mean_iou,
            record["score"],
            " (best so far)" if record["best"] else "",
        )
        return {**record, "sample": sample} if sample is not None else record

    def _track_best(self, record: Record, epoch: int) -> None:
        """Keep the weights of the best validation so far (rank 0 writes them to ``best/``)
        and stop early after ``patience`` validations without a better one. Every rank holds
        the same weights and the same summed confusion, so all decide alike."""
        if not self.config.keep_best and not self.config.patience:
            return
        best = np.nan if self.best is None else self.best["score"]
        better = not np.isfinite(best) or record["score"] > best  # NaN: no validation data
        if better:
            self.since_best = 0
            self.best = {
                "step": self.global_step,
                "epoch": epoch,
                "score": record["score"],
                "mean_iou": record["mean_iou"],
                **{k: v for k, v in record.items() if k.startswith("iou_")},
            }
            if self.config.keep_best and self.rank == 0:
                save_checkpoint(
                    self.best_dir,
                    self.global_step,
                    self.model,
                    self.optimizer,
                    {"best": self.best},
                    keep=1,
                )
        else:
            self.since_best += 1
        if self.config.patience and self.since_best >= self.config.patience:
            self.early_stopped = True
            if self.rank == 0:
                log.info(
                    "early stop at epoch %d: %d validations without a better one than epoch %d's",
                    epoch,
                    self.since_best,
                    self.best["epoch"],
                )

    # --- saving --------------------------------------------------------------------------------

    def save(self, epoch: int) -> str | None:
        """Checkpoint (rank 0 writes; every rank calls it at the same step). The batch-norm
        statistics are averaged over the ranks first: a checkpoint holds rank 0's variables
        only, and a run resumed from it gives them to every rank, so unsynchronised
        statistics made a resumed run end with other statistics than an uninterrupted one
        (``benchmarks/bench_faults.py``); synchronised, both runs hold the same state."""
        self._check_weights(epoch)
        self.sync_statistics()
        if self.rank != 0:
            return None
        state = {
            "epoch": self.epoch if self.step_in_epoch == 0 else epoch,
            "step_in_epoch": self.step_in_epoch,
            "records": self.records,
            "validations": self.validations,
            "best": self.best,
            "since_best": self.since_best,
            "early_stopped": self.early_stopped,
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
        checkpoint = self.save(self.epoch)  # the statistics averaged over the ranks first
        if self.rank != 0:
            return None, None
        return checkpoint, self.write_bundle()

    def write_bundle(self) -> str:
        """Write the model bundle ``OUT/model`` (rank 0): the best validation's weights with
        ``keep_best`` (from ``OUT/best``), else those in memory. The weights in memory stay the
        last step's."""
        best = self._best_weights()
        if best is None:
            return self._save_bundle(self.global_step)
        last = self.model.get_weights()
        self.model.set_weights(best)
        try:
            return self._save_bundle(self.best["step"])
        finally:
            self.model.set_weights(last)

    def _best_weights(self) -> list | None:
        """The best validation's weights when they are not the last step's, else ``None``."""
        if not (self.config.keep_best and self.best) or self.best["step"] == self.global_step:
            return None
        path = self.best_dir / f"ckpt-{self.best['step']:08d}.npz"
        if not path.exists():
            log.warning("%s is missing: the model bundle holds the last step's weights", path)
            self.best = None
            return None
        return load_checkpoint(path).model_weights

    def _input_stats(self):
        """The network's input channels and their statistics."""
        stats, channels = self.data.stats, self.config.channels or tuple(self.data.stats.channels)
        return channels, stats.select([list(stats.channels).index(c) for c in channels])

    def _model_overrides(self) -> dict:
        channels, chosen = self._input_stats()
        return resolve_channels(self.config.model_overrides, channels, chosen.minval, chosen.maxval)

    def _save_bundle(self, weights_step: int) -> str:
        channels, chosen = self._input_stats()
        extra = {"train_config": self.config.to_dict(), "steps": self.global_step}
        extra["weights_step"] = weights_step  # the step whose weights these are
        if self.best:
            extra["best_validation"] = self.best
        extra["early_stopped"] = self.early_stopped
        if self.parent is not None:
            extra["parent"] = self.parent.record()
        if self.data.stats.label_config:  # the teacher's settings, from stats.h5
            extra["label_config"] = self.data.stats.label_config
        bundle = save_bundle(
            self.model,
            Path(self.config.out_dir) / "model",
            channels=channels,
            minval=chosen.minval,
            maxval=chosen.maxval,
            name=self.config.model,
            preset=self.config.preset,
            overrides=dict(self.model_overrides),  # to rebuild it for another grid
            extra=extra,
        )
        return str(bundle)


def _score(record: Record) -> float:
    """What the best validation is chosen by: the mean IoU of the event classes (TC, AR),
    those present; the mean IoU over all classes where neither is."""
    events = [record[k] for k in ("iou_1", "iou_2") if k in record and np.isfinite(record[k])]
    return float(np.mean(events)) if events else float(record["mean_iou"])


def _bundle_steps(path: Path) -> int | None:
    """The training step a bundle records (``None``: no readable bundle there)."""
    try:
        return int(load_bundle(path).extra.get("steps"))
    except (BundleError, TypeError, ValueError):
        return None


def summarize(results: list[TrainResult]) -> pd.Series:
    """The headline figures of a run from every rank's :class:`TrainResult` (rank 0 first)."""
    first = results[0]
    history, validation = first.history, first.validation
    best = validation[validation.best] if "best" in validation else validation.iloc[:0]
    best = best.iloc[-1] if len(best) else None
    return pd.Series(
        {
            "ranks": first.size,
            "steps": int(history.step.max()) if len(history) else 0,
            "final loss": history.loss_avg.iloc[-1] if len(history) else np.nan,
            "validation mean IoU": validation.mean_iou.iloc[-1] if len(validation) else np.nan,
            "best validation TC, AR (the bundle's)": (
                f"{best.iou_1:.3f}, {best.iou_2:.3f} (epoch {int(best.epoch) + 1}, step "
                f"{int(best.step)})"
                if best is not None
                else "-"
            ),
            "samples/s (median)": history.samples_per_s.iloc[1:].median(),
            "sustained GFLOP/s (median)": history.gflops.iloc[1:].median(),
            "weights identical on all ranks": len({r.checksum for r in results}) == 1,
            "model bundle": first.bundle,
        }
    )


def weights_checksum(model) -> str:
    """SHA-256 of all weights' bytes: equal on two ranks only if the weights are identical."""
    digest = hashlib.sha256()
    for w in model.get_weights():
        digest.update(np.ascontiguousarray(w).tobytes())
    return digest.hexdigest()
