"""What a rank trains on: its files, statistics and class weights, and the batch plan.

:meth:`RankData.prepare` opens this rank's training and validation files (its shard of the
shared sample set, or its node's staged copies), :func:`steps_per_epoch` and
:func:`total_steps` give every rank the same number of steps, :func:`plan` says in advance
what a run will take, and :func:`batches` makes a rank's tf.data batches
(:mod:`climnb.train.pipeline`); :func:`reading` iterates over them, raising a refused sample
file as itself.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from climnb.data.staging import StagingConfig, files_per_rank, stage
from climnb.io.reader import SampleReader
from climnb.io.samples import SampleError
from climnb.io.sampleset import SampleSet, StagedSet
from climnb.io.stats import Stats
from climnb.models.losses import PAPER_FREQUENCIES, class_weights, frequencies_from_counts
from climnb.train.config import TrainConfig
from climnb.train.init_from import Parent, parent_stats
from climnb.train.pipeline import PipelineConfig, make_dataset, shard_files
from climnb.train.ranks import mpi
from climnb.train.together import all_ok

log = logging.getLogger(__name__)

__all__ = [
    "RankData",
    "batches",
    "check_files",
    "plan",
    "prepare",
    "reading",
    "stage_first",
    "steps_per_epoch",
    "total_steps",
]


@dataclass(frozen=True)
class RankData:
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


def prepare(config: TrainConfig, hvd, parent: Parent | None = None) -> tuple[RankData, int]:
    """This rank's data and the steps per epoch, the same on every rank. Staged first where
    ``config.stage_first`` asks; every rank opens and verifies its files, then all go on, or
    all stop naming the file (:func:`climnb.train.together.all_ok`)."""
    rank, size = hvd.rank(), hvd.size()
    if config.stage_first:
        all_ok(hvd, lambda: stage_first(config, rank, size, hvd.local_size()))
    data = all_ok(hvd, lambda: RankData.prepare(config, rank, size, hvd.local_size()))
    if parent is not None:  # the parent's normalisation: its kernels see what they learnt on
        data = dataclasses.replace(data, stats=parent_stats(data.stats, parent))
    steps = steps_per_epoch(hvd.allgather_object(len(data.train)), config.batch_size)
    check_files(config, data)
    return data, steps


def stage_first(config: TrainConfig, rank: int, size: int, local_size: int) -> None:
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
    MPI = mpi()
    world = MPI.COMM_WORLD if MPI is not None and MPI.COMM_WORLD.size == size else None
    if world is not None:
        heads = world.Split(0 if rank % per_node == 0 else MPI.UNDEFINED, rank)
        if heads != MPI.COMM_NULL:
            log.info("rank %d: %s", rank, stage(staging, heads).summary)
            heads.Free()
    elif rank == 0:
        log.info("rank 0 for every node: %s", stage(staging).summary)
    # everyone waits for the staging in the caller's all_ok, which also reports its errors


def _class_weights(config: TrainConfig, counts) -> np.ndarray:
    if config.class_weighting == "none":
        return np.ones(3)
    freq = (
        frequencies_from_counts(np.maximum(counts, 1))
        if counts is not None and np.sum(counts) > 0
        else PAPER_FREQUENCIES
    )
    return np.asarray(class_weights(freq, config.class_weighting), np.float64)


def steps_per_epoch(counts: list[int], batch: int) -> int:
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


def total_steps(config: TrainConfig, steps_per_epoch: int) -> int:
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
        steps = steps_per_epoch(counts, config.batch_size)
        return {
            "train_files": sum(counts),
            "steps_per_epoch": steps,
            "total_steps": total_steps(config, steps),
        }
    local = local_size or config.ranks_per_node or size
    ranks = [RankData.prepare(config, r, size, local) for r in range(size)]
    steps = steps_per_epoch([len(d.train) for d in ranks], config.batch_size)
    return {
        "train_files": sum(len(d.train) for d in ranks),
        "validation_files": sum(len(d.validation) for d in ranks),
        "steps_per_epoch": steps,
        "total_steps": total_steps(config, steps),
    }


def check_files(config: TrainConfig, data: RankData) -> None:
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


def batches(files, stats, config: TrainConfig, epoch, *, shuffle=True):
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


def reading(batches, tf):
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
