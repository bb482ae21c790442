"""Building blocks shared by the two networks: convolutions with the right dtype policy,
initialiser and weight decay, batch norm, ReLU and dropout, in one place."""

from __future__ import annotations

from functools import cache

from climnb.models.backend import import_keras, import_tf
from climnb.models.precision import check_bf16_support, policy_name
from climnb.models.presets import POLEWARD_SCALE

__all__ = [
    "LayerFactory",
    "fused_batch_norm_layer",
    "latitude_channel_layer",
    "mask_dropout_layer",
    "poleward_channel_layer",
    "ivt_channel_layer",
    "register_layers",
]


#: Channel multiple for which oneDNN's bfloat16 batch norm has a jit kernel (AVX-512).
BF16_BN_CHANNELS = 16


@cache
def fused_batch_norm_layer():
    """Keras' ``BatchNormalization`` whose training pass is TensorFlow's fused kernel.

    Keras 3 normalises in separate element-wise ops (mean, variance, subtract, scale: several
    passes over the activations, and in bfloat16 a cast to float32 and back around them); on a
    CPU these ran outside oneDNN and took a large share of a training step (see
    ``benchmarks/bench_models.py --profile``). ``FusedBatchNormV3`` (oneDNN's batch norm
    primitive when oneDNN is on) reads and writes each activation once per direction, takes
    bfloat16/float16 activations with float32 statistics, and has a fused gradient. In
    bfloat16 a layer whose channels are not a multiple of 16 normalises in float32 (a cast
    each way): oneDNN's bfloat16 kernel for those is a generic one, which made the toy
    Tiramisu's (8-map layers) bfloat16 step 2.3x slower than its float32 one.

    Same weights, same arithmetic as Keras' layer: the moving variance is updated with the
    biased batch variance as Keras does (the fused kernel returns the unbiased one; it is
    scaled back). Inference, masks, renorm, synchronised statistics and non-4-D inputs use
    Keras' own code. Registered for ``model.keras`` files as ``climnb>FusedBatchNormalization``.
    """
    keras, tf = import_keras(), import_tf()

    @keras.saving.register_keras_serializable(package="climnb")
    class FusedBatchNormalization(keras.layers.BatchNormalization):
        def call(self, inputs, training=None, mask=None):
            axis = self.axis if self.axis >= 0 else self.axis + len(inputs.shape)
            if (
                not (training and self.trainable)
                or mask is not None
                or self.renorm
                or self.synchronized
                or len(inputs.shape) != 4
                or axis != 3
            ):
                return super().call(inputs, training=training, mask=mask)
            channels = inputs.shape[-1]
            gamma = self.gamma if self.scale else tf.ones((channels,), tf.float32)
            beta = self.beta if self.center else tf.zeros((channels,), tf.float32)
            # oneDNN's bfloat16 batch norm is a jit kernel only for channels in 16s; other
            # counts get its generic one (nspc_bnorm:any), 10-25x slower than float32's
            dtype = self.compute_dtype
            if dtype == "bfloat16" and channels % BF16_BN_CHANNELS:
                dtype = "float32"
            x = tf.cast(inputs, dtype)
            y, mean, variance = tf.compat.v1.nn.fused_batch_norm(
                x,
                tf.cast(gamma, tf.float32),
                tf.cast(beta, tf.float32),
                epsilon=self.epsilon,
                data_format="NHWC",
                is_training=True,
            )
            n = tf.cast(tf.reduce_prod(tf.shape(x)[:3]), tf.float32)
            variance = variance * tf.maximum(n - 1.0, 1.0) / n  # unbiased -> biased, as Keras
            m = self.momentum
            self.moving_mean.assign(self.moving_mean * m + mean * (1.0 - m))
            self.moving_variance.assign(self.moving_variance * m + variance * (1.0 - m))
            return tf.cast(y, self.compute_dtype)

    return FusedBatchNormalization


@cache
def mask_dropout_layer():
    """Keras' ``Dropout`` whose training pass draws its mask from 16-bit random integers and
    multiplies by it.

    Keras 3 (``tf.nn.experimental.stateless_dropout``) draws one float per activation in the
    activations' type and keeps them with a broadcasting ``SelectV2``, forward and backward;
    in bfloat16 on a CPU these ran outside oneDNN and took 28 % of a paper-Tiramisu training
    step (``benchmarks/bench_models.py --profile``), more than the forward convolutions. Here
    one Philox number gives two 16-bit draws, a draw below ``round(rate * 65536)`` drops
    the activation (a rate within 2^-17 of the asked one), and the kept ones are scaled by
    ``1 / (1 - rate)`` through one multiplication, whose gradient is one multiplication too:
    2.9x faster forward and backward for a 192 x 288 x 32 bfloat16 map.

    Same settings, same seed generator (so checkpoints keep its state), the identity at
    inference; masks differ from Keras' draw for draw. A ``noise_shape`` uses Keras' own code.
    Registered for ``model.keras`` files as ``climnb>MaskDropout``.
    """
    keras, tf = import_keras(), import_tf()

    @keras.saving.register_keras_serializable(package="climnb")
    class MaskDropout(keras.layers.Dropout):
        def call(self, inputs, training=False):
            if not (training and self.rate > 0) or self.noise_shape is not None:
                return super().call(inputs, training=training)
            shape = tf.shape(inputs)
            channels = inputs.shape[-1]
            pairs = (channels + 1) // 2
            words = tf.random.stateless_uniform(
                tf.concat([shape[:-1], [pairs]], 0),
                seed=self.seed_generator.next(),
                minval=None,
                maxval=None,
                dtype=tf.uint32,
            )
            draws = tf.reshape(tf.bitcast(words, tf.uint16), tf.concat([shape[:-1], [-1]], 0))
            if 2 * pairs != channels:
                draws = draws[..., :channels]
            threshold = tf.constant(min(round(self.rate * 65536), 65535), tf.uint16)
            scale = tf.constant(1.0 / (1.0 - self.rate), inputs.dtype)
            return inputs * (tf.cast(draws >= threshold, inputs.dtype) * scale)

    return MaskDropout


@cache
def latitude_channel_layer():
    """A Keras layer that appends ``sin(latitude)`` as one more input channel.

    The rows of a global grid on ascending latitudes (climnb's convention on reading) are at
    ``-90 + (i + 0.5) * 180 / height`` degrees, so the map follows from the input's height: the
    same layer serves the training grid and any other global grid at inference. A fully
    convolutional network cannot tell the hemispheres apart otherwise, and the atmospheric-river
    rule's "poleward transport" is the sign of ``V850`` times the hemisphere's
    (CoordConv, Liu et al. 2018). Written by hand: Keras has no coordinate-channel layer.
    Registered for ``model.keras`` files as ``climnb>LatitudeChannel``.
    """
    keras = import_keras()
    ops = keras.ops

    @keras.saving.register_keras_serializable(package="climnb")
    class LatitudeChannel(keras.layers.Layer):
        def get_config(self):  # no settings of its own: the base config (name, dtype) is all
            return super().get_config()

        def call(self, inputs):
            shape = ops.shape(inputs)
            rows = ops.cast(ops.arange(shape[1]), inputs.dtype) + 0.5
            lat = (rows / ops.cast(shape[1], inputs.dtype) - 0.5) * 3.141592653589793
            column = ops.reshape(ops.sin(lat), (1, -1, 1, 1))
            plane = ops.broadcast_to(column, (shape[0], shape[1], shape[2], 1))
            return ops.concatenate([inputs, ops.cast(plane, inputs.dtype)], axis=-1)

        def compute_output_shape(self, input_shape):
            return (*input_shape[:-1], None if input_shape[-1] is None else input_shape[-1] + 1)

    return LatitudeChannel


@cache
def poleward_channel_layer():
    """A Keras layer that appends the poleward moisture transport as one more input channel.

    The channel is ``TMQ x V850 x sign(latitude) / scale``, in physical units over ``scale``
    (kg m-1 s-1; 357 = 250 / 0.7, the atmospheric-river teacher's threshold on ``TMQ x |V850|``,
    so 1 is a river's strength and the sign says poleward or equatorward): the quantity whose
    object-wide mean the teacher's poleward rule (:func:`climnb.labels.ar.transport_rivers`)
    tests. The network sees min-max normalised fields, so the layer undoes the normalisation of
    the two channels first (``x * (maxval - minval) + minval``); their indices and the
    training set's ``minval``/``maxval`` are the layer's settings (see
    :func:`climnb.models.presets.resolve_poleward`), saved with it in ``model.keras`` files.
    Rows are a global grid on ascending latitudes, as for :func:`latitude_channel_layer`: the
    southern half (the first ``height / 2`` rows) is negative latitude. Registered as
    ``climnb>PolewardTransport``.
    """
    keras = import_keras()
    ops = keras.ops

    @keras.saving.register_keras_serializable(package="climnb")
    class PolewardTransport(keras.layers.Layer):
        def __init__(self, tmq, v850, minval, maxval, scale=POLEWARD_SCALE, **kwargs):
            super().__init__(**kwargs)
            self.tmq, self.v850 = int(tmq), int(v850)
            self.minval = [float(v) for v in minval]
            self.maxval = [float(v) for v in maxval]
            self.scale = float(scale)

        def get_config(self):
            return {
                **super().get_config(),
                "tmq": self.tmq,
                "v850": self.v850,
                "minval": self.minval,
                "maxval": self.maxval,
                "scale": self.scale,
            }

        def _physical(self, inputs, channel, k):
            x = ops.cast(inputs[..., channel : channel + 1], "float32")
            return x * (self.maxval[k] - self.minval[k]) + self.minval[k]

        def call(self, inputs):
            shape = ops.shape(inputs)
            transport = self._physical(inputs, self.tmq, 0) * self._physical(inputs, self.v850, 1)
            rows = ops.cast(ops.arange(shape[1]), "float32") + 0.5
            sign = ops.reshape(ops.sign(rows - ops.cast(shape[1], "float32") / 2), (1, -1, 1, 1))
            plane = ops.cast(transport * sign / self.scale, inputs.dtype)
            return ops.concatenate([inputs, plane], axis=-1)

        def compute_output_shape(self, input_shape):
            return (*input_shape[:-1], None if input_shape[-1] is None else input_shape[-1] + 1)

    return PolewardTransport


@cache
def ivt_channel_layer():
    """A Keras layer that appends the moisture transport's magnitude as one more input channel.

    The channel is ``TMQ x |(U850, V850)| / scale`` (kg m-1 s-1 over ``scale``, 1 at the
    atmospheric-river teacher's threshold): the proxy IVT that the teacher's transport method
    thresholds (:func:`climnb.labels.ar.ivt_magnitude`), which a network otherwise has to
    form as a product of three normalised inputs. Like :func:`poleward_channel_layer`, whose
    normalisation it shares, it undoes the min-max normalisation of ``TMQ``, ``V850`` and
    ``U850`` (``minval``/``maxval`` in that order) and keeps its settings in ``model.keras``
    files. Registered as ``climnb>TransportMagnitude``.
    """
    keras = import_keras()
    ops = keras.ops

    @keras.saving.register_keras_serializable(package="climnb")
    class TransportMagnitude(poleward_channel_layer()):
        def __init__(self, tmq, v850, u850, minval, maxval, scale=POLEWARD_SCALE, **kwargs):
            super().__init__(tmq, v850, minval, maxval, scale, **kwargs)
            self.u850 = int(u850)

        def get_config(self):
            return {**super().get_config(), "u850": self.u850}

        def call(self, inputs):
            tmq = self._physical(inputs, self.tmq, 0)
            v850, u850 = self._physical(inputs, self.v850, 1), self._physical(inputs, self.u850, 2)
            plane = tmq * ops.sqrt(u850 * u850 + v850 * v850) / self.scale
            return ops.concatenate([inputs, ops.cast(plane, inputs.dtype)], axis=-1)

    return TransportMagnitude


def register_layers() -> None:
    """Register climnb's own Keras layers, so that ``model.keras`` files holding them load."""
    fused_batch_norm_layer()
    mask_dropout_layer()
    latitude_channel_layer()
    poleward_channel_layer()
    ivt_channel_layer()


class LayerFactory:
    """Makes named Keras layers with one dtype policy, He-uniform init and L2 weight decay.

    Parameters
    ----------
    mixed_precision : ``False`` (float32), ``True`` (``"mixed_float16"``) or a precision name
        (``"mixed_bfloat16"``, see :mod:`climnb.models.precision`): compute in that type with
        float32 variables; the model's logits are cast back to float32 by :meth:`logits`.
    weight_decay : L2 factor on kernels (0 for none).
    batch_norm : whether :meth:`conv_bn_relu` normalises.
    dropout : rate of the dropout after :meth:`conv_bn_relu` (0 for none), through
        :func:`mask_dropout_layer` (Keras' layer with a cheaper mask).
    fused_batch_norm : batch norm through TensorFlow's fused kernel in training
        (:func:`fused_batch_norm_layer`; same weights and results as Keras' layer, faster).
    batch_norm_momentum : momentum of the batch-norm moving statistics that inference uses
        (Keras' default 0.99 averages over about 100 steps).
    """

    def __init__(
        self,
        *,
        mixed_precision=False,
        weight_decay=0.0,
        batch_norm=True,
        dropout=0.0,
        fused_batch_norm=True,
        batch_norm_momentum=0.99,
    ):
        self.keras = import_keras()
        self.layers = self.keras.layers
        name = policy_name(mixed_precision)
        if name == "mixed_bfloat16":
            check_bf16_support(len(import_tf().config.list_physical_devices("GPU")))
        self.policy = self.keras.DTypePolicy(name)
        self.weight_decay = weight_decay
        self.batch_norm = batch_norm
        self.dropout = dropout
        self.batch_norm_momentum = batch_norm_momentum
        self.batch_norm_layer = (
            fused_batch_norm_layer() if fused_batch_norm else self.layers.BatchNormalization
        )
        self.dropout_layer = mask_dropout_layer()

    def _conv_kwargs(self, use_bias):
        reg = self.keras.regularizers.L2(self.weight_decay) if self.weight_decay else None
        return dict(
            padding="same",
            use_bias=use_bias,
            kernel_initializer="he_uniform",
            kernel_regularizer=reg,
            dtype=self.policy,
        )

    def conv(self, x, filters, kernel, *, name, strides=1, dilation=1, use_bias=True):
        """A 'same'-padded 2-D convolution, no activation.

        A strided 1x1 convolution is built as the subsampling it is (a 1x1 max pool of that
        stride, ``{name}_sub``) followed by the 1x1 convolution at stride 1: the same weights,
        outputs and gradients, but it keeps clear of oneDNN's strided 1x1 weight-gradient kernel
        (``jit_1x1:avx512_core``), which in TensorFlow 2.18's oneDNN corrupts the heap and
        crashes float32 training on AVX-512 CPUs.
        """
        if strides != 1 and kernel in (1, (1, 1)):
            x = self.layers.MaxPooling2D(1, strides, name=f"{name}_sub", dtype=self.policy)(x)
            strides = 1
        return self.layers.Conv2D(
            filters,
            kernel,
            strides=strides,
            dilation_rate=dilation,
            name=name,
            **self._conv_kwargs(use_bias),
        )(x)

    def conv_transpose(self, x, filters, kernel, *, name, strides=2, use_bias=True):
        """A 'same'-padded transposed convolution: output = strides x input size."""
        return self.layers.Conv2DTranspose(
            filters, kernel, strides=strides, name=name, **self._conv_kwargs(use_bias)
        )(x)

    def bn_relu(self, x, *, name):
        """Batch norm (if enabled) then ReLU."""
        if self.batch_norm:
            x = self.batch_norm_layer(
                momentum=self.batch_norm_momentum, name=f"{name}_bn", dtype=self.policy
            )(x)
        return self.layers.ReLU(name=f"{name}_relu", dtype=self.policy)(x)

    def conv_bn_relu(self, x, filters, kernel, *, name, strides=1, dilation=1):
        """Convolution - batch norm - ReLU (- dropout). No conv bias when batch norm follows."""
        x = self.conv(
            x,
            filters,
            kernel,
            name=f"{name}_conv",
            strides=strides,
            dilation=dilation,
            use_bias=not self.batch_norm,
        )
        x = self.bn_relu(x, name=name)
        if self.dropout:
            x = self.dropout_layer(self.dropout, name=f"{name}_drop", dtype=self.policy)(x)
        return x

    def concat(self, tensors, *, name):
        """Concatenate along channels (or pass a single tensor through)."""
        if len(tensors) == 1:
            return tensors[0]
        return self.layers.Concatenate(axis=-1, name=name, dtype=self.policy)(tensors)

    def logits(self, x, n_classes, *, name="logits"):
        """1x1 classifier convolution, cast to float32 for a stable softmax and loss."""
        x = self.conv(x, n_classes, 1, name=name)
        return self.layers.Activation("linear", dtype="float32", name=f"{name}_fp32")(x)
