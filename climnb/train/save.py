"""A run's checkpoints, its resume, and the model bundle it ends with.

:meth:`Saver.start` resumes from the newest checkpoint in ``OUT/checkpoints`` (rank 0 reads
it, every rank gets its state and weights) or starts fresh (from the parent's weights when
fine-tuning); :meth:`Saver.save` writes a checkpoint and the history (rank 0, atomically);
:meth:`Saver.write_bundle` writes the model bundle ``OUT/model`` that
:mod:`climnb.inference.predict` reads, with the best validation's weights under ``keep_best``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from climnb.bundle import BundleError, load_bundle, save_bundle
from climnb.io.atomic import remove_leftovers
from climnb.train.checkpoint import load_checkpoint, load_latest, restore, save_checkpoint
from climnb.train.config import TrainConfig
from climnb.train.init_from import Parent, init_weights
from climnb.train.network import Network
from climnb.train.progress import Progress

log = logging.getLogger(__name__)

__all__ = ["Saver", "bundle_steps"]


class Saver:
    """Rank 0's checkpoints and model bundle, and every rank's resume."""

    def __init__(
        self, config: TrainConfig, net: Network, progress: Progress, parent: Parent | None = None
    ):
        self.config, self.net, self.progress, self.parent = config, net, progress, parent
        self.hvd, self.rank = net.hvd, net.rank

    @property
    def bundle(self) -> Path:
        return Path(self.config.out_dir) / "model"

    def start(self) -> None:
        """Resume from the newest checkpoint (``resume``), or start fresh; then every rank
        holds rank 0's state, weights and optimiser state."""
        config, state = self.config, None
        if self.rank == 0:  # a STOP left by an earlier run must not end this one
            config.stop_file.unlink(missing_ok=True)
            for folder in (config.checkpoint_dir, Path(config.out_dir), config.best_dir):
                for p in remove_leftovers(folder):  # a killed run's half-written file
                    log.info("removed %s, left by an interrupted run", p)
        ckpt = load_latest(config.checkpoint_dir) if self.rank == 0 and config.resume else None
        if ckpt is not None:
            state = restore(ckpt, self.net.model, self.net.optimizer)
            log.info("resuming from %s (step %d)", ckpt.path, state["step"])
        elif self.rank == 0:  # a fresh start: an earlier run's best weights are not this run's
            for old in config.best_dir.glob("ckpt-*.npz"):
                old.unlink()
            if self.parent is not None:  # the other ranks get them in the broadcast below
                init_weights(self.net.model, self.parent, self.net.input_stats()[0])
        state = self.hvd.broadcast_object(state, root_rank=0)
        if state:
            self.progress.restore(state)
        self.net.broadcast()

    def save(self, epoch: int) -> str | None:
        """Checkpoint (rank 0 writes; every rank calls it at the same step). The batch-norm
        statistics are averaged over the ranks first: a checkpoint holds rank 0's variables
        only, and a run resumed from it gives them to every rank, so unsynchronised
        statistics made a resumed run end with other statistics than an uninterrupted one
        (``benchmarks/bench_faults.py``); synchronised, both runs hold the same state."""
        self.net.sync_statistics()
        if self.rank != 0:
            return None
        path = save_checkpoint(
            self.config.checkpoint_dir,
            self.progress.global_step,
            self.net.model,
            self.net.optimizer,
            self.progress.state(epoch),
            keep=self.config.keep_checkpoints,
        )
        self.progress.write_history(self.config.out_dir)
        return str(path)

    def keep_finished(self) -> None:
        """A finished run, rerun: its bundle is left as it is when it holds the last
        checkpoint's step, else (lost, or older) written again from it (rank 0)."""
        steps, step = bundle_steps(self.bundle), self.progress.global_step
        if self.rank == 0 and steps != step:
            log.warning(
                "%s: the finished run's model bundle is %s: writing it from the checkpoint of "
                "step %d, without training",
                self.config.out_dir,
                "missing" if steps is None else f"of step {steps}",
                step,
            )
            self.write_bundle()
        elif self.rank == 0:
            log.warning(
                "%s: finished at step %d; left as it is (to train on, raise --max-steps or "
                "--epochs, or use another --out)",
                self.config.out_dir,
                step,
            )

    def write_bundle(self) -> str:
        """Write the model bundle ``OUT/model`` (rank 0): the best validation's weights with
        ``keep_best`` (from ``OUT/best``), else those in memory. The weights in memory stay the
        last step's."""
        best = self._best_weights()
        if best is None:
            return self._save_bundle(self.progress.global_step)
        model = self.net.model
        last = model.get_weights()
        model.set_weights(best)
        try:
            return self._save_bundle(self.progress.best["step"])
        finally:
            model.set_weights(last)

    def _best_weights(self) -> list | None:
        """The best validation's weights when they are not the last step's, else ``None``."""
        progress = self.progress
        if not (self.config.keep_best and progress.best):
            return None
        if progress.best["step"] == progress.global_step:
            return None
        path = self.config.best_dir / f"ckpt-{progress.best['step']:08d}.npz"
        if not path.exists():
            log.warning("%s is missing: the model bundle holds the last step's weights", path)
            progress.best = None
            return None
        return load_checkpoint(path).model_weights

    def _save_bundle(self, weights_step: int) -> str:
        config, progress, net = self.config, self.progress, self.net
        channels, chosen = net.input_stats()
        extra = {"train_config": config.to_dict(), "steps": progress.global_step}
        extra["weights_step"] = weights_step  # the step whose weights these are
        if progress.best:
            extra["best_validation"] = progress.best
        extra["early_stopped"] = progress.early_stopped
        if self.parent is not None:
            extra["parent"] = self.parent.record()
        if net.data.stats.label_config:  # the teacher's settings, from stats.h5
            extra["label_config"] = net.data.stats.label_config
        bundle = save_bundle(
            net.model,
            self.bundle,
            channels=channels,
            minval=chosen.minval,
            maxval=chosen.maxval,
            name=config.model,
            preset=config.preset,
            overrides=dict(net.model_overrides),  # to rebuild it for another grid
            extra=extra,
        )
        return str(bundle)


def bundle_steps(path: Path) -> int | None:
    """The training step a bundle records (``None``: no readable bundle there)."""
    try:
        return int(load_bundle(path).extra.get("steps"))
    except (BundleError, TypeError, ValueError):
        return None
