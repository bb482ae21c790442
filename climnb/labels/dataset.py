"""Label a whole data set: one dask task per time chunk, a lazy label array and an event table.

What is labelled depends on what the input holds (:func:`plan_labels`): rivers from IVT or its
components (the transport method), from TMQ with 850 hPa winds (the IVT proxy) or from TMQ
alone (the paper's final data set); storms only when the vorticity, pressure and warm-core
fields exist. The result is on the input's own grid and coordinates unless asked otherwise.

Examples
--------
>>> import dask
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> labels, events = label_dataset(ds)
>>> labels.dims, labels.dtype.name, labels.chunks is not None
(('time', 'lat', 'lon'), 'uint8', True)
>>> labels, events = compute(labels, events)  # one pass computes both
>>> sorted(events.class_name.unique())
['atmospheric_river', 'tropical_cyclone']
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Mapping

import dask
import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr
from dask.delayed import Delayed

from climnb.io.atomic import atomic_path
from climnb.io.channels import CLASS_NAMES
from climnb.io.netcdf import FILL_LIMIT as _FILL_LIMIT
from climnb.io.netcdf import input_grid, normalize
from climnb.labels.config import LabelConfig
from climnb.labels.land import land_fraction_values
from climnb.labels.plan import CLASS_CHOICES, Plan, plan_labels, required_variables
from climnb.labels.schema import EVENT_COLUMNS, conform
from climnb.labels.sphere import is_periodic
from climnb.labels.step import fill_missing, label_step
from climnb.labels.stitch import stitch_centres, track_rules
from climnb.labels.tc import find_centres, max_wind_near
from climnb.labels.workers import run_task, worker_processes
from climnb.versions import written_by

__all__ = [
    "StepError",
    "Plan",
    "plan_labels",
    "CLASS_CHOICES",
    "required_variables",
    "label_step",
    "label_dataset",
    "compute",
    "worker_processes",
    "StepInputs",
    "save_labelled",
    "EVENT_COLUMNS",
]

log = logging.getLogger(__name__)


class StepInputs:
    """The dask graph that reads (and puts on the canonical grid) one time chunk of the input
    variables, carried inside that chunk's label task and run there (:meth:`read`).

    The fields are then read where they are labelled, in the worker thread, process or
    dask.distributed worker that runs the task, and only the labels and the event table leave
    it: with processes, the fields never travel through the scheduler, and each process reads
    outside the other processes' HDF5 lock. For a file-backed input the graph holds the file's
    lazy array wrappers (path, variable, index), not the data; pickled it is a few kB.

    That needs input chunks of the label tasks' steps: a full-size field opens so
    (:func:`climnb.io.netcdf.open_dataset`, one step a chunk). A small grid opens tens of steps
    a chunk, which the tasks of those steps share: its steps are read once in this process and
    passed in (:func:`_step_inputs` gives None), a few tens of kB each.
    """

    def __init__(self, graph: dict, keys: list):
        self.graph, self.keys = graph, keys

    def read(self) -> list[np.ndarray]:
        """The arrays, one per key, computed here (dask's single-threaded executor).

        The graph's lazy file arrays are kept (:data:`_OPENED`, by their dask key: file path,
        modification time, variable): an unpickled copy would close its file when the task
        ends and the next step would open it again (about 17 ms a file at full size).
        """
        from dask._task_spec import DataNode

        graph = dict(self.graph)
        with _OPENED_LOCK:
            for key, node in graph.items():
                value = node.value if isinstance(node, DataNode) else None
                if not hasattr(value, "__array__") or isinstance(value, np.ndarray):
                    continue  # tasks, and data held in memory
                kept = _OPENED.pop(key, None)
                _OPENED[key] = graph[key] = node if kept is None else kept
                while len(_OPENED) > _OPENED_MAX:
                    _OPENED.pop(next(iter(_OPENED)))
        return [np.asarray(a) for a in dask.core.get(graph, self.keys)]


#: Lazy file arrays of recent :class:`StepInputs` in this process, oldest first.
_OPENED: dict = {}
_OPENED_MAX = 64
_OPENED_LOCK = threading.Lock()


def _step_inputs(arrays: list[da.Array]) -> list[StepInputs] | None:
    """One :class:`StepInputs` per time chunk of ``arrays`` (one per variable, chunked along
    time only), or None when the chunks share work: a task (such as reading a file's whole
    variable and splitting it) or a literal array of over 1 MiB that more than one chunk's
    graph needs, which each chunk would then redo or carry. One pass over the graph."""
    try:  # dask >= 2024.12's task spec; on an older dask the chunks are passed in as before
        from dask._task_spec import Alias  # noqa: F401  (what _is_work needs)
        from dask.core import convert_legacy_graph, get_deps
    except ImportError:
        log.debug("this dask has no task spec: label inputs are read outside the tasks")
        return None

    graph = {}
    for a in arrays:
        graph.update(a.__dask_graph__())
    graph = convert_legacy_graph(graph)
    deps, _ = get_deps(graph)
    owner, parts = {}, []
    for i, keys in enumerate(zip(*(_chunk_keys(a) for a in arrays), strict=True)):
        seen, stack = set(), list(keys)
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            stack.extend(deps[key])
            if owner.setdefault(key, i) != i and _is_work(graph[key]):
                log.debug("time chunks share %s: their inputs are read outside the tasks", key)
                return None
        parts.append(StepInputs({k: graph[k] for k in seen}, list(keys)))
    return parts


def _chunk_keys(a: da.Array) -> list:
    """The key of each time chunk of ``a`` (time, lat, lon), lat and lon in one chunk each."""
    return [k[0][0] for k in a.__dask_keys__()]


def _is_work(node) -> bool:
    """A task that computes something, or a literal array of over 1 MiB."""
    from dask._task_spec import Alias, DataNode, Task

    if isinstance(node, DataNode):
        node = node.value
    if isinstance(node, np.ndarray):
        return node.nbytes > 2**20
    return isinstance(node, Task) and not isinstance(node, Alias)


def _label_block(*args):
    """A label task: labelled here, or in a worker process inside :func:`worker_processes`."""
    return run_task(_label_here, *args)


class StepError(ValueError):
    """A time step the labeller cannot label (a field with no valid value, ...), named by its
    time; ``climnb label`` adds the input files."""


def _when(time) -> str:
    if isinstance(time, np.datetime64):
        return str(np.datetime_as_string(time, unit="m"))
    return str(time)


def _label_here(names, lat, lon, config, classes, times, threshold, tracked, *blocks):
    """Label a block of time steps: returns (labels (t, lat, lon), events). ``blocks``: one
    array per variable, or one :class:`StepInputs` that reads them; ``tracked``: the storm
    centres to keep at each time as the first pass found them (:func:`_tracked`), or None."""
    if len(blocks) == 1 and isinstance(blocks[0], StepInputs):
        blocks = blocks[0].read()
    out = np.zeros((len(times), lat.size, lon.size), np.uint8)
    tables = []
    for k, time in enumerate(times):
        fields = {n: b[k] for n, b in zip(names, blocks, strict=True)}
        kept = None if tracked is None else tracked.get(_time_key(time), {})
        try:
            out[k], events = label_step(
                fields,
                lat,
                lon,
                config,
                classes=classes,
                ivt_threshold=threshold,
                tracked=kept,
            )
        except ValueError as err:  # what the step holds wrongly: name the step
            raise StepError(f"time {_when(time)}: {err}") from None
        tables.append(events.assign(time=time))
    events = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    return out, events.reindex(columns=list(EVENT_COLUMNS))


def _centres_block(*args):
    """A centre-finding task: here, or in a worker process inside :func:`worker_processes`."""
    return run_task(_centres_here, *args)


def _centres_here(names, lat, lon, config, times, *blocks) -> pd.DataFrame:
    """The storm centres of a block of time steps (``time, row, col, lat, lon``, and the
    ``vorticity, min_psl`` the search gives), in the order :func:`label_step` would find
    them in each, before any track is known."""
    if len(blocks) == 1 and isinstance(blocks[0], StepInputs):
        blocks = blocks[0].read()
    periodic, rows = is_periodic(lon), []
    land = land_fraction_values(lat, lon)
    for k, time in enumerate(times):
        try:
            fields, _ = fill_missing({n: b[k] for n, b in zip(names, blocks, strict=True)})
        except ValueError as err:
            raise StepError(f"time {_when(time)}: {err}") from None
        for r, c, zeta, psl in find_centres(fields, lat, lon, config.tc, periodic=periodic):
            wind = max_wind_near(
                fields, lat, lon, r, c, config.tc.wind_radius_deg, periodic=periodic
            )
            rows.append((time, r, c, lat[r], lon[c], land[r, c], wind, zeta, psl))
    columns = ["time", "row", "col", "lat", "lon", "land_fraction", "wind", "vorticity", "min_psl"]
    return pd.DataFrame(rows, columns=columns)


def _tracked(config, *tables) -> dict:
    """The centres on a cyclone's track, by time, in the order they were found, with their
    track's number and what the search gave: ``{time: {(row, col): (track, vorticity,
    min_psl), ...}}`` (tracks numbered from 0 in order of formation)."""
    centres = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    if centres.empty:
        return {}
    paths = stitch_centres(centres, config.tc)
    kept = paths[paths.keep]
    log.info(
        "%d storm centres on %d paths; %d centres on %d cyclone tracks kept",
        len(paths),
        paths.track_id.nunique(),
        len(kept),
        kept.track_id.nunique(),
    )
    number = {t: k for k, t in enumerate(dict.fromkeys(kept.track_id))}
    out: dict = {}
    found = kept[["time", "row", "col", "track_id", "vorticity", "min_psl"]]
    for time, r, c, t, zeta, psl in found.itertuples(index=False):  # each time's in their order
        out.setdefault(_time_key(time), {})[int(r), int(c)] = (number[t], float(zeta), float(psl))
    return out


def _time_key(time):
    """One hashable form of a time, whether numpy's, pandas' or a cftime date."""
    return pd.Timestamp(time) if isinstance(time, (np.datetime64, pd.Timestamp)) else time


def _track_storms(plan, times) -> tuple[bool, str]:
    """Whether storms are kept only on cyclone tracks (``TCConfig.tracks``), and a note."""
    tc = plan.config.tc
    if CLASS_NAMES[1] not in plan.classes or tc.tracks == "off":
        return False, ""
    hours = 0.0
    if len(times) > 1:
        hours = pd.Timedelta(times[-1] - times[0]).total_seconds() / 3600.0
    if tc.tracks == "auto":
        if "T200" in plan.variables:
            return False, ""
        if hours < tc.min_lifetime_h:
            return False, (
                f"storms not tracked: the input spans {hours:g} h, less than a cyclone's "
                f"{tc.min_lifetime_h:g} h (without a warm core, heat lows can pass as storms)"
            )
    winds = any(n in plan.variables for n in ("U850", "UBOT"))
    return True, "storms kept on " + track_rules(tc, winds=winds)


def label_dataset(
    ds: xr.Dataset,
    config: LabelConfig | None = None,
    *,
    classes: str = "auto",
    variables: Mapping[str, str] | None = None,
    grid: str = "input",
    units: Mapping[str, str] | None = None,
    regrid: float | None = None,
) -> tuple[xr.DataArray, dask.delayed.Delayed]:
    """Label every time step of ``ds`` lazily.

    Parameters
    ----------
    ds : fields with latitude, longitude and (optionally) time, in any naming, units, latitude
        order and longitude convention :func:`climnb.io.netcdf.normalize` understands; extra
        variables allowed. Numpy-backed data are chunked; dask-backed data are streamed one
        time chunk at a time.
    config : the settings (default :class:`LabelConfig`).
    classes : ``"auto"`` (what the input supports), ``"ar"``, ``"tc"`` or ``"both"``.
    variables : extra mapping from ``ds``'s variable names to climnb's (``{"pw": "TMQ"}``).
    grid : ``"input"`` (default) gives the labels on ``ds``'s own latitudes, longitudes, order
        and coordinate names (time's too, and its scalar coordinates such as ERA5's
        ``number``); ``"canonical"`` on ascending latitudes and longitudes 0..360.
    units : units to take instead of the variables' ``units`` attributes, by the input's
        name or climnb's (``{"IVT": "kg m-1 s-1"}``): for an attribute that is wrong or missing.
    regrid : for a projected or curvilinear grid (2-D latitude and longitude, WRF, NAM): the
        spacing (degrees) of the regular grid the fields are labelled on
        (:mod:`climnb.io.regrid`); with ``grid="input"`` the labels come back on the input's
        points. Such a grid is refused without it.

    Returns
    -------
    labels : lazy uint8 DataArray (time, lat, lon), one dask task per ``config.time_chunk``
        steps; its attributes say which classes were labelled (``classes``) and why
        (``notes``), and :func:`plan_labels`'s :class:`Plan` is in ``labels.attrs["plan"]``
        until it is written.
    events : a dask ``Delayed`` pandas DataFrame with the columns :data:`EVENT_COLUMNS`
        (longitudes in the input's convention with ``grid="input"``).
        Compute both with :func:`compute` (or ``dask.compute(..., optimize_graph=False)``),
        which labels each step once; a plain ``dask.compute(labels, events)`` optimises the
        two collections separately, fuses the shared per-step task into the array and so
        labels every step twice.

    Raises
    ------
    ValueError
        If the input supports none of the classes asked for, or a coordinate or a dimension
        is missing or wrong, or the time axis is empty.
    """
    if grid not in ("input", "canonical"):
        raise ValueError(f"grid must be 'input' or 'canonical', got {grid!r}")
    own = input_grid(ds, regrid) if grid == "input" else None
    ds = normalize(ds, variables=variables, units=units, regrid=regrid)
    plan = plan_labels(ds.data_vars, config, classes)
    config, names = plan.config, list(plan.variables)
    ds, lat, lon = _prepared(ds, names, config)
    threshold, note = _ivt_threshold(ds, config)
    tracking, track_note = _track_storms(plan, ds.time.values)
    notes = plan.notes + tuple(n for n in (note, track_note) if n)
    blocks, tables = _label_tasks(ds, names, lat, lon, plan, threshold, tracking)
    labels = xr.DataArray(
        da.concatenate(blocks, axis=0),
        coords={"time": ds.time, "lat": ds.lat, "lon": ds.lon},
        dims=("time", "lat", "lon"),
        name="labels",
        attrs=_label_attrs(plan, notes, tracking),
    )
    # the tables as arguments of their own: a list of them is optimised and culled table by
    # table (each through the threshold's whole graph), seconds for a few hundred steps
    events = dask.delayed(_concat, pure=True)(
        own is not None and float(np.nanmin(own.lon)) < 0, *tables
    )
    if own is not None:
        labels = own.restore(labels)
    log.info("labelling %d time steps of %d x %d in %d tasks: %s", ds.sizes["time"],
             lat.size, lon.size, len(blocks), "; ".join(notes))  # fmt: skip
    return labels, events


def _label_tasks(ds, names, lat, lon, plan: Plan, threshold, tracking: bool):
    """One label task per time chunk: the lazy uint8 block of each and its Delayed table."""
    config = plan.config
    token = dask.base.tokenize(ds, config, plan.classes)
    tracked = _tracked_graph(ds, names, lat, lon, config, token) if tracking else None
    # what every task shares, bound once: dask.delayed looks through each argument for
    # collections (the settings' fields, the threshold's graph) at every call otherwise
    label = dask.delayed(
        functools.partial(_label_block, names, lat, lon, config, plan.classes), pure=True
    )
    if threshold is not None:
        threshold = dask.delayed(threshold, pure=True)
    blocks, tables, start = [], [], 0
    for parts, size in zip(_chunk_parts(ds, names), ds.chunks["time"], strict=True):
        times = ds.time.values[start : start + size]
        result = label(
            times, threshold, tracked, *parts, dask_key_name=f"label-step-{token}-{start}"
        )
        blocks.append(da.from_delayed(result[0], (size, lat.size, lon.size), np.uint8))
        tables.append(result[1])
        start += size
    return blocks, tables


def _prepared(ds: xr.Dataset, names: list[str], config: LabelConfig):
    """The variables ``names`` of the normalised ``ds``, one dask chunk per
    ``config.time_chunk`` steps, and the latitudes and longitudes (float)."""
    if ds.sizes["time"] == 0:
        raise ValueError("the input's time axis is empty: nothing to label")
    # the fill values (|x| >= 1e30) are made missing by the labeller itself
    # (:func:`~climnb.labels.step.fill_missing`), in the pass that finds NaN, rather than by a
    # lazy `where` over each field
    ds = normalize(ds, required=names, mask_fill=False)[names]
    ds = ds.chunk({"time": config.time_chunk, "lat": -1, "lon": -1})
    lat, lon = ds.lat.values.astype(float), ds.lon.values.astype(float)
    if lat.size < 3 or lon.size < 3:
        raise ValueError(f"grid {lat.size} x {lon.size} is too small to label (need 3 x 3)")
    return ds, lat, lon


def _chunk_parts(ds: xr.Dataset, names: list[str]) -> list[list]:
    """What each time chunk's label task takes in: one :class:`StepInputs` that reads the
    chunk, or (where chunks share work) the chunks themselves as Delayed dependencies."""
    arrays = [ds[n].data for n in names]
    inputs = _step_inputs(arrays)
    if inputs is not None:
        return [[part] for part in inputs]
    keys = [_chunk_keys(a) for a in arrays]
    return [
        [Delayed(k[i], a.__dask_graph__(), layer=a.name) for a, k in zip(arrays, keys, strict=True)]
        for i in range(len(ds.chunks["time"]))
    ]


def _label_attrs(plan: Plan, notes: tuple[str, ...], tracking: bool) -> dict:
    """The label array's attributes: classes, why, the checks and the settings used."""
    config = plan.config
    return {
        "long_name": "heuristic class of each pixel",
        "flag_values": np.array([0, 1, 2], np.uint8),
        "flag_meanings": " ".join(CLASS_NAMES),
        "source": written_by("climnb.labels.label_dataset"),
        "classes": " ".join(plan.classes),
        "notes": "; ".join(notes),
        "storm_checks": "; ".join(plan.storm_checks),
        # the storms are those of cyclone tracks with gaps up to this long: `climnb tracks`
        # bridges the same gaps
        **({"storm_max_gap_h": config.tc.max_gap_h} if tracking else {}),
        # the settings used, as JSON: sample sets and model bundles carry them on
        "climnb_config": json.dumps(config.to_dict()),
    }


#: Variables the storm centres are found from (the rest only draws masks).
_CENTRE_VARIABLES = (
    *("VORT850", "U850", "V850", "UBOT", "VBOT", "PSL"),
    *("T200", "T500", "Z200", "Z1000"),
)


def _tracked_graph(ds, names, lat, lon, config, token):
    """A lazy :func:`_tracked`: a centre-finding task per time chunk reading only the
    variables centres are found from, then one task that stitches them."""
    used = [n for n in names if n in _CENTRE_VARIABLES]
    arrays = [ds[n].data for n in used]
    inputs = _step_inputs(arrays)
    find = dask.delayed(functools.partial(_centres_block, used, lat, lon, config), pure=True)
    tables, start = [], 0
    for i, size in enumerate(ds.chunks["time"]):
        times = ds.time.values[start : start + size]
        if inputs is not None:
            parts = [inputs[i]]
        else:
            parts = [a[start : start + size] for a in arrays]
        tables.append(find(times, *parts, dask_key_name=f"storm-centres-{token}-{start}"))
        start += size
    return dask.delayed(_tracked, pure=True)(config, *tables, dask_key_name=f"tracks-{token}")


def _ivt_threshold(ds: xr.Dataset, config: LabelConfig):
    """The per-grid-point IVT threshold of the transport method (lazy), or None, and a note."""
    ar = config.ar
    if ar.method != "transport" or ar.ivt_percentile is None:
        return None, ""
    n = ds.sizes["time"]
    if n < ar.min_series_steps:
        return None, (
            f"series of {n} steps is shorter than {ar.min_series_steps}: fixed threshold "
            f"{ar.ivt_threshold:g} instead of the {ar.ivt_percentile:g}th percentile"
        )
    ds = ds.map(  # label_dataset leaves the fill values in: mask them as normalize would
        lambda v: v.where(np.abs(v) < _FILL_LIMIT) if np.issubdtype(v.dtype, np.floating) else v
    )
    if "IVT" in ds:
        ivt = ds.IVT
    elif "IVTU" in ds:
        ivt = np.hypot(ds.IVTU, ds.IVTV)
    else:
        ivt = ds.TMQ * np.hypot(ds.U850, ds.V850)
    q = ivt.chunk({"time": -1}).quantile(ar.ivt_percentile / 100.0, dim="time")
    threshold = np.maximum(q, ar.ivt_floor).astype(np.float32)
    return (
        threshold.data,
        f"threshold: {ar.ivt_percentile:g}th percentile of each point's {n} steps",
    )


def compute(*collections, **kwargs):
    """``dask.compute`` without graph optimisation, so that tasks shared by several collections
    (the labels and the event table of :func:`label_dataset`, or a NetCDF write and the event
    table) run once. Keyword arguments go to :func:`dask.compute` (``scheduler``, ...).
    """
    return dask.compute(*collections, optimize_graph=False, **kwargs)


def _concat(signed_lon: bool, *tables: pd.DataFrame) -> pd.DataFrame:
    out = conform(pd.concat(tables, ignore_index=True), EVENT_COLUMNS)
    if signed_lon:  # the input's convention: -180..180
        out["lon"] = (out.lon + 180.0) % 360.0 - 180.0
    return out


def save_labelled(ds: xr.Dataset, labels: xr.DataArray, events: pd.DataFrame | None, path):
    """Write the fields of ``ds`` with ``labels`` added (NetCDF) and the event table (CSV).

    Both atomically; the events go to ``path`` with the suffix ``.events.csv``. This is the
    input of the sample-file step (``climnb samples``, notebook 02).
    """
    from pathlib import Path

    path = Path(path)
    out = ds.assign(labels=labels.astype("uint8"))
    with atomic_path(path) as tmp:
        out.to_netcdf(tmp, encoding={"labels": {"dtype": "u1", "zlib": True}})
    if events is not None:
        with atomic_path(path.with_suffix(".events.csv")) as tmp:
            events.to_csv(tmp, index=False)
    return path
