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

__all__ = ["worker_processes", "run_task", "current_pool"]

#: What a worker process imports as it starts (:func:`_warm_up`): the labeller, so that the
#: first label task finds it loaded.
_WARM_MODULES = ("climnb.labels.dataset",)

#: The process pool that label tasks are sent to (see :func:`worker_processes`), with the
#: process id that owns it.
_POOL: tuple[int, object] | None = None


@contextlib.contextmanager
def worker_processes(n: int, *, pool=None):
    """Label in ``n`` worker processes while a threaded dask computation runs in this one.

    Inside the block, each label task of :func:`~climnb.labels.dataset.label_dataset` that a
    thread of this process runs is sent to one of ``n`` processes (a
    :class:`concurrent.futures.ProcessPoolExecutor`, started fresh with ``spawn``, so that no
    lock held by another thread is copied into it); the process reads the task's own time
    chunk (:class:`~climnb.labels.dataset.StepInputs`), labels it and returns the uint8 labels
    and the event table. Everything else (the output writes, their locks)
    stays in this process's threads. This is the arrangement ``climnb label --workers N`` uses:
    labelling scales with processes (no GIL, no shared HDF5 lock) and the NetCDF writer's lock
    stays in one process::

        with worker_processes(2), dask.config.set(scheduler="threads", num_workers=2):
            compute(write, events)

    Elsewhere (the ``sync``, ``processes`` or dask.distributed schedulers, or other processes)
    label tasks run where they are scheduled, as without it. ``pool``: an executor of one's
    own to send them to instead (left open at the end, e.g. to keep its processes warm over
    several computations; ``n`` is then ignored).

    The ``n`` processes start at once and import the labeller (:func:`_warm_up`) while the
    caller goes on (opening the input, building the graph), rather than at the first label
    task: a worker process's start is about 0.8 s of CPU. When the block ends, each
    worker process leaves without Python's interpreter teardown (:func:`_exit_with`), which
    the pool waits for.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _POOL
    if pool is None and n < 1:
        raise ValueError(f"worker processes must be at least 1, got {n}")
    with contextlib.ExitStack() as stack:
        if pool is None:
            context = multiprocessing.get_context("spawn")
            pool = stack.enter_context(
                ProcessPoolExecutor(
                    n, mp_context=context, initializer=_exit_with, initargs=(os.getpid(),)
                )
            )
            for _ in range(n):  # each submit starts a process (spawn starts them on demand)
                pool.submit(_warm_up)
        previous, _POOL = _POOL, (os.getpid(), pool)
        try:
            yield pool
        finally:
            _POOL = previous


def current_pool():
    """The executor of the :func:`worker_processes` block this process is in, or None."""
    return _POOL[1] if _POOL is not None and _POOL[0] == os.getpid() else None


def _warm_up() -> None:
    """In a worker process: import what label tasks run (see :func:`worker_processes`)."""
    import importlib

    for name in _WARM_MODULES:
        importlib.import_module(name)


def _exit_with(parent: int, every_s: float = 0.5) -> None:
    """In a worker process: exit when ``parent`` has gone (killed with SIGKILL, say), which
    the pool cannot tell its idle workers; and, when the pool closes, exit at once after
    the exit handlers rather than through the interpreter's teardown (freeing every module
    and object: 0.4-0.5 s of CPU in a full-size labeller's worker, which the pool waited for;
    a worker's results have all gone back through its pipe by then, and it writes no file)."""
    import atexit
    import threading
    import time

    # registered first, so it runs last; multiprocessing has flushed stdout and stderr
    atexit.register(os._exit, 0)

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
