"""Tables and a toy forward pass for looking at the networks (notebook 03, the benchmark).

Examples
--------
>>> from climnb.models import build_model
>>> from climnb.models.report import architecture_table, forward_pass
>>> from climnb.data.synthetic import make_dataset
>>> model = build_model("tiramisu", (96, 144, 16), preset="toy")
>>> architecture_table(model).index[:3].tolist()
['stem', 'down1', 'td1']
>>> ds, _ = make_dataset(n_time=1, seed=0)
>>> out = forward_pass(model, ds)
>>> out.probability.dims, out.probability.shape
(('time', 'lat', 'lon', 'class'), (1, 96, 144, 3))
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES
from climnb.models.backend import import_keras
from climnb.models.flops import count_flops, count_params
from climnb.models.presets import PAPER_FIGURES

__all__ = ["size_table", "paper_table", "architecture_table", "minmax_input", "forward_pass"]

_BLOCK = re.compile(r"^(s\d+)u\d+|^([a-z]+\d*)")


def size_table(models: dict) -> pd.DataFrame:
    """Input shape, trainable parameters and FLOP per sample (paper convention) of
    ``{label: model}``."""
    rows = []
    for label, model in models.items():
        flops = count_flops(model)
        rows.append(
            {
                "model": label,
                "input": "x".join(str(s) for s in model.input_shape[1:]),
                "params": count_params(model),
                "forward GFLOP/sample": flops.forward / 1e9,
                "train GFLOP/sample": flops.training / 1e9,
            }
        )
    return pd.DataFrame(rows).set_index("model")


def paper_table(models: dict) -> pd.DataFrame:
    """Parameters and training FLOP per sample of ``{name: model}`` next to the paper's.

    Names are ``"tiramisu"`` or ``"deeplab"``; the models should be the paper presets at
    768 x 1152 x 16 for the ratios to mean anything.
    """
    rows = []
    for name, model in models.items():
        paper = PAPER_FIGURES[name]
        params = count_params(model)
        train = count_flops(model).training
        rows.append(
            {
                "model": name,
                "input": "x".join(str(s) for s in model.input_shape[1:]),
                "params (M)": params / 1e6,
                "paper params (M)": paper["params"] / 1e6,
                "params ratio": params / paper["params"],
                "train TFLOP/sample": train / 1e12,
                "paper TFLOP/sample": paper["train_flop"] / 1e12,
                "TFLOP ratio": train / paper["train_flop"],
                "exact train TFLOP/sample": count_flops(model, "exact").training / 1e12,
            }
        )
    return pd.DataFrame(rows).set_index("model")


def architecture_table(model) -> pd.DataFrame:
    """Per block (stem, dense blocks and transitions; backbone stages, ASPP, decoder): layers
    with kernels, their parameters (batch norm not included), forward GFLOP per sample and
    the block's output shape."""
    frame = count_flops(model).to_frame()

    def block(name):
        if name.startswith(("aspp_", "dec_")):  # one row per ASPP branch / decoder step
            return re.sub(r"_(de)?conv$", "", name)
        m = _BLOCK.match(name)
        return m.group(1) or m.group(2) if m else name

    frame["block"] = frame["name"].map(block)
    grouped = frame.groupby("block", sort=False)
    return pd.DataFrame(
        {
            "layers": grouped.size(),
            "params": grouped["params"].sum(),
            "forward GFLOP": grouped["gflop"].sum(),
            "output": grouped["output_shape"].last(),
        }
    )


def minmax_input(ds: xr.Dataset, channels=CHANNEL_NAMES) -> np.ndarray:
    """Stack ``channels`` channels-last as float32, each scaled to [0, 1] by its min and max
    over ``ds`` (the paper's normalisation; training uses the data set's ``stats.h5``)."""
    x = np.stack([ds[name].values for name in channels], axis=-1).astype(np.float32)
    lo = x.min(axis=tuple(range(x.ndim - 1)))
    hi = x.max(axis=tuple(range(x.ndim - 1)))
    return (x - lo) / np.where(hi > lo, hi - lo, 1.0)


def forward_pass(model, ds: xr.Dataset, classes=CLASS_NAMES) -> xr.Dataset:
    """Run ``model`` on every time step of ``ds``: class probabilities and the argmax class.

    Returns a Dataset with ``probability`` (time, lat, lon, class) and ``prediction``
    (time, lat, lon), on the coordinates of ``ds``.
    """
    keras = import_keras()
    logits = model.predict(minmax_input(ds), verbose=0)
    probs = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
    dims = ("time", "lat", "lon")
    coords = {d: ds[d] for d in dims}
    return xr.Dataset(
        {
            "probability": (dims + ("class",), probs),
            "prediction": (dims, probs.argmax(axis=-1).astype(np.uint8)),
        },
        coords=coords | {"class": list(classes)},
        attrs={"model": model.name},
    )
