"""Architecture settings of the two segmentation networks, as frozen dataclasses, and their presets.

The ``"paper"`` presets reproduce the SC18 Gordon Bell runs (Kurth et al., "Exascale Deep Learning
for Climate Analytics"): at 768 x 1152 x 16 input they have the paper's parameter counts and FLOP
per sample (see :mod:`climnb.models.flops`). The ``"toy"`` presets keep the same topology, shrunk
so that several hundred training steps at 96 x 144 take a couple of minutes on two CPU cores.
``"small"`` sits in between (for a single GPU, or toy data at full resolution).

This module imports neither TensorFlow nor Keras.

Examples
--------
>>> from climnb.models.presets import get_config
>>> cfg = get_config("tiramisu", "paper")
>>> cfg.blocks, cfg.growth_rate, cfg.kernel_size, cfg.stride
((2, 2, 2, 4, 5), 32, 5, 16)
>>> get_config("deeplab", "toy", aspp_filters=48).aspp_filters
48
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from climnb.labels.config import ARConfig

__all__ = [
    "TiramisuConfig",
    "DeepLabConfig",
    "ModelConfig",
    "PRESETS",
    "MODEL_NAMES",
    "PAPER_FIGURES",
    "get_config",
    "check_input_shape",
    "resolve_poleward",
    "resolve_channels",
    "POLEWARD_SCALE",
]

#: the poleward channel's unit: the atmospheric-river teacher's threshold on TMQ x |V850|
POLEWARD_SCALE = ARConfig.proxy_threshold
POLEWARD_KEYS = ("tmq", "v850", "minval", "maxval")
#: the settings of each transport channel, and the input channels it is computed from
CHANNEL_KEYS = {
    "poleward_channel": (POLEWARD_KEYS, ("TMQ", "V850")),
    "ivt_channel": ((*POLEWARD_KEYS, "u850"), ("TMQ", "V850", "U850")),
}


@dataclass(frozen=True)
class TiramisuConfig:
    """Settings of the Tiramisu (FC-DenseNet, Jegou et al. 2017) as modified by the paper.

    Attributes
    ----------
    blocks : layers in each dense block of the down path; the last one is the bottleneck, and
        the up path mirrors the others (``(2, 2, 2, 4, 5)``: 2-2-2-4 down, 5 bottleneck, 4-2-2-2
        up). With the stem, 4 transitions down, 4 up and the 1x1 classifier, 35 layers.
    growth_rate : new feature maps per dense-block layer (k).
    kernel_size : kernel of the dense-block layers and of the stem convolution.
    initial_filters : width of the stem convolution. The paper's code used 64 (``nb_filter``);
        with 48, as in FC-DenseNet-103, the network is 7.2 M parameters and 3.8 TFLOP instead of
        7.5 M and 4.2.
    upsample_kernel : kernel of the stride-2 transposed convolutions of the transitions up. They
        upsample only the new feature maps of the block below (not its input), as in FC-DenseNet.
    batch_norm : batch normalisation after each convolution (conv - BN - ReLU, the order of the
        paper's final code).
    dropout : dropout rate after each conv - BN - ReLU (0 disables it).
    weight_decay : L2 factor on convolution kernels; the penalties are in ``model.losses``.
    batch_norm_momentum : momentum of the batch-norm moving statistics used at inference
        (Keras' 0.99 averages over about 100 steps, too slow for a run of a few hundred).
    latitude_channel : append ``sin(latitude)`` of a global ascending-latitude grid as one more
        input channel (:func:`climnb.models.layers.latitude_channel_layer`), so that the network
        knows the hemisphere (which way is poleward).
    poleward_channel : append the poleward moisture transport ``TMQ x V850 x sign(latitude)``
        as one more input channel (:func:`climnb.models.layers.poleward_channel_layer`), the
        quantity the atmospheric-river teacher's poleward rule tests. ``True`` asks for it; the
        network is built from the normalisation it undoes, a mapping made by
        :func:`resolve_poleward` from the sample set's statistics (training does this, and the
        bundle records the mapping).
    ivt_channel : append the moisture transport's magnitude ``TMQ x |(U850, V850)|`` (the proxy
        IVT the atmospheric-river teacher thresholds) as one more input channel
        (:func:`climnb.models.layers.ivt_channel_layer`); resolved like ``poleward_channel``.
    """

    blocks: tuple[int, ...] = (2, 2, 2, 4, 5)
    growth_rate: int = 32
    kernel_size: int = 5
    initial_filters: int = 64
    upsample_kernel: int = 3
    batch_norm: bool = True
    dropout: float = 0.2
    weight_decay: float = 1e-4
    batch_norm_momentum: float = 0.99
    latitude_channel: bool = False
    poleward_channel: bool | Mapping[str, Any] = False
    ivt_channel: bool | Mapping[str, Any] = False

    def __post_init__(self):
        for name, (keys, _) in CHANNEL_KEYS.items():
            settings = getattr(self, name)
            missing = sorted(set(keys) - set(settings)) if isinstance(settings, Mapping) else []
            if missing:
                raise ValueError(
                    f"{name} needs {', '.join(keys)}; missing "
                    f"{', '.join(missing)} (make it with resolve_channels)"
                )
        if len(self.blocks) < 2 or min(self.blocks) < 1:
            raise ValueError(f"blocks needs at least two positive entries, got {self.blocks}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        _check_momentum(self.batch_norm_momentum)

    @property
    def stride(self) -> int:
        """Total down-sampling factor: input height and width must be multiples of it."""
        return 2 ** (len(self.blocks) - 1)


@dataclass(frozen=True)
class DeepLabConfig:
    """Settings of DeepLabv3+ (Chen et al. 2018) with a ResNet v2 backbone, as in the paper.

    Attributes
    ----------
    units : bottleneck units per backbone stage; ``(3, 4, 6, 3)`` is ResNet-50.
    widths : bottleneck widths per stage; each stage outputs 4 x its width (256 ... 2048).
    root_filters : filters of the 7x7 stride-2 root convolution (followed by a 3x3 stride-2
        max pool).
    output_stride : input size / backbone output size, 8 or 16. At 8 the last two stages are
        dilated (rates 2 and 4) instead of strided, as in the paper.
    aspp_filters : channels of each ASPP branch and of its 1x1 projection.
    aspp_rates : dilation rates of the three 3x3 ASPP branches (12/24/36 at output stride 8).
    low_level_filters : channels of the 1x1 projection of the low-level features (the first
        1x1 convolution of the last unit of stage 1, at stride 4) that the decoder joins.
    decoder_filters : channels of the decoder's transposed and 3x3 convolutions.
    input_skip : filters of the 3x3 convolutions on the raw input whose output joins the decoder
        at full resolution (the "deconv1x" decoder of the paper's code); ``()`` leaves them out.
        The paper's 43.7 M parameters and 14.4 TFLOP include them.
    batch_norm : batch normalisation in the backbone, ASPP and decoder.
    weight_decay : L2 factor on convolution kernels; the penalties are in ``model.losses``.
    batch_norm_momentum : momentum of the batch-norm moving statistics used at inference.
    """

    units: tuple[int, ...] = (3, 4, 6, 3)
    widths: tuple[int, ...] = (64, 128, 256, 512)
    root_filters: int = 64
    output_stride: int = 8
    aspp_filters: int = 256
    aspp_rates: tuple[int, int, int] = (12, 24, 36)
    low_level_filters: int = 48
    decoder_filters: int = 256
    input_skip: tuple[int, ...] = (64, 128)
    batch_norm: bool = True
    weight_decay: float = 1e-4
    batch_norm_momentum: float = 0.99

    def __post_init__(self):
        if self.output_stride not in (8, 16):
            raise ValueError(f"output_stride must be 8 or 16, got {self.output_stride}")
        if len(self.units) != 4 or len(self.widths) != 4:
            raise ValueError("units and widths need four stages each (a ResNet v2 backbone)")
        if len(self.aspp_rates) != 3:
            raise ValueError(f"aspp_rates needs three rates, got {self.aspp_rates}")
        _check_momentum(self.batch_norm_momentum)

    @property
    def stride(self) -> int:
        """Input height and width must be multiples of this (the backbone's output stride)."""
        return self.output_stride


def _check_momentum(momentum: float) -> None:
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"batch_norm_momentum must be in [0, 1), got {momentum}")


ModelConfig = TiramisuConfig | DeepLabConfig

PRESETS: dict[str, dict[str, ModelConfig]] = {
    "tiramisu": {
        "paper": TiramisuConfig(),
        "small": TiramisuConfig(growth_rate=16, kernel_size=3, initial_filters=32),
        # Sized to the toy grid (docs/network_quality.md): one layer per dense block (2 in the
        # bottleneck), 16 stem maps and a growth of 8 take 0.66 GFLOP per training sample
        # instead of 3.5 with (2, 2, 2, 2, 3), 24 and 12, and learnt better in the demo's time;
        # the receptive field (~100 cells at stride 16) still spans a river's length. No
        # weight decay: against the normalised class-weighted loss (~1e-3 once trained) the
        # paper's 1e-4 L2 term (0.14 at initialisation) dominated. Batch-norm momentum 0.9:
        # with 0.99 the statistics used at validation and inference lagged a run of a few
        # hundred steps.
        "toy": TiramisuConfig(
            blocks=(1, 1, 1, 1, 2),
            growth_rate=8,
            kernel_size=3,
            initial_filters=16,
            dropout=0.0,
            weight_decay=0.0,
            batch_norm_momentum=0.9,
        ),
    },
    "deeplab": {
        "paper": DeepLabConfig(),
        "small": DeepLabConfig(
            units=(2, 2, 2, 2),
            widths=(32, 64, 128, 256),
            root_filters=32,
            aspp_filters=128,
            low_level_filters=32,
            decoder_filters=128,
            input_skip=(32, 64),
        ),
        "toy": DeepLabConfig(
            units=(1, 1, 1, 1),
            widths=(16, 24, 32, 48),
            root_filters=16,
            aspp_filters=48,
            aspp_rates=(2, 4, 6),
            low_level_filters=16,
            decoder_filters=48,
            input_skip=(16, 16),
        ),
    },
}
MODEL_NAMES = tuple(PRESETS)

#: The paper's figures at 768 x 1152 x 16 input: parameters and training FLOP per sample.
PAPER_FIGURES: dict[str, dict[str, float]] = {
    "tiramisu": {"params": 7.8e6, "train_flop": 4.2e12, "layers": 35},
    "deeplab": {"params": 43.7e6, "train_flop": 14.4e12, "layers": 66},
}


def _canonical(name: str) -> str:
    key = name.lower().replace("-", "").replace("_", "")
    aliases = {"tiramisu": "tiramisu", "fcdensenet": "tiramisu"}
    aliases |= {"deeplab": "deeplab", "deeplabv3+": "deeplab", "deeplabv3plus": "deeplab"}
    if key not in aliases:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    return aliases[key]


def get_config(name: str, preset: str = "paper", **overrides) -> ModelConfig:
    """The settings of model ``name`` (``"tiramisu"`` or ``"deeplab"``) for a preset.

    ``overrides`` replace single fields, so any size between the presets can be had, e.g.
    ``get_config("tiramisu", "paper", growth_rate=16)``. Lists are turned into tuples.
    """
    name = _canonical(name)
    if preset not in PRESETS[name]:
        raise ValueError(
            f"unknown preset {preset!r} for {name}; choose one of {', '.join(PRESETS[name])}"
        )
    config = PRESETS[name][preset]
    fields = {f.name for f in dataclasses.fields(config)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise TypeError(
            f"{type(config).__name__} has no field(s) {', '.join(unknown)}; "
            f"fields are: {', '.join(sorted(fields))}"
        )
    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    return dataclasses.replace(config, **overrides)


def resolve_channels(
    overrides: Mapping[str, Any],
    channels: Sequence[str],
    minval: Sequence[float],
    maxval: Sequence[float],
) -> dict:
    """``overrides`` with ``poleward_channel=True`` and ``ivt_channel=True`` replaced by what
    their layers need: the indices of ``TMQ``, ``V850`` (and ``U850``) among the network's
    input ``channels`` and their min-max normalisation (``minval``, ``maxval``, per channel in
    the order of ``channels``, from ``stats.h5``). Other overrides, and mappings already
    resolved, pass unchanged.

    >>> resolve_channels({"poleward_channel": True}, ["TMQ", "U850", "V850"], [0, -9, -20],
    ...                  [70, 9, 20])["poleward_channel"]["v850"]
    2
    """
    out = dict(overrides)
    channels = list(channels)
    for name, (_, needs) in CHANNEL_KEYS.items():
        if out.get(name) is not True:
            continue
        missing = [c for c in needs if c not in channels]
        if missing:
            raise ValueError(
                f"model_overrides: {name} needs the input channels {' and '.join(needs)}; "
                f"{', '.join(missing)} not among channels {channels}"
            )
        index = [channels.index(c) for c in needs]
        out[name] = {
            **{c.lower(): i for c, i in zip(needs, index, strict=True)},
            "minval": [float(minval[i]) for i in index],
            "maxval": [float(maxval[i]) for i in index],
            "scale": POLEWARD_SCALE,
        }
    return out


#: the former name, from when only the poleward channel existed (kept for callers of it)
resolve_poleward = resolve_channels


def _nearest_multiples(size: int, stride: int) -> list[int]:
    below = (size // stride) * stride
    return [s for s in (below, below + stride) if s > 0]


def check_input_shape(input_shape, stride: int, model: str = "model") -> tuple[int, int, int]:
    """Return ``(height, width, channels)`` or raise ValueError naming sizes that would work.

    Examples
    --------
    >>> check_input_shape((96, 144, 16), 16)
    (96, 144, 16)
    >>> check_input_shape((100, 144, 16), 16, "tiramisu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: tiramisu needs ... of 16 ...; got 100 x 144. Height 100 -> try 96 or 112. ...
    """
    if len(input_shape) != 3 or any(s is None or int(s) < 1 for s in input_shape):
        raise ValueError(
            f"input_shape must be (height, width, channels) with positive sizes "
            f"(channels last), got {tuple(input_shape)}"
        )
    h, w, c = (int(s) for s in input_shape)
    bad = [(label, s) for label, s in (("Height", h), ("Width", w)) if s % stride]
    if not bad:
        return h, w, c
    hints = " ".join(
        f"{label} {s} -> try {' or '.join(map(str, _nearest_multiples(s, stride)))}."
        for label, s in bad
    )
    hs = _nearest_multiples(h, stride) if h % stride else [h]
    ws = _nearest_multiples(w, stride) if w % stride else [w]
    examples = " or ".join(f"{a} x {b}" for a in hs for b in ws)
    raise ValueError(
        f"{model} needs input height and width that are multiples of {stride} (its total "
        f"stride); got {h} x {w}. {hints} For example {examples}."
    )
