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

Examples
--------
>>> cfg = OptimizerConfig(learning_rate=1e-3, warmup_steps=10, schedule="poly", decay_steps=90)
>>> lr = make_schedule(cfg)
>>> [round(float(lr(s)), 6) for s in (0, 4, 9, 10, 55, 100, 500)]
[0.0001, 0.0005, 0.001, 0.001, 0.0005, 0.0, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time they load lazily, with TensorFlow (see __getattr__)
    from climnb.train._optim_keras import LarcAdam, WarmupDecay, larc_factor

__all__ = [
    "OptimizerConfig",
    "WarmupDecay",
    "LarcAdam",
    "larc_factor",
    "make_schedule",
    "make_optimizer",
    "train_step",
]

SCHEDULES = ("constant", "poly", "piecewise")
LARC_MODES = ("clip", "scale")


@dataclass(frozen=True)
class OptimizerConfig:
    """Settings of the optimiser and its learning-rate schedule.

    Attributes
    ----------
    learning_rate : base learning rate (reached at the end of the warm-up).
    beta_1, beta_2, epsilon : Adam's; epsilon as TensorFlow 1's Adam (1e-8).
    schedule : ``"constant"``; ``"poly"``: ``lr * (1 - t / decay_steps) ** power`` down to
        ``end_learning_rate``; ``"piecewise"``: ``lr`` until ``boundaries[0]``, then
        ``lr * factors[0]`` until ``boundaries[1]``, ... (the paper code's ``piece:`` mode).
        ``t`` counts steps after the warm-up, as do ``decay_steps`` and ``boundaries``.
    warmup_steps : linear warm-up ``lr * (step + 1) / warmup_steps`` over the first steps
        (0 for none).
    decay_steps, power, end_learning_rate : of the polynomial decay.
    boundaries, factors : of the piecewise decay; same length.
    larc : rescale each variable's gradient by LARC before Adam.
    larc_eta : LARC trust coefficient (the paper: 0.002).
    larc_mode : ``"clip"`` (the paper) or ``"scale"``.
    larc_epsilon : LARC's local rate when a variable or its gradient is all zero.
    gradient_lag : apply the previous step's gradient (the paper's "gradient lag").
    mixed_precision : dynamic loss scaling for float16 compute (build the model with
        ``mixed_precision=True`` too: float16 compute, float32 master weights).
    initial_loss_scale, loss_scale_growth_steps : of the dynamic loss scaling.
    """

    learning_rate: float = 1e-3
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8
    schedule: str = "constant"
    warmup_steps: int = 0
    decay_steps: int = 10_000
    power: float = 1.0
    end_learning_rate: float = 0.0
    boundaries: tuple[int, ...] = ()
    factors: tuple[float, ...] = ()
    larc: bool = False
    larc_eta: float = 0.002
    larc_mode: str = "clip"
    larc_epsilon: float = 1.0 / 16000.0
    gradient_lag: bool = False
    mixed_precision: bool = False
    initial_loss_scale: float = 2.0**15
    loss_scale_growth_steps: int = 2000

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.larc_mode not in LARC_MODES:
            raise ValueError(f"larc_mode must be one of {LARC_MODES}, got {self.larc_mode!r}")
        if len(self.boundaries) != len(self.factors):
            raise ValueError("boundaries and factors must have the same length")
        if list(self.boundaries) != sorted(self.boundaries):
            raise ValueError(f"boundaries must increase, got {self.boundaries}")
        if self.learning_rate <= 0 or self.warmup_steps < 0 or self.decay_steps < 1:
            raise ValueError("need learning_rate > 0, warmup_steps >= 0 and decay_steps >= 1")
        object.__setattr__(self, "boundaries", tuple(int(b) for b in self.boundaries))
        object.__setattr__(self, "factors", tuple(float(f) for f in self.factors))


_KERAS_NAMES = ("WarmupDecay", "LarcAdam", "larc_factor")


def __getattr__(name):
    # the Keras classes load TensorFlow: only when asked for
    if name in _KERAS_NAMES:
        from climnb.train import _optim_keras

        return getattr(_optim_keras, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_schedule(config: OptimizerConfig):
    """The learning-rate schedule of ``config``: a :class:`WarmupDecay` (a function of the step)."""
    from climnb.train._optim_keras import WarmupDecay

    return WarmupDecay(
        config.learning_rate,
        warmup_steps=config.warmup_steps,
        schedule=config.schedule,
        decay_steps=config.decay_steps,
        power=config.power,
        end_learning_rate=config.end_learning_rate,
        boundaries=config.boundaries,
        factors=config.factors,
    )


def make_optimizer(config: OptimizerConfig | None = None):
    """The optimiser of ``config``: a :class:`LarcAdam`, wrapped in Keras'
    ``LossScaleOptimizer`` when ``config.mixed_precision`` is set.

    Both expose ``scale_loss(loss)``, ``apply(grads, variables)``, ``learning_rate`` (the
    current scheduled value), ``iterations`` and ``variables``.
    """
    from climnb.train._optim_keras import LarcAdam, keras

    config = config or OptimizerConfig()
    optimizer = LarcAdam(
        learning_rate=make_schedule(config),
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
        larc=config.larc,
        larc_eta=config.larc_eta,
        larc_mode=config.larc_mode,
        larc_epsilon=config.larc_epsilon,
        gradient_lag=config.gradient_lag,
    )
    if config.mixed_precision:
        optimizer = keras.optimizers.LossScaleOptimizer(
            optimizer,
            initial_scale=config.initial_loss_scale,
            dynamic_growth_steps=config.loss_scale_growth_steps,
        )
    return optimizer


def train_step(model, optimizer, loss_fn, x, y, *, allreduce=None):
    """One optimisation step; returns the loss (without weight decay) as a tensor.

    Parameters
    ----------
    model : a Keras model returning logits.
    optimizer : from :func:`make_optimizer`.
    loss_fn : ``loss_fn(labels, logits)``, e.g. :class:`climnb.models.losses.WeightedCrossEntropy`.
    x, y : a batch of inputs and integer labels.
    allreduce : ``allreduce(list_of_grads) -> list_of_grads`` applied before the update, e.g.
        ``lambda g: hvd.grouped_allreduce(g, op=hvd.Average)``; None on a single process.

    Wrap it in ``tf.function`` for speed (pass a fresh wrapper per model and optimiser).
    """
    from climnb.models._backend import import_tf

    tf = import_tf()
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits)
        total = loss + tf.add_n(model.losses) if model.losses else loss
        scaled = optimizer.scale_loss(total)
    grads = tape.gradient(scaled, variables)
    if allreduce is not None:
        grads = allreduce(grads)
    optimizer.apply(grads, variables)
    return loss
