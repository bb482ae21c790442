"""dask.distributed for the data-parallel steps (labelling years of output): where the workers
run, and computing on them with progress.

:func:`dask_client` gives a :class:`distributed.Client` for one of three places:

* ``"local"`` — a :class:`distributed.LocalCluster` on this machine: one single-threaded worker
  process per core (``processes=True, threads_per_worker=1``), the arrangement in which
  labelling scales with the workers: each label task reads its own time step inside its worker
  (:class:`climnb.labels.dataset.StepInputs`), so no worker waits on another's GIL or HDF5
  lock and only the small uint8 labels leave it (``benchmarks/bench_labels.py --only
  scaling`` measures 1 vs 2 workers); the dashboard link is ``client.dashboard_link``;
* ``"slurm"`` — dask-jobqueue's :class:`~dask_jobqueue.SLURMCluster`: workers submitted as
  batch jobs (``jobs``, ``cores``, ``memory``, ``walltime``, ``queue``, ``account``,
  ``job_extra_directives``, ... as keyword arguments);
* an address (``"tcp://host:8786"``, or ``"host:8786"``) — a scheduler that runs already.

:func:`compute` computes dask collections on such a client without graph optimisation (so that
tasks shared by several collections run once, as :func:`climnb.labels.compute` does locally),
with a progress bar, and returns the results. Memory stays bounded over a long, lazily opened
series: each time chunk is read, labelled and written before the workers take many more (dask's
queuing of root tasks), and only the small event tables are kept.

Examples
--------
>>> from climnb.runtime.scheduler import dask_client, compute                # doctest: +SKIP
>>> with dask_client("local", n_workers=2) as client:                # doctest: +SKIP
...     print(client.dashboard_link)
...     _, events = compute(client, write, events)
"""

from __future__ import annotations

import logging
import re
import signal
import threading

log = logging.getLogger(__name__)

__all__ = ["dask_client", "compute"]


def dask_client(scheduler: str = "local", **options):
    """A :class:`distributed.Client` on ``scheduler`` (``"local"``, ``"slurm"`` or an address).

    Parameters
    ----------
    scheduler : where the workers run (see the module's description).
    options : for ``"local"``, :class:`distributed.LocalCluster` arguments (default: one
        single-threaded worker process per core, ``processes=True, threads_per_worker=1``,
        ``dashboard_address=":0"``); for ``"slurm"``,
        :class:`dask_jobqueue.SLURMCluster` arguments plus ``jobs`` (default 1), the number of
        batch jobs to start; none for an address.

    The client closes the cluster it started when it is closed (``with`` block or
    ``client.close()``).
    """
    from distributed import Client

    if scheduler == "local":
        import os

        from distributed import LocalCluster

        options = {
            "n_workers": os.cpu_count() or 1,
            "processes": True,
            "threads_per_worker": 1,
            "dashboard_address": ":0",
            **options,
        }
        return _owning(Client(LocalCluster(**options)))
    if scheduler == "slurm":
        SLURMCluster = _import_slurm_cluster()

        jobs = options.pop("jobs", 1)
        cluster = SLURMCluster(**options)
        cluster.scale(jobs=jobs)
        log.info("dask workers submitted to Slurm as %d job(s):\n%s", jobs, cluster.job_script())
        return _owning(Client(cluster))
    if options:
        raise ValueError(f"options {sorted(options)} apply to 'local' or 'slurm', not {scheduler}")
    if not re.match(r"^(\w+://)?[\w.\-]+:\d+$", scheduler):
        raise ValueError(
            f"scheduler must be 'local', 'slurm' or an address like tcp://host:8786, "
            f"got {scheduler!r}"
        )
    return Client(scheduler if "://" in scheduler else f"tcp://{scheduler}", timeout="30s")


def _owning(client):
    """Make ``client.close()`` close the cluster it was given too."""
    close = client.close

    def close_both(*args, **kwargs):
        result = close(*args, **kwargs)
        if client.cluster is not None:
            client.cluster.close()
        return result

    client.close = close_both
    return client


def compute(client, *collections, progress: bool = True, notebook: bool | None = None):
    """Compute ``collections`` on ``client`` in one pass; return their results.

    Parameters
    ----------
    client : a :class:`distributed.Client` (from :func:`dask_client`).
    collections : dask collections or delayed objects (e.g. a ``to_netcdf(compute=False)``
        write and the event table of :func:`climnb.labels.label_dataset`).
    progress : show distributed's progress bar (a widget in a notebook, text in a terminal).
    notebook : force the widget (True) or the text bar (False); default: guess.

    Make the client before building a NetCDF write (``to_netcdf(compute=False)``): xarray
    picks the write lock when it builds the write, a lock the workers can share only if a
    distributed client exists then.
    """
    from distributed import progress as show_progress

    futures = client.compute(list(collections), optimize_graph=False)
    drawn = None
    if progress:
        bar = show_progress(futures, notebook=notebook, multi=False)
        if bar is not None:  # a notebook widget: it updates while we wait below
            drawn = _listen_now(client, bar)
    results = tuple(client.gather(futures))
    if drawn is not None:
        drawn.result(timeout=30)  # the bar shows the end before the client may close
    return results


def _listen_now(client, bar):
    """Display distributed's progress widget and feed it from the client's own event loop.

    Displayed as usual, the widget would start listening on the kernel's event loop, which
    runs only after the cell: the bar would stay at 0 % and, once the client is closed, add
    a connection traceback to the cell. Returns the future of the listening coroutine.
    """
    import asyncio

    from IPython.display import display

    display(bar.widget)
    return asyncio.run_coroutine_threadsafe(bar.listen(), client.loop.asyncio_loop)


def _import_slurm_cluster():
    """dask-jobqueue's SLURMCluster, with Ctrl-C left as it was: importing dask_jobqueue
    (its runner module) sets SIGINT to ``sys.exit()``, which would end ``climnb label`` with
    status 0 and stop a kernel's interrupt from raising KeyboardInterrupt."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main else None
    from dask_jobqueue import SLURMCluster

    if main and before is not None and signal.getsignal(signal.SIGINT) is not before:
        signal.signal(signal.SIGINT, before)
    return SLURMCluster
