"""Building blocks shared by the two networks: convolutions with the right dtype policy,
initialiser and weight decay, batch norm, ReLU and dropout, in one place."""

from __future__ import annotations

from climnb.models.backend import import_keras

__all__ = ["LayerFactory"]


class LayerFactory:
    """Makes named Keras layers with one dtype policy, He-uniform init and L2 weight decay.

    Parameters
    ----------
    mixed_precision : compute in float16 with float32 variables (Keras ``mixed_float16``
        policy); the model's logits are cast back to float32 by :meth:`logits`.
    weight_decay : L2 factor on kernels (0 for none).
    batch_norm : whether :meth:`conv_bn_relu` normalises.
    dropout : rate of the dropout after :meth:`conv_bn_relu` (0 for none).
    """

    def __init__(self, *, mixed_precision=False, weight_decay=0.0, batch_norm=True, dropout=0.0):
        self.keras = import_keras()
        self.layers = self.keras.layers
        self.policy = self.keras.DTypePolicy("mixed_float16" if mixed_precision else "float32")
        self.weight_decay = weight_decay
        self.batch_norm = batch_norm
        self.dropout = dropout

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
        """A 'same'-padded 2-D convolution, no activation."""
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
            x = self.layers.BatchNormalization(name=f"{name}_bn", dtype=self.policy)(x)
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
            x = self.layers.Dropout(self.dropout, name=f"{name}_drop", dtype=self.policy)(x)
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
