"""Checkpoints: one ``.npz`` file per checkpoint, written atomically by rank 0.

A checkpoint holds the model's weights, the optimiser's variables (Adam moments, the lag
buffer, the loss scale, the step counter) and a small JSON state (step, epoch, steps done in
that epoch). One file, renamed into place when complete, so an interrupted write never leaves a
checkpoint that looks finished; :func:`latest` ignores anything else.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from climnb.atomic import atomic_path

log = logging.getLogger(__name__)

__all__ = ["Checkpoint", "save_checkpoint", "load_checkpoint", "latest", "restore"]

_NAME = re.compile(r"^ckpt-(\d{8})\.npz$")


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    model_weights: list[np.ndarray]
    optimizer_variables: list[np.ndarray]
    state: dict


def save_checkpoint(folder, step: int, model, optimizer, state: dict, keep: int = 2) -> Path:
    """Write ``ckpt-<step>.npz`` in ``folder`` and delete all but the ``keep`` newest."""
    folder = Path(folder)
    path = folder / f"ckpt-{step:08d}.npz"
    arrays = {f"w{i:05d}": np.asarray(w) for i, w in enumerate(model.get_weights())}
    arrays.update({f"o{i:05d}": np.asarray(v) for i, v in enumerate(optimizer.variables)})
    arrays["state"] = np.frombuffer(json.dumps({**state, "step": step}).encode(), np.uint8)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    for old in _all(folder)[:-keep]:
        old.unlink(missing_ok=True)
    log.info("checkpoint %s", path)
    return path


def _all(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _NAME.match(p.name))


def latest(folder) -> Path | None:
    """The newest complete checkpoint in ``folder``, or ``None``."""
    found = _all(Path(folder))
    return found[-1] if found else None


def load_checkpoint(path) -> Checkpoint:
    """Read a checkpoint file; a damaged one raises ``ValueError`` naming it."""
    path = Path(path)
    try:
        with np.load(path) as z:
            weights = [z[k] for k in sorted(k for k in z.files if k.startswith("w"))]
            opt = [z[k] for k in sorted(k for k in z.files if k.startswith("o"))]
            state = json.loads(bytes(z["state"]).decode())
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(
            f"checkpoint {path} is damaged ({err}); delete it to resume from the one before"
        ) from err
    return Checkpoint(path, weights, opt, state)


def restore(checkpoint: Checkpoint, model, optimizer) -> dict:
    """Load weights and optimiser variables into ``model`` and ``optimizer`` (built)."""
    model.set_weights(checkpoint.model_weights)
    variables = optimizer.variables
    if len(variables) != len(checkpoint.optimizer_variables):
        raise ValueError(
            f"checkpoint {checkpoint.path} has {len(checkpoint.optimizer_variables)} optimizer "
            f"variables but this optimizer has {len(variables)}: was it made with other "
            "settings (LARC, gradient lag, mixed precision)?"
        )
    for var, value in zip(variables, checkpoint.optimizer_variables, strict=True):
        var.assign(value)
    return checkpoint.state
