"""The paper's optimiser: Adam with LARC and gradient lag, learning-rate schedules, and mixed
precision, as a Keras 3 optimizer that a plain ``tf.GradientTape`` loop drives.

How a (Horovod) training loop uses it -- the whole contract is ``scale_loss`` and ``apply``::

    opt = make_optimizer(OptimizerConfig(larc=True, gradient_lag=True, mixed_precision=True))
    model = build_model("deeplab", shape, mixed_precision=opt_config.mixed_precision)

    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits) + tf.add_n(model.losses)   # weight decay
        scaled = opt.scale_loss(loss)             # x dynamic loss scale (mixed precision only)
    grads = tape.gradient(scaled, model.trainable_variables)
    grads = hvd.grouped_allreduce(grads, op=hvd.Average)   # Horovod, if any
    opt.apply(grads, model.trainable_variables)

:func:`train_step` is exactly that, with the allreduce as an argument. ``opt.apply`` then
(1) with mixed precision: divides the gradients by the loss scale and, if any is not finite,
skips the step and halves the scale (doubling it after ``loss_scale_growth_steps`` good steps);
all ranks see the same averaged gradients, so they all skip together; (2) with gradient lag:
applies the gradient stored at the previous call and stores this one (the first call applies
zeros, a no-op for Adam); (3) with LARC: rescales each variable's gradient; (4) takes an Adam
step with the scheduled learning rate. The lag buffers are optimizer variables, so they are
checkpointed and broadcast with the optimizer's other state (``opt.variables``).

Gradient lag is what lets the paper overlap the allreduce of step n with the compute of step
n + 1; in a TensorFlow 2 eager loop that overlap needs an asynchronous allreduce, but the
arithmetic (and its effect on convergence) is this.

LARC (You et al. 2017; NVIDIA apex's ``LARC``; the paper's code), per variable ``v`` with
gradient ``g``::

    local = eta * ||v|| / ||g||        (epsilon if either norm is 0)
    clip:   g <- g * min(local, lr) / lr      (inner Adam then multiplies by lr)
    scale:  g <- g * local

Where things live: the settings (:class:`OptimizerConfig`) in :mod:`climnb.train.config`, no
TensorFlow; the Keras classes and functions in :mod:`climnb.train.keras_optim`, which this
module loads on first use of one of its names (TensorFlow comes with it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from climnb.train.config import LARC_MODES, SCHEDULES, OptimizerConfig

if TYPE_CHECKING:
    from climnb.train.keras_optim import (
        LarcAdam,
        WarmupDecay,
        larc_factor,
        make_optimizer,
        make_schedule,
        train_step,
    )

__all__ = [
    "OptimizerConfig",
    "SCHEDULES",
    "LARC_MODES",
    "WarmupDecay",
    "LarcAdam",
    "larc_factor",
    "make_schedule",
    "make_optimizer",
    "train_step",
]

_KERAS_NAMES = frozenset(__all__[3:])


def __getattr__(name):
    # the one place TensorFlow's side of the optimiser is loaded: on first use
    if name in _KERAS_NAMES:
        return getattr(importlib.import_module("climnb.train.keras_optim"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
