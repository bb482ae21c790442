"""The ranks a training process belongs to: Horovod, or one process without it.

:func:`horovod` starts Horovod (``horovod.tensorflow``) when it is installed, else returns
:class:`OneProcess`, the few Horovod calls the loop makes, for a single process. Also the
rank a launcher gave this process before Horovod starts (:func:`rank_hint`), the compute
threads of a rank (:func:`set_threads`) and mpi4py's ``MPI`` where Horovod runs over MPI.
"""

from __future__ import annotations

import logging
import os
import re

from climnb.train.together import one_process_only

log = logging.getLogger(__name__)

__all__ = ["OneProcess", "horovod", "mpi", "rank_hint", "set_threads"]


class OneProcess:
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


def horovod():
    """``horovod.tensorflow``, initialised; :class:`OneProcess` where it is not installed."""
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        one_process_only()
        log.debug("Horovod is not installed: training in one process without it")
        return OneProcess()
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


def set_threads(tf, threads: int | None) -> None:
    """Size TensorFlow's thread pools for ``threads`` compute threads (``None``: its default)."""
    if not threads:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
    except RuntimeError:  # TensorFlow already running in this process (an engine re-used)
        pass


def mpi():
    """mpi4py's ``MPI`` (initialised by Horovod when it runs over MPI), or ``None``."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI


def rank_hint() -> int:
    """This process's rank before Horovod starts (launchers set it in the environment)."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "HOROVOD_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0
