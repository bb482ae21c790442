"""Segmentation networks (Tiramisu, DeepLabv3+), their loss, metric and FLOP counting.

``import climnb.models`` is cheap: TensorFlow is imported when a model, loss or metric is
built. Without TensorFlow those calls raise ImportError saying what to install
(``pip install 'climnb[train]'``).

Examples
--------
>>> from climnb.models import build_model, count_flops, count_params
>>> model = build_model("deeplab", (96, 144, 16), preset="toy")
>>> model.output_shape
(None, 96, 144, 3)
>>> build_model("tiramisu", (100, 144, 16), preset="toy")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: tiramisu needs ... multiples of 16 ...; got 100 x 144. Height 100 -> try 96 or 112. ...
"""

from __future__ import annotations

from climnb.models.deeplab import build_deeplab
from climnb.models.flops import count_flops, count_params
from climnb.models.presets import (
    MODEL_NAMES,
    PAPER_FIGURES,
    PRESETS,
    DeepLabConfig,
    TiramisuConfig,
    get_config,
)
from climnb.models.tiramisu import build_tiramisu

__all__ = [
    "build_model",
    "model_summary",
    "count_flops",
    "count_params",
    "get_config",
    "TiramisuConfig",
    "DeepLabConfig",
    "PRESETS",
    "PAPER_FIGURES",
    "MODEL_NAMES",
]


def build_model(
    name: str,
    input_shape,
    n_classes: int = 3,
    preset: str = "paper",
    *,
    mixed_precision: bool | str = False,
    fused_batch_norm: bool = True,
    **overrides,
):
    """Build a segmentation network as a Keras model that returns float32 logits.

    Parameters
    ----------
    name : ``"tiramisu"`` or ``"deeplab"`` (aliases: ``"fc-densenet"``, ``"deeplabv3+"``).
    input_shape : ``(height, width, channels)``, channels last; height and width must be
        multiples of the network's stride (16 for the Tiramisu presets, 8 for DeepLabv3+).
    n_classes : number of classes (3: background, tropical cyclone, atmospheric river).
    preset : ``"paper"`` (the paper's networks), ``"small"`` or ``"toy"`` (CPU-sized).
    mixed_precision : compute precision with float32 master weights: ``False`` (float32),
        ``True`` (float16, ``"mixed_float16"``) or ``"mixed_bfloat16"`` (bfloat16: fast on CPUs
        with AVX512_BF16/AMX, no loss scaling needed); see :mod:`climnb.models.precision`.
    fused_batch_norm : batch norm trained through TensorFlow's fused kernel (the default; same
        weights and results as Keras' layer, faster on CPUs; ``False``: Keras' own layer).
    **overrides : fields of :class:`TiramisuConfig` / :class:`DeepLabConfig` to change, e.g.
        ``growth_rate=16`` or ``dropout=0.0``.

    Returns
    -------
    keras.Model from ``(batch, h, w, channels)`` to logits ``(batch, h, w, n_classes)``;
    ``model.losses`` holds the weight-decay penalties.
    """
    config = get_config(name, preset, **overrides)
    build = build_tiramisu if isinstance(config, TiramisuConfig) else build_deeplab
    return build(
        input_shape,
        n_classes,
        config,
        mixed_precision=mixed_precision,
        fused_batch_norm=fused_batch_norm,
    )


def model_summary(model) -> str:
    """Keras' layer-by-layer summary of ``model`` as a string."""
    lines: list[str] = []
    model.summary(print_fn=lambda line, **kwargs: lines.append(line), line_length=110)
    return "\n".join(lines)
