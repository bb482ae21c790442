"""What a training run returns: each rank's :class:`TrainResult`, the run's headline figures
(:func:`summarize`) and the weights' checksum that shows the ranks agree."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["TrainResult", "summarize", "weights_checksum"]


@dataclass
class TrainResult:
    """What one rank returns: its history, validation results and final state."""

    rank: int
    size: int
    history: pd.DataFrame
    validation: pd.DataFrame
    checksum: str
    stopped: bool
    checkpoint: str | None
    bundle: str | None
    finished_before: bool = False  # the run had finished: nothing trained, nothing changed


def summarize(results: list[TrainResult]) -> pd.Series:
    """The headline figures of a run from every rank's :class:`TrainResult` (rank 0 first)."""
    first = results[0]
    history, validation = first.history, first.validation
    best = validation[validation.best] if "best" in validation else validation.iloc[:0]
    best = best.iloc[-1] if len(best) else None
    return pd.Series(
        {
            "ranks": first.size,
            "steps": int(history.step.max()) if len(history) else 0,
            "final loss": history.loss_avg.iloc[-1] if len(history) else np.nan,
            "validation mean IoU": validation.mean_iou.iloc[-1] if len(validation) else np.nan,
            "best validation TC, AR (the bundle's)": (
                f"{best.iou_1:.3f}, {best.iou_2:.3f} (epoch {int(best.epoch) + 1}, step "
                f"{int(best.step)})"
                if best is not None
                else "-"
            ),
            "samples/s (median)": history.samples_per_s.iloc[1:].median(),
            "sustained GFLOP/s (median)": history.gflops.iloc[1:].median(),
            "weights identical on all ranks": len({r.checksum for r in results}) == 1,
            "model bundle": first.bundle,
        }
    )


def weights_checksum(model) -> str:
    """SHA-256 of all weights' bytes: equal on two ranks only if the weights are identical."""
    digest = hashlib.sha256()
    for w in model.get_weights():
        digest.update(np.ascontiguousarray(w).tobytes())
    return digest.hexdigest()
