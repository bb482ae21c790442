"""The model bundle: a trained network with everything inference needs, in one directory.

A **model bundle** holds what inference needs, so that a model trained on one machine segments
data anywhere else exactly as it did in training:

* ``model.keras``: the Keras 3 model (architecture and weights);
* ``climnb.json``: the channel list (in the network's input order), the per-channel min-max
  normalisation of training, the number of classes, the architecture's name, preset and field
  overrides, its stride (input height and width must be multiples of it), the input shape it
  was built for and the climnb version.

The format sits below both training (:mod:`climnb.train`, which writes bundles with
:func:`save_bundle`) and inference (:mod:`climnb.inference.predict`, which reads them with
:func:`load_bundle`), so neither imports the other. TensorFlow is imported only when a model is
saved or loaded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import climnb
from climnb.io.atomic import temp_path
from climnb.io.channels import CLASS_NAMES
from climnb.models import MODEL_NAMES, build_model, get_config
from climnb.models.backend import import_keras
from climnb.models.layers import register_layers

__all__ = ["Bundle", "BundleError", "save_bundle", "load_bundle", "MODEL_FILE", "META_FILE"]

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
        """Class names, from :data:`climnb.io.channels.CLASS_NAMES` where the count matches."""
        if self.n_classes == len(CLASS_NAMES):
            return CLASS_NAMES
        return tuple(f"class{i}" for i in range(self.n_classes))

    def normalisation(self) -> tuple[np.ndarray, np.ndarray]:
        """(offset, scale), float32 per channel: :meth:`normalise` is
        ``nan_to_num((x - offset) * scale)`` (a channel of one value scales to 0)."""
        span = self.maxval - self.minval
        scale = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 0.0).astype(np.float32)
        return self.minval.astype(np.float32), scale

    def normalise(self, x: np.ndarray) -> np.ndarray:
        """Min-max normalise ``x`` (..., channels) in place as the training pipeline does.

        NaN (missing values) become 0, the normalised minimum.
        """
        offset, scale = self.normalisation()
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
    tmp = temp_path(path)
    tmp.mkdir(parents=True)
    try:
        with _tempdir_in(tmp):  # Keras's own scratch (assets/) too: removed with ``tmp``
            model.save(tmp / MODEL_FILE)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        _replace_dir(tmp, path)
    except OSError as err:  # a full disk: name the bundle (a failed write names nothing)
        if err.filename is None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("saved %s/%s bundle (%d channels) to %s", name, preset, len(channels), path)
    return path


def _metadata(model, channels, minval, maxval, name, preset, overrides, stride, extra) -> dict:
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
    try:
        return get_config(name, preset, **overrides).stride
    except (ValueError, TypeError) as err:
        raise BundleError(
            f"cannot tell the stride of model {name!r} (preset {preset!r}): {err}; pass stride="
        ) from None


@contextlib.contextmanager
def _tempdir_in(folder: Path):
    """Point :mod:`tempfile` at ``folder`` for a while: ``model.save`` writes an ``assets``
    folder under the temporary directory and leaves it there when the save fails."""
    import tempfile

    before = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = before


def _replace_dir(new: Path, path: Path) -> None:
    """Move directory ``new`` to ``path``, replacing what is there."""
    if not path.exists():
        os.replace(new, path)
        return
    if not (path / META_FILE).exists() and any(path.iterdir()):
        raise BundleError(f"{path} exists and is not a model bundle; not replacing it")
    old = temp_path(path, ".old")
    os.replace(path, old)
    os.replace(new, path)
    shutil.rmtree(old, ignore_errors=True)


def _check_lengths(meta_path: Path, meta: dict, shape: tuple) -> None:
    """Refuse metadata whose channels, normalisation values and model input disagree in
    number (an edited or mixed-up ``climnb.json``), naming each count."""
    norm = meta["normalisation"]
    counts = {
        "channels": len(meta["channels"]),
        "minval": len(norm["minval"]),
        "maxval": len(norm["maxval"]),
    }
    if shape and shape[-1] is not None:
        counts["model input channels"] = int(shape[-1])
    if len(set(counts.values())) > 1:
        said = ", ".join(f"{n} {k}" for k, n in counts.items())
        raise BundleError(
            f"{meta_path}: its counts disagree ({said}): the metadata was edited or comes "
            "from another model; copy the bundle again or save it again from the training run"
        )


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
            "climnb.bundle.save_bundle at the end of training"
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
    try:
        shape = tuple(m["input_shape"])
        _check_lengths(meta_path, meta, shape)
    except (TypeError, KeyError) as err:
        raise BundleError(f"{meta_path}: unreadable bundle metadata: {err!r}") from None
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


def _check_archive(path: Path) -> None:
    """Refuse a ``model.keras`` that is not a whole zip archive (cut short by a copy or a
    full disk, or bytes changed), which Keras would call "File not found"."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()  # every member's CRC-32
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as err:
        bad = f"not a whole zip archive ({err})"
    else:
        bad = bad and f"its member {bad} fails its CRC-32"
    if bad:
        raise BundleError(
            f"{path}: the model file is damaged (truncated or changed: {bad}); copy the bundle "
            "again or save it again from the training run"
        )


def _load_keras(path: Path):
    keras = import_keras()
    register_layers()  # climnb's own layers (batch norm, input channels) for model.keras files
    _check_archive(path)
    try:
        return keras.models.load_model(path, compile=False)
    except Exception as err:  # Keras raises many types for a bad file
        raise BundleError(f"{path}: cannot load the Keras model: {err}") from err


def _precision(saved) -> bool | str:
    """The compute precision of the saved network's convolutions, as ``build_model`` takes it
    (the model's own policy is float32 whatever its layers compute in)."""
    names = {layer.dtype_policy.name for layer in saved.layers if hasattr(layer, "kernel")}
    if "mixed_bfloat16" in names:
        return "mixed_bfloat16"
    return "mixed_float16" in names


def _rebuild(bundle: Bundle, saved, height: int, width: int):
    """The saved network for a (height, width) input, with the saved weights."""
    shape = (height, width, len(bundle.channels))
    log.info("rebuilding %s for input %s x %s", bundle.name, height, width)
    try:
        model = build_model(
            bundle.name,
            shape,
            bundle.n_classes,
            bundle.preset,
            mixed_precision=_precision(saved),
            **bundle.overrides,
        )
    except ValueError:
        if bundle.name.lower() in MODEL_NAMES:
            raise
        keras = import_keras()  # a foreign architecture: re-run its layers on a new input
        model = keras.models.clone_model(saved, input_tensors=keras.Input(shape))
    try:
        model.set_weights(saved.get_weights())
    except ValueError:
        trained = "x".join(str(s) for s in bundle.input_shape[:2])
        raise BundleError(
            f"{bundle.path}: the network cannot be rebuilt for a {height} x {width} grid: its "
            f"weights do not fit {bundle.name}/{bundle.preset} with overrides "
            f"{bundle.overrides or '{}'} (a bundle from before climnb recorded the model "
            f"overrides?); predict on its training grid ({trained}) or save the bundle again "
            "with overrides="
        ) from None
    return model
