"""Count parameters and FLOP of a built Keras model analytically, layer by layer.

Nothing is run: the counts come from the layers' kernels and the static shapes of the graph, so
the full-size networks can be counted on a laptop.

Convention (the one of the paper's ``graph_flops.py``, which produced its 4.2 and 14.4 TFLOP):

* a multiply-add is 2 FLOP; convolutions, transposed convolutions and dense layers are counted
  (bias adds, batch norm, activations, pooling and concatenation are not: together they are
  well under 1 % of the total here);
* a convolution costs ``2 * H_out * W_out * k_h * k_w * C_in * C_out``; a transposed
  convolution ``2 * H_in * W_in * k_h * k_w * C_in * C_out`` (every input pixel meets the whole
  kernel);
* the training FLOP of a sample are 3 x the forward FLOP: the backward pass costs twice the
  forward one (the gradient with respect to the layer input and with respect to the weights are
  each as expensive as the forward convolution).
* ``convention="paper"`` also reproduces how TensorFlow 1 executed a dilated convolution, which
  the paper's counter saw: the input is padded by ``(k - 1) * rate`` and up to a multiple of
  ``rate``, then split into ``rate**2`` blocks (``SpaceToBatchND``), and the counter charged the
  convolution for every padded pixel. For the ASPP branches at rate 24 and 36 on a 96 x 144
  map that is 2.0x and 2.8x the useful work; it is why DeepLabv3+ counts 14.4 TFLOP in the paper
  against 13.0 TFLOP of exact arithmetic (``convention="exact"``). Networks without dilation
  count the same either way.

Examples
--------
>>> from climnb.models import build_model
>>> from climnb.models.flops import count_flops, count_params
>>> model = build_model("tiramisu", (96, 144, 16), preset="toy")
>>> flops = count_flops(model)
>>> flops.training == 3 * flops.forward
True
>>> count_params(model) > 0
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LayerFlops", "FlopCount", "count_flops", "count_params", "conv_flops"]

CONVENTIONS = ("paper", "exact")
BACKWARD_FACTOR = 2.0  # backward = 2 x forward, so training = 3 x forward


@dataclass(frozen=True)
class LayerFlops:
    """FLOP of one layer for one sample, forward pass."""

    name: str
    kind: str
    output_shape: tuple[int, ...]
    params: int
    flop: float


@dataclass(frozen=True)
class FlopCount:
    """Forward and training FLOP per sample, with the per-layer breakdown.

    Attributes
    ----------
    forward : FLOP of one forward pass of one sample.
    training : forward + backward FLOP of one sample (3 x forward).
    convention : ``"paper"`` or ``"exact"`` (see the module docstring).
    layers : one :class:`LayerFlops` per counted layer, in graph order.
    """

    forward: float
    training: float
    convention: str
    layers: tuple[LayerFlops, ...]

    def to_frame(self):
        """The per-layer breakdown as a pandas DataFrame (FLOP in GFLOP, forward)."""
        import pandas as pd  # only here: `climnb --help` imports this module

        frame = pd.DataFrame([vars(layer) for layer in self.layers])
        frame["gflop"] = frame.pop("flop") / 1e9
        return frame

    def by_kind(self) -> dict[str, float]:
        """Forward FLOP summed by layer kind."""
        out: dict[str, float] = {}
        for layer in self.layers:
            out[layer.kind] = out.get(layer.kind, 0.0) + layer.flop
        return out


def _padded(size: int, kernel: int, rate: int) -> int:
    """Spatial size TF1's SpaceToBatchND gave a 'same' dilated convolution (all blocks)."""
    return math.ceil((size + (kernel - 1) * rate) / rate) * rate


def conv_flops(
    in_hw, out_hw, kernel, c_in, c_out, *, rate=1, transposed=False, convention="paper"
) -> float:
    """Forward FLOP of one (transposed) 2-D convolution for one sample.

    Examples
    --------
    A 3x3 convolution from 2 to 4 channels on a 5 x 5 map: 2 * 25 * 9 * 2 * 4 = 3600 FLOP.

    >>> conv_flops((5, 5), (5, 5), (3, 3), 2, 4)
    3600.0

    Dilated by 2, the paper's convention pads 5 -> 10 (5 + 4, up to a multiple of 2):

    >>> conv_flops((5, 5), (5, 5), (3, 3), 2, 4, rate=2)
    14400.0
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    kh, kw = kernel
    if transposed:
        pixels = in_hw[0] * in_hw[1]
    elif rate > 1 and convention == "paper":
        pixels = _padded(in_hw[0], kh, rate) * _padded(in_hw[1], kw, rate)
    else:
        pixels = out_hw[0] * out_hw[1]
    return 2.0 * pixels * kh * kw * c_in * c_out


def _layer_flops(layer, convention) -> float | None:
    """Forward FLOP of a Keras layer, or None if it is not a counted kind."""
    kind = type(layer).__name__
    if kind in ("Conv2D", "Conv2DTranspose"):
        in_shape, out_shape = layer.input.shape, layer.output.shape
        kh, kw = layer.kernel_size
        c_in = in_shape[-1] // getattr(layer, "groups", 1)
        return conv_flops(
            in_shape[1:3],
            out_shape[1:3],
            (kh, kw),
            c_in,
            layer.filters,
            rate=max(layer.dilation_rate),
            transposed=kind == "Conv2DTranspose",
            convention=convention,
        )
    if kind == "Dense":
        out_shape = layer.output.shape
        positions = math.prod(out_shape[1:-1])
        return 2.0 * positions * layer.input.shape[-1] * layer.units
    return None


def _walk(model):
    """All leaf layers, descending into nested models."""
    for layer in model.layers:
        if hasattr(layer, "layers") and layer.layers:
            yield from _walk(layer)
        else:
            yield layer


def count_flops(model, convention: str = "paper") -> FlopCount:
    """Analytic forward and training FLOP per sample of a built Keras model.

    Parameters
    ----------
    model : a built Keras functional model with static spatial input shape.
    convention : ``"paper"`` (default; matches the paper's figures) or ``"exact"``.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    layers = []
    for layer in _walk(model):
        flop = _layer_flops(layer, convention)
        if flop is None:
            continue
        if any(s is None for s in layer.output.shape[1:]):
            raise ValueError(
                f"layer {layer.name} has a dynamic output shape {layer.output.shape}; "
                "build the model with a fixed input height and width to count its FLOP"
            )
        params = sum(math.prod(w.shape) for w in layer.trainable_weights)
        layers.append(
            LayerFlops(
                layer.name, type(layer).__name__, tuple(layer.output.shape[1:]), params, flop
            )
        )
    forward = sum(layer.flop for layer in layers)
    return FlopCount(
        forward=forward,
        training=forward * (1.0 + BACKWARD_FACTOR),
        convention=convention,
        layers=tuple(layers),
    )


def count_params(model, trainable_only: bool = True) -> int:
    """Number of parameters from the model's weights (trainable ones by default, like the
    paper; batch-norm moving statistics are the non-trainable rest)."""
    weights = model.trainable_weights if trainable_only else model.weights
    return int(sum(math.prod(w.shape) for w in weights))
