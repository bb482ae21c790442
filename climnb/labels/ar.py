"""Atmospheric rivers: long, narrow, mid-latitude filaments of strong vapour transport.

Recipe (one time step):

1. the strength field: the IVT proxy ``TMQ * |V850|`` (:mod:`climnb.labels.ivt`), true IVT
   when the input has an ``IVT`` variable, or TMQ (``ARConfig.field``);
2. damp the tropics with ``1 - exp(-lat^2 / (2 sigma^2))`` so that the deep tropical moisture
   does not dominate the threshold;
3. keep pixels above the per-step percentile (95th) of the damped field;
4. connected components joined across the 0/360 seam (:mod:`climnb.labels.components`);
5. draw each object's edge (``ARConfig.edge``): ``"half_max"`` (default) grows or trims it to
   where its TMQ anomaly over the zonal median falls to half its local peak, which is where a
   river's moisture ends whatever the percentile, and drops objects whose mean anomaly is
   below ``min_anomaly``; ``"percentile"`` keeps the percentile mask (the paper);
6. keep the long narrow mid-latitude objects (length, length / width, latitude band, area).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import ndimage

from climnb.labels.components import label_components, label_max, measure
from climnb.labels.config import ARConfig
from climnb.labels.sphere import EARTH_RADIUS_KM

__all__ = ["river_strength", "tmq_anomaly", "detect_rivers"]

log = logging.getLogger(__name__)


def river_strength(fields: Mapping[str, np.ndarray], lat: np.ndarray, config: ARConfig):
    """The damped field that is thresholded: IVT (or its proxy) or TMQ, times the damping."""
    if config.field == "tmq":
        strength = fields["TMQ"]
    elif "IVT" in fields:
        strength = fields["IVT"]
    else:
        strength = fields["TMQ"] * np.hypot(fields["U850"], fields["V850"])
    return strength * _damping(lat, config).astype(strength.dtype)[:, None]


def _damping(lat, config: ARConfig) -> np.ndarray:
    """The tropical damping ``1 - exp(-lat^2 / (2 sigma^2))`` of each latitude row."""
    lat = np.asarray(lat, dtype=np.float64)
    if config.tropics_sigma_deg <= 0:
        return np.ones_like(lat)
    return 1.0 - np.exp(-(lat**2) / (2.0 * config.tropics_sigma_deg**2))


def detect_rivers(
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: ARConfig,
    *,
    periodic: bool = True,
    exclude: np.ndarray | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Find atmospheric rivers in one time step.

    Parameters
    ----------
    fields : 2-D (lat, lon) arrays ``TMQ``, ``U850``, ``V850`` (and optionally ``IVT``),
        ascending latitude, without NaN.
    lat, lon : grid coordinates (degrees).
    config : the settings.
    periodic : whether longitude wraps (a global grid).
    exclude : boolean (lat, lon) pixels that cannot be river, such as the storms already found
        (a storm wins where both are found, so a river is measured without it).

    Returns
    -------
    mask : boolean (lat, lon), True on rivers.
    rivers : one row per river: ``lat, lon`` (centroid), ``area_km2, length_km, width_km,
        max_ivt`` (of the strength field before damping) and ``max_wind`` (850 hPa).
    """
    strength = river_strength(fields, lat, config)
    threshold = np.percentile(strength, config.percentile)
    above = strength > threshold
    if exclude is not None:
        above &= ~exclude
    labels, n = label_components(above, periodic=periodic, connectivity=config.connectivity)
    shapes = measure(labels, n, lat, lon, min_area_km2=config.min_area_km2)
    candidates = shapes.label.to_numpy()
    keep = np.ones(len(shapes), bool)
    if config.edge == "half_max":
        anomaly = tmq_anomaly(fields["TMQ"], lat, config)
        labels, n = _half_max(labels, candidates, anomaly, lat, lon, config, periodic, exclude)
        shapes = measure(labels, n, lat, lon, min_area_km2=config.min_area_km2)
        keep = _label_mean(anomaly, labels, n)[shapes.label.to_numpy()] >= config.min_anomaly
    kept = shapes.label.to_numpy()[keep & _river_like(shapes, config)]
    log.debug("%d objects above %.3g, %d river-like", candidates.size, threshold, kept.size)
    labels, n = _relabel(labels, kept)
    return labels > 0, _describe(labels, n, lat, lon, fields)


def _label_mean(values: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
    """Mean of ``values`` over each label 0..n (0 for an empty label)."""
    flat = labels.ravel()
    total = np.bincount(flat, weights=values.ravel(), minlength=n + 1)
    return total / np.maximum(np.bincount(flat, minlength=n + 1), 1)


def _river_like(shapes: pd.DataFrame, config: ARConfig) -> np.ndarray:
    lo, hi = config.lat_band
    return (
        (shapes.length_km >= config.min_length_km)
        & (shapes.length_km >= config.min_aspect * shapes.width_km)
        & (shapes.area_km2 <= config.max_area_km2)
        & shapes.lat.abs().between(lo, hi)
    ).to_numpy()


def _relabel(labels: np.ndarray, kept: np.ndarray) -> tuple[np.ndarray, int]:
    lut = np.zeros(int(labels.max()) + 1, np.int32)
    lut[kept] = np.arange(1, kept.size + 1)
    return lut[labels], int(kept.size)


def tmq_anomaly(tmq: np.ndarray, lat: np.ndarray, config: ARConfig) -> np.ndarray:
    """TMQ minus the zonal median of its latitude row, times the tropical damping.

    Rivers cover a small part of any latitude circle, so the median is the air around them.
    """
    return (tmq - np.median(tmq, axis=1, keepdims=True)) * _damping(lat, config)[:, None].astype(
        tmq.dtype
    )


def _half_max(labels, candidates, anomaly, lat, lon, config: ARConfig, periodic, exclude):
    """Redraw each candidate's edge at ``edge_fraction`` of its local peak TMQ anomaly.

    The anomaly is :func:`tmq_anomaly`, damped in the tropics like the strength field. The
    peak is local: the largest anomaly within ``edge_window_km`` (so that where two rivers
    cross, or one carries more water, the rest of the river keeps its own edge), but at least
    half the candidate's 90th percentile (so that noise beside a river is not measured against
    itself). A candidate whose 90th percentile is below ``min_anomaly`` is dropped. The redrawn
    object may not reach beyond ``grow_pixels`` of the candidate, so that it cannot run along
    unrelated moist air.
    """
    local = ndimage.maximum_filter(
        anomaly,
        size=_window(lat, lon, config),
        mode=("nearest", "wrap" if periodic else "nearest"),
    )
    out = np.zeros(labels.shape, bool)
    objects = ndimage.find_objects(labels)
    grow = config.grow_pixels
    for lab in candidates:
        rows = objects[lab - 1][0]
        win = slice(max(rows.start - grow, 0), min(rows.stop + grow, labels.shape[0]))
        seed = labels[win] == lab
        an = anomaly[win]
        peak = np.percentile(an[seed], 90)
        if peak < config.min_anomaly:
            continue
        reach = ndimage.maximum_filter(
            seed, size=2 * grow + 1, mode=("nearest", "wrap" if periodic else "nearest")
        )
        if exclude is not None:
            reach &= ~exclude[win]
        edge = config.edge_fraction * np.maximum(local[win], 0.5 * peak)
        grown, _ = label_components(
            (an >= edge) & reach, periodic=periodic, connectivity=config.connectivity
        )
        hit = np.unique(grown[seed])
        out[win] |= np.isin(grown, hit[hit > 0])
    # every connected piece is an object of its own, measured and filtered alone
    return label_components(out, periodic=periodic, connectivity=config.connectivity)


def _window(lat, lon, config: ARConfig) -> tuple[int, int]:
    """Rows and columns of a box ``2 * edge_window_km`` across at 45 degrees latitude."""
    km_per_deg = np.pi * EARTH_RADIUS_KM / 180.0
    dlat = abs(float(lat[1] - lat[0])) * km_per_deg
    dlon = abs(float(lon[1] - lon[0])) * km_per_deg * np.cos(np.radians(45.0))
    return (
        2 * int(np.ceil(config.edge_window_km / dlat)) + 1,
        2 * int(np.ceil(config.edge_window_km / dlon)) + 1,
    )


def _describe(labels, n, lat, lon, fields) -> pd.DataFrame:
    shapes = measure(labels, n, lat, lon)
    if n == 0:
        return shapes.assign(max_ivt=pd.Series(dtype=float), max_wind=pd.Series(dtype=float))
    wind = np.hypot(fields["U850"], fields["V850"])
    ivt = fields["IVT"] if "IVT" in fields else fields["TMQ"] * wind
    index = shapes.label.to_numpy()
    return shapes.assign(
        max_ivt=label_max(ivt, labels, index),
        max_wind=label_max(wind, labels, index),
    )
