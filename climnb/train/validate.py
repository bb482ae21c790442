"""Validation on every rank, the best validation so far, and early stopping.

:meth:`Validation.validate` averages the batch-norm statistics over the ranks, runs the
network over this rank's validation files and sums the confusion matrices over the ranks,
so every rank holds the same IoU. The best validation is chosen by the mean IoU of the event
classes (:func:`score`); with ``keep_best`` rank 0 keeps its weights in ``OUT/best``, and
``patience`` validations in a row without a better one stop the run early.
"""

from __future__ import annotations

import logging

import numpy as np

from climnb.models.metrics import ConfusionMatrix
from climnb.train.checkpoint import save_checkpoint
from climnb.train.config import TrainConfig
from climnb.train.inputs import RankData, batches, reading
from climnb.train.network import Network
from climnb.train.progress import Progress, Record

log = logging.getLogger(__name__)

__all__ = ["Validation", "score"]


class Validation:
    """One rank's validations, recorded in ``progress``."""

    def __init__(self, config: TrainConfig, data: RankData, net: Network, progress: Progress):
        self.config, self.data, self.net, self.progress = config, data, net, progress
        self.hvd, self.rank = net.hvd, net.rank

    def validate(self, epoch: int) -> Record:
        """Validate after ``epoch``: the record (also kept in ``progress``), with rank 0's
        first label and prediction under ``"sample"``."""
        self.net.sync_statistics()
        cm = ConfusionMatrix(3)
        sample = None
        if self.data.validation:
            found = batches(self.data.validation, self.data.stats, self.config, 0, shuffle=False)
            for x, y, _ in reading(found, self.net.tf):
                pred = self.net.predict(x)
                cm.update(y, pred)
                if sample is None and self.rank == 0:
                    sample = {
                        "label": np.asarray(y[0], np.uint8),
                        "prediction": np.asarray(pred[0], np.uint8),
                    }
        total = self.hvd.allreduce(cm.state, op=self.hvd.Sum)
        per_class, mean_iou = cm.result(total)
        step = self.progress.global_step
        record = {
            "kind": "validation",
            "rank": self.rank,
            "step": step,
            "epoch": epoch,
            "mean_iou": float(mean_iou),
            **{f"iou_{k}": float(v) for k, v in enumerate(per_class)},
        }
        record["score"] = score(record)
        self._track_best(record, epoch)
        best = self.progress.best
        record["best"] = bool(best and best["step"] == step)
        self.progress.validations.append(record)
        log.info(
            "rank %d epoch %d step %d: validation mean IoU %.3f, TC and AR %.3f%s",
            self.rank,
            epoch,
            step,
            mean_iou,
            record["score"],
            " (best so far)" if record["best"] else "",
        )
        return {**record, "sample": sample} if sample is not None else record

    def _track_best(self, record: Record, epoch: int) -> None:
        """Keep the weights of the best validation so far (rank 0 writes them to ``best/``)
        and stop early after ``patience`` validations without a better one. Every rank holds
        the same weights and the same summed confusion, so all decide alike."""
        config, progress = self.config, self.progress
        if not config.keep_best and not config.patience:
            return
        best = np.nan if progress.best is None else progress.best["score"]
        better = not np.isfinite(best) or record["score"] > best  # NaN: no validation data
        if better:
            progress.since_best = 0
            progress.best = {
                "step": progress.global_step,
                "epoch": epoch,
                "score": record["score"],
                "mean_iou": record["mean_iou"],
                **{k: v for k, v in record.items() if k.startswith("iou_")},
            }
            if config.keep_best and self.rank == 0:
                save_checkpoint(
                    config.best_dir,
                    progress.global_step,
                    self.net.model,
                    self.net.optimizer,
                    {"best": progress.best},
                    keep=1,
                )
        else:
            progress.since_best += 1
        if config.patience and progress.since_best >= config.patience:
            progress.early_stopped = True
            if self.rank == 0:
                log.info(
                    "early stop at epoch %d: %d validations without a better one than epoch %d's",
                    epoch,
                    progress.since_best,
                    progress.best["epoch"],
                )


def score(record: Record) -> float:
    """What the best validation is chosen by: the mean IoU of the event classes (TC, AR),
    those present; the mean IoU over all classes where neither is."""
    events = [record[k] for k in ("iou_1", "iou_2") if k in record and np.isfinite(record[k])]
    return float(np.mean(events)) if events else float(record["mean_iou"])
