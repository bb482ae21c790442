"""How far a run has come: its counters and records, what a checkpoint holds of them.

:class:`Progress` is the state every part of a rank's run shares: the steps taken, the epoch
and the step in it, the step and validation records, and the best validation so far. A
checkpoint stores it (:meth:`Progress.state`) and a resumed run takes it back
(:meth:`Progress.restore`); rank 0 writes the records as ``history.csv`` and
``validation.csv`` (:meth:`Progress.write_history`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from climnb.io.atomic import atomic_path
from climnb.train.config import TrainConfig

__all__ = ["Progress", "Record"]

Record = dict


@dataclass
class Progress:
    """Counters and records of one rank's run."""

    global_step: int = 0
    epoch: int = 0
    step_in_epoch: int = 0
    records: list[Record] = field(default_factory=list)
    validations: list[Record] = field(default_factory=list)
    best: dict | None = None  # the best validation's step, epoch and IoU
    since_best: int = 0  # validations since the best one
    early_stopped: bool = False

    def state(self, epoch: int) -> dict:
        """What a checkpoint taken in ``epoch`` stores besides the weights."""
        return {
            "epoch": self.epoch if self.step_in_epoch == 0 else epoch,
            "step_in_epoch": self.step_in_epoch,
            "records": self.records,
            "validations": self.validations,
            "best": self.best,
            "since_best": self.since_best,
            "early_stopped": self.early_stopped,
        }

    def restore(self, state: dict) -> None:
        """Take back a checkpoint's state (its ``step`` included); records made after the
        checkpoint's step are dropped."""
        self.global_step, self.epoch = state["step"], state["epoch"]
        self.step_in_epoch = state["step_in_epoch"]
        self.records = [r for r in state.get("records", []) if r["step"] <= state["step"]]
        self.validations = [v for v in state.get("validations", []) if v["step"] <= state["step"]]
        self.best = state.get("best")
        self.since_best = int(state.get("since_best", 0))
        self.early_stopped = bool(state.get("early_stopped", False))

    def reached_max(self, config: TrainConfig) -> bool:
        return bool(config.max_steps and self.global_step >= config.max_steps)

    def finished(self, config: TrainConfig) -> bool:
        """Resumed from the checkpoint a finished run wrote: all epochs, or ``max_steps``."""
        return self.global_step > 0 and (
            self.epoch >= config.epochs or self.reached_max(config) or self.early_stopped
        )

    def write_history(self, out_dir: str | Path) -> None:
        """Write the records as ``history.csv`` and ``validation.csv`` (atomically)."""
        out = Path(out_dir)
        for name, rows in (("history.csv", self.records), ("validation.csv", self.validations)):
            if rows:
                with atomic_path(out / name) as tmp:
                    pd.DataFrame(rows).to_csv(tmp, index=False)
