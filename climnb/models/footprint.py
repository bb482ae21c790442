"""How far a network sees along longitude, and how much memory its forward pass holds.

Both are read from a built Keras functional model's graph; nothing is run. They let
:mod:`climnb.inference.predict` cut a step that does not fit a memory budget into longitude
tiles whose outputs equal those of the whole step:

* :func:`receptive_radius`: how many input columns on either side of an output pixel can
  change it (an upper bound, exact for stride-1 convolutions with odd kernels). A tile that
  carries that many columns of its neighbours on each side (the halo) computes its own columns
  exactly as the whole step does: the zero padding of 'same' convolutions then only ever meets
  the halo, or the step's own edge. A layer that sees the whole width (global pooling) or one
  this module does not know makes the radius ``None``: such a network is not tiled.
* :func:`activation_bytes_per_pixel`: the most bytes of activations alive at once in a forward
  pass, per input pixel (a tensor lives from the layer that makes it to the last layer that
  reads it, as TensorFlow's graph executor frees it), in the layers' compute precision.

Only the width is tiled: a tile keeps every latitude, so layers that depend on the row (the
latitude channel) see what they see in the whole step.

Examples
--------
>>> from climnb.models import build_model
>>> model = build_model("tiramisu", (96, 144, 16), preset="toy")
>>> receptive_radius(model)  # columns either side of a pixel that can change its class
123
>>> receptive_radius(build_model("deeplab", (96, 144, 16), preset="toy")) is None  # image pooling
True
"""

from __future__ import annotations

import math

from climnb.models.backend import import_keras

__all__ = ["receptive_radius", "activation_bytes_per_pixel", "POINTWISE"]

#: Layers whose output column depends only on the same column of their input (at inference:
#: batch norm with moving statistics, dropout as the identity; the channel layers depend on the
#: row, which tiles along longitude keep whole).
POINTWISE = frozenset(
    {
        "InputLayer",
        "BatchNormalization",
        "FusedBatchNormalization",
        "ReLU",
        "LeakyReLU",
        "Activation",
        "Softmax",
        "Dropout",
        "MaskDropout",
        "SpatialDropout2D",
        "Identity",
        "Rescaling",
        "LatitudeChannel",
        "PolewardTransport",
        "TransportMagnitude",
    }
)
_CONV = frozenset({"Conv2D", "DepthwiseConv2D", "SeparableConv2D"})
_POOL = frozenset({"MaxPooling2D", "AveragePooling2D"})
_MERGE = frozenset({"Concatenate", "Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"})


def _window(layer, kind):
    """(kernel, dilation, stride) of a sliding-window layer along the width."""
    if kind in _POOL:
        return layer.pool_size[1], 1, layer.strides[1]
    return layer.kernel_size[1], layer.dilation_rate[1], layer.strides[1]


def _step(layer, fields: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(radius in input columns, jump: input columns per column) of a layer's output, from
    those of its inputs; None where the layer sees the whole width or is not known."""
    kind = type(layer).__name__
    if kind in _MERGE:
        if len({jump for _, jump in fields}) != 1:
            return None
        return max(r for r, _ in fields), fields[0][1]
    if len(fields) != 1:
        return None
    radius, jump = fields[0]
    if kind in POINTWISE:
        return radius, jump
    if kind in _CONV or kind in _POOL:
        kernel, dilation, stride = _window(layer, kind)
        span = (kernel - 1) * dilation
        if span and getattr(layer, "padding", "same") != "same":  # 'valid' shifts the grid
            return None
        # stride 1: 'same' pads span // 2 before and the rest after; strided: the window may
        # lie wholly on one side of the output's first input column
        reach = math.ceil(span / 2) if stride == 1 else span
        return radius + reach * jump, jump * stride
    if kind == "Conv2DTranspose":
        if layer.padding != "same":
            return None
        kernel, stride = layer.kernel_size[1], layer.strides[1]
        finer = jump / stride
        return radius + (kernel - 1) * finer + jump, finer
    if kind == "UpSampling2D":
        return radius + jump, jump / layer.size[1]
    return None


def _graph(model):
    """(layer, input tensors, output tensors) of every node of a functional model, in order."""
    ops = getattr(model, "operations", None)
    if ops is None or not hasattr(model, "inputs"):
        return None
    nodes = []
    for layer in ops:
        for node in layer._inbound_nodes:
            nodes.append((layer, list(node.input_tensors), list(node.output_tensors)))
    return nodes


def receptive_radius(model) -> int | None:
    """Input columns on either side of an output pixel that can change it, or None.

    An upper bound on the network's receptive field along the width (in input pixels), from
    its layers' kernels, dilations and strides. ``None`` when a layer sees the whole width
    (global pooling), is a nested model or is not known here: tiling such a network would
    change its output.
    """
    nodes = _graph(model)
    if nodes is None:
        return None
    fields = {id(t): (0.0, 1.0) for t in model.inputs}
    for layer, inputs, outputs in nodes:
        if type(layer).__name__ == "InputLayer":
            continue
        if any(id(t) not in fields for t in inputs):
            return None
        out = _step(layer, [fields[id(t)] for t in inputs])
        if out is None:
            return None
        for t in outputs:
            fields[id(t)] = out
    radii = [fields.get(id(t)) for t in model.outputs]
    if any(r is None for r in radii):
        return None
    return math.ceil(max(r for r, _ in radii))


def _bytes(tensor) -> int:
    size = import_keras().backend.standardize_dtype(tensor.dtype)
    return int(tensor.shape[-1]) * {"bfloat16": 2, "float16": 2, "float64": 8}.get(size, 4)


def activation_bytes_per_pixel(model) -> float:
    """The most bytes of activations alive at once in a forward pass, per input pixel.

    Tensors are followed through the graph in the order of its layers: each lives from the
    layer that makes it to the last layer that reads it (the model's outputs to the end), and
    a tensor at ``jump`` times coarser resolution costs ``1 / jump**2`` per input pixel. The
    input is counted. This is a lower bound on what the forward pass holds: the runtime adds
    its own copies (oneDNN's blocked layouts, the input's normalised copy), which
    :mod:`climnb.inference.predict` allows for with a measured factor.
    """
    nodes = _graph(model)
    if nodes is None:
        raise ValueError(f"{model.name}: not a functional model; its activations are unknown")
    jumps = {id(t): 1.0 for t in model.inputs}
    last = {id(t): len(nodes) for t in model.outputs}
    for i, (_, inputs, _) in enumerate(nodes):
        for t in inputs:
            last[id(t)] = max(last.get(id(t), i), i)
    live = {id(t): _bytes(t) for t in model.inputs}
    peak = sum(live.values())
    for i, (layer, inputs, outputs) in enumerate(nodes):
        if type(layer).__name__ == "InputLayer":
            continue
        jump = jumps.get(id(inputs[0]), 1.0) if inputs else 1.0
        field = _step(layer, [(0.0, jumps.get(id(t), 1.0)) for t in inputs])
        out_jump = field[1] if field is not None else jump
        for t in outputs:
            jumps[id(t)] = out_jump
            live[id(t)] = _bytes(t) / out_jump**2
        peak = max(peak, sum(live.values()))
        for t in inputs:
            if last.get(id(t), i) <= i:
                live.pop(id(t), None)
    return peak
