"""IPART (Xu et al. 2020) as an independent river detector for bench_labels.py (not a dependency).

IPART finds atmospheric rivers by top-hat by reconstruction (THR) of IVT in space and time,
then geometry filters and an axis search. Install it without its pinned dependencies (its
metadata asks for matplotlib 2.2.3 and basemap, which only its plotting needs):

    pip install --no-deps ipart && pip install networkx scikit-image

Its 2020 code predates scikit-image 0.19 (``selem`` became ``footprint``), networkx 2.4
(``Graph.edge``), NumPy 2 (``ndarray.ptp``) and matplotlib 3.8 (``ContourSet.collections``);
:func:`load` bridges those four spellings without changing what IPART computes (the contour is
used only for its record table), and stubs ``mpl_toolkits.basemap``, which only its plotting
module imports.
"""

from __future__ import annotations

import sys
import types

import numpy as np

__all__ = ["load", "ipart_rivers"]


class _Morphology:
    """skimage.morphology as IPART calls it."""

    def __getattr__(self, name):
        from skimage import morphology, segmentation

        func = getattr(segmentation if name == "watershed" else morphology, name)

        def call(*args, selem=None, **kwargs):
            if selem is not None:
                kwargs["footprint"] = selem
            return func(*args, **kwargs)

        return call


def _bin_contour(mask, lons=None, lats=None, return_largest=True):
    from skimage import measure

    lons = np.arange(mask.shape[1]) if lons is None else np.asarray(lons)
    lats = np.arange(mask.shape[0]) if lats is None else np.asarray(lats)
    contours = measure.find_contours(np.asarray(mask, float), 0.5) or [np.zeros((1, 2))]
    c = max(contours, key=len)
    x = np.interp(c[:, 1], np.arange(lons.size), lons)
    y = np.interp(c[:, 0], np.arange(lats.size), lats)
    return types.SimpleNamespace(vertices=np.stack([x, y], axis=1))


def load():
    """Import IPART's THR and detector modules with the bridges above; None if not installed."""
    if "mpl_toolkits.basemap" not in sys.modules:
        stub = types.ModuleType("mpl_toolkits.basemap")
        stub.Basemap = None
        sys.modules["mpl_toolkits.basemap"] = stub
    try:
        import ipart.AR_detector
        import ipart.thr
        import networkx as nx
        from ipart.utils import funcs
    except ImportError:
        return None
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


def ipart_rivers(ds, *, kernel_deg: float = 4.5, kernel_steps: int = 3) -> np.ndarray:
    """Boolean (time, lat, lon) river mask of IPART's THR method on ``ds.IVT`` (components
    ``IVTU``/``IVTV`` for its axis), with its default geometry filters (length >= 2000 km,
    length / width >= 2, centroid 20-80 degrees, area 0.5-18 million km2).

    ``kernel_deg``/``kernel_steps``: the THR structuring element, about 4.5 degrees wide as in
    IPART's examples (6 cells of 0.75 degree) and, for the short series here, 3 steps long
    (IPART uses about 4 days of 6-hourly data; a shorter kernel removes less of slow systems).
    """
    import warnings

    ipart = load()
    if ipart is None:
        raise ImportError("IPART is not installed: pip install --no-deps ipart")
    from ipart.utils import funcs

    lat, lon = ds.lat.values, ds.lon.values
    cells = max(int(round(kernel_deg / abs(lat[1] - lat[0]))), 1)
    ivt = ds.IVT.values.astype(float)
    times = [str(t)[:16].replace("T", " ") for t in ds.time.values]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, rec, ano = ipart.thr.THR(
            funcs.NCVAR(ivt, "ivt"), [min(kernel_steps, len(times)), cells, cells], verbose=False
        )
        index, labels, *_ = ipart.AR_detector.findARs(
            ivt,
            rec.data,
            ano.data,
            ds.IVTU.values.astype(float),
            ds.IVTV.values.astype(float),
            lat,
            lon,
            times=times,
            zonal_cyclic=True,
            verbose=False,
        )
    out = np.zeros(ivt.shape, bool)  # steps without a river are left out of its result
    out[np.asarray(index, dtype=int)] = np.asarray(labels.data).reshape(-1, *ivt.shape[1:]) > 0
    return out
