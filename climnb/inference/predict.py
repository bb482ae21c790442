"""Run a trained network over new climate data: batched inference from a model bundle.

:func:`predict` runs a model bundle (:mod:`climnb.bundle`, written at the end of training)
over an xarray Dataset (lazy, any number of steps, any of the longitude and latitude
conventions that :func:`climnb.io.netcdf.normalize` understands), NetCDF files, Zarr stores or
DeepCAM sample files. The result is lazy (dask): one task per batch of time steps, each reading
only its own steps, so :func:`climnb.io.files.write` streams a period of any length to NetCDF or
Zarr with the memory of a few batches; it comes back on the caller's grid (coordinate names,
latitude order, longitude convention) with CF attributes. Grids that the stride
does not divide are padded (longitude periodically, latitude by reflection) and cropped back;
a network built for a fixed grid is rebuilt for the padded grid with the same weights.

TensorFlow is imported only when a model is saved, loaded or run.

Examples
--------
>>> import tempfile
>>> from climnb.io.channels import CHANNEL_NAMES
>>> from climnb.bundle import save_bundle
>>> from climnb.models import build_model
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> model = build_model("tiramisu", (96, 144, 16), preset="toy")  # untrained, for the example
>>> lo, hi = ds.min(), ds.max()
>>> path = save_bundle(model, tempfile.mkdtemp() + "/toy", channels=CHANNEL_NAMES,
...                    minval=[float(lo[c]) for c in CHANNEL_NAMES],
...                    maxval=[float(hi[c]) for c in CHANNEL_NAMES],
...                    name="tiramisu", preset="toy")
>>> pred = predict(path, ds.isel(lat=slice(0, 90)))  # 90 rows: padded to 96, cropped back
>>> pred.dims, pred.shape, pred.dtype.name, type(pred.data).__name__  # lazy: nothing ran yet
(('time', 'lat', 'lon'), (2, 90, 144), 'uint8', 'Array')
>>> pred.attrs["flag_meanings"]
'background tropical_cyclone atmospheric_river'
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Sequence

import dask
import numpy as np
import xarray as xr

import climnb
from climnb.bundle import Bundle, BundleError, load_bundle
from climnb.inference.inputs import describe, open_input, open_source, select_channels
from climnb.inference.postprocess import apply_river_rules, river_config
from climnb.io.files import cf_coords, read_grid, to_caller_grid
from climnb.labels.config import ARConfig
from climnb.models.backend import import_tf
from climnb.models.footprint import activation_bytes_per_pixel, receptive_radius

__all__ = [
    "predict",
    "predict_batch",
    "open_input",
    "pad_fields",
    "tile_plan",
    "forward_bytes",
    "network_slots",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


# ---------------------------------------------------------------------------------------------
# Padding and inference
# ---------------------------------------------------------------------------------------------


def pad_fields(x: np.ndarray, stride: int) -> tuple[np.ndarray, tuple[slice, slice]]:
    """Pad (batch, lat, lon, channels) so that lat and lon are multiples of ``stride``.

    Longitude is padded periodically (the globe wraps), latitude by reflection about the first
    and last rows (there is no data beyond the poles); the padding is split between the two
    ends. Returns the padded array and the (lat, lon) slices that crop it back.

    >>> x = np.arange(2 * 3 * 5).reshape(1, 3, 5, 2).astype(np.float32)
    >>> padded, (rows, cols) = pad_fields(x, 4)
    >>> padded.shape, np.array_equal(padded[:, rows, cols], x)
    ((1, 4, 8, 2), True)
    """
    h, w = x.shape[1:3]
    ph, pw = -h % stride, -w % stride
    top, left = ph // 2, pw // 2
    if ph and ph >= h:
        raise BundleError(f"{h} latitudes are too few to pad to a multiple of {stride}")
    if ph:
        x = np.pad(x, ((0, 0), (top, ph - top), (0, 0), (0, 0)), mode="reflect")
    if pw:
        x = np.pad(x, ((0, 0), (0, 0), (left, pw - left), (0, 0)), mode="wrap")
    return x, (slice(top, top + h), slice(left, left + w))


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


_MODEL_LOCK = threading.Lock()  # dask threads share a bundle: build each grid's network once
_SLOTS: threading.BoundedSemaphore | None = None  # set by network_slots


@contextlib.contextmanager
def network_slots(n: int):
    """Inside, at most ``n`` forward passes of the network run at once, in all threads.

    Computed with one dask thread more than ``n``, a batch is read, checked and made ready
    (and the one before it turned into classes and written) while the network runs: the
    extra thread then waits, holding that one batch, for the network (so at most one batch
    more than ``n`` is in flight). With ``n`` threads, each reads, runs and writes its batch
    in turn, and the network waits for the reading and the writing.
    """
    global _SLOTS
    if n < 1:
        raise ValueError(f"network slots must be at least 1, got {n}")
    previous, _SLOTS = _SLOTS, threading.BoundedSemaphore(n)
    try:
        yield
    finally:
        _SLOTS = previous


#: Resident memory of a forward pass over the activations that
#: :func:`climnb.models.footprint.activation_bytes_per_pixel` counts: oneDNN's reordered
#: copies in blocked layouts and the runtime's pools on top (measured on the paper Tiramisu at
#: 768 x 1152: 1.7x in float32, 1.8x in bfloat16; ``benchmarks/bench_predict.py``).
RUNTIME_FACTOR = 2.0
#: Bytes per pixel and channel of a batch outside the network: the float32 input, its padded
#: copy (where the grid needs padding), the next batch that waits for the network
#: (:func:`network_slots`), the float32 output and its classes.
BATCH_BYTES = 4 * 4


def _forward_function(model, offset: np.ndarray, scale: np.ndarray):
    """``model``'s inference on raw fields as one TensorFlow graph function, made once per
    model (a model is its bundle's, and so is the normalisation): the fields normalised as
    :meth:`Bundle.normalise` does (``offset`` and ``scale``, :meth:`Bundle.normalisation`; the same
    float32 operations, so the same values), then the network.

    The normalisation runs on TensorFlow's threads inside the call, not in NumPy on the batch's
    one thread before it, where the network waited for it (0.2 s a full-size step); the batch
    needs no normalised copy. In a graph TensorFlow frees each activation once its last reader
    has run; a Keras functional model called eagerly keeps every layer's output until the call
    returns (5.1 GB against 2.0 GB for a full-size bfloat16 step of the paper Tiramisu).
    """
    with _MODEL_LOCK:
        fn = getattr(model, "_climnb_forward", None)
        if fn is None:
            tf = import_tf()
            spec = tf.TensorSpec((None, *model.input_shape[1:]), tf.float32)
            big = float(np.finfo(np.float32).max)
            offset = tf.constant(offset, tf.float32)
            scale = tf.constant(scale, tf.float32)

            def forward(x, model):
                x = (x - offset) * scale
                # numpy.nan_to_num: NaN to 0, infinities to the largest finite values
                x = tf.clip_by_value(tf.where(tf.math.is_nan(x), 0.0, x), -big, big)
                return model(x, training=False)

            # a partial, not a lambda: TensorFlow counts traces per code object, and would warn
            # of "retracing" when the tiles' networks (one per width) are each traced once
            # no AutoGraph: the network has no Python control flow on tensors to convert
            fn = tf.function(
                functools.partial(forward, model=model), input_signature=[spec], autograph=False
            )
            model._climnb_forward = fn
    return fn


def tile_plan(width: int, window: int, halo: int) -> list[tuple[slice, slice, slice]]:
    """Longitude tiles of a ``width``-column step, every one ``window`` columns wide.

    Each tile keeps its columns that lie ``halo`` or more from its edges, or at the step's own
    edge; the kept columns of the tiles cover the step once. Returns (input columns, columns
    of the tile's output to keep, output columns) per tile. With ``halo`` at least the
    network's receptive radius (:func:`climnb.models.footprint.receptive_radius`) and
    everything a multiple of its stride, the kept columns equal those of the whole step. One
    width for all tiles: one network, one set of oneDNN kernels and buffers of one size that
    the allocator reuses, where tiles of several widths left memory behind.

    >>> [(w.start, w.stop, k.start, k.stop) for w, k, _ in tile_plan(96, 48, 16)]
    [(0, 48, 0, 32), (16, 64, 16, 32), (32, 80, 16, 32), (48, 96, 16, 48)]
    """
    if window >= width:
        return [(slice(0, width), slice(0, width), slice(0, width))]
    if window <= 2 * halo:
        raise ValueError(f"a window of {window} columns keeps none with a halo of {halo}")
    tiles, start = [], 0  # start: the first column not kept yet
    while start < width:
        lo = min(max(0, start - halo), width - window)
        hi = lo + window
        stop = width if hi == width else hi - halo
        tiles.append((slice(lo, hi), slice(start - lo, stop - lo), slice(start, stop)))
        start = stop
    return tiles


def _footprint(model) -> tuple[int | None, float]:
    """(receptive radius, activation bytes per pixel) of ``model``, worked out once."""
    known = getattr(model, "_climnb_footprint", None)
    if known is None:
        known = (receptive_radius(model), activation_bytes_per_pixel(model))
        model._climnb_footprint = known
    return known


def forward_bytes(bundle: Bundle, height: int, width: int, batch: int = 1) -> float:
    """Estimated resident memory of one forward pass over ``batch`` steps of ``height`` x
    ``width`` (a padded grid), the batch's own arrays included: activations grow with the
    pixels, so tiles of any width are costed from the whole grid's network."""
    with _MODEL_LOCK:
        model = bundle.model(height, width)
    return _cost(bundle, model, height * width * batch)


def _cost(bundle: Bundle, model, pixels: int) -> float:
    _, per_pixel = _footprint(model)
    channels = len(bundle.channels) + bundle.n_classes
    return pixels * (RUNTIME_FACTOR * per_pixel + BATCH_BYTES * channels)


def _plan(bundle: Bundle, shape: tuple[int, ...], memory: float | None):
    """(samples per pass, tile width, halo columns) to run a padded batch of ``shape`` in
    ``memory`` bytes; a tile of the whole width means no tiling."""
    n, h, w = shape[:3]
    if memory is None:
        return n, w, 0
    with _MODEL_LOCK:
        model = bundle.model(h, w)
    fits = int(memory // _cost(bundle, model, h * w))
    if fits >= 1:
        return min(n, fits), w, 0
    radius, _ = _footprint(model)
    stride = bundle.stride
    if radius is None:
        raise BundleError(
            f"{bundle.name} ({bundle.preset}) sees the whole width (global pooling), so a "
            f"{h} x {w} step cannot be split: it needs about "
            f"{_cost(bundle, model, h * w) / 1e9:.1f} GB a worker; raise --memory or lower "
            "--workers"
        )
    halo = -(-radius // stride) * stride
    for window in range(w - stride, 2 * halo, -stride):
        if _cost(bundle, model, h * window) <= memory:
            return 1, window, halo
    least = _cost(bundle, model, h * min(w, stride + 2 * halo))
    raise BundleError(
        f"{memory / 1e9:.2f} GB a worker is too little for {bundle.name} ({bundle.preset}) "
        f"on {h} x {w}: its narrowest tile ({stride} columns and {halo} either side, the "
        f"network's receptive field) needs about {least / 1e9:.2f} GB; raise --memory or "
        "lower --workers"
    )


def _run(bundle: Bundle, x: np.ndarray, memory: float | None) -> np.ndarray:
    """The network's float32 output over a padded batch of raw fields (normalised inside the
    network's call), ``memory`` bytes at a time."""
    n, h, w = x.shape[:3]
    per_pass, window, halo = _plan(bundle, x.shape, memory)
    offset, scale = bundle.normalisation()
    out = None
    for i in range(0, n, per_pass):
        for cols, keep, into in tile_plan(w, window, halo):
            part = np.ascontiguousarray(x[i : i + per_pass, :, cols])
            with _MODEL_LOCK:
                model = bundle.model(h, part.shape[2])
            network = _forward_function(model, offset, scale)
            with _SLOTS or contextlib.nullcontext():
                y = network(part)
            y = np.asarray(y, np.float32)[:, :, keep]
            if out is None:
                out = np.empty((n, h, w, y.shape[-1]), np.float32)
            out[i : i + per_pass, :, into] = y
            del y, part
    return out


def check_ranges(bundle: Bundle, x: np.ndarray, *, where: str) -> None:
    """Refuse fields far outside the range their channel had in training: ``x`` (..., channels)
    whose median of a channel lies more than the training range's width below its minimum or
    above its maximum. That is a unit mistake (PSL in hPa for Pa, T in deg C for K), which
    the network would otherwise turn silently into nonsense classes.

    >>> import numpy as np
    >>> b = type("B", (), {"channels": ("PSL",), "minval": np.array([96000.0]),
    ...                    "maxval": np.array([104000.0])})()
    >>> check_ranges(b, np.full((1, 2, 2, 1), 101000.0), where="x")
    >>> check_ranges(b, np.full((1, 2, 2, 1), 1010.0), where="x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    climnb.bundle.BundleError: x: variable PSL has values 1010..1010 (median 1010), far ...
    """
    flat = np.asarray(x).reshape(-1, len(bundle.channels))
    lo, hi = np.asarray(bundle.minval, float), np.asarray(bundle.maxval, float)
    width = np.maximum(np.maximum(hi - lo, np.abs(hi) * 1e-3), 1e-12)
    # the median lies outside [lo - width, hi + width] only if half of the finite values do:
    # counted in a pass over all channels at once; the median itself only for those channels
    finite = np.isfinite(flat)
    n = finite.sum(axis=0)
    below = ((flat < lo - width) & finite).sum(axis=0)
    above = ((flat > hi + width) & finite).sum(axis=0)
    for i in np.flatnonzero((n > 0) & (2 * np.maximum(below, above) >= n - 1)):
        values = flat[:, i][finite[:, i]]
        median = float(np.median(values))
        if lo[i] - width[i] <= median <= hi[i] + width[i]:
            continue
        raise BundleError(
            f"{where}: variable {bundle.channels[i]} has values "
            f"{values.min():.4g}..{values.max():.4g} (median {median:.4g}), far outside its "
            f"training range {lo[i]:.4g}..{hi[i]:.4g}: wrong units (hPa for Pa? deg C for "
            "K?); convert it, or skip this check with --no-range-check"
        )


def predict_batch(
    bundle: Bundle,
    x: np.ndarray,
    *,
    probabilities: bool = False,
    check_range: bool = True,
    memory: float | None = None,
) -> np.ndarray:
    """Run the network over one batch ``x`` (time, lat, lon, channels) on the canonical grid.

    Returns class ids (time, lat, lon) uint8, or with ``probabilities`` the per-class
    probabilities (time, lat, lon, class) float32 (the softmax of the network's output, unless
    it already ends in one). ``x`` is not changed. With ``memory`` (GB), the batch is run
    a few steps at a time, or a step in longitude tiles, so that the forward pass's estimated
    peak (:func:`forward_bytes`) stays within it; tiles carry the network's receptive field
    of their neighbours, so the classes are those of the whole step.
    """
    x = np.asarray(x, np.float32)  # no copy: the network's call normalises (_forward_function)
    if check_range:
        check_ranges(bundle, x, where="a batch of the input")
    n_bad = int(np.isnan(x).sum())
    if n_bad:
        log.warning("%d missing values in a batch set to the normalised minimum", n_bad)
    x, (rows, cols) = pad_fields(x, bundle.stride)
    out = _run(bundle, x, None if memory is None else memory * 1e9)[:, rows, cols]
    if not probabilities:
        return out.argmax(axis=-1).astype(np.uint8)
    return out if _is_probability(out) else _softmax(out)


def _is_probability(out: np.ndarray) -> bool:
    return bool(out.min() >= 0 and np.allclose(out.sum(axis=-1), 1.0, atol=1e-3))


def predict(
    bundle: Bundle | PathLike,
    source: xr.Dataset | PathLike | Sequence[PathLike],
    *,
    batch_size: int = 4,
    probabilities: bool = False,
    grid: str = "input",
    check_range: bool = True,
    river_rules: bool | ARConfig = False,
    memory: float | None = None,
) -> xr.DataArray | xr.Dataset:
    """Segment every time step of ``source`` with a trained network, lazily.

    Nothing runs until the result is computed, plotted or written: the output is dask-backed,
    one task per ``batch_size`` time steps, each reading only its own steps of the input. Write
    it with :func:`climnb.io.files.write` (NetCDF or Zarr, streamed with bounded memory), or
    ``.load()`` it when it fits in memory.

    Parameters
    ----------
    bundle : a :class:`Bundle` or the path of one (training writes ``OUT_DIR/model``).
    source : an xarray Dataset (may be lazy), NetCDF file(s) or glob(s), Zarr store(s), DeepCAM
        sample files or a directory of them. It must hold the channels the network was trained
        on.
    batch_size : time steps per forward pass and per output chunk (memory: about
        ``batch_size`` x lat x lon x 16 x 4 bytes of input per running task, plus the
        network's activations).
    probabilities : also return the per-class probabilities (softmax of the network's output),
        computed in the same pass as the classes.
    grid : ``"input"`` returns the input's latitude and longitude names, values, order and
        attributes (for example ``latitude`` descending, ``longitude`` -180..180);
        ``"canonical"`` returns ``lat`` ascending and ``lon`` 0..360, like
        :func:`climnb.io.netcdf.normalize`.
    check_range : refuse a channel far outside its training range (wrong units:
        :func:`check_ranges`), on the first and last steps before any work and on every
        batch.
    river_rules : put the predicted rivers through the river definition's object rules
        (:func:`climnb.inference.postprocess.apply_river_rules`: length, length / width, latitude of
        the centroid, mean poleward transport, distance to the predicted storms and to the
        equator), with the input's ``TMQ`` and ``V850`` (or ``IVTV``) of each step: river
        objects the rules reject become background, in the same lazy pass. ``True`` takes the
        teacher's settings when the bundle records them, else ``ARConfig()``
        (:func:`climnb.inference.postprocess.river_config`); an :class:`~climnb.labels.ARConfig` is
        used as given. Only ``prediction`` changes, not the probabilities.
    memory : GB that one running batch may hold (its forward pass, its input and output;
        the runtime shared by all batches, about 0.6 GB with TensorFlow, not included). A
        batch that does not fit runs fewer steps at a time, then one step in longitude tiles
        that carry the network's receptive field of their neighbours (the same classes as
        the whole step; :func:`tile_plan`); ``None`` runs each batch whole. A network that
        sees the whole width (DeepLabv3+'s image pooling) is not tiled: BundleError names
        the memory it needs.

    Returns
    -------
    xarray.DataArray or xarray.Dataset
        ``prediction`` (time, lat, lon) uint8 class ids with CF attributes (``flag_values``,
        ``flag_meanings``) and the input's coordinates; with ``probabilities`` a Dataset of
        ``prediction`` and ``probability`` (time, lat, lon, class) float32.

    Raises
    ------
    BundleError
        When the input lacks channels the network was trained on (they are named), lacks the
        variables ``river_rules`` needs (named), or has no time steps.
    """
    bundle = bundle if isinstance(bundle, Bundle) else load_bundle(bundle)
    _check_arguments(grid, batch_size, memory)
    raw = open_source(source)
    ds = _input_channels(bundle, raw, source, check_range)
    x = _stacked(ds, bundle.channels, batch_size)
    if memory is not None:  # before any work: a budget no tile fits is refused here
        padded = [-(-n // bundle.stride) * bundle.stride for n in x.shape[1:3]]
        _plan(bundle, (min(batch_size, x.shape[0]), *padded), memory * 1e9)
    classes, probs = _lazy(bundle, x, probabilities, check_range, memory)
    out = _as_xarray(bundle, ds, classes, probs)
    if river_rules is not False:
        out = _ruled(out, raw, _river_settings(bundle, river_rules), source)
    return _on_input_grid(out, source) if grid == "input" else out


def _check_arguments(grid: str, batch_size: int, memory: float | None) -> None:
    if grid not in ("input", "canonical"):
        raise ValueError(f"grid must be 'input' or 'canonical', got {grid!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if memory is not None and not memory > 0:
        raise ValueError(f"memory must be a positive number of GB, got {memory!r}")


def _input_channels(bundle: Bundle, raw: xr.Dataset, source, check_range: bool) -> xr.Dataset:
    """The bundle's channels of the opened ``source``, refused when it has no time steps or
    (``check_range``) when its first or last step is far outside the training range."""
    ds = select_channels(raw, bundle.channels, source)
    if ds.sizes["time"] == 0:
        raise BundleError(f"{describe(source)}: the input has no time steps")
    if check_range:  # before any work: the first and the last step
        check_ranges(bundle, _ends(ds, bundle.channels), where=describe(source))
    return ds


def _lazy(bundle: Bundle, x, probabilities: bool, check_range: bool, memory: float | None):
    """``(classes, probabilities or None)``: dask arrays, one :func:`predict_batch` task per
    chunk of ``x``."""
    token = dask.base.tokenize(
        str(bundle.path), bundle.extra, x.name, probabilities, check_range, memory
    )
    block = functools.partial(
        predict_batch,
        bundle,
        probabilities=probabilities,
        check_range=check_range,
        memory=memory,
    )
    if probabilities:
        probs = x.map_blocks(
            block,
            chunks=(*x.chunks[:3], (bundle.n_classes,)),
            name=f"predict-{token}",
            meta=np.empty((0, 0, 0, 0), np.float32),
        )
        return probs.argmax(axis=-1).astype(np.uint8), probs
    classes = x.map_blocks(
        block,
        drop_axis=3,
        name=f"predict-{token}",
        meta=np.empty((0, 0, 0), np.uint8),  # not a forward pass of an empty batch to find it
    )
    return classes, None


def _on_input_grid(out: xr.DataArray | xr.Dataset, source):
    """``out`` on the grid of ``source`` (its coordinate names, order and convention)."""
    original = source if isinstance(source, xr.Dataset) else read_grid(source)
    return out if original is None else to_caller_grid(out, original)


def _river_settings(bundle: Bundle, river_rules: bool | ARConfig) -> ARConfig:
    if isinstance(river_rules, ARConfig):
        return river_rules
    if river_rules is not True:
        raise ValueError(f"river_rules must be True, False or an ARConfig, got {river_rules!r}")
    config, where = river_config(bundle)
    log.info("river rules with %s", where)
    return config


def _ruled(out: xr.DataArray | xr.Dataset, fields: xr.Dataset, config: ARConfig, source):
    """``out`` (canonical grid) with its ``prediction`` put through the river rules."""
    pred = out if isinstance(out, xr.DataArray) else out.prediction
    try:
        ruled = apply_river_rules(pred, fields, config)
    except ValueError as err:  # what the input lacks: name the input
        raise BundleError(f"{describe(source)}: river rules: {err}") from None
    return ruled if isinstance(out, xr.DataArray) else out.assign(prediction=ruled)


def _ends(ds: xr.Dataset, channels: Sequence[str]) -> np.ndarray:
    """The first and last steps' channels (steps, lat, lon, channel), each step read once."""
    steps = sorted({0, ds.sizes["time"] - 1})
    arrays = [ds[c].isel(time=steps).data for c in channels]
    return np.stack([np.asarray(a, np.float32) for a in dask.compute(*arrays)], axis=-1)


def _stacked(ds: xr.Dataset, channels: Sequence[str], batch_size: int):
    """The channels as one dask array (time, lat, lon, channel), ``batch_size`` steps a chunk."""
    import dask.array as dsa

    arrays = []
    for c in channels:
        data = ds[c].data
        if not isinstance(data, dsa.Array):
            data = dsa.from_array(data, chunks=(batch_size, -1, -1))
        arrays.append(data.astype(np.float32))
    x = dsa.stack(arrays, axis=-1)
    return x.rechunk((batch_size, -1, -1, -1))


def _as_xarray(bundle: Bundle, ds: xr.Dataset, classes, probs) -> xr.DataArray | xr.Dataset:
    coords = {
        k: v for k, v in cf_coords(ds).coords.items() if set(v.dims) <= {"time", "lat", "lon"}
    }
    model = f"{bundle.name} ({bundle.preset})"
    attrs = {
        "long_name": "predicted class of each pixel",
        "flag_values": np.arange(bundle.n_classes, dtype=np.uint8),
        "flag_meanings": " ".join(bundle.class_names),
        "valid_range": np.array([0, bundle.n_classes - 1], np.uint8),
        "model": model,
        "model_bundle": str(bundle.path),
    }
    pred = xr.DataArray(
        classes, dims=("time", "lat", "lon"), coords=coords, name="prediction", attrs=attrs
    )
    if probs is None:
        return pred
    prob = xr.DataArray(
        probs,
        dims=("time", "lat", "lon", "class"),
        coords={**coords, "class": np.array(bundle.class_names, object)},  # vlen: Zarr 3 spec
        attrs={"long_name": "probability of each class", "units": "1", "valid_range": [0.0, 1.0]},
    )
    return xr.Dataset(
        {"prediction": pred, "probability": prob},
        attrs={
            "Conventions": "CF-1.10",
            "title": "segmentation of tropical cyclones and atmospheric rivers",
            "source": f"climnb {climnb.__version__}, model {model}",
            "model_bundle": str(bundle.path),
        },
    )
