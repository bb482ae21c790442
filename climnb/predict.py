"""Run a trained network over new climate data: the model bundle and batched inference.

A **model bundle** is a directory that holds everything inference needs, so that a model
trained on one machine segments data anywhere else exactly as it did in training:

* ``model.keras``: the Keras 3 model (architecture and weights);
* ``climnb.json``: the channel list (in the network's input order), the per-channel min-max
  normalisation of training, the number of classes, the architecture's name, preset and field
  overrides, its stride (input height and width must be multiples of it), the input shape it
  was built for and the climnb version.

The training loop writes one with :func:`save_bundle`; :func:`load_bundle` reads it back and
:func:`predict` runs it over an xarray Dataset (lazy, any number of steps, any of the longitude
and latitude conventions that :func:`climnb.io.netcdf.normalize` understands) or DeepCAM
sample files, a batch of time steps at a time. Grids that the stride does not divide are padded
(longitude periodically, latitude by reflection) and cropped back; a network built for a fixed
grid is rebuilt for the padded grid with the same weights.

TensorFlow is imported only when a model is saved, loaded or run.

Examples
--------
>>> import tempfile
>>> from climnb.channels import CHANNEL_NAMES
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

import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from climnb.channels import CLASS_NAMES

__all__ = [
    "Bundle",
    "BundleError",
    "save_bundle",
    "load_bundle",
    "predict",
    "iter_predict",
    "open_input",
    "pad_fields",
    "MODEL_FILE",
    "META_FILE",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
MODEL_FILE = "model.keras"
META_FILE = "climnb.json"
FORMAT = "climnb-model-bundle"
FORMAT_VERSION = 1


class BundleError(ValueError):
    """A model bundle that cannot be used, or input that does not fit it."""


@dataclass(frozen=True, eq=False)
class Bundle:
    """A trained network with what inference needs to feed it as in training.

    Attributes
    ----------
    path : the bundle directory.
    channels : input channel names, in the order of the network's last input axis.
    minval, maxval : per-channel min-max normalisation of training (float64, one per channel):
        the network sees ``(x - minval) / (maxval - minval)`` (0 where ``maxval == minval``).
    n_classes : classes of the output (3: background, tropical cyclone, atmospheric river).
    name, preset : architecture (``"tiramisu"``, ``"deeplab"``, or any other name) and preset.
    overrides : fields of the architecture's config that differed from the preset.
    stride : input height and width must be multiples of this.
    input_shape : ``(height, width, channels)`` the saved network was built for; a height or
        width of ``None`` means any multiple of ``stride``.
    climnb_version : version of climnb that wrote the bundle.
    extra : free-form metadata given to :func:`save_bundle` (epoch, IoU, data set, ...).
    """

    path: Path
    channels: tuple[str, ...]
    minval: np.ndarray
    maxval: np.ndarray
    n_classes: int
    name: str
    preset: str
    overrides: dict
    stride: int
    input_shape: tuple[int | None, int | None, int]
    climnb_version: str
    extra: dict = field(default_factory=dict)
    _models: dict = field(default_factory=dict, repr=False)

    @property
    def class_names(self) -> tuple[str, ...]:
        """Class names, from :data:`climnb.channels.CLASS_NAMES` where the count matches."""
        if self.n_classes == len(CLASS_NAMES):
            return CLASS_NAMES
        return tuple(f"class{i}" for i in range(self.n_classes))

    def normalise(self, x: np.ndarray) -> np.ndarray:
        """Min-max normalise ``x`` (..., channels) in place as the training pipeline does.

        NaN (missing values) become 0, the normalised minimum.
        """
        span = self.maxval - self.minval
        offset = self.minval.astype(np.float32)
        scale = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 0.0).astype(np.float32)
        np.subtract(x, offset, out=x)
        np.multiply(x, scale, out=x)
        return np.nan_to_num(x, copy=False, nan=0.0)

    def model(self, height: int | None = None, width: int | None = None):
        """The Keras model, for inputs of ``height`` x ``width`` (default: as saved).

        A network saved for a fixed grid is rebuilt for another one (with
        :func:`climnb.models.build_model` for climnb's architectures, else by cloning) and
        given the saved weights; the result is cached.
        """
        saved = self._models.get("saved")
        if saved is None:
            saved = self._models["saved"] = _load_keras(self.path / MODEL_FILE)
        h0, w0, _ = self.input_shape
        if (height is None or h0 in (None, height)) and (width is None or w0 in (None, width)):
            return saved
        key = (height, width)
        if key not in self._models:
            self._models[key] = _rebuild(self, saved, height, width)
        return self._models[key]


# ---------------------------------------------------------------------------------------------
# Saving and loading
# ---------------------------------------------------------------------------------------------


def save_bundle(
    model,
    path: PathLike,
    *,
    channels: Sequence[str],
    minval: Sequence[float] | np.ndarray,
    maxval: Sequence[float] | np.ndarray,
    name: str,
    preset: str,
    overrides: dict | None = None,
    stride: int | None = None,
    extra: dict | None = None,
) -> Path:
    """Save a trained Keras model with its normalisation as a bundle directory, atomically.

    Parameters
    ----------
    model : the Keras 3 model (logits or probabilities of shape (batch, h, w, n_classes)).
    path : the bundle directory to write; an existing bundle there is replaced as a whole
        (readers see the old bundle or the new one, never a mix).
    channels : the input channel names in the order the network was fed (for a training run
        on a channel subset, the subset).
    minval, maxval : per-channel minimum and maximum used to normalise the training input,
        in the order of ``channels`` (from ``stats.h5``: ``stats.select(index).minval``).
    name, preset : architecture and preset as given to :func:`climnb.models.build_model`.
    overrides : config fields given to ``build_model`` beyond the preset (e.g.
        ``{"dropout": 0.0}``), so that the network can be rebuilt for other grid sizes.
    stride : input size divisor; default the architecture's (``get_config(...).stride``).
    extra : JSON-serialisable metadata to keep (epoch, validation IoU, data set, ...).

    Returns
    -------
    Path
        The bundle directory.
    """
    path = Path(path)
    minval, maxval = np.asarray(minval, np.float64), np.asarray(maxval, np.float64)
    channels = tuple(str(c) for c in channels)
    if minval.shape != (len(channels),) or maxval.shape != (len(channels),):
        raise BundleError(
            f"minval and maxval need one value per channel ({len(channels)}); "
            f"got shapes {minval.shape} and {maxval.shape}"
        )
    meta = _metadata(
        model, channels, minval, maxval, name, preset, overrides or {}, stride, extra or {}
    )
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.mkdir(parents=True)
    try:
        model.save(tmp / MODEL_FILE)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        _replace_dir(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("saved %s/%s bundle (%d channels) to %s", name, preset, len(channels), path)
    return path


def _metadata(model, channels, minval, maxval, name, preset, overrides, stride, extra) -> dict:
    import climnb

    shape = tuple(model.input_shape[1:])
    if len(shape) != 3 or shape[-1] != len(channels):
        raise BundleError(
            f"the model takes input {model.input_shape}, expected "
            f"(batch, height, width, {len(channels)}) for {len(channels)} channels"
        )
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "climnb_version": climnb.__version__,
        "model": {
            "file": MODEL_FILE,
            "name": name,
            "preset": preset,
            "overrides": _jsonable(overrides),
            "n_classes": int(model.output_shape[-1]),
            "stride": int(stride or _architecture_stride(name, preset, overrides)),
            "input_shape": list(shape),
        },
        "channels": list(channels),
        "normalisation": {"method": "minmax", "minval": minval.tolist(), "maxval": maxval.tolist()},
        "classes": list(CLASS_NAMES) if model.output_shape[-1] == len(CLASS_NAMES) else None,
        "extra": _jsonable(extra),
    }


def _jsonable(obj):
    return json.loads(
        json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    )


def _architecture_stride(name: str, preset: str, overrides: dict) -> int:
    from climnb.models import get_config

    try:
        return get_config(name, preset, **overrides).stride
    except (ValueError, TypeError) as err:
        raise BundleError(
            f"cannot tell the stride of model {name!r} (preset {preset!r}): {err}; pass stride="
        ) from None


def _replace_dir(new: Path, path: Path) -> None:
    """Move directory ``new`` to ``path``, replacing what is there."""
    if not path.exists():
        os.replace(new, path)
        return
    if not (path / META_FILE).exists() and any(path.iterdir()):
        raise BundleError(f"{path} exists and is not a model bundle; not replacing it")
    old = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.old")
    os.replace(path, old)
    os.replace(new, path)
    shutil.rmtree(old, ignore_errors=True)


def load_bundle(path: PathLike) -> Bundle:
    """Read a bundle's metadata; the Keras model itself loads on first use.

    Raises
    ------
    BundleError
        When the directory, its ``climnb.json`` or ``model.keras`` is missing or unreadable.
    """
    path = Path(path)
    meta_path = path / META_FILE
    if not meta_path.is_file():
        what = "no such directory" if not path.exists() else f"no {META_FILE} in it"
        raise BundleError(
            f"{path}: not a climnb model bundle ({what}); bundles are written by "
            "climnb.predict.save_bundle at the end of training"
        )
    try:
        meta = json.loads(meta_path.read_text())
        m, norm = meta["model"], meta["normalisation"]
    except (ValueError, KeyError) as err:
        raise BundleError(f"{meta_path}: unreadable bundle metadata: {err}") from None
    if meta.get("format") != FORMAT or meta.get("format_version", 0) > FORMAT_VERSION:
        raise BundleError(
            f"{meta_path}: format {meta.get('format')!r} version "
            f"{meta.get('format_version')} is not one this climnb reads"
        )
    if not (path / m.get("file", MODEL_FILE)).is_file():
        raise BundleError(f"{path}: the model file {MODEL_FILE} is missing")
    shape = tuple(m["input_shape"])
    return Bundle(
        path=path,
        channels=tuple(meta["channels"]),
        minval=np.asarray(norm["minval"], np.float64),
        maxval=np.asarray(norm["maxval"], np.float64),
        n_classes=int(m["n_classes"]),
        name=m["name"],
        preset=m["preset"],
        overrides=dict(m.get("overrides") or {}),
        stride=int(m["stride"]),
        input_shape=shape,
        climnb_version=meta.get("climnb_version", "?"),
        extra=dict(meta.get("extra") or {}),
    )


def _load_keras(path: Path):
    from climnb.models._backend import import_keras

    keras = import_keras()
    try:
        return keras.models.load_model(path, compile=False)
    except Exception as err:  # Keras raises many types for a bad file
        raise BundleError(f"{path}: cannot load the Keras model: {err}") from err


def _rebuild(bundle: Bundle, saved, height: int, width: int):
    """The saved network for a (height, width) input, with the saved weights."""
    from climnb.models import MODEL_NAMES, build_model
    from climnb.models._backend import import_keras

    shape = (height, width, len(bundle.channels))
    log.info("rebuilding %s for input %s x %s", bundle.name, height, width)
    try:
        model = build_model(bundle.name, shape, bundle.n_classes, bundle.preset, **bundle.overrides)
    except ValueError:
        if bundle.name.lower() in MODEL_NAMES:
            raise
        keras = import_keras()  # a foreign architecture: re-run its layers on a new input
        model = keras.models.clone_model(saved, input_tensors=keras.Input(shape))
    model.set_weights(saved.get_weights())
    return model


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
