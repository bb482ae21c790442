"""Tiramisu (FC-DenseNet) as run in the paper: 5 dense blocks of 2, 2, 2, 4, 5 layers.

Topology (Jegou et al. 2017, with the paper's changes), for the ``"paper"`` preset:

* stem: 5x5 convolution to 64 maps - BN - ReLU (the paper's code: ``nb_filter=64``, the stem
  uses the dense blocks' kernel size);
* down path: dense blocks of 2, 2, 2, 4 layers (each layer: 5x5 conv to 32 new maps - BN - ReLU
  - dropout, concatenated to its input), each followed by a transition down that is a 1x1
  stride-2 convolution keeping the width (instead of FC-DenseNet's max pool);
* bottleneck: a dense block of 5 layers;
* up path: transitions up, each a 3x3 stride-2 transposed convolution of only the new maps of
  the block below (FC-DenseNet's trick that keeps the up path narrow), concatenated with the
  skip connection of the same resolution, then dense blocks of 4, 2, 2, 2 layers;
* a 1x1 convolution to the classes, output in float32 logits at the input resolution.

That is 35 layers with weights. At 768 x 1152 x 16: 7.51 M trainable parameters (paper: 7.8 M,
-3.8 %) and 4.19 TFLOP per training sample (paper: 4.2 TFLOP) -- see
:func:`climnb.models.flops.count_flops`.

Examples
--------
>>> from climnb.models import build_model
>>> model = build_model("tiramisu", (96, 144, 16), preset="toy")
>>> model.output_shape
(None, 96, 144, 3)
"""

from __future__ import annotations

from climnb.models.layers import (
    LayerFactory,
    ivt_channel_layer,
    latitude_channel_layer,
    poleward_channel_layer,
)
from climnb.models.presets import TiramisuConfig, check_input_shape

__all__ = ["build_tiramisu"]


def _dense_block(mk: LayerFactory, x, n_layers: int, config: TiramisuConfig, name: str):
    """``n_layers`` conv-BN-ReLU layers, each seeing all maps before it; returns (x, new maps)."""
    added = []
    for i in range(n_layers):
        new = mk.conv_bn_relu(x, config.growth_rate, config.kernel_size, name=f"{name}_l{i + 1}")
        added.append(new)
        x = mk.concat([x, new], name=f"{name}_l{i + 1}_cat")
    return x, added


def build_tiramisu(
    input_shape,
    n_classes: int = 3,
    config: TiramisuConfig | None = None,
    *,
    mixed_precision: bool | str = False,
    fused_batch_norm: bool = True,
    name: str = "tiramisu",
):
    """Build the Tiramisu as a Keras functional model returning float32 logits.

    Parameters
    ----------
    input_shape : ``(height, width, channels)``; height and width must be multiples of
        ``config.stride`` (16 for five blocks), otherwise ValueError names sizes that work.
    n_classes : output classes (3: background, tropical cyclone, atmospheric river).
    config : architecture settings; the paper's by default.
    mixed_precision : ``True`` for float16 or ``"mixed_bfloat16"`` for bfloat16 compute, with
        float32 variables (see :mod:`climnb.models.precision`).
    fused_batch_norm : train batch norm with TensorFlow's fused kernel (same results, faster;
        see :func:`climnb.models.layers.fused_batch_norm_layer`).
    name : model name.

    Returns
    -------
    keras.Model mapping ``(batch, h, w, channels)`` to logits ``(batch, h, w, n_classes)``.
    """
    config = config or TiramisuConfig()
    h, w, c = check_input_shape(input_shape, config.stride, "tiramisu")
    mk = LayerFactory(
        mixed_precision=mixed_precision,
        fused_batch_norm=fused_batch_norm,
        weight_decay=config.weight_decay,
        batch_norm=config.batch_norm,
        dropout=config.dropout,
        batch_norm_momentum=config.batch_norm_momentum,
    )
    inputs = mk.keras.Input(shape=(h, w, c), name="fields")
    x = inputs
    if config.latitude_channel:
        x = latitude_channel_layer()(name="latitude", dtype=mk.policy)(x)
    for option in ("poleward_channel", "ivt_channel"):
        if getattr(config, option) is True:
            raise ValueError(
                f"{option}=True needs the normalisation of its input channels to undo: pass "
                "climnb.models.presets.resolve_channels(overrides, channels, minval, maxval)"
            )
    if config.poleward_channel:
        settings = dict(config.poleward_channel)
        x = poleward_channel_layer()(name="poleward", dtype=mk.policy, **settings)(x)
    if config.ivt_channel:
        settings = dict(config.ivt_channel)
        x = ivt_channel_layer()(name="transport", dtype=mk.policy, **settings)(x)
    x = mk.conv_bn_relu(x, config.initial_filters, config.kernel_size, name="stem")

    skips = []
    for i, n in enumerate(config.blocks[:-1], start=1):
        x, _ = _dense_block(mk, x, n, config, f"down{i}")
        skips.append(x)
        x = mk.conv_bn_relu(x, x.shape[-1], 1, strides=2, name=f"td{i}")

    x, added = _dense_block(mk, x, config.blocks[-1], config, "bottleneck")

    for i, n in enumerate(reversed(config.blocks[:-1]), start=1):
        new = mk.concat(added, name=f"tu{i}_new")
        up = mk.conv_transpose(new, new.shape[-1], config.upsample_kernel, name=f"tu{i}")
        x = mk.concat([up, skips.pop()], name=f"tu{i}_skip")
        x, added = _dense_block(mk, x, n, config, f"up{i}")

    logits = mk.logits(x, n_classes)
    return mk.keras.Model(inputs, logits, name=name)
