"""The TensorFlow side of :mod:`climnb.train.optim` (read its docstring): the schedule, LARC,
the LARC/lag Adam, and the functions that build them and take a step.

Importing this module loads TensorFlow; :mod:`climnb.train.optim` loads it on first use, so
the settings (:mod:`climnb.train.config`) and everything that only names the optimiser stay
light.

Examples
--------
>>> from climnb.train.config import OptimizerConfig
>>> cfg = OptimizerConfig(learning_rate=1e-3, warmup_steps=10, schedule="poly", decay_steps=90)
>>> lr = make_schedule(cfg)
>>> [round(float(lr(s)), 6) for s in (0, 4, 9, 10, 55, 100, 500)]
[0.0001, 0.0005, 0.001, 0.001, 0.0005, 0.0, 0.0]
"""

from __future__ import annotations

from climnb.models.backend import import_keras, import_tf
from climnb.train.config import LARC_MODES, OptimizerConfig

keras = import_keras()
tf = import_tf()
ops = keras.ops

__all__ = [
    "WarmupDecay",
    "LarcAdam",
    "larc_factor",
    "make_schedule",
    "make_optimizer",
    "train_step",
]


@keras.saving.register_keras_serializable(package="climnb")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then constant, polynomial or piecewise-constant decay.

    Parameters are the schedule fields of :class:`climnb.train.optim.OptimizerConfig`.
    """

    def __init__(
        self,
        learning_rate,
        warmup_steps=0,
        schedule="constant",
        decay_steps=10_000,
        power=1.0,
        end_learning_rate=0.0,
        boundaries=(),
        factors=(),
    ):
        self.learning_rate = float(learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.schedule = schedule
        self.decay_steps = int(decay_steps)
        self.power = float(power)
        self.end_learning_rate = float(end_learning_rate)
        self.boundaries = tuple(int(b) for b in boundaries)
        self.factors = tuple(float(f) for f in factors)

    def _decayed(self, t):
        lr = self.learning_rate
        if self.schedule == "poly":
            frac = ops.minimum(t, float(self.decay_steps)) / float(self.decay_steps)
            return (lr - self.end_learning_rate) * (1.0 - frac) ** self.power + (
                self.end_learning_rate
            )
        if self.schedule == "piecewise":
            out = ops.full_like(t, lr)
            for boundary, factor in zip(self.boundaries, self.factors, strict=True):
                out = ops.where(t >= float(boundary), lr * factor, out)
            return out
        return ops.full_like(t, lr)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        lr = self._decayed(ops.maximum(step - float(self.warmup_steps), 0.0))
        if self.warmup_steps:
            ramp = self.learning_rate * (step + 1.0) / float(self.warmup_steps)
            lr = ops.where(step < float(self.warmup_steps), ramp, lr)
        return lr

    def get_config(self):
        return dict(
            learning_rate=self.learning_rate,
            warmup_steps=self.warmup_steps,
            schedule=self.schedule,
            decay_steps=self.decay_steps,
            power=self.power,
            end_learning_rate=self.end_learning_rate,
            boundaries=self.boundaries,
            factors=self.factors,
        )


def larc_factor(grad, variable, learning_rate, eta=0.002, mode="clip", epsilon=1.0 / 16000.0):
    """The LARC multiplier of one variable's gradient (a scalar tensor).

    Examples
    --------
    ``||v|| = 5``, ``||g|| = 1``: local rate 0.002 * 5 / 1 = 0.01; clipped at lr = 0.1 that
    is 0.01 / 0.1 = 0.1; at lr = 0.001 the local rate is larger, so the factor is 1.

    >>> import numpy as np
    >>> v, g = np.array([3.0, 4.0]), np.array([0.6, 0.8])
    >>> round(float(larc_factor(g, v, 0.1)), 6), round(float(larc_factor(g, v, 0.001)), 6)
    (0.1, 1.0)
    >>> round(float(larc_factor(g, v, 0.1, mode="scale")), 6)
    0.01
    """
    # tf.nn.l2_loss (sum of squares / 2) is one pass over the weights; square-then-sum is two
    v_norm = tf.sqrt(2.0 * tf.nn.l2_loss(tf.cast(variable, tf.float32)))
    g_norm = tf.sqrt(2.0 * tf.nn.l2_loss(tf.cast(grad, tf.float32)))
    ok = ops.logical_and(v_norm > 0.0, g_norm > 0.0)
    local = ops.where(ok, eta * v_norm / ops.where(ok, g_norm, 1.0), epsilon)
    if mode == "scale":
        return local
    if mode != "clip":
        raise ValueError(f"mode must be one of {LARC_MODES}, got {mode!r}")
    learning_rate = ops.cast(learning_rate, "float32")
    return ops.minimum(local, learning_rate) / ops.maximum(learning_rate, 1e-30)


@keras.saving.register_keras_serializable(package="climnb")
class LarcAdam(keras.optimizers.Adam):
    """Adam with optional LARC gradient rescaling and gradient lag.

    Parameters
    ----------
    larc, larc_eta, larc_mode, larc_epsilon, gradient_lag : see
        :class:`climnb.train.optim.OptimizerConfig`.
    **kwargs : Keras ``Adam`` arguments (``learning_rate`` may be a schedule).
    """

    def __init__(
        self,
        *,
        larc=False,
        larc_eta=0.002,
        larc_mode="clip",
        larc_epsilon=1.0 / 16000.0,
        gradient_lag=False,
        name="larc_adam",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        if larc_mode not in LARC_MODES:
            raise ValueError(f"larc_mode must be one of {LARC_MODES}, got {larc_mode!r}")
        self.larc = bool(larc)
        self.larc_eta = float(larc_eta)
        self.larc_mode = larc_mode
        self.larc_epsilon = float(larc_epsilon)
        self.gradient_lag = bool(gradient_lag)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        if self.gradient_lag:
            self._lagged = self.add_optimizer_variables(var_list, "lagged_gradient")

    def _swap_lagged(self, grads, variables):
        """Return the stored gradients and store these ones instead."""
        out = []
        for g, v in zip(grads, variables, strict=True):
            slot = self._lagged[self._get_variable_index(v)]
            # a copy, read now: convert_to_tensor could hand back the variable itself, which
            # would then be read after the assignment below
            out.append(ops.copy(slot.value))
            slot.assign(ops.cast(g, slot.dtype))
        return out

    #: take the Adam step with TensorFlow's fused ``ResourceApplyAdam`` kernel (see
    #: :meth:`update_step`); ``False`` for Keras' own element-wise ops (the same update)
    fused = True

    def update_step(self, gradient, variable, learning_rate):
        """Adam's step of one variable; through ``ResourceApplyAdam`` where it applies.

        Keras 3 writes the step as ~12 element-wise TensorFlow ops a variable (each a pass
        over the variable's memory); TensorFlow's ``ResourceApplyAdam`` kernel is the same
        update (``m += (g - m)(1 - b1)``, ``v += (g^2 - v)(1 - b2)``, ``var -= m alpha /
        (sqrt(v) + eps)``, ``alpha = lr sqrt(1 - b2^t) / (1 - b1^t)``) in one pass. It is
        used for dense float32 gradients of TensorFlow variables without AMSGrad; anything
        else takes Keras' own code.
        """
        if not (
            self.fused
            and not self.amsgrad
            and isinstance(variable, tf.Variable)
            and not isinstance(gradient, tf.IndexedSlices)
            and variable.dtype == tf.float32
        ):
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        local_step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            beta1_power=tf.pow(beta_1, local_step),
            beta2_power=tf.pow(beta_2, local_step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if self.gradient_lag:
            grads = self._swap_lagged(grads, trainable_variables)
        if self.larc:
            grads = [
                g
                * ops.cast(
                    larc_factor(
                        g, v, learning_rate, self.larc_eta, self.larc_mode, self.larc_epsilon
                    ),
                    g.dtype,
                )
                for g, v in zip(grads, trainable_variables, strict=True)
            ]
        super()._backend_update_step(grads, trainable_variables, learning_rate)

    def get_config(self):
        config = super().get_config()
        config.update(
            larc=self.larc,
            larc_eta=self.larc_eta,
            larc_mode=self.larc_mode,
            larc_epsilon=self.larc_epsilon,
            gradient_lag=self.gradient_lag,
        )
        return config


def make_schedule(config: OptimizerConfig):
    """The learning-rate schedule of ``config``: a :class:`WarmupDecay` (a function of the step)."""
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
