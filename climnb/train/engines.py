"""Training on ipyparallel engines from a notebook, watched live.

:func:`train_on_engines` starts :func:`climnb.train.loop.train` on every engine at once. Each
engine publishes its records with ipyparallel's data publication; this process polls them and
hands them to a dashboard (:class:`climnb.viz.dashboard.TrainingDashboard`). If an engine fails
or dies, the others would wait in their next allreduce forever, so the engines are stopped at
once and :class:`TrainingError` says which rank failed and how; the run resumes from its last
checkpoint when started again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from climnb.train.config import TrainConfig
from climnb.train.loop import train

log = logging.getLogger(__name__)

__all__ = ["train_on_engines", "TrainingError"]


class TrainingError(RuntimeError):
    """Training failed on an engine; the engines have been stopped."""


def train_on_engines(
    engines,
    config: TrainConfig,
    *,
    on_update: Callable | None = None,
    poll: float = 0.5,
    publish_every: float = 0.5,
):
    """Train on all engines of ``engines`` (a started :class:`climnb.runtime.cluster.Engines`).

    Parameters
    ----------
    engines : running engines with Horovod initialised (``engines.init_horovod()``).
    config : the run's settings.
    on_update : called with ``{engine_id: published data}`` every ``poll`` seconds and once at
        the end (e.g. ``TrainingDashboard.update``).
    poll : seconds between polls.
    publish_every : seconds between an engine's publications.

    Returns
    -------
    list of :class:`climnb.train.loop.TrainResult`, one per rank, ordered by rank.
    """
    client = engines.client
    ids = sorted(client.ids)
    results = {eid: client[eid].apply_async(_engine_train, config, publish_every) for eid in ids}
    update = on_update or (lambda data: None)
    while True:
        update({eid: ar.data for eid, ar in results.items()})
        problem = _problem(client, ids, results)
        if problem:
            engines.stop()
            raise TrainingError(
                f"{problem}; the engines were stopped. Start them again and "
                f"train with resume=True to continue from the last checkpoint "
                f"in {config.out_dir}/checkpoints."
            )
        if all(ar.ready() for ar in results.values()):
            break
        time.sleep(poll)
    update({eid: ar.data for eid, ar in results.items()})
    return sorted((ar.get() for ar in results.values()), key=lambda r: r.rank)


def _problem(client, ids, results) -> str | None:
    for eid, ar in results.items():
        if ar.ready() and not ar.successful():
            try:
                ar.get()
            except Exception as err:
                name = type(err).__name__
                detail = getattr(err, "ename", None) or name
                return f"engine {eid} failed with {detail}: {_short(err)}"
    gone = set(ids) - set(client.ids)
    if gone:
        return f"engine(s) {sorted(gone)} died during training"
    return None


def _short(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[-1] if text else repr(err)


def _engine_train(config: TrainConfig, publish_every: float):
    """Runs on an engine: train and publish the records as they come."""
    from ipyparallel.datapub import publish_data

    state = {"steps": [], "validations": [], "sample": None, "last": 0.0}

    def on_record(record):
        if record["kind"] == "step":
            state["steps"].append(record)
        else:
            sample = record.pop("sample", None)
            state["validations"].append(record)
            state["sample"] = sample if sample is not None else state["sample"]
        now = time.monotonic()
        if record["kind"] != "step" or now - state["last"] >= publish_every:
            state["last"] = now
            publish_data(
                {
                    "steps": list(state["steps"]),
                    "validations": list(state["validations"]),
                    "sample": state["sample"],
                }
            )

    result = train(config, on_record=on_record)
    publish_data(
        {
            "steps": state["steps"],
            "validations": state["validations"],
            "sample": state["sample"],
            "done": True,
        }
    )
    return result
