"""Expert labels in the ClimateNet layout: reading them, and the samples they make.

ClimateNet (Prabhat et al. 2021, GMD 14, 107) ships one NetCDF file per labelled time step and
labeller, named ``data-YYYY-MM-DD-HH-1_N.nc`` (``N``: the labeller). Each file has a time
dimension of length 1, the 16 CAM5 channels and an integer ``LABELS(lat, lon)`` with
0 background, 1 tropical cyclone, 2 atmospheric river.

* :func:`open_expert` opens such files (a folder, a glob or a list) into one Dataset whose
  ``LABELS`` is (time, labeller, lat, lon). The time step and the labeller come from the file
  name. A step that fewer labellers labelled holds :data:`MISSING` (-1) for the others.
* :func:`majority`, :func:`union` and :func:`soft` (the per-class mean) make one consensus of
  the labellers, with missing labellers left out; :func:`consensus` picks one by name
  (:mod:`climnb.labels.consensus`; the file names are :mod:`climnb.labels.layout`'s).
* :func:`expert_samples` turns the labellers of each step into the samples of a sample set,
  as :data:`LABELLERS` says: one per labeller (``each``), or one consensus (``majority``,
  ``union``, or ``mean``: a soft target); :func:`write_expert_set` writes them as a split
  sample set (what ``climnb samples`` does with such a folder).
* :func:`write_expert_folder` (:mod:`climnb.labels.synthetic_experts`) writes such a folder
  from :func:`climnb.data.synthetic.make_dataset`, with labellers that differ from the truth
  in known ways (:data:`STYLES`), for tests, docstrings and notebooks.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.channels import CHANNEL_NAMES, CLASS_NAMES
from climnb.io.samples import SampleError, sample_name
from climnb.io.sampleset import SampleSet, write_sample_set
from climnb.labels.consensus import consensus, majority, soft, union
from climnb.labels.layout import MISSING, NAME_PATTERN, expert_name, parse_name
from climnb.labels.schema import CONSENSUS
from climnb.labels.synthetic_experts import STYLES, write_expert_folder

__all__ = [
    "CONSENSUS",
    "DEFAULT_LABELLERS",
    "LABELLERS",
    "MISSING",
    "STYLES",
    "ExpertSamples",
    "consensus",
    "expert_name",
    "expert_samples",
    "in_layout",
    "majority",
    "open_expert",
    "parse_name",
    "soft",
    "step_files",
    "union",
    "write_expert_folder",
    "write_expert_set",
]

_N_CLASSES = len(CLASS_NAMES)

PathLike = str | os.PathLike


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


def _read_one(path: Path, channels: Sequence[str], variable: str = "LABELS") -> xr.Dataset:
    """``LABELS`` (lat, lon), checked and loaded, and the ``channels`` (lat, lon) of one file,
    lazily (dask): a full-size step's 16 channels take 57 MB, and a folder holds hundreds.
    Without ``channels`` (a step's other labellers) no dask: a third of the time to open."""
    try:
        ds = xr.open_dataset(path, chunks={} if channels else None)
    except Exception as err:  # backends raise many kinds
        raise ValueError(
            f"{path}: cannot be read as NetCDF (truncated, or another format?; "
            f"{type(err).__name__})"
        ) from None
    if variable not in ds:
        ds.close()
        raise ValueError(f"{path}: has no variable {variable}")
    missing = [c for c in channels if c not in ds]
    if missing:
        ds.close()
        raise ValueError(f"{path}: lacks the channel(s) {', '.join(missing)}")
    out = ds[[variable, *channels]]
    if variable != "LABELS":
        out = out.rename({variable: "LABELS"})
    out["LABELS"] = out.LABELS.load()
    if not channels:
        ds.close()
    _check_own_time(out, path)
    out = out.squeeze([d for d in out.dims if d not in ("lat", "lon") and out.sizes[d] == 1])
    out = out.drop_vars([c for c in out.coords if c not in ("lat", "lon")])
    labels = out.LABELS
    if set(labels.dims) != {"lat", "lon"}:
        raise ValueError(f"{path}: {variable} has dimensions {labels.dims}, expected (lat, lon)")
    values = labels.values
    bad = ~np.isin(values, np.arange(_N_CLASSES))
    if bad.any():
        odd = np.unique(values[bad])[:5].tolist()
        raise ValueError(
            f"{path}: {variable} holds values other than 0, 1, 2 (background, TC, AR): {odd}"
        )
    out["LABELS"] = labels.transpose("lat", "lon").astype(np.int8)
    return out


def _check_own_time(ds: xr.Dataset, path: Path) -> None:
    """Refuse a file whose own time coordinate is not the step its name says (a file renamed
    or copied under another step's name would be scored against that step)."""
    if "time" not in ds.coords or ds["time"].size != 1:
        return
    own = ds["time"].values.ravel()[0]
    if isinstance(own, np.datetime64):
        own = pd.Timestamp(own)
    if not hasattr(own, "year"):  # numbers without units: nothing to compare
        return
    named, _ = parse_name(path)
    if (own.year, own.month, own.day, own.hour) != (
        named.year,
        named.month,
        named.day,
        named.hour,
    ):
        raise ValueError(
            f"{path}: its time coordinate is {own}, but its name says {named:%Y-%m-%d %H}:00; "
            "name the file after its own time (data-YYYY-MM-DD-HH-1_N.nc) or fix its time"
        )


def _same_grid(a: xr.Dataset, b: xr.Dataset, path_a, path_b) -> None:
    for c in ("lat", "lon"):
        if a.sizes[c] != b.sizes[c] or not np.allclose(a[c].values, b[c].values, atol=1e-6):
            raise ValueError(f"{path_b}: its grid differs from that of {path_a} ({c})")


def open_expert(
    paths: PathLike | Sequence[PathLike],
    *,
    channels: bool | Sequence[str] = False,
    variable: str = "LABELS",
) -> xr.Dataset:
    """Open ClimateNet-layout files into one Dataset with a ``labeller`` dimension.

    Parameters
    ----------
    paths : a folder (its ``data-*.nc``), a glob pattern, a file, or a list of them.
    channels : also read the input channels: True for the 16 CAM5 channels, or a list of
        names. A step's channels are taken from its first labeller's file (the labellers of
        one step share the fields).
    variable : the files' label variable (ClimateNet: ``LABELS``); read as ``LABELS``.

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
        one = _read_one(f, names if time not in fields else [], variable)
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
    import dask.array

    for name in names:  # the steps' lazy fields stacked (xr.concat of each: 10x the time)
        first = fields[times[0]][name]
        steps = [fields[t][name].transpose(*first.dims).data for t in times]
        ds[name] = xr.DataArray(
            dask.array.stack(steps), dims=("time", *first.dims), attrs=first.attrs
        ).assign_coords(time=coords["time"][1])
    return ds


# ---------------------------------------------------------------------------------------------
# Samples for training
# ---------------------------------------------------------------------------------------------

#: What the labellers of one step become in a sample set (``climnb samples --labellers``).
LABELLERS = ("each", "majority", "union", "mean")

#: The default: one target per step. ``each`` repeats a step's 16 fields once per labeller
#: (copies that add no new input, and weigh steps by how many labelled them); ``union`` makes
#: every event as large as its largest drawing; ``mean`` needs the soft-target training and its
#: argmax is the majority anyway. The majority keeps what most labellers agree on.
DEFAULT_LABELLERS = "majority"


@dataclass(frozen=True)
class ExpertSamples:
    """The samples that the labellers of each step become (:func:`expert_samples`).

    Attributes
    ----------
    ds : the channels (sample, as ``time``; lat, lon); with ``each``, a step's fields repeat
        once per labeller, and ``time`` repeats with them.
    labels : class ids (time, lat, lon) of each sample: the labeller's mask, or the consensus
        (for ``mean``, its argmax: the majority).
    soft : for ``mean``, the per-class shares (time, class_id, lat, lon); else ``None``.
    names : the sample file names, unique (``data-...-1_N.h5`` per labeller with ``each``).
    expert : per sample, for the manifest: ``{"labeller": N}`` or ``{"labellers": [...],
        "consensus": rule}``.
    how : the rule (one of :data:`LABELLERS`).
    """

    ds: xr.Dataset
    labels: xr.DataArray
    soft: xr.DataArray | None
    names: list[str]
    expert: list[dict]
    how: str


def expert_samples(
    expert: xr.Dataset, how: str = DEFAULT_LABELLERS, *, run: int = 1
) -> ExpertSamples:
    """The samples of :func:`open_expert`'s Dataset (opened with ``channels``), by rule ``how``.

    ``each``: one sample per labeller of each step (missing ones left out); ``majority`` and
    ``union``: one sample per step, the consensus of the labellers who labelled it; ``mean``:
    one sample per step whose target is the share of labellers giving each class, with the
    majority as its class ids. Consensus masks are computed a step at a time (lazily).

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = write_expert_folder(folder, n_time=2, labellers=("truth", "dilate"), seed=0)
    >>> samples = expert_samples(open_expert(folder, channels=True), "each")
    >>> samples.names[:2], samples.expert[:2]
    (['data-2000-01-01-00-1_0.h5', 'data-2000-01-01-00-1_1.h5'], [{'labeller': 0}, {'labeller': 1}])
    >>> expert_samples(open_expert(folder, channels=True), "mean").soft.dims
    ('time', 'class_id', 'lat', 'lon')
    """
    if how not in LABELLERS:
        raise ValueError(f"labellers must be one of {', '.join(LABELLERS)}, got {how!r}")
    fields = expert[[v for v in expert.data_vars if "labeller" not in expert[v].dims]]
    fields = fields.drop_vars("n_labellers", errors="ignore")
    if not any(c in fields for c in CHANNEL_NAMES):
        raise ValueError("the expert data set has no channels: open it with channels=True")
    labels = expert.LABELS
    present = labels.isel(lat=0, lon=0).values != MISSING
    if how == "each":
        steps, which = np.nonzero(present)
        ds = fields.isel(time=steps)
        lab = labels.values[steps, which]
        ns = expert.labeller.values[which]
        out = xr.DataArray(lab.astype(np.uint8), dims=("time", "lat", "lon"), coords=ds.coords)
        names = [sample_name(t, run, labeller=n) for t, n in zip(ds.time.values, ns, strict=True)]
        records = [{"labeller": int(n)} for n in ns]
        return ExpertSamples(ds, out.rename("labels"), None, names, records, how)
    lazy = labels.chunk({"time": 1, "labeller": -1})
    target = consensus(lazy, how)
    shares = target if how == "mean" else None
    classes = majority(lazy) if how == "mean" else target
    classes = classes.assign_coords(time=fields.time).rename("labels")
    names = [sample_name(t, run) for t in fields.time.values]
    ids = expert.labeller.values
    records = [{"labellers": [int(n) for n in ids[row]], "consensus": how} for row in present]
    return ExpertSamples(fields, classes, shares, names, records, how)


def in_layout(files: Sequence[PathLike], *, option: str = "--input") -> bool:
    """Whether ``files`` are ClimateNet files (``data-YYYY-MM-DD-HH-1_N.nc``): all (True) or
    none (False); a mix is refused naming one of each."""
    ours = [NAME_PATTERN.search(Path(f).name) is not None for f in files]
    if all(ours):
        return bool(ours)
    if any(ours):
        odd, one = files[ours.index(False)], files[ours.index(True)]
        raise ValueError(
            f"{odd}: not in the ClimateNet layout (data-YYYY-MM-DD-HH-1_N.nc) while {one} is; "
            f"give {option} one kind of file"
        )
    return False


def step_files(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    """One file per labelled time step (its first labeller's): the fields of a ClimateNet
    folder without repeated steps, for readers that take a time series (labelling,
    prediction)."""
    first: dict = {}
    for f in sorted(_expand(paths), key=parse_name):  # by time, then labeller
        first.setdefault(parse_name(f)[0], f)
    return [first[t] for t in sorted(first)]


def write_expert_set(
    paths: PathLike | Sequence[PathLike],
    out: PathLike,
    *,
    labellers: str = DEFAULT_LABELLERS,
    variable: str = "LABELS",
    run: int = 1,
    channels: Sequence[str] = CHANNEL_NAMES,
    progress: Callable[[int], None] | None = None,
    **split,
) -> SampleSet:
    """Write ClimateNet-layout files as a split sample set (``climnb samples`` on them).

    Parameters
    ----------
    paths : a folder, glob(s) or files in the layout (:func:`open_expert`).
    out : the sample set folder (:func:`climnb.io.sampleset.write_sample_set`).
    labellers : one of :data:`LABELLERS` (:func:`expert_samples`); default
        :data:`DEFAULT_LABELLERS`.
    variable : the label variable of the files.
    split : ``method``, ``gap_hours``, ``seed``, ``fractions``, ``overwrite`` of
        :func:`~climnb.io.sampleset.write_sample_set`. The split works on the time steps:
        every labeller of a step lands in the same set, and the gap is between steps.

    The manifests record each sample's ``labeller`` (``each``) or ``labellers`` and
    ``consensus``.
    """
    if labellers not in LABELLERS:
        raise ValueError(f"--labellers must be one of {', '.join(LABELLERS)}, got {labellers!r}")
    expert = open_expert(paths, channels=list(channels), variable=variable)
    samples = expert_samples(expert, labellers, run=run)
    try:
        return write_sample_set(
            samples.ds,
            samples.labels,
            out,
            run=run,
            channels=channels,
            progress=progress,
            names=samples.names,
            soft=samples.soft,
            expert=samples.expert,
            **split,
        )
    except SampleError:
        raise
    except ValueError as err:  # a split too small for its gap, ...: name the inputs
        raise SampleError(f"{_where(paths)}: {err}") from None


def _where(paths) -> str:
    return str(paths) if isinstance(paths, (str, os.PathLike)) else ", ".join(map(str, paths))
