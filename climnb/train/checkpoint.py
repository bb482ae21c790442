"""Checkpoints: one ``.npz`` file per checkpoint, written atomically by rank 0.

A checkpoint holds the model's weights, the optimiser's variables (Adam moments, the lag
buffer, the loss scale, the step counter), the states of the model's random seed generators
(each dropout layer's: Keras keeps them out of ``get_weights``, and a run resumed without them
drew other dropout masks than an uninterrupted one, so its weights differed) and a small JSON
state (step, epoch, steps done in that epoch). One file, renamed into place when complete, so an
interrupted write never leaves a checkpoint that looks finished; :func:`latest` ignores anything
else.

Verified both ways: a checkpoint is read back before older ones are deleted, and every load
checks the zip's CRC-32 of each array, the JSON state and that every weight is finite. A damaged
checkpoint (truncated, bytes flipped, a bad CRC) raises :class:`CheckpointError`;
:func:`load_latest` then falls back to the newest good one with a warning, and leaves the
damaged file where it is (renamed ``*.damaged``) for a look.
"""

from __future__ import annotations

import json
import logging
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from climnb.io.atomic import atomic_path

log = logging.getLogger(__name__)

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "save_checkpoint",
    "load_checkpoint",
    "load_latest",
    "latest",
    "restore",
    "seed_variables",
]

_NAME = re.compile(r"^ckpt-(\d{8})\.npz$")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be trusted (truncated, corrupt, non-finite)."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    model_weights: list[np.ndarray]
    optimizer_variables: list[np.ndarray]
    state: dict
    seed_states: list[np.ndarray] = field(default_factory=list)


def seed_variables(model) -> list:
    """The model's variables that are neither weights nor statistics: the states of its random
    seed generators (one per dropout layer), in the model's order."""
    weights = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def save_checkpoint(folder, step: int, model, optimizer, state: dict, keep: int = 2) -> Path:
    """Write ``ckpt-<step>.npz`` in ``folder``, read it back, then delete all but the ``keep``
    newest. Non-finite weights are refused (:class:`CheckpointError`): a checkpoint is always
    one to go back to."""
    folder = Path(folder)
    path = folder / f"ckpt-{step:08d}.npz"
    weights = [np.asarray(w) for w in model.get_weights()]
    bad = [i for i, w in enumerate(weights) if not np.all(np.isfinite(w))]
    if bad:
        raise CheckpointError(
            f"not saving checkpoint {path}: weights {bad[:5]} are not finite (NaN or Inf)"
        )
    arrays = {f"w{i:05d}": w for i, w in enumerate(weights)}
    arrays.update({f"o{i:05d}": np.asarray(v) for i, v in enumerate(optimizer.variables)})
    arrays.update({f"s{i:05d}": np.asarray(v) for i, v in enumerate(seed_variables(model))})
    arrays["state"] = np.frombuffer(json.dumps({**state, "step": step}).encode(), np.uint8)
    try:
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
    except OSError as err:  # a full disk: name the checkpoint (a failed write names nothing)
        if err.filename is None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    load_checkpoint(path)  # read back before anything older goes
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
    """Read and check a checkpoint file; a damaged one raises :class:`CheckpointError` naming
    it and what is wrong."""
    path = Path(path)
    try:
        # the file opened here, not by np.load: numpy leaves its own open when the zip
        # directory is unreadable (a truncated file); reading each member checks its CRC-32
        with open(path, "rb") as f, np.load(f) as z:
            weights = [z[k] for k in sorted(k for k in z.files if k.startswith("w"))]
            opt = [z[k] for k in sorted(k for k in z.files if k.startswith("o"))]
            seeds = [z[k] for k in sorted(k for k in z.files if k[:1] == "s" and k[1:].isdigit())]
            state = json.loads(bytes(z["state"]).decode())
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        raise CheckpointError(
            f"checkpoint {path} is damaged ({type(err).__name__}: {err})"
        ) from err
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        raise CheckpointError(f"checkpoint {path} is damaged (no step in its state)")
    bad = [i for i, w in enumerate(weights) if not np.all(np.isfinite(w))]
    if bad:
        raise CheckpointError(f"checkpoint {path} holds non-finite weights {bad[:5]}")
    return Checkpoint(path, weights, opt, state, seeds)


def load_latest(folder) -> Checkpoint | None:
    """The newest checkpoint in ``folder`` that loads and checks, or ``None`` if there is none.

    A damaged one is renamed ``<name>.damaged`` (kept, never deleted) and the one before it is
    tried, with a warning naming both.
    """
    for path in reversed(_all(Path(folder))):
        try:
            return load_checkpoint(path)
        except CheckpointError as err:
            kept = path.with_name(path.name + ".damaged")
            path.replace(kept)
            log.warning("%s; set aside as %s, trying the checkpoint before it", err, kept.name)
    return None


def _check_same_model(checkpoint: Checkpoint, model) -> None:
    """Refuse to resume from a checkpoint whose weights are not of ``model``'s shapes (a run
    folder trained with another model, preset or config), before Keras's own message."""
    want = [tuple(np.shape(w)) for w in model.get_weights()]
    have = [tuple(np.shape(w)) for w in checkpoint.model_weights]
    if want == have:
        return
    if len(want) != len(have):
        what = f"{len(have)} weight arrays, this model {len(want)}"
    else:
        i = next(i for i, (a, b) in enumerate(zip(want, have, strict=True)) if a != b)
        what = f"weight {i} of shape {have[i]}, this model's {want[i]}"
    raise ValueError(
        f"{checkpoint.path}: a checkpoint of another model ({what}): the run folder was "
        "trained with another model, preset or config; give another --out, or --no-resume to "
        "start afresh there"
    )


def restore(checkpoint: Checkpoint, model, optimizer) -> dict:
    """Load weights and optimiser variables into ``model`` and ``optimizer`` (built).

    Raises
    ------
    ValueError
        When the checkpoint is of another model (other weights or shapes), naming it and how
        to start afresh.
    """
    _check_same_model(checkpoint, model)
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
    seeds = seed_variables(model)
    if checkpoint.seed_states and len(seeds) == len(checkpoint.seed_states):
        for var, value in zip(seeds, checkpoint.seed_states, strict=True):
            var.assign(value)
    elif seeds:  # written before the seed states were kept, or by another network
        log.warning(
            "checkpoint %s holds %d random seed states, the model has %d: the dropout masks "
            "after this resume differ from those of an uninterrupted run",
            checkpoint.path,
            len(checkpoint.seed_states),
            len(seeds),
        )
    return checkpoint.state
