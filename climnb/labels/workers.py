"""The worker processes that label while a threaded dask computation writes in this one
(:func:`worker_processes`), and the switch every label task goes through (:func:`run_task`).

Examples
--------
>>> run_task(abs, -3)  # outside worker_processes(n): here
3
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["worker_processes", "run_task"]

#: The process pool that label tasks are sent to (see :func:`worker_processes`), with the
#: process id that owns it and its number of processes (None: a pool of one's own).
_POOL: tuple[int, object, int | None] | None = None

#: What a worker process imports as it starts, before its first task: the label tasks' module
#: (xarray, dask, SciPy, a second or more), while the parent still opens the input.
_PRELOAD = "climnb.labels.dataset"


@contextlib.contextmanager
def worker_processes(n: int, *, pool=None):
    """Label in ``n`` worker processes while a threaded dask computation runs in this one.

    Inside the block, each label task of :func:`~climnb.labels.dataset.label_dataset` that a
    thread of this process runs is sent to one of ``n`` processes (a
    :class:`concurrent.futures.ProcessPoolExecutor`, started fresh with ``spawn``, so that no
    lock held by another thread is copied into it); the process reads the task's own time
    chunk (:class:`~climnb.labels.dataset.StepInputs`), labels it and returns the uint8 labels
    and the event table. The processes start at once, each importing the labeller, so that
    they are ready by the first task. Everything else (the output writes, their locks)
    stays in this process's threads. This is the arrangement ``climnb label --workers N`` uses:
    labelling scales with processes (no GIL, no shared HDF5 lock) and the NetCDF writer's lock
    stays in one process::

        with worker_processes(2), dask.config.set(scheduler="threads", num_workers=2):
            compute(write, events)

    Elsewhere (the ``sync``, ``processes`` or dask.distributed schedulers, or other processes)
    label tasks run where they are scheduled, as without it. ``pool``: an executor of one's
    own to send them to instead (left open at the end, e.g. to keep its processes warm over
    several computations; ``n`` is then ignored). Inside a block of ``n`` processes of this
    process, ``worker_processes(n)`` gives that block's pool: a command can open it before
    the input (the processes start while it reads) and the writer inside still finds it.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _POOL
    if pool is None and n < 1:
        raise ValueError(f"worker processes must be at least 1, got {n}")
    if pool is None and _POOL is not None and _POOL[0] == os.getpid() and _POOL[2] == n:
        yield _POOL[1]  # the enclosing block's processes, started already
        return
    own = pool is None
    if own:
        pool = ProcessPoolExecutor(
            n,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start,
            initargs=(os.getpid(), _PRELOAD),
        )
        for _ in range(n):  # each submit with no idle process starts one: all n now
            pool.submit(os.getpid)
    previous, _POOL = _POOL, (os.getpid(), pool, n if own else None)
    done = False
    try:
        yield pool
        done = True
    finally:
        _POOL = previous
        if own:  # after an error, not held up by processes still starting
            pool.shutdown(wait=done, cancel_futures=not done)


def _start(parent: int, preload: str) -> None:
    """A worker process's start: watch ``parent`` (:func:`_exit_with`), import ``preload``."""
    import importlib

    _exit_with(parent)
    importlib.import_module(preload)


def _exit_with(parent: int, every_s: float = 0.5) -> None:
    """In a worker process: exit when ``parent`` has gone (killed with SIGKILL, say), which
    the pool cannot tell its idle workers."""
    import threading
    import time

    def watch():
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="climnb-parent-watch").start()


def run_task(fn, *args):
    """``fn(*args)`` here, or in a worker process inside :func:`worker_processes` (in the
    process that opened it; ``fn`` then goes by reference and must be a module's function)."""
    if _POOL is not None and _POOL[0] == os.getpid():
        return _POOL[1].submit(fn, *args).result()
    return fn(*args)
