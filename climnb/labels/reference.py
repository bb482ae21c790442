"""IPART (Xu et al. 2020) as an independent river detector to compare climnb's rivers with.

IPART finds atmospheric rivers by *top-hat by reconstruction* (THR) of IVT in space and time:
a grey erosion of the (time, lat, lon) IVT cube with a large structuring element, then a
reconstruction by dilation, gives the slowly varying background; what stands above it (the
anomaly) is candidate river, which geometry filters (length >= 2000 km, length / width >= 2,
centroid 20-80 degrees, area 0.5-18 million km2) and an axis search then keep or drop. It is
relative (no fixed IVT threshold), so it disagrees with a 250 kg m-1 s-1 rule by design.

It is an optional extra, never a runtime dependency of climnb: its metadata pins matplotlib
2.2.3 and basemap, which do not install on Python 3.11, so it is installed without them (only
its plotting needs them)::

    python -m pip install --no-deps ipart && python -m pip install networkx scikit-image

(``tools/setup.sh`` does this; networkx and scikit-image are in the ``bench`` extra.)

Its 2020 code predates scikit-image 0.19 (``selem`` became ``footprint``), networkx 2.4
(``Graph.edge``), NumPy 2 (``ndarray.ptp``, ``np.alltrue``) and matplotlib 3.8
(``ContourSet.collections``); :func:`load_ipart` bridges those spellings without changing what
IPART computes (the contour is used only for its record table), and stubs
``mpl_toolkits.basemap``, which only its tracer and plotting import.

The THR kernel: IPART's examples use ``KERNEL=[16, 6, 6]``, *half* lengths in time steps and
grid cells, on 6-hourly 0.75-degree ERA-Interim, i.e. 96 hours and 4.5 degrees either side
(an 8-day, 9-degree box). :func:`thr_kernel` turns those physical spans into steps and cells of
any series, so the comparison uses IPART's own settings on 3-hourly or coarser data too.

Examples
--------
>>> from climnb.labels.reference import thr_kernel
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, ivt=True)  # 3-hourly, 1.9-degree toy grid
>>> thr_kernel(ds)
(32, 2)
"""

from __future__ import annotations

import logging
import sys
import types
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from climnb.data.synthetic import make_dataset
from climnb.labels.components import label_components
from climnb.labels.dataset import compute, label_dataset
from climnb.labels.scores import agreement
from climnb.labels.sphere import cell_area_km2, is_periodic

__all__ = [
    "INSTALL",
    "available",
    "load_ipart",
    "thr_kernel",
    "ipart_detect",
    "oversized_candidates",
    "IpartComparison",
    "compare_with_ipart",
    "AGREEMENT_COLUMNS",
]

log = logging.getLogger(__name__)

#: How to install IPART beside climnb (named in the ImportError).
INSTALL = "python -m pip install --no-deps ipart && python -m pip install networkx scikit-image"

#: IPART's documented THR kernel: half lengths of 96 hours and 4.5 degrees (16 steps of 6 h,
#: 6 cells of 0.75 degree in its examples).
KERNEL_HOURS = 96.0
KERNEL_DEG = 4.5


class _Morphology:
    """skimage.morphology as IPART calls it (``selem=`` is ``footprint=`` since 0.19)."""

    def __getattr__(self, name):
        from skimage import morphology, segmentation

        func = getattr(segmentation if name == "watershed" else morphology, name)

        def call(*args, selem=None, **kwargs):
            if selem is not None:
                kwargs["footprint"] = selem
            return func(*args, **kwargs)

        return call


def _bin_contour(mask, lons=None, lats=None, return_largest=True):
    """IPART's ``getBinContour`` without matplotlib's removed ``ContourSet.collections``."""
    from skimage import measure

    lons = np.arange(mask.shape[1]) if lons is None else np.asarray(lons)
    lats = np.arange(mask.shape[0]) if lats is None else np.asarray(lats)
    contours = measure.find_contours(np.asarray(mask, float), 0.5) or [np.zeros((1, 2))]
    c = max(contours, key=len)
    x = np.interp(c[:, 1], np.arange(lons.size), lons)
    y = np.interp(c[:, 0], np.arange(lats.size), lats)
    return types.SimpleNamespace(vertices=np.stack([x, y], axis=1))


def load_ipart():
    """IPART's THR and detector modules, with the bridges of the module docstring.

    Raises
    ------
    ImportError
        When IPART (or networkx / scikit-image, which it needs) is not installed; the message
        names the install command.
    """
    try:  # a real basemap, where installed, is left alone
        import mpl_toolkits.basemap  # noqa: F401
    except ImportError:
        stub = types.ModuleType("mpl_toolkits.basemap")
        stub.Basemap = None
        sys.modules["mpl_toolkits.basemap"] = stub
    try:
        import ipart.AR_detector
        import ipart.thr
        import networkx as nx
        from ipart.utils import funcs
    except ImportError as err:
        raise ImportError(
            f"IPART, the reference river detector, is not installed ({err}); install it "
            f"without its pinned plotting dependencies: {INSTALL}"
        ) from err
    ipart.thr.morphology = ipart.AR_detector.morphology = _Morphology()

    def d_latitude(lats, lons, R=6371000, verbose=True):
        dy = np.ptp(funcs.getBounds(lats), axis=1) * np.pi / 180.0 * R
        return np.repeat(dy[:, None], len(lons), axis=1)

    funcs.dLatitude = d_latitude
    funcs.getBinContour = _bin_contour
    if not hasattr(np, "alltrue"):
        np.alltrue = np.all
    for graph in (nx.Graph, nx.DiGraph):
        if not hasattr(graph, "edge"):
            graph.edge = property(lambda self: self.adj)
    return ipart


def available() -> bool:
    """Whether IPART can be imported (see :data:`INSTALL`)."""
    try:
        load_ipart()
    except ImportError:
        return False
    return True


def thr_kernel(
    ds: xr.Dataset, *, hours: float = KERNEL_HOURS, degrees: float = KERNEL_DEG
) -> tuple[int, int]:
    """IPART's THR half lengths ``(steps, cells)`` for the time step and grid of ``ds``."""
    if ds.sizes.get("time", 1) > 1:
        step_h = float(np.diff(ds.time.values[:2])[0] / np.timedelta64(1, "h"))
    else:
        step_h = 6.0
    dlat = float(abs(ds.lat.values[1] - ds.lat.values[0]))
    return max(int(round(hours / step_h)), 1), max(int(round(degrees / dlat)), 1)


def ipart_detect(
    ds: xr.Dataset,
    *,
    kernel: tuple[int, int] | None = None,
    ivt: str = "IVT",
    components: tuple[str, str] = ("IVTU", "IVTV"),
    **find_ars,
) -> xr.Dataset:
    """IPART's THR rivers on ``ds[ivt]`` (``components`` for its axis search).

    Parameters
    ----------
    ds : (time, lat, lon) IVT and its components in kg m-1 s-1 on a global grid (IPART is told
        it is zonally cyclic), such as :func:`climnb.io.files.open_fields` returns; latitudes
        from north to south are sorted (the result is then south to north).
    kernel : THR half lengths ``(steps, cells)``; default :func:`thr_kernel`, IPART's own
        96 hours and 4.5 degrees. A series shorter than the kernel's 2 x steps + 1 is logged:
        its reconstruction then follows slow systems less than IPART's would.
    find_ars : overrides of IPART's ``findARs`` settings (its defaults are its documented ones:
        ``thres_low=1`` kg m-1 s-1 of anomaly, ``min_length=2000`` km, ``min_LW=2``,
        ``min_lat=20``, ``max_lat=80``, ``min_area=50e4``, ``max_area=1800e4`` km2);
        ``thres_low=None`` is IPART's own per-step threshold (``determineThresLow``: the elbow
        of the anomaly's area-threshold curve).

    Returns
    -------
    xarray.Dataset with ``rivers`` (bool), ``anomaly`` and ``reconstruction`` (IVT = anomaly +
    reconstruction), all (time, lat, lon) on the coordinates of ``ds``, ``threshold`` (time:
    the anomaly above which IPART's candidates lie) and the kernel in its attributes.
    """
    ipart = load_ipart()
    ds = _checked_input(ds, ivt, components)
    steps, cells = kernel or thr_kernel(ds)
    n_time = ds.sizes["time"]
    if n_time < 2 * steps + 1:
        log.warning(
            "THR kernel spans %d steps but the series has %d: the reconstruction follows slow "
            "systems less than IPART's would",
            2 * steps + 1,
            n_time,
        )
    values = ds[ivt].transpose("time", "lat", "lon").values.astype(float)
    kernel_sizes = [min(steps, n_time), cells, cells]
    rec, ano, index, labels = _thr_find_ars(ipart, ds, values, components, kernel_sizes, find_ars)
    thres_low = find_ars.get("thres_low", 1.0)
    anomaly = np.asarray(ano.data, float).reshape(values.shape)
    if thres_low is None:  # what findARs computes for each step
        threshold = [ipart.AR_detector.determineThresLow(a) for a in anomaly]
    else:
        threshold = np.full(n_time, float(thres_low))
    rivers = np.zeros(values.shape, bool)  # steps without a river are left out of its result
    rivers[np.asarray(index, dtype=int)] = (
        np.asarray(labels.data).reshape(-1, *values.shape[1:]) > 0
    )
    dims, coords = ("time", "lat", "lon"), {k: ds[k] for k in ("time", "lat", "lon")}
    return xr.Dataset(
        {
            "rivers": (dims, rivers),
            "anomaly": (dims, anomaly),
            "threshold": ("time", np.asarray(threshold, float)),
            "reconstruction": (dims, np.asarray(rec.data, float).reshape(values.shape)),
        },
        coords=coords,
        attrs={
            "method": "IPART THR (Xu et al. 2020)",
            "kernel_steps": steps,
            "kernel_cells": cells,
        },
    )


def _checked_input(ds: xr.Dataset, ivt: str, components: tuple[str, str]) -> xr.Dataset:
    """``ds`` with latitudes south to north (IPART's geometry expects them so), once it is
    known to hold IVT and its components."""
    missing = [k for k in (ivt, *components) if k not in ds]
    if missing:
        raise KeyError(
            f"IPART needs IVT and its components: missing {missing}; found {sorted(ds.data_vars)}"
        )
    if ds.lat.values[0] > ds.lat.values[-1]:
        ds = ds.sortby("lat")
    return ds


def _thr_find_ars(ipart, ds: xr.Dataset, values, components, kernel_sizes, find_ars: dict):
    """IPART's THR (``(reconstruction, anomaly)`` of ``values``, IVT on (time, lat, lon)) and
    its ``findARs`` on them: ``(reconstruction, anomaly, steps with a river, their labels)``."""
    from ipart.utils import funcs

    lat, lon = ds.lat.values, ds.lon.values
    qu, qv = (ds[c].transpose("time", "lat", "lon").values.astype(float) for c in components)
    times = [str(t)[:16].replace("T", " ") for t in ds.time.values]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, rec, ano = ipart.thr.THR(funcs.NCVAR(values, "ivt"), kernel_sizes, verbose=False)
        index, labels, *_ = ipart.AR_detector.findARs(
            values,
            rec.data,
            ano.data,
            qu,
            qv,
            lat,
            lon,
            times=times,
            zonal_cyclic=True,
            verbose=False,
            **find_ars,
        )
    return rec, ano, index, labels


def oversized_candidates(
    anomaly: xr.DataArray, *, thres_low=1.0, max_area: float = 1800e4
) -> xr.DataArray:
    """Where IPART's candidates (seam-joined regions of THR anomaly > ``thres_low``, a number
    or one per step such as :func:`ipart_detect`'s ``threshold``) are larger than its
    ``max_area`` (km2): it drops them whole, rivers and all. Its defaults.

    A diagnostic of disagreement: when the reconstruction lies far below IVT almost
    everywhere (a kernel long compared with how fast the background changes), candidates
    merge across ocean basins and exceed the area bound.
    """
    from scipy import ndimage

    anomaly = anomaly.transpose("time", "lat", "lon")
    lat, lon = anomaly.lat.values, anomaly.lon.values
    area = cell_area_km2(lat, lon)
    area = np.broadcast_to(area[:, None] if area.ndim == 1 else area, anomaly.shape[1:])
    out = np.zeros(anomaly.shape, bool)
    thres = np.broadcast_to(np.asarray(thres_low, float), anomaly.shape[:1])
    for t, field in enumerate(anomaly.values):
        objects, n = label_components(field > thres[t], periodic=is_periodic(lon))
        if n:
            sizes = np.asarray(ndimage.sum(area, objects, np.arange(1, n + 1)))
            out[t] = np.isin(objects, 1 + np.flatnonzero(sizes > max_area))
    return xr.DataArray(out, coords=anomaly.coords, dims=anomaly.dims, name="oversized")


#: Columns of :attr:`IpartComparison.table`, in the order worth reading.
AGREEMENT_COLUMNS = ("iou", "iou_strong", "recall", "precision", "n_reference", "n_ours")


@dataclass
class IpartComparison:
    """What :func:`compare_with_ipart` returns.

    Attributes
    ----------
    table : :func:`climnb.labels.scores.agreement` of climnb vs IPART, the truth vs IPART and
        climnb vs the truth (rows), in the columns :data:`AGREEMENT_COLUMNS`.
    series : the synthetic series (with IVT, its components and ``truth``).
    ours : climnb's labels of the series (class ids).
    ipart : :func:`ipart_detect`'s result (``rivers``, ``anomaly``, ...).
    dropped : :func:`oversized_candidates` of IPART's anomaly: what it drops whole.
    """

    table: pd.DataFrame
    series: xr.Dataset
    ours: xr.DataArray
    ipart: xr.Dataset
    dropped: xr.DataArray


def compare_with_ipart(
    *, n_time: int = 72, n_lat: int = 96, n_lon: int = 144, seed: int = 0
) -> IpartComparison:
    """climnb's rivers, IPART's (its own kernel and filters) and the truth on one synthetic
    series of ``n_time`` steps (IPART needs a series longer than its kernel's reach).

    >>> if available():  # doctest: +SKIP
    ...     found = compare_with_ipart(n_time=72)
    ...     found.table.loc["climnb vs IPART", "iou"]
    """
    series, _ = make_dataset(n_time=n_time, n_lat=n_lat, n_lon=n_lon, seed=seed, ivt=True)
    ipart = ipart_detect(series)
    ours, _ = compute(*label_dataset(series.drop_vars("truth")))
    pairs = {
        "climnb vs IPART": (ours, ipart.rivers),
        "truth vs IPART": (series.truth, ipart.rivers),
        "climnb vs truth": (ours, series.truth == 2),
    }
    rows = {name: agreement(a, b, series.IVT, series.lon) for name, (a, b) in pairs.items()}
    table = pd.DataFrame(rows).T[list(AGREEMENT_COLUMNS)]
    return IpartComparison(table, series, ours, ipart, oversized_candidates(ipart.anomaly))
