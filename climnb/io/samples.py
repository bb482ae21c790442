"""DeepCAM-style HDF5 sample files written: one file per time step, 16 channels and a label mask.

The layout of a file, its name, its checks and reading it are :mod:`climnb.io.samplefile`'s
(all importable from here too); this module writes files and keeps the folder's manifest.

Examples
--------
>>> import tempfile
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> paths = write_samples(ds, ds.truth, tempfile.mkdtemp())
>>> [p.name for p in paths]
['data-2000-01-01-00-1.h5', 'data-2000-01-01-03-1.h5']
>>> data, labels = read_sample(paths[0])
>>> data.shape, data.dtype, labels.dtype
((96, 144, 16), dtype('float32'), dtype('uint8'))
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np

from climnb.io.atomic import atomic_path
from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES
from climnb.io.manifest import JOURNAL_NAME, MANIFEST_NAME, Entry, Manifest, sha256_file
from climnb.io.samplefile import (
    DATA,
    LABELS,
    SAMPLE_GLOB,
    SOFT,
    SampleError,
    SampleInfo,
    check_arrays,
    check_soft,
    check_values,
    group_channels,
    has_dates,
    inspect_sample,
    iso_hour,
    iso_time,
    list_samples,
    open_checked,
    open_sample,
    read_sample,
    read_soft_labels,
    sample_name,
    sample_names,
    source_of,
)
from climnb.io.steps import iter_steps

__all__ = [
    "DATA",
    "LABELS",
    "SAMPLE_GLOB",
    "SampleError",
    "SampleInfo",
    "SOFT",
    "check_soft",
    "check_values",
    "group_channels",
    "has_dates",
    "inspect_sample",
    "iso_hour",
    "iso_time",
    "list_samples",
    "open_checked",
    "open_sample",
    "read_sample",
    "read_soft_labels",
    "sample_name",
    "sample_names",
    "source_of",
    "write_sample",
    "write_samples",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
_ALIGN = 4096  # dataset offsets aligned to a page: raw reads can slice without copying


def _check_step(ds, labels, channels, i: int, data, lab, name: str) -> None:
    """Refuse time step ``i`` of the input before it is written as ``name``: non-finite
    fields, labels that are not class indices; name the input file, the variable and the
    time."""
    t = iso_time(ds.time.values[i]) if has_dates(ds) else None
    when = f"time step {i}" if t is None else f"time {t}"
    when += f" (sample {name})"
    bad = ~np.isfinite(data)
    if bad.any():
        y, x, c = (int(j) for j in np.argwhere(bad)[0])
        var = ds[channels[c]]
        raise SampleError(
            f"{source_of(var)}: variable {channels[c]} holds non-finite value(s) at {when}, "
            f"e.g. {data[y, x, c]} at (lat, lon) index ({y}, {x}); fields must be finite"
        )
    ok = np.isin(lab, np.arange(len(CLASS_NAMES)))
    if not ok.all():
        raise SampleError(
            f"{source_of(labels)}: label variable {labels.name} at {when}: labels outside "
            f"0..{len(CLASS_NAMES) - 1}: value {lab[~ok].flat[0]} ({int((~ok).sum())} "
            "pixel(s)); labels must be class indices 0, 1 or 2"
        )


def write_sample(
    path: PathLike,
    data: np.ndarray,
    labels: np.ndarray,
    *,
    channels: Sequence[str] = CHANNEL_NAMES,
    time=None,
    lat: np.ndarray | None = None,
    lon: np.ndarray | None = None,
    soft: np.ndarray | None = None,
    expert: dict | None = None,
) -> Path:
    """Write one sample file atomically and record its digest in the folder's manifest.

    Parameters
    ----------
    path : file to write.
    data : (H, W, C) array, stored as float32; NaN or infinite values are refused.
    labels : (H, W) class indices 0, 1, 2, stored as uint8; other values are refused.
    channels : names of the C channels.
    time, lat, lon : coordinates kept in the file so that it describes itself.
    soft : (H, W, classes) per-class shares, a soft target (:data:`SOFT`); ``labels`` should
        be its argmax.
    expert : where the target came from, for the manifest: ``labeller``, or ``labellers``
        and ``consensus`` (:class:`climnb.io.manifest.Entry`).
    """
    path = Path(path)
    entry = _write(
        path,
        data,
        labels,
        channels=channels,
        time=time,
        lat=lat,
        lon=lon,
        soft=soft,
        expert=expert,
    )
    Manifest.append(path.parent, path.name, entry)
    return path


def _write(path: Path, data, labels, *, channels, time, lat, lon, soft=None, expert=None) -> Entry:
    data = np.asarray(data, dtype=np.float32)
    labels = np.asarray(labels)
    check_arrays(path, data.shape, labels.shape, len(channels))
    check_values(path, data, labels)
    labels = labels.astype(np.uint8)
    if soft is not None:
        soft = np.asarray(soft, np.float32)
        check_soft(path, soft, labels.shape)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w", alignment_threshold=1, alignment_interval=_ALIGN) as f:
            g = f.create_group("climate")
            g.create_dataset("data", data=data)
            g.create_dataset("labels_0", data=labels)
            if soft is not None:
                g.create_dataset("labels_soft", data=soft)
                g["labels_soft"].attrs["classes"] = np.array(
                    list(CLASS_NAMES), dtype=h5py.string_dtype()
                )
            for key, value in (expert or {}).items():  # the file describes itself
                g.attrs[key] = np.asarray(value) if key == "labellers" else value
            g.attrs["channels"] = np.array(list(channels), dtype=h5py.string_dtype())
            g.attrs["classes"] = np.array(list(CLASS_NAMES), dtype=h5py.string_dtype())
            if time is not None:
                g.attrs["time"] = iso_time(time)
            if lat is not None:
                g.create_dataset("lat", data=np.asarray(lat, np.float64))
                g["lat"].attrs["units"] = "degrees_north"
            if lon is not None:
                g.create_dataset("lon", data=np.asarray(lon, np.float64))
                g["lon"].attrs["units"] = "degrees_east"
        # the digest of the bytes just written, before the file is visible under its name
        entry = Entry(
            bytes=tmp.stat().st_size,
            sha256=sha256_file(tmp),
            time=iso_time(time),
            class_counts=tuple(
                int(c) for c in np.bincount(labels.ravel(), minlength=len(CLASS_NAMES))
            ),
            **_expert_fields(expert),
        )
    return entry


def _expert_fields(expert: dict | None) -> dict:
    out = dict(expert or {})
    unknown = set(out) - {"labeller", "labellers", "consensus"}
    if unknown:
        raise ValueError(f"unknown expert field(s) {sorted(unknown)}")
    if out.get("labellers") is not None:
        out["labellers"] = tuple(int(n) for n in out["labellers"])
    if out.get("labeller") is not None:
        out["labeller"] = int(out["labeller"])
    return out


def write_samples(
    ds,
    labels,
    out_dir: PathLike,
    *,
    run: int = 1,
    channels: Sequence[str] = CHANNEL_NAMES,
    progress=None,
    resume: bool = False,
    names: Sequence[str] | None = None,
    soft=None,
    expert: Sequence[dict] | None = None,
) -> list[Path]:
    """Write one sample file per time step of an xarray Dataset, and the folder's manifest.

    Parameters
    ----------
    ds : xarray.Dataset with the channel variables on (time, lat, lon); may be dask-backed,
        one time step is loaded at a time.
    labels : (time, lat, lon) DataArray of class indices, or the name of a variable of ``ds``.
    out_dir : directory for the files (made if missing); ``manifest.json`` in it lists them.
    run : the ``N`` of the file names (run or ensemble member).
    channels : the channels to write, in order.
    progress : called with the number of files written after each file (a progress bar).
    resume : continue an interrupted write of *these same steps* into ``out_dir``: a file
        already there whose SHA-256 matches its entry in the folder's manifest or journal is
        kept (it is hashed once, a read of its bytes), any other file is written again, and
        files or entries of other names are removed, so that the folder ends as an
        uninterrupted run leaves it. The caller makes sure the steps and options are the
        same (:func:`climnb.io.sampleset.write_sample_set` keys its folder by them).
    names : the file names of the steps (default :func:`sample_names`); a caller writing a
        part of a larger data set passes the part's names in the whole, so that steps
        without a time get names unique across the parts.
    soft : (time, class_id, lat, lon) per-class shares of each step, a soft target
        (:func:`climnb.labels.expert.soft`), stored as :data:`SOFT` beside ``labels``.
    expert : for each step, where its target came from (``labeller``, or ``labellers`` and
        ``consensus``), recorded in the manifest and the file.

    Returns
    -------
    list of Path
        The files written, in time order.
    """
    fields, labels, soft, names = _step_arrays(
        ds, labels, out_dir, run=run, channels=channels, names=names, soft=soft, expert=expert
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kept = _resumable(out, names) if resume else {}
    todo = [i for i, name in enumerate(names) if name not in kept]
    if kept and progress is not None:
        progress(len(kept))
    arrays = (fields, labels, soft)
    _write_steps(out, ds, arrays, names, todo, channels=channels, expert=expert, progress=progress)
    _close_manifest(out, names, channels, tuple(fields.shape[1:3]), resume=resume)
    paths = [out / name for name in names]
    log.info("wrote %d sample files to %s (%d kept)", len(paths) - len(kept), out_dir, len(kept))
    return paths


def _step_arrays(ds, labels, out_dir, *, run, channels, names, soft, expert):
    """``(fields (time, lat, lon, channel), labels (time, lat, lon), soft targets (time, lat,
    lon, class) or None, the steps' file names)``, checked: the channels there, one grid and
    one name and expert record a step."""
    if isinstance(labels, str):
        labels = ds[labels]
    missing = [c for c in channels if c not in ds]
    if missing:
        raise SampleError(f"{source_of(labels)}: lacks channel(s) {', '.join(missing)}")
    fields = ds[list(channels)].to_dataarray("channel").transpose("time", "lat", "lon", "channel")
    labels = labels.transpose("time", "lat", "lon")
    if labels.shape != fields.shape[:3]:
        raise SampleError(f"labels have shape {labels.shape}, fields {fields.shape[:3]}")
    names = list(sample_names(ds, run) if names is None else names)
    if len(names) != ds.sizes.get("time", 0):
        raise SampleError(f"{out_dir}: {len(names)} names for {ds.sizes.get('time', 0)} steps")
    if not names:
        raise SampleError(f"{out_dir}: the data have no time steps, nothing to write")
    if soft is not None:
        soft = soft.transpose("time", "lat", "lon", ...)
        if soft.shape[:3] != labels.shape:
            raise SampleError(f"soft targets have shape {soft.shape[:3]}, labels {labels.shape}")
    if expert is not None and len(expert) != len(names):
        raise SampleError(f"{out_dir}: {len(expert)} expert records for {len(names)} steps")
    return fields, labels, soft, names


def _write_steps(out: Path, ds, arrays, names, todo, *, channels, expert, progress) -> None:
    """Check and write the steps ``todo`` of ``arrays`` (fields, labels, soft targets), read a
    block of steps at a time; each file goes into the folder's journal once it is written."""
    fields, labels, soft = arrays
    times = ds.time.values if has_dates(ds) else None
    lat, lon = ds.lat.values, ds.lon.values
    for i, (data, lab, sft) in iter_steps([fields, labels, soft], todo):  # blocks of steps
        _check_step(ds, labels, channels, i, data, lab, names[i])
        entry = _write(
            out / names[i],
            data,
            lab,
            channels=channels,
            time=None if times is None else times[i],
            lat=lat,
            lon=lon,
            soft=sft,
            expert=None if expert is None else expert[i],
        )
        Manifest.append(out, names[i], entry)
        if progress is not None:
            progress(1)


def _close_manifest(out: Path, names, channels, grid: tuple, *, resume: bool) -> None:
    """The folder's manifest from its journal, with the channels and the grid."""
    manifest = Manifest.read(out) or Manifest()
    if resume:  # exactly the files of these steps, as an uninterrupted run lists them
        manifest = Manifest(files={n: manifest.files[n] for n in names})
    manifest.with_files({}, channels=tuple(channels), grid=grid).write(out)


def _resumable(out: Path, names: Sequence[str]) -> dict[str, Entry]:
    """Files of ``names`` in ``out`` whose SHA-256 matches the folder's manifest/journal;
    everything else a killed run left there (other files, unfinished temporaries) is removed."""
    try:
        manifest = Manifest.read(out) or Manifest()
    except ValueError as err:  # a manifest.json cut short: nothing can be trusted
        log.warning("%s: %s; writing every file again", out, err)
        manifest = Manifest()
    wanted, kept = set(names), {}
    for path in sorted(out.iterdir()):
        entry = manifest.files.get(path.name)
        if path.name in wanted and entry is not None and sha256_file(path) == entry.sha256:
            kept[path.name] = entry
        elif path.name not in (MANIFEST_NAME, JOURNAL_NAME) and path.is_file():
            path.unlink()  # unlisted, changed, or a temporary of a killed write
    manifest = Manifest(files=kept)
    manifest.write(out)  # the journal now lists only what is kept
    log.info("%s: resuming, %d of %d files kept (SHA-256 verified)", out, len(kept), len(names))
    return kept
