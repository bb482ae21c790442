"""DeepLabv3+ with a ResNet-50 v2 backbone at output stride 8, as run in the paper.

Topology for the ``"paper"`` preset (the paper's code: TF-slim ``resnet_v2_50``, decoder
``deconv1x``):

* backbone: 7x7 stride-2 root convolution (64) and 3x3 stride-2 max pool, then pre-activation
  (v2) bottleneck units (BN - ReLU first; 1x1, 3x3, 1x1 convolutions; identity or 1x1
  projection shortcut) in stages of 3, 4, 6, 3 units and 256, 512, 1024, 2048 channels. The
  stride of each stage sits in its last unit (slim's convention); once the output stride (8) is
  reached, further strides become dilation, so stage 3 runs at rate 2 and stage 4 at rate 4,
  all at 1/8 of the input; a final BN - ReLU;
* ASPP: 256-channel 1x1 branch, three 3x3 branches dilated 12/24/36, an image-pooling branch
  (global mean, 1x1 conv, broadcast back), concatenated and projected by a 1x1 convolution;
* decoder: a 3x3 stride-2 transposed convolution to 1/4, concatenated with a 48-channel 1x1
  projection of the low-level features (the first 1x1 convolution of stage 1's last unit, at
  1/4), two 3x3 convolutions, two more stride-2 transposed convolutions to full resolution,
  concatenated with two 3x3 convolutions of the raw input (64 and 128 maps: ``input_skip``),
  two 3x3 convolutions and a 1x1 classifier; logits in float32 at the input resolution.

At 768 x 1152 x 16: 43.7 M trainable parameters (paper: 43.7 M) and 14.4 TFLOP per training
sample in the paper's counting convention (13.0 TFLOP of exact convolution arithmetic; see
:mod:`climnb.models.flops`). Without ``input_skip`` the network has 42.2 M parameters and
6.1 TFLOP (4.8 exact): the paper's figures include the full-resolution skip.

Deliberate differences from the paper's code, none of which changes the FLOP count and all of
which change the parameter count by under 0.02 %:

* the decoder's transposed convolutions and its full-resolution convolutions have BN - ReLU
  after them; in the original they were linear (``tf.layers`` defaults), which made the last
  five layers one linear map;
* the image-pooling branch has no batch norm: with the paper's one sample per GPU, batch norm
  over a 1x1 map normalises a single value to zero.

Examples
--------
>>> from climnb.models import build_model
>>> model = build_model("deeplab", (96, 144, 16), preset="toy")
>>> model.output_shape
(None, 96, 144, 3)
"""

from __future__ import annotations

import math

from climnb.models.layers import LayerFactory
from climnb.models.presets import DeepLabConfig, check_input_shape

__all__ = ["build_deeplab", "backbone_plan"]

#: slim's resnet_v2: stages 1-3 end with a stride-2 unit, stage 4 keeps the resolution.
_STAGE_STRIDES = (2, 2, 2, 1)
_ROOT_STRIDE = 4  # 7x7 stride-2 convolution + stride-2 max pool


def backbone_plan(config: DeepLabConfig) -> list[tuple[int, int, int, int, int]]:
    """``(stage, unit, stride, rate, width)`` of each bottleneck unit, slim's atrous rule.

    Examples
    --------
    >>> plan = backbone_plan(DeepLabConfig())
    >>> [(s, u, st, r) for s, u, st, r, _ in plan if st > 1 or r > 1][:3]
    [(1, 3, 2, 1), (3, 1, 1, 2), (3, 2, 1, 2)]
    >>> sorted({r for *_, r, _ in plan})
    [1, 2, 4]
    """
    plan, current, rate = [], _ROOT_STRIDE, 1
    for stage, (n_units, width, stage_stride) in enumerate(
        zip(config.units, config.widths, _STAGE_STRIDES, strict=True), start=1
    ):
        for unit in range(1, n_units + 1):
            stride = stage_stride if unit == n_units else 1
            if current == config.output_stride:
                plan.append((stage, unit, 1, rate, width))
                rate *= stride
            else:
                plan.append((stage, unit, stride, 1, width))
                current *= stride
    return plan


def _bottleneck_v2(mk: LayerFactory, x, width, stride, rate, name):
    """Pre-activation bottleneck; returns (output, output of its first 1x1 conv block)."""
    depth = 4 * width
    preact = mk.bn_relu(x, name=f"{name}_preact")
    if x.shape[-1] == depth:
        shortcut = x
        if stride > 1:
            shortcut = mk.layers.MaxPooling2D(1, stride, name=f"{name}_sub", dtype=mk.policy)(x)
    else:
        shortcut = mk.conv(preact, depth, 1, strides=stride, name=f"{name}_shortcut")
    conv1 = mk.conv_bn_relu(preact, width, 1, name=f"{name}_conv1")
    r = mk.conv_bn_relu(conv1, width, 3, strides=stride, dilation=rate, name=f"{name}_conv2")
    r = mk.conv(r, depth, 1, name=f"{name}_conv3")
    return mk.layers.Add(name=f"{name}_add", dtype=mk.policy)([shortcut, r]), conv1


def _backbone(mk: LayerFactory, inputs, config: DeepLabConfig):
    """ResNet v2 features at ``output_stride`` and the low-level features at stride 4."""
    x = mk.conv(inputs, config.root_filters, 7, strides=2, name="root")
    x = mk.layers.MaxPooling2D(3, 2, padding="same", name="root_pool", dtype=mk.policy)(x)
    low_level = None
    for stage, unit, stride, rate, width in backbone_plan(config):
        x, conv1 = _bottleneck_v2(mk, x, width, stride, rate, f"s{stage}u{unit}")
        if stage == 1 and unit == config.units[0]:
            low_level = conv1
    return mk.bn_relu(x, name="postnorm"), low_level


def _aspp(mk: LayerFactory, x, config: DeepLabConfig):
    """Atrous spatial pyramid pooling: 1x1, three dilated 3x3, image pooling; 1x1 projection."""
    f = config.aspp_filters
    branches = [mk.conv_bn_relu(x, f, 1, name="aspp_1x1")]
    for rate in config.aspp_rates:
        branches.append(mk.conv_bn_relu(x, f, 3, dilation=rate, name=f"aspp_r{rate}"))
    h, w = x.shape[1], x.shape[2]
    pooled = mk.layers.GlobalAveragePooling2D(keepdims=True, name="aspp_pool", dtype=mk.policy)(x)
    pooled = mk.conv(pooled, f, 1, name="aspp_pool_conv")
    pooled = mk.layers.ReLU(name="aspp_pool_relu", dtype=mk.policy)(pooled)
    pooled = mk.layers.UpSampling2D((h, w), name="aspp_pool_up", dtype=mk.policy)(pooled)
    branches.append(pooled)
    x = mk.concat(branches, name="aspp_cat")
    return mk.conv_bn_relu(x, f, 1, name="aspp_proj")


def _up(mk: LayerFactory, x, filters, name):
    """3x3 stride-2 transposed convolution - BN - ReLU."""
    x = mk.conv_transpose(x, filters, 3, name=f"{name}_deconv", use_bias=not mk.batch_norm)
    return mk.bn_relu(x, name=name)


def _decoder(mk: LayerFactory, inputs, encoded, low_level, config: DeepLabConfig):
    f = config.decoder_filters
    x = encoded
    for i in range(int(math.log2(config.output_stride // 4))):
        x = _up(mk, x, encoded.shape[-1], f"dec_up{i + 1}")
    low = mk.conv_bn_relu(low_level, config.low_level_filters, 1, name="dec_low")
    x = mk.concat([x, low], name="dec_low_cat")
    x = mk.conv_bn_relu(x, f, 3, name="dec_conv1")
    x = mk.conv_bn_relu(x, f, 3, name="dec_conv2")
    x = _up(mk, x, f, "dec_up_half")
    x = _up(mk, x, f, "dec_up_full")
    if config.input_skip:
        skip = inputs
        for i, n in enumerate(config.input_skip, start=1):
            skip = mk.conv_bn_relu(skip, n, 3, name=f"dec_skip{i}")
        x = mk.concat([x, skip], name="dec_skip_cat")
        x = mk.conv_bn_relu(x, f, 3, name="dec_full1")
        x = mk.conv_bn_relu(x, f, 3, name="dec_full2")
    return x


def build_deeplab(
    input_shape,
    n_classes: int = 3,
    config: DeepLabConfig | None = None,
    *,
    mixed_precision: bool | str = False,
    fused_batch_norm: bool = True,
    name: str = "deeplabv3plus",
):
    """Build DeepLabv3+ as a Keras functional model returning float32 logits.

    Parameters
    ----------
    input_shape : ``(height, width, channels)``; height and width must be multiples of the
        output stride (8), otherwise ValueError names sizes that work.
    n_classes : output classes.
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
    config = config or DeepLabConfig()
    h, w, c = check_input_shape(input_shape, config.stride, "deeplab")
    mk = LayerFactory(
        mixed_precision=mixed_precision,
        fused_batch_norm=fused_batch_norm,
        weight_decay=config.weight_decay,
        batch_norm=config.batch_norm,
        batch_norm_momentum=config.batch_norm_momentum,
    )
    inputs = mk.keras.Input(shape=(h, w, c), name="fields")
    features, low_level = _backbone(mk, inputs, config)
    encoded = _aspp(mk, features, config)
    x = _decoder(mk, inputs, encoded, low_level, config)
    logits = mk.logits(x, n_classes)
    return mk.keras.Model(inputs, logits, name=name)
