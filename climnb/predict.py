"""Run a trained network over new climate data: batched inference from a model bundle.

:func:`predict` runs a model bundle (:mod:`climnb.bundle`, written at the end of training)
over an xarray Dataset (lazy, any number of steps, any of the longitude
and latitude conventions that :func:`climnb.io.netcdf.normalize` understands) or DeepCAM
sample files, a batch of time steps at a time. Grids that the stride does not divide are padded
(longitude periodically, latitude by reflection) and cropped back; a network built for a fixed
grid is rebuilt for the padded grid with the same weights.

TensorFlow is imported only when a model is saved, loaded or run.

Examples
--------
>>> import tempfile
>>> from climnb.channels import CHANNEL_NAMES
>>> from climnb.bundle import save_bundle
>>> from climnb.models import build_model
>>> from climnb.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> model = build_model("tiramisu", (96, 144, 16), preset="toy")  # untrained, for the example
>>> lo, hi = ds.min(), ds.max()
>>> path = save_bundle(model, tempfile.mkdtemp() + "/toy", channels=CHANNEL_NAMES,
...                    minval=[float(lo[c]) for c in CHANNEL_NAMES],
...                    maxval=[float(hi[c]) for c in CHANNEL_NAMES],
...                    name="tiramisu", preset="toy")
>>> pred = predict(path, ds.isel(lat=slice(0, 90)))  # 90 rows: padded to 96, cropped back
>>> pred.dims, pred.shape, pred.dtype.name
(('time', 'lat', 'lon'), (2, 90, 144), 'uint8')
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from climnb.bundle import Bundle, BundleError, load_bundle

__all__ = ["predict", "iter_predict", "open_input", "pad_fields"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


# ---------------------------------------------------------------------------------------------
# Input: datasets and sample files
# ---------------------------------------------------------------------------------------------


def open_input(
    source: xr.Dataset | PathLike | Sequence[PathLike], channels: Sequence[str]
) -> xr.Dataset:
    """The input as a lazy Dataset on climnb's canonical grid with ``channels`` present.

    ``source`` is a Dataset, NetCDF file(s) or glob(s), DeepCAM sample files (``*.h5``) or a
    directory of them. Raises :class:`BundleError` naming the channels the input lacks.
    """
    if isinstance(source, xr.Dataset):
        ds = source
    else:
        files = [source] if isinstance(source, (str, os.PathLike)) else list(source)
        if all(_is_samples(f) for f in files):
            ds = _open_samples(files)
        else:
            from climnb.io.netcdf import open_dataset

            ds = open_dataset(files)
    missing = [c for c in channels if c not in ds.data_vars]
    if missing:
        raise BundleError(
            f"the input lacks channel(s) {', '.join(missing)} that the model was trained on; "
            f"the model needs {', '.join(channels)}; the input has "
            f"{', '.join(map(str, ds.data_vars)) or 'no variables'}"
        )
    from climnb.io.netcdf import normalize

    return normalize(ds[list(channels)], required=channels)


def _is_samples(path: PathLike) -> bool:
    p = Path(path)
    return p.suffix == ".h5" or (p.is_dir() and any(p.glob("data-*.h5")))


def _open_samples(paths: Sequence[PathLike]) -> xr.Dataset:
    """DeepCAM sample files as a lazy (dask) Dataset, one time step per file."""
    import dask
    import dask.array as dsa
    import h5py

    from climnb.io.samples import inspect_sample, list_samples

    files = []
    for p in map(Path, paths):
        files += list_samples(p) if p.is_dir() else [p]
    first = inspect_sample(files[0])
    infos = [first] + [inspect_sample(f, shape=first.shape) for f in files[1:]]
    h, w = first.shape
    for info in infos[1:]:
        if info.channels != first.channels:
            raise BundleError(
                f"{info.path}: channels {info.channels} differ from those of {first.path}"
            )
    read = dask.delayed(_read_data, pure=True)
    data = dsa.stack(
        [
            dsa.from_delayed(read(info.path), (h, w, len(first.channels)), np.float32)
            for info in infos
        ]
    )
    variables = {
        name: (("time", "lat", "lon"), data[..., i]) for i, name in enumerate(first.channels)
    }
    with h5py.File(first.path, "r") as f:
        lat = f["climate/lat"][...] if "climate/lat" in f else np.linspace(-90, 90, h)
        lon = f["climate/lon"][...] if "climate/lon" in f else np.arange(w) * 360.0 / w
    times = [i.time for i in infos]
    time = np.array(times, "datetime64[ns]") if all(times) else np.arange(len(infos))
    coords = {"time": time, "lat": lat, "lon": lon, "file": ("time", [str(i.path) for i in infos])}
    return xr.Dataset(variables, coords=coords)


def _read_data(path: Path) -> np.ndarray:
    from climnb.io.samples import read_sample

    return read_sample(path)[0]


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


def iter_predict(
    bundle: Bundle, ds: xr.Dataset, *, batch_size: int = 4, probabilities: bool = False
) -> Iterator[tuple[slice, np.ndarray, np.ndarray | None]]:
    """Yield ``(time slice, classes (b, lat, lon) uint8, probabilities or None)`` per batch.

    ``ds`` must be on the canonical grid with the bundle's channels (see :func:`open_input`);
    one batch of time steps is loaded (computed, if lazy) at a time.
    """
    n = ds.sizes["time"]
    for start in range(0, n, batch_size):
        sl = slice(start, min(start + batch_size, n))
        step = ds[list(bundle.channels)].isel(time=sl).load()  # one read of a lazy input
        x = np.stack([step[c].values.astype(np.float32) for c in bundle.channels], axis=-1)
        n_bad = int(np.isnan(x).sum())
        if n_bad:
            log.warning(
                "steps %d-%d: %d missing values set to the normalised minimum",
                sl.start,
                sl.stop - 1,
                n_bad,
            )
        x, (rows, cols) = pad_fields(bundle.normalise(x), bundle.stride)
        model = bundle.model(*x.shape[1:3])
        out = np.asarray(model(x, training=False), np.float32)[:, rows, cols]
        probs = _softmax(out) if probabilities and not _is_probability(out) else out
        yield sl, out.argmax(axis=-1).astype(np.uint8), probs if probabilities else None


def _is_probability(out: np.ndarray) -> bool:
    return bool(out.min() >= 0 and np.allclose(out.sum(axis=-1), 1.0, atol=1e-3))


def predict(
    bundle: Bundle | PathLike,
    source: xr.Dataset | PathLike | Sequence[PathLike],
    *,
    batch_size: int = 4,
    probabilities: bool = False,
    grid: str = "input",
    progress: bool | Callable[[int], object] = False,
) -> xr.DataArray | xr.Dataset:
    """Segment every time step of ``source`` with a trained network.

    Parameters
    ----------
    bundle : a :class:`Bundle` or the path of one.
    source : an xarray Dataset (may be lazy), NetCDF file(s) or glob(s), DeepCAM sample files
        or a directory of them. It must hold the channels the network was trained on.
    batch_size : time steps per forward pass (memory: about ``batch_size`` x lat x lon x 16 x
        4 bytes of input, plus the network's activations).
    probabilities : also return the per-class probabilities (softmax of the network's output).
    grid : ``"input"`` returns the input's latitude and longitude values and order (for
        example -180..180, descending latitude); ``"canonical"`` returns latitudes ascending
        and longitudes 0..360, like :func:`climnb.io.netcdf.normalize` and the labels.
    progress : ``True`` for a tqdm bar, or a callable given the number of steps done per batch.

    Returns
    -------
    xarray.DataArray or xarray.Dataset
        ``prediction`` (time, lat, lon) uint8 class ids with the input's coordinates; with
        ``probabilities`` a Dataset of ``prediction`` and ``probability``
        (time, lat, lon, class) float32.

    Raises
    ------
    BundleError
        When the input lacks channels the network was trained on (they are named).
    """
    bundle = bundle if isinstance(bundle, Bundle) else load_bundle(bundle)
    if grid not in ("input", "canonical"):
        raise ValueError(f"grid must be 'input' or 'canonical', got {grid!r}")
    original = source if isinstance(source, xr.Dataset) else None
    ds = open_input(source, bundle.channels)
    shape = tuple(ds.sizes[d] for d in ("time", "lat", "lon"))
    classes = np.empty(shape, np.uint8)
    probs = np.empty((*shape, bundle.n_classes), np.float32) if probabilities else None
    update, close = _progress(progress, shape[0])
    try:
        for sl, c, p in iter_predict(
            bundle, ds, batch_size=batch_size, probabilities=probabilities
        ):
            classes[sl] = c
            if probs is not None:
                probs[sl] = p
            update(sl.stop - sl.start)
    finally:
        close()
    out = _as_xarray(bundle, ds, classes, probs)
    if grid == "input" and original is not None:
        out = _to_input_grid(out, original)
    return out


def _progress(progress, total: int):
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="step", desc="predict")
        return bar.update, bar.close
    if callable(progress):
        return progress, lambda: None
    return (lambda n: None), (lambda: None)


def _as_xarray(bundle: Bundle, ds: xr.Dataset, classes, probs) -> xr.DataArray | xr.Dataset:
    coords = {k: v for k, v in ds.coords.items() if set(v.dims) <= {"time", "lat", "lon"}}
    attrs = {
        "long_name": "predicted class of each pixel",
        "flag_values": np.arange(bundle.n_classes, dtype=np.uint8),
        "flag_meanings": " ".join(bundle.class_names),
        "model": f"{bundle.name} ({bundle.preset})",
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
        coords={**coords, "class": list(bundle.class_names)},
        attrs={"long_name": "probability of each class", "units": "1"},
    )
    return xr.Dataset(
        {"prediction": pred, "probability": prob},
        attrs={"model": attrs["model"], "model_bundle": attrs["model_bundle"]},
    )


def _to_input_grid(out, original: xr.Dataset):
    """Put ``out`` back on the latitude/longitude values and order of the input Dataset."""
    from climnb.io.netcdf import COORD_ALIASES

    lat_name = next(n for n in COORD_ALIASES["lat"] if n in original.coords)
    lon_name = next(n for n in COORD_ALIASES["lon"] if n in original.coords)
    lat, lon = original[lat_name].values, original[lon_name].values
    out = out.sel(lat=lat, lon=lon % 360.0)
    return out.assign_coords(
        lat=("lat", lat, original[lat_name].attrs), lon=("lon", lon, original[lon_name].attrs)
    )
