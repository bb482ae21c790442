"""The network a rank trains: model, optimiser, loss and the compiled training step.

:class:`Network` builds the model for the run's data (its channels' statistics, the grid),
the paper's optimiser (:mod:`climnb.train.optim`) with the learning rate scaled to the ranks
and decayed to the run's last step, the weighted loss, and the two compiled functions a run
calls: the training step (gradients averaged over the ranks) and validation's forward pass.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from climnb.models import build_model, count_flops
from climnb.models.losses import soft_dice_loss, weighted_cross_entropy
from climnb.models.presets import resolve_channels
from climnb.train import optim
from climnb.train.config import OptimizerConfig, TrainConfig
from climnb.train.init_from import Parent, freeze_blocks
from climnb.train.inputs import RankData

log = logging.getLogger(__name__)

__all__ = ["Network"]


class Network:
    """One rank's model, optimiser and loss, and its compiled step and forward pass."""

    def __init__(
        self,
        config: TrainConfig,
        data: RankData,
        hvd,
        tf,
        total_steps: int,
        parent: Parent | None = None,
    ):
        self.config, self.data, self.hvd, self.tf = config, data, hvd, tf
        self.rank, self.size = hvd.rank(), hvd.size()
        tf.keras.utils.set_random_seed(config.seed)
        if self.rank == 0:
            log.info("precision %s (%s)", config.precision, config.precision_reason)
        self.model_overrides = self._model_overrides()  # transport channels from the stats
        self.model = build_model(
            config.model,
            data.shape,
            3,
            config.preset,
            mixed_precision=config.precision,
            **self.model_overrides,
        )
        if parent is not None:  # before the optimiser sees the trainable variables
            freeze_blocks(self.model, config.freeze_blocks)
        self.optimizer = optim.make_optimizer(self._optimizer_config(total_steps))
        self.optimizer.build(self.model.trainable_variables)
        weights, dice = data.class_weights, config.dice_weight

        def loss_fn(y, logits):  # no Dice ops in the graph when its weight is 0
            loss = weighted_cross_entropy(y, logits, weights)
            return loss + dice * soft_dice_loss(y, logits) if dice else loss

        self.loss_fn = loss_fn
        self.flop_per_sample = count_flops(self.model).training

    def _optimizer_config(self, total_steps: int) -> OptimizerConfig:
        """The optimiser's settings for this run: the learning rate scaled with the number of
        ranks (``scale_lr``) and decayed linearly to zero at the last step (``lr_decay``)."""
        config, opt_config = self.config, self.config.optimizer
        if config.scale_lr and self.size > 1:
            opt_config = dataclasses.replace(
                opt_config, learning_rate=opt_config.learning_rate * self.size
            )
        if config.lr_decay == "linear":  # to zero at the run's last step
            opt_config = dataclasses.replace(
                opt_config,
                schedule="poly",
                power=1.0,
                end_learning_rate=0.0,
                decay_steps=max(total_steps - opt_config.warmup_steps, 1),
            )
        return opt_config

    def input_stats(self):
        """The network's input channels and their statistics."""
        stats = self.data.stats
        channels = self.config.channels or tuple(stats.channels)
        return channels, stats.select([list(stats.channels).index(c) for c in channels])

    def _model_overrides(self) -> dict:
        channels, chosen = self.input_stats()
        return resolve_channels(self.config.model_overrides, channels, chosen.minval, chosen.maxval)

    def compile(self) -> None:
        """Make the compiled training step and validation's forward pass (traced at first
        call)."""
        tf = self.tf
        self.step_fn = self._compile_step()
        # validation's forward pass, compiled once (the last batch may trace a second shape):
        # called eagerly it took 2-5 s of every epoch's turnover on the toy demo
        self.predict = tf.function(
            lambda x: tf.argmax(self.model(x, training=False), axis=-1),
            autograph=False,
            reduce_retracing=True,
        )

    def _compile_step(self):
        hvd, tf = self.hvd, self.tf

        def allreduce(grads):
            return hvd.grouped_allreduce(grads, op=hvd.Average)

        # batch norm's moving means and variances (not, say, a dropout layer's seed state)
        statistics = [v for v in self.model.non_trainable_variables if "float" in str(v.dtype)]

        # no AutoGraph: the step has no Python control flow on tensors (the optimiser and the
        # schedules use ops.where/ops.cond), and converting its source cost ~0.7 s of CPU per
        # run, each rank (measured: identical losses with float16 loss scaling, LARC, gradient
        # lag, warm-up, piecewise and poly schedules, Tiramisu and DeepLab)
        @tf.function(autograph=False)
        def step(x, y):
            loss = optim.train_step(
                self.model,
                self.optimizer,
                self.loss_fn,
                x,
                y,
                allreduce=allreduce if self.size > 1 else None,
            )
            # The loss alone does not show a bad batch: in a compiled step oneDNN fuses batch
            # norm with the ReLU after it, whose max(NaN, 0) is 0, so a NaN or overflowing input
            # leaves the loss finite and only the moving statistics non-finite.
            finite = [tf.reduce_all(tf.math.is_finite(x))]
            finite += [tf.reduce_all(tf.math.is_finite(v)) for v in statistics]
            return loss, tf.reduce_all(tf.stack(finite))

        return step

    def broadcast(self) -> None:
        """Identical start on every rank: weights and optimiser state from rank 0 (alone,
        there is nothing to send). In place: a few broadcast ops, where the default traces a
        tf.function assigning each variable (measured: 1.7 s of each rank's start, 0.08 s in
        place; over MPI and Gloo, int64 and float32 variables alike)."""
        if self.size > 1:
            for variables in (self.model.variables, self.optimizer.variables):
                self.hvd.broadcast_variables([v.value for v in variables], 0, inplace=True)

    def sync_statistics(self) -> None:
        """Average the non-trainable variables (batch-norm moving statistics) over the ranks.

        Gradients are averaged every step, so the trainable weights agree already; each rank's
        batch-norm statistics, however, have seen only its own shard of the data.
        """
        variables = self.model.non_trainable_variables
        if self.size > 1 and variables:
            averaged = self.hvd.grouped_allreduce([v.value for v in variables], op=self.hvd.Average)
            for var, value in zip(variables, averaged, strict=True):
                var.assign(value)

    def weights_finite(self) -> bool:
        """Whether every weight is finite (the same on every rank: the weights agree)."""
        return all(np.all(np.isfinite(w)) for w in self.model.get_weights())
