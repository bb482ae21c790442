"""Horovod on the engines: each engine's threads, its rank, the Gloo rendezvous for local
engines, and an allreduce that shows the ranks work together.

:class:`HorovodRanks` is the part of :class:`climnb.runtime.cluster.Engines` that readies the
engines to train; the functions named ``engine_*`` run on the engines themselves (sent there
by ipyparallel).
"""

from __future__ import annotations

import socket

from climnb.runtime.install import install_hint
from climnb.runtime.launch import EngineStartError

__all__ = ["HorovodRanks", "engine_allreduce", "engine_init_horovod", "engine_set_threads"]


class HorovodRanks:
    """Horovod initialised on every engine, for :class:`climnb.runtime.cluster.Engines`."""

    def init_horovod(self):
        """Initialise Horovod on every engine; return a table of rank, host and engine id.

        Without Horovod: one engine is readied to train alone (rank 0 of 1, controller
        ``"none"``); several are refused with :class:`EngineStartError`, in one line."""
        import pandas as pd

        if not self.horovod and self.n > 1:
            raise EngineStartError(
                f"Horovod is not installed, so {self.n} engines cannot train together: start "
                f"one engine (n=1) to train in one process without it, or install Horovod: "
                f"{install_hint('horovod')}"
            )
        view = self.view
        # Every engine imports TensorFlow before any calls hvd.init: Horovod's Gloo rendezvous
        # gives up (and ends the engine) when a peer is still importing after its timeout, as
        # happened on a loaded 2-core machine.
        view.apply_async(engine_set_threads, self.threads).get(timeout=self.config.timeout)
        local = self.launcher == "local" and self.horovod
        gloo = self._gloo_env() if local else [{}] * len(view.targets)
        rows = []
        results = [
            self.client[eid].apply_async(engine_init_horovod, self.threads, env, self.horovod)
            for eid, env in zip(view.targets, gloo, strict=True)
        ]
        for eid, result in zip(view.targets, results, strict=True):
            rows.append({**result.get(timeout=self.config.timeout), "engine_id": eid})
        columns = [
            "rank",
            "local_rank",
            "size",
            "host",
            "engine_id",
            "threads",
            "controller",
            "pid",
        ]
        table = pd.DataFrame(rows)[columns].sort_values("rank").reset_index(drop=True)
        if sorted(table["rank"]) != list(range(self.n)):
            raise EngineStartError(f"Horovod ranks are not 0..{self.n - 1}:\n{table}")
        return table

    def check_allreduce(self) -> list[float]:
        """Sum ``rank + 1`` over all ranks with Horovod; every engine should return n(n+1)/2."""
        return self.view.apply(engine_allreduce)

    def _gloo_env(self) -> list[dict[str, str]]:
        """Start a Horovod rendezvous server here and give each engine its slot."""
        from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
        from horovod.runner.http.http_server import RendezvousServer

        hostname = socket.gethostname()
        slots = get_host_assignments(parse_hosts(f"{hostname}:{self.n}"), self.n)
        self._rendezvous = RendezvousServer()
        port = self._rendezvous.start()
        self._rendezvous.init(slots)
        common = {
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_IFACE": "lo",
            "HOROVOD_GLOO_TIMEOUT_SECONDS": str(max(30, int(self.config.timeout))),
        }
        return [
            {
                **common,
                "HOROVOD_HOSTNAME": hostname,
                "HOROVOD_RANK": str(s.rank),
                "HOROVOD_SIZE": str(s.size),
                "HOROVOD_LOCAL_RANK": str(s.local_rank),
                "HOROVOD_LOCAL_SIZE": str(s.local_size),
                "HOROVOD_CROSS_RANK": str(s.cross_rank),
                "HOROVOD_CROSS_SIZE": str(s.cross_size),
            }
            for s in slots
        ]


def engine_set_threads(threads: int) -> None:
    """Runs on an engine: import TensorFlow and set its thread pools (once per process)."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
    except RuntimeError:  # already initialised by an earlier call: keep its settings
        pass


def engine_init_horovod(threads: int, env: dict[str, str], horovod: bool = True) -> dict:
    """Runs on an engine: set the Gloo variables, initialise Horovod, describe itself
    (without Horovod: rank 0 of 1, as the training loop will run there)."""
    import os
    import socket

    os.environ.update(env)
    engine_set_threads(threads)
    if not horovod:
        return {
            "rank": 0,
            "local_rank": 0,
            "size": 1,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "threads": threads,
            "controller": "none",
        }
    import horovod.tensorflow as hvd

    hvd.init()
    return {
        "rank": hvd.rank(),
        "local_rank": hvd.local_rank(),
        "size": hvd.size(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "threads": threads,
        "controller": "mpi" if hvd.mpi_enabled() else "gloo",
    }


def engine_allreduce() -> float:
    """Runs on an engine: the sum of ``rank + 1`` over all ranks."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    return float(hvd.allreduce(tf.constant(hvd.rank() + 1.0), op=hvd.Sum))
