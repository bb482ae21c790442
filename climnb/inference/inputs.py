"""What a trained network reads: a Dataset, NetCDF files, Zarr stores or GRIB files as they
come, or DeepCAM sample files (whole sets, split folders or files), with the bundle's channels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import dask
import h5py
import numpy as np
import xarray as xr

from climnb.bundle import BundleError
from climnb.io.files import open_fields
from climnb.io.manifest import sha256_file
from climnb.io.netcdf import normalize
from climnb.io.samples import SampleError, inspect_sample, read_sample
from climnb.io.sampleset import SAMPLE_GLOB, SPLITS, SampleSet

__all__ = ["describe", "open_input", "open_source", "sample_files", "select_channels"]

PathLike = str | os.PathLike


def open_input(
    source: xr.Dataset | PathLike | Sequence[PathLike], channels: Sequence[str]
) -> xr.Dataset:
    """The input as a lazy Dataset on climnb's canonical grid with ``channels`` present.

    ``source`` is a Dataset, NetCDF file(s) or glob(s), Zarr store(s), DeepCAM sample files
    (``*.h5``) or a directory of them. Raises :class:`BundleError` naming the input and the
    channels it lacks.
    """
    return select_channels(open_source(source), channels, source)


def open_source(source: xr.Dataset | PathLike | Sequence[PathLike]) -> xr.Dataset:
    """The input as it comes (lazy): every variable, the input's own grid."""
    if isinstance(source, xr.Dataset):
        return source
    files = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if all(is_samples(f) for f in files):
        return open_samples(files)

    return open_fields(files)


def select_channels(ds: xr.Dataset, channels: Sequence[str], source) -> xr.Dataset:
    """``ds``'s ``channels`` on the canonical grid, or :class:`BundleError` naming those it
    lacks."""
    missing = [c for c in channels if c not in ds.data_vars]
    if missing:
        raise BundleError(
            f"{describe(source)}: the input lacks channel(s) {', '.join(missing)} that the "
            "model was trained on; "
            f"the model needs {', '.join(channels)}; the input has "
            f"{', '.join(map(str, ds.data_vars)) or 'no variables'}"
        )

    return normalize(ds[list(channels)], required=channels)


def is_samples(path: PathLike) -> bool:
    """A DeepCAM sample file, or a folder that :class:`climnb.io.sampleset.SampleSet` opens."""
    p = Path(path)
    if p.suffix == ".h5":
        return True
    if not p.is_dir() or p.suffix == ".zarr":
        return False
    return any(p.glob(SAMPLE_GLOB)) or any((p / s).is_dir() for s in SPLITS)


def sample_files(paths: Sequence[PathLike]) -> list[tuple[Path, str | None]]:
    """(file, SHA-256 its manifest records) of every sample file to read, in time order within
    each input; ``None`` where the folder has no manifest (a foreign download).

    Folders are read through :class:`climnb.io.sampleset.SampleSet` (a split set: all its
    splits; a flat folder: its files). A file its folder's manifest does not list, or whose
    size is not the manifest's, is refused here, before any work; the content is hashed
    against the manifest when the file is read (:func:`_read_data`).
    """
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            ss = SampleSet.open(p)
            ss.check_complete()  # a manifest is a promise: every file it lists is read
            parts = [(ss.manifest(s), ss.files(s)) for s in ss.splits or (None,)]
        else:
            parts = [(SampleSet(p.parent).manifest(), [p])]
        mine = []
        for m, files in parts:
            for f in files:
                entry = m.files.get(f.name) if m is not None else None
                if m is not None and entry is None:
                    raise SampleError(f"{f}: not listed in the manifest of {f.parent}")
                if entry is not None and f.stat().st_size != entry.bytes:
                    raise SampleError(
                        f"{f}: {f.stat().st_size} bytes, its manifest says {entry.bytes}: "
                        "truncated or changed since it was written"
                    )
                mine.append((f, entry.sha256 if entry is not None else None))
        if not mine:
            raise SampleError(f"{p}: no sample files in it or its split folders")
        out += sorted(mine, key=lambda fe: fe[0].name) if p.is_dir() else mine
    return out


def open_samples(paths: Sequence[PathLike]) -> xr.Dataset:
    """DeepCAM sample files as a lazy (dask) Dataset, one time step per file."""
    import dask.array as dsa

    files = sample_files(paths)
    infos = [inspect_sample(f) for f, _ in files]
    first = _odd_one_out(infos)
    h, w = first.shape
    read = dask.delayed(_read_data, pure=True)
    data = dsa.stack(
        [
            dsa.from_delayed(read(info.path, sha), (h, w, len(first.channels)), np.float32)
            for info, (_, sha) in zip(infos, files, strict=True)
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


def _odd_one_out(infos: Sequence) -> object:
    """A file whose grid or channels differ from those of most files is refused, naming it
    (not the good files: the first file in name order may be the stray one); returns a
    file of the majority."""
    from collections import Counter

    for what in ("shape", "channels"):
        counts = Counter(getattr(i, what) for i in infos)
        usual, n = counts.most_common(1)[0]
        odd = next((i for i in infos if getattr(i, what) != usual), None)
        if odd is not None:
            word = "grid" if what == "shape" else "channels"
            raise BundleError(
                f"{odd.path}: {word} {getattr(odd, what)}, while {n} of the {len(infos)} sample "
                f"files have {usual}: a file of another set among them?"
            )
    return infos[0]


def _read_data(path: Path, sha256: str | None = None) -> np.ndarray:
    """The channels of a sample file; first its SHA-256 against the manifest's, if known."""
    if sha256 is not None:
        got = sha256_file(path)
        if got != sha256:
            raise SampleError(
                f"{path}: content changed since it was written (SHA-256 {got[:12]}..., "
                f"manifest {sha256[:12]}...): corrupt or modified file"
            )
    return read_sample(path)[0]


def describe(source) -> str:
    if isinstance(source, xr.Dataset):
        return "the Dataset"
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    files = list(map(str, source))
    if len(files) <= 3:
        return ", ".join(files)
    return f"{files[0]} ... {files[-1]} ({len(files)} files)"
