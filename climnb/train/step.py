"""One training step on every rank, and the stop when the loss or the weights stop being
finite.

:meth:`Steps.step` runs the compiled step (:class:`climnb.train.network.Network`), then one
allreduce sums the loss, the ``STOP`` file's presence and the step's finiteness over the
ranks, so that every rank sees the same sums and all stop at the same step.
:class:`NonFiniteError` names the step and each rank's batch files; nothing is saved.
"""

from __future__ import annotations

import time

import numpy as np

from climnb.train.checkpoint import latest
from climnb.train.config import TrainConfig
from climnb.train.inputs import RankData
from climnb.train.network import Network
from climnb.train.pipeline import epoch_order, shard_files
from climnb.train.progress import Progress, Record

__all__ = ["NonFiniteError", "Steps"]


class NonFiniteError(ValueError):
    """The loss or the weights stopped being finite; training stopped, nothing was saved."""

    collective = True  # every rank raises it at the same step (climnb.train.together)


class Steps:
    """The training steps of one rank, each recorded in ``progress``."""

    def __init__(self, config: TrainConfig, data: RankData, net: Network, progress: Progress):
        self.config, self.data, self.net, self.progress = config, data, net, progress
        self.hvd, self.tf, self.rank, self.size = net.hvd, net.tf, net.rank, net.size

    def step(self, x, y, epoch: int) -> tuple[Record, bool]:
        """One step over the batch ``(x, y)``: its record, and whether a ``STOP`` file asks
        every rank to stop after it."""
        tf, progress = self.tf, self.progress
        start = time.perf_counter()
        loss, finite = self.net.step_fn(x, y)
        stop_here = float(self.config.stop_file.exists())
        flags = [tf.cast(loss, tf.float32), stop_here, 1.0 - tf.cast(finite, tf.float32)]
        summed = self.hvd.allreduce(tf.stack(flags), op=self.hvd.Sum)
        loss_sum, stop, not_finite = (float(v) for v in np.asarray(summed))
        seconds = time.perf_counter() - start
        progress.global_step += 1
        progress.step_in_epoch += 1
        if not np.isfinite(loss_sum):  # every rank sees the same sums: all stop here together
            self.stop_non_finite(float(loss), epoch)
        if not_finite:
            what = "batch (its inputs, or the batch-norm statistics they gave)"
            self.stop_non_finite(float(loss), epoch, what=what)
        samples = self.config.batch_size * self.size
        record = {
            "kind": "step",
            "rank": self.rank,
            "step": progress.global_step,
            "epoch": epoch,
            "loss": float(loss),
            "loss_avg": loss_sum / self.size,
            "lr": float(np.asarray(self.net.optimizer.learning_rate)),
            "seconds": seconds,
            "samples_per_s": samples / seconds,
            "gflops": self.net.flop_per_sample * samples / seconds / 1e9,
            "time": time.time(),
        }
        progress.records.append(record)
        return record, stop > 0

    def batch_files(self, epoch: int) -> list[str]:
        """Names of the files of this rank's batch just taken (the pipeline's own order)."""
        step_in_epoch = self.progress.step_in_epoch
        if step_in_epoch < 1:
            return []
        shard = shard_files(self.data.train)  # the pipeline's order: sorted, then shuffled
        order = epoch_order(len(shard), seed=self.config.seed, epoch=epoch)
        b, n = step_in_epoch - 1, self.config.batch_size
        return [str(shard[i]) for i in order[b * n : (b + 1) * n]]

    def stop_non_finite(self, loss: float, epoch: int, what: str = "loss") -> None:
        """Raise :class:`NonFiniteError` on every rank, naming the step and each rank's batch;
        nothing is saved, so the newest checkpoint on disk stays the last good one."""
        mine = {"rank": self.rank, "loss": loss, "files": self.batch_files(epoch)}
        ranks = self.hvd.allgather_object(mine)
        if self.rank == 0:
            self.progress.write_history(self.config.out_dir)
        good = latest(self.config.checkpoint_dir)
        batches = "; ".join(
            f"rank {r['rank']} (loss {r['loss']:.4g}): {', '.join(r['files'])}" for r in ranks
        )
        raise NonFiniteError(
            f"the {what} is not finite at step {self.progress.global_step} (epoch {epoch}); "
            f"batch files: {batches}. Stopped without saving: "
            + (f"the last good checkpoint is {good}" if good else "no checkpoint was written")
            + ", no model bundle. Fix or remove those files, then run again to resume."
        )

    def check_weights(self, epoch: int) -> None:
        """The weights are the same on every rank, so every rank reaches the same verdict."""
        if not self.net.weights_finite():
            self.stop_non_finite(float("nan"), epoch, what="model's weights")
