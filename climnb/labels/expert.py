"""Expert labels in the ClimateNet layout: reading, consensus, and a synthetic factory.

ClimateNet (Prabhat et al. 2021, GMD 14, 107) ships one NetCDF file per labelled time step and
labeller, named ``data-YYYY-MM-DD-HH-1_N.nc`` (``N``: the labeller). Each file has a time
dimension of length 1, the 16 CAM5 channels and an integer ``LABELS(lat, lon)`` with
0 background, 1 tropical cyclone, 2 atmospheric river.

* :func:`open_expert` opens such files (a folder, a glob or a list) into one Dataset whose
  ``LABELS`` is (time, labeller, lat, lon). The time step and the labeller come from the file
  name. A step that fewer labellers labelled holds :data:`MISSING` (-1) for the others.
* :func:`majority`, :func:`union` and :func:`soft` (the per-class mean) make one consensus of
  the labellers, with missing labellers left out; :func:`consensus` picks one by name.
* :func:`write_expert_folder` writes such a folder from :func:`climnb.synthetic.make_dataset`,
  with labellers that differ from the truth in known ways (:data:`STYLES`), for tests,
  docstrings and notebooks.

Examples
--------
>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> paths = write_expert_folder(folder, n_time=2, labellers=("truth", "dilate"), seed=0)
>>> [p.name for p in paths][:2]
['data-2000-01-01-00-1_0.nc', 'data-2000-01-01-00-1_1.nc']
>>> ds = open_expert(folder)
>>> ds.LABELS.dims, ds.sizes["labeller"]
(('time', 'labeller', 'lat', 'lon'), 2)
>>> majority(ds.LABELS).dims
('time', 'lat', 'lon')
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy import ndimage

from climnb.atomic import atomic_path
from climnb.channels import CHANNEL_NAMES, CLASS_NAMES
from climnb.labels.components import label_components
from climnb.labels.schema import CONSENSUS
from climnb.synthetic import make_dataset

__all__ = [
    "CONSENSUS",
    "MISSING",
    "STYLES",
    "consensus",
    "expert_name",
    "majority",
    "open_expert",
    "parse_name",
    "soft",
    "union",
    "write_expert_folder",
]

#: Value of ``LABELS`` where a labeller did not label a step.
MISSING = -1


_NAME = re.compile(r"data-(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d+)_(\d+)\.nc$")
_N_CLASSES = len(CLASS_NAMES)

PathLike = str | os.PathLike


def parse_name(path: PathLike) -> tuple[pd.Timestamp, int]:
    """The time step and the labeller of a ClimateNet file name ``data-YYYY-MM-DD-HH-1_N.nc``.

    >>> parse_name("x/data-2011-06-01-03-1_2.nc")
    (Timestamp('2011-06-01 03:00:00'), 2)
    """
    m = _NAME.search(Path(path).name)
    if not m:
        raise ValueError(
            f"{path}: not a ClimateNet file name (data-YYYY-MM-DD-HH-1_N.nc, N the labeller)"
        )
    year, month, day, hour, _, labeller = (int(g) for g in m.groups())
    try:
        return pd.Timestamp(year, month, day, hour), labeller
    except ValueError as err:
        raise ValueError(f"{path}: no such date in the file name ({err})") from None


def expert_name(time, labeller: int) -> str:
    """The ClimateNet file name of ``time`` and ``labeller`` (the inverse of :func:`parse_name`).

    >>> expert_name("2011-06-01T03", 2)
    'data-2011-06-01-03-1_2.nc'
    """
    return f"data-{pd.Timestamp(time):%Y-%m-%d-%H}-1_{int(labeller)}.nc"


def _expand(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in map(str, paths):
        if os.path.isdir(p):
            out += sorted(Path(p).glob("data-*.nc"))
        else:
            matches = sorted(Path(m) for m in _glob(p))
            if not matches:
                raise FileNotFoundError(f"no such file: {p}")
            out += matches
    if not out:
        raise FileNotFoundError(f"no ClimateNet files (data-*.nc) in {', '.join(map(str, paths))}")
    return out


def _glob(pattern: str) -> list[str]:
    import glob

    return glob.glob(pattern) if glob.has_magic(pattern) else [pattern] * os.path.exists(pattern)


def _read_one(path: Path, channels: Sequence[str]) -> xr.Dataset:
    """``LABELS`` (lat, lon), checked and loaded, and the ``channels`` (lat, lon) of one file,
    lazily (dask): a full-size step's 16 channels take 57 MB, and a folder holds hundreds."""
    try:
        ds = xr.open_dataset(path, chunks={})
    except Exception as err:  # backends raise many kinds
        raise ValueError(
            f"{path}: cannot be read as NetCDF (truncated, or another format?; "
            f"{type(err).__name__})"
        ) from None
    if "LABELS" not in ds:
        ds.close()
        raise ValueError(f"{path}: has no variable LABELS")
    missing = [c for c in channels if c not in ds]
    if missing:
        ds.close()
        raise ValueError(f"{path}: lacks the channel(s) {', '.join(missing)}")
    out = ds[["LABELS", *channels]]
    out["LABELS"] = out.LABELS.load()
    if not channels:
        ds.close()
    out = out.squeeze([d for d in out.dims if d not in ("lat", "lon") and out.sizes[d] == 1])
    out = out.drop_vars([c for c in out.coords if c not in ("lat", "lon")])
    labels = out.LABELS
    if set(labels.dims) != {"lat", "lon"}:
        raise ValueError(f"{path}: LABELS has dimensions {labels.dims}, expected (lat, lon)")
    values = labels.values
    bad = ~np.isin(values, np.arange(_N_CLASSES))
    if bad.any():
        odd = np.unique(values[bad])[:5].tolist()
        raise ValueError(
            f"{path}: LABELS holds values other than 0, 1, 2 (background, TC, AR): {odd}"
        )
    out["LABELS"] = labels.transpose("lat", "lon").astype(np.int8)
    return out


def _same_grid(a: xr.Dataset, b: xr.Dataset, path_a, path_b) -> None:
    for c in ("lat", "lon"):
        if a.sizes[c] != b.sizes[c] or not np.allclose(a[c].values, b[c].values, atol=1e-6):
            raise ValueError(f"{path_b}: its grid differs from that of {path_a} ({c})")


def open_expert(
    paths: PathLike | Sequence[PathLike], *, channels: bool | Sequence[str] = False
) -> xr.Dataset:
    """Open ClimateNet-layout files into one Dataset with a ``labeller`` dimension.

    Parameters
    ----------
    paths : a folder (its ``data-*.nc``), a glob pattern, a file, or a list of them.
    channels : also read the input channels: True for the 16 CAM5 channels, or a list of
        names. A step's channels are taken from its first labeller's file (the labellers of
        one step share the fields).

    Returns
    -------
    xarray.Dataset
        ``LABELS`` (time, labeller, lat, lon) int8, :data:`MISSING` where a labeller did not
        label a step; ``n_labellers`` (time) how many did; the channels (time, lat, lon); the
        ``labeller`` coordinate holds the ``N`` of the file names; ``file`` (time, labeller)
        the file name ("" where missing).

    Raises
    ------
    FileNotFoundError
        When nothing matches.
    ValueError
        Naming the file: a name not in the layout, a step and labeller given twice, no
        ``LABELS``, values other than 0, 1, 2, or a grid unlike the first file's.
    """
    names = list(CHANNEL_NAMES) if channels is True else list(channels or [])
    files = _expand(paths)
    keys = {}
    for f in files:
        key = parse_name(f)
        if key in keys:
            raise ValueError(f"{f}: step and labeller {key[1]} also in {keys[key]}")
        keys[key] = f
    times = sorted({t for t, _ in keys})
    labellers = sorted({n for _, n in keys})
    first = None
    labels = np.full((len(times), len(labellers), 0, 0), MISSING, np.int8)
    fields, file_names = {}, np.full((len(times), len(labellers)), "", object)
    for (time, n), f in sorted(keys.items()):
        one = _read_one(f, names if time not in fields else [])
        if first is None:
            first = (one, f)
            shape = (len(times), len(labellers), one.sizes["lat"], one.sizes["lon"])
            labels = np.full(shape, MISSING, np.int8)
        _same_grid(first[0], one, first[1], f)
        i, j = times.index(time), labellers.index(n)
        labels[i, j] = one.LABELS.values
        file_names[i, j] = f.name
        fields.setdefault(time, one.drop_vars("LABELS"))
    return _assemble(labels, times, labellers, first[0], fields, file_names, names)


def _assemble(labels, times, labellers, grid, fields, file_names, names) -> xr.Dataset:
    coords = {
        "time": ("time", pd.DatetimeIndex(times)),
        "labeller": ("labeller", np.asarray(labellers, np.int64)),
        "lat": grid.lat,
        "lon": grid.lon,
    }
    ds = xr.Dataset(
        {
            "LABELS": (
                ("time", "labeller", "lat", "lon"),
                labels,
                {
                    "long_name": "expert class of each pixel",
                    "flag_values": np.arange(_N_CLASSES, dtype=np.int8),
                    "flag_meanings": " ".join(CLASS_NAMES),
                    "missing_value": np.int8(MISSING),
                },
            ),
            "n_labellers": (("time",), (labels[:, :, 0, 0] != MISSING).sum(axis=1)),
            "file": (("time", "labeller"), file_names.astype(str)),
        },
        coords=coords,
        attrs={"source": "expert labels, ClimateNet layout (data-YYYY-MM-DD-HH-1_N.nc)"},
    )
    for name in names:
        ds[name] = xr.concat([fields[t][name] for t in times], dim="time").assign_coords(
            time=coords["time"][1]
        )
    return ds


# ---------------------------------------------------------------------------------------------
# Consensus of the labellers
# ---------------------------------------------------------------------------------------------


def _votes(labels: xr.DataArray) -> xr.DataArray:
    """Votes per class (class, time, lat, lon): how many labellers gave each pixel that class."""
    per_class = [(labels == c).sum("labeller") for c in range(_N_CLASSES)]
    return xr.concat(per_class, dim=xr.DataArray(np.arange(_N_CLASSES), dims="class_id"))


def majority(labels: xr.DataArray) -> xr.DataArray:
    """The class most labellers gave each pixel; a tie goes to the lower class id.

    Background (0) therefore wins every tie it is part of: two labellers who disagree on a
    pixel leave it background, unless one says storm and the other river (then storm, as a
    storm wins over a river in the truth too). Missing labellers do not vote.

    >>> da = xr.DataArray([[[[1, 1]], [[1, 0]], [[0, 0]]]], dims=("time", "labeller", "lat", "lon"))
    >>> majority(da).values.tolist()
    [[[1, 0]]]
    """
    out = _votes(labels).argmax("class_id").astype(np.uint8)
    return out.rename("LABELS").assign_attrs(consensus="majority")


def union(labels: xr.DataArray) -> xr.DataArray:
    """A pixel is a storm if any labeller says so, else a river if any says so, else 0.

    >>> da = xr.DataArray([[[[2, 0]], [[1, 0]]]], dims=("time", "labeller", "lat", "lon"))
    >>> union(da).values.tolist()
    [[[1, 0]]]
    """
    tc, ar = (labels == 1).any("labeller"), (labels == 2).any("labeller")
    out = xr.where(tc, 1, xr.where(ar, 2, 0)).astype(np.uint8)
    return out.rename("LABELS").assign_attrs(consensus="union")


def soft(labels: xr.DataArray) -> xr.DataArray:
    """Per-class mean of the labellers: the share of them that gave each pixel each class.

    Returns float32 (time, class_id, lat, lon) that sums to 1 over ``class_id`` (a soft target).

    >>> da = xr.DataArray([[[[1]], [[0]], [[-1]]]], dims=("time", "labeller", "lat", "lon"))
    >>> soft(da).values.ravel().tolist()
    [0.5, 0.5, 0.0]
    """
    votes = _votes(labels)
    present = (labels != MISSING).sum("labeller")
    share = (votes / present.where(present > 0)).fillna(0.0).astype(np.float32)
    share = share.transpose("time", "class_id", ...).assign_coords(
        class_name=("class_id", list(CLASS_NAMES))
    )
    return share.rename("LABELS").assign_attrs(consensus="mean")


def consensus(labels: xr.DataArray, how: str = "majority") -> xr.DataArray:
    """One of :data:`CONSENSUS`: ``majority``, ``union`` or ``mean`` (:func:`soft`)."""
    rules = {"majority": majority, "union": union, "mean": soft}
    if how not in rules:
        raise ValueError(f"consensus must be one of {', '.join(CONSENSUS)}, got {how!r}")
    return rules[how](labels)


# ---------------------------------------------------------------------------------------------
# A synthetic ClimateNet folder
# ---------------------------------------------------------------------------------------------


def _dilate(truth: np.ndarray, pixels: int = 1) -> np.ndarray:
    """Grow every class by ``pixels`` (periodic in longitude); storms win over rivers."""
    out = truth.copy()
    pad = pixels
    for c in (2, 1):
        mask = np.pad(truth == c, ((0, 0), (pad, pad)), mode="wrap")
        grown = ndimage.binary_dilation(mask, iterations=pixels)[:, pad:-pad]
        out[grown] = c
    return out


def _miss_small(truth: np.ndarray) -> np.ndarray:
    """Leave out the storms smaller than the mean storm of the step (never the largest)."""
    out = truth.copy()
    comps, n = label_components(truth == 1)
    if n:
        sizes = np.bincount(comps.ravel(), minlength=n + 1)[1:]
        small = np.flatnonzero(sizes < sizes.mean()) + 1
        out[np.isin(comps, small)] = 0
    return out


def _rivers_only(truth: np.ndarray) -> np.ndarray:
    """Label the rivers but no storms (a labeller who skips the storm class)."""
    return np.where(truth == 1, 0, truth).astype(truth.dtype)


#: How each synthetic labeller departs from the truth, by name.
STYLES = {
    "truth": lambda t: t.copy(),
    "dilate": _dilate,
    "miss_small": _miss_small,
    "rivers_only": _rivers_only,
}


def write_expert_folder(
    folder: PathLike,
    *,
    labellers: Sequence[str] = ("truth", "dilate", "miss_small"),
    skip: Sequence[tuple[int, int]] = (),
    **kwargs,
) -> list[Path]:
    """Write a ClimateNet-layout folder of synthetic steps labelled by several labellers.

    Parameters
    ----------
    folder : where to write ``data-YYYY-MM-DD-HH-1_N.nc`` (created if missing).
    labellers : the style (:data:`STYLES`) of labeller ``N = 0, 1, ...``: ``truth`` copies the
        generator's truth, ``dilate`` grows both classes by one pixel (storms over rivers),
        ``miss_small`` leaves out the storms smaller than the step's mean storm,
        ``rivers_only`` labels no storms. With the default three, the majority is the truth
        and the union is the ``dilate`` labeller's mask.
    skip : ``(time index, labeller)`` pairs not written, for steps fewer labellers labelled.
    kwargs : passed to :func:`climnb.synthetic.make_dataset` (``n_time``, ``seed``, sizes...).

    Returns
    -------
    list of Path
        The files written, sorted by time then labeller. The fields and the truth are those of
        ``make_dataset(**kwargs)``.
    """
    unknown = [s for s in labellers if s not in STYLES]
    if unknown:
        raise ValueError(f"unknown labeller style(s) {unknown}; known: {', '.join(STYLES)}")
    ds, _ = make_dataset(**kwargs)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    skip = {(int(t), int(n)) for t, n in skip}
    paths = []
    for t in range(ds.sizes["time"]):
        step = ds.isel(time=[t])
        truth = step.truth.values[0]
        for n, style in enumerate(labellers):
            if (t, n) in skip:
                continue
            path = folder / expert_name(step.time.values[0], n)
            one = step[list(CHANNEL_NAMES)]
            one["LABELS"] = (("lat", "lon"), STYLES[style](truth).astype(np.int32))
            one.attrs = {"labeller": n, "style": style, "source": "climnb.labels.expert"}
            with atomic_path(path) as tmp:
                one.to_netcdf(tmp)
            paths.append(path)
    return paths
