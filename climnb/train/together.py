"""Ranks fail together: one rank's bad file stops every rank, never leaves them waiting.

Data-parallel training is a chain of collectives (allgather, broadcast, allreduce): a rank
that raises on its own leaves the others waiting in the next collective for ever. Two guards:

* :func:`all_ok` runs this rank's preparation (opening and verifying its files), then one
  collective says whether every rank got there: if one failed, every rank raises the same
  one-line :class:`RankError` naming the rank and its error (the file), before the first step;
* :func:`abort_on_failure` wraps the training of a rank: an error that only this rank raises
  (a file that turns bad during a step, say) is written as one line naming the rank, and the
  whole job is aborted (``MPI_Abort`` with exit status 2 under MPI; without MPI, Horovod is
  shut down and the process exits with status 2), instead of hanging. Not on ipyparallel
  engines: there :func:`climnb.train.engines.train_on_engines` reports the failed engine's
  error and stops the engines.

Errors marked ``collective`` (:class:`RankError`, a non-finite loss), which every rank raises
at the same point, need no abort: the ranks stop side by side and the caller reports them as
usual. Any other error once Horovod runs with several ranks aborts the job, even one that every
rank would raise (a batch too large for the files, say): a rank cannot know whether the others
raised it too or wait for it in a collective; the one line it writes still says what is wrong.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import TypeVar

from climnb.runtime.install import install_hint

log = logging.getLogger(__name__)

__all__ = ["RankError", "all_ok", "abort_on_failure", "launched_ranks", "one_process_only"]

# processes started together by a launcher: OpenMPI's mpirun, MPICH's/Slurm's PMI, srun
_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS")

T = TypeVar("T")


class RankError(ValueError):
    """A rank failed before training; raised on every rank, naming the rank and the error."""

    collective = True  # every rank raises it: no abort needed


def all_ok(hvd, work: Callable[[], T]) -> T:
    """``work()`` on this rank, then a collective "all ok": a failure on any rank raises
    :class:`RankError` (``rank R of N: ...``) on every rank. ``hvd``: Horovod, or the loop's
    one-process stand-in."""
    rank, size = hvd.rank(), hvd.size()
    try:
        result, error = work(), None
    except Exception as err:  # noqa: BLE001 - reported on every rank below
        result, error = None, err
    if size == 1:
        if error is not None:
            raise error
        return result
    message = None if error is None else _one_line(error)
    failed = [(r, m) for r, m in hvd.allgather_object((rank, message)) if m is not None]
    if failed:
        r, m = failed[0]
        more = f" (and {len(failed) - 1} more rank(s))" if len(failed) > 1 else ""
        raise RankError(f"rank {r} of {size}: {m}{more}") from error
    return result


@contextlib.contextmanager
def abort_on_failure() -> Iterator[None]:
    """Abort the whole job when this rank raises an error the other ranks do not share."""
    try:
        yield
    except Exception as err:
        if not getattr(err, "collective", False):
            _abort(err)
        raise


def _abort(err: BaseException) -> None:
    """Under Horovod with several ranks: one line naming the rank, then abort every rank."""
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        return
    if not hvd.is_initialized() or hvd.size() < 2 or _in_kernel():
        return
    rank, size = hvd.rank(), hvd.size()
    print(
        f"climnb train: error (rank {rank} of {size}): {_one_line(err)}; aborting every rank",
        file=sys.stderr,
        flush=True,
    )
    log.debug("rank %d failed", rank, exc_info=err)
    if hvd.mpi_enabled():  # Horovod over MPI (not Gloo: mpi4py would start MPI of its own)
        try:
            from mpi4py import MPI
        except ImportError:
            MPI = None
        if MPI is not None and MPI.Is_initialized() and MPI.COMM_WORLD.size == size:
            MPI.COMM_WORLD.Abort(2)
    with contextlib.suppress(Exception):  # Gloo: the others see this rank's links close
        hvd.shutdown()
    os._exit(2)


def _in_kernel() -> bool:
    """On an ipyparallel engine (an IPython kernel): there ``train_on_engines`` sees the
    error and stops the engines itself, and aborting would lose the error's text."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


def launched_ranks(env: dict | None = None) -> int:
    """How many processes the launcher that started this one started (1 without one).

    >>> launched_ranks({"OMPI_COMM_WORLD_SIZE": "4"}), launched_ranks({})
    (4, 1)
    """
    env = os.environ if env is None else env
    sizes = [int(env[v]) for v in _SIZE_VARIABLES if env.get(v, "").isdigit()]
    return max(sizes, default=1)


def one_process_only(env: dict | None = None) -> None:
    """Without Horovod, training is one process: refuse (one line) when a launcher started
    several, which would each train alone into the same run folder."""
    n = launched_ranks(env)
    if n > 1:
        raise ValueError(
            f"Horovod is not installed, so the {n} processes the launcher started cannot train "
            "together: run one process (python -m climnb train ... without mpirun/srun), or "
            f"install Horovod: {install_hint('horovod')}"
        )


def _one_line(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())
