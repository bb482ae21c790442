"""Atmospheric rivers: long, narrow, mid-latitude filaments of strong vapour transport.

Two methods (``ARConfig.method``; ``"auto"`` picks the first the input allows).

**Transport** (:func:`transport_rivers`), when the input has IVT or its components, or TMQ and
850 hPa winds (the proxy ``TMQ * |V850|``, thresholded at ``proxy_threshold``, 250 / 0.7): the
river is the IVT object itself, as in IVT-based catalogues:

1. IVT >= ``ivt_threshold`` (250 kg m-1 s-1, the fixed threshold of Rutz et al. 2014 and of
   many catalogues since), or, for a series long enough, IVT above the ``ivt_percentile``
   (85th) of each grid point's own series and above ``ivt_floor`` (100 kg m-1 s-1), the
   relative rule of Guan & Waliser (2015, JGR 120, 12514);
2. pixels within ``exclude_tropics_deg`` (15 degrees) of the equator removed (the tropics'
   high IVT is the trade-wind moisture, not rivers; Guan & Waliser also drop objects whose
   transport is not poleward there);
3. connected components (joined across the 0/360 seam on global grids only), and objects
   that touch parted where one river ends (below);
4. length >= 2000 km and length / width >= 2 (Guan & Waliser 2015), centroid within
   ``ivt_lat_band`` (20-80 degrees), and no pixel within ``storm_buffer_km`` of a storm;
5. where the meridional transport is known (``IVTV``, or the proxy's ``TMQ * V850``), a mean
   transport over the object with a poleward component (``ivt_min_poleward``), Guan &
   Waliser's check against subtropical trade-wind and other non-poleward moisture flows.

Steps 3-5 are :func:`river_rules`, which also applies them to any mask: :func:`rule_classes`
puts a network's predicted rivers through them (``climnb predict --river-rules``).

**Rivers that touch.** Rivers side by side, or one beginning where another ends, form one
connected IVT object; on a reanalysis the rivers of a hemisphere's storm track can join into
a band round the globe, whose length and area describe no river. Step 3 parts such objects
as IPART does (Xu et al. 2020, GMD 13, 4639: its peak partition, ``single_dome``): a
watershed of IVT seeded at each independent IVT maximum, one whose prominence (its height
above the saddle that joins it to a higher maximum) is at least ``split_ratio`` (0.6, IPART's
``max_ph_ratio``) of its height above the object's edge and whose region above the saddle
covers ``split_min_area_km2`` (5e5 km2, IPART's least river area;
:func:`climnb.labels.components.split_at_saddles`, periodic in longitude). The reason: along
one river the transport stays high from its source to its end, while rivers that touch are
joined by weaker transport between their cores, a saddle deep compared with their heights.
The length, width, latitude and poleward rules (Guan & Waliser 2015) then apply to each
part, as to a river found alone. An object is parted only when two or more of its parts have
a river's shape (length, length / width and latitude): a partition that yields one such part
or none has separated no rivers (it would only trim a bump off a river, or carve a piece out
of a subtropical plume that fails the rules whole), so such an object is judged whole. A cut
of one pixel keeps the parts apart in the mask, so tracks and event tables, which label the
mask again, see the same rivers. The moisture method does not part objects (it has no
transport to part them by).

**Moisture** (the SC18 paper's route, for inputs without IVT; one time step):

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

With TMQ and 850 hPa winds the strength is the IVT proxy; with TMQ alone it is TMQ, as in
the paper's final data set. Both methods leave no river pixel within
``exclude_tropics_deg`` of the equator, and a time step with no river gives an empty mask.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import ndimage

from climnb.labels.components import (
    MEASURE_COLUMNS,
    _label,
    _measure,
    _split,
    label_components,
    label_pixels,
    measure,
)
from climnb.labels.config import ARConfig
from climnb.labels.sphere import EARTH_RADIUS_KM

__all__ = [
    "river_strength",
    "tmq_anomaly",
    "detect_rivers",
    "transport_rivers",
    "ivt_magnitude",
    "river_rules",
    "rule_variables",
    "rule_classes",
    "storm_surroundings",
]

log = logging.getLogger(__name__)


def ivt_magnitude(fields: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """IVT (kg m-1 s-1) from ``IVT``, its components ``IVTU``/``IVTV``, or the proxy
    ``TMQ * |V850|``; None when the fields hold none of them."""
    if "IVT" in fields:
        return fields["IVT"]
    if "IVTU" in fields and "IVTV" in fields:
        return np.hypot(fields["IVTU"], fields["IVTV"])
    if {"TMQ", "U850", "V850"} <= set(fields):
        return fields["TMQ"] * np.hypot(fields["U850"], fields["V850"])
    return None


def river_strength(fields: Mapping[str, np.ndarray], lat: np.ndarray, config: ARConfig):
    """The damped field that is thresholded: IVT (or its proxy) or TMQ, times the damping."""
    strength = ivt_magnitude(fields) if config.field == "ivt" else None
    if strength is None:
        strength = fields["TMQ"]
    return strength * _damping(lat, config).astype(strength.dtype)[:, None]


def _tropics(lat, shape, config: ARConfig) -> np.ndarray:
    """Boolean (lat, lon): pixels within ``exclude_tropics_deg`` of the equator."""
    near = np.abs(np.asarray(lat, dtype=float)) < config.exclude_tropics_deg
    return np.broadcast_to(near[:, None], shape)


def transport_rivers(
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: ARConfig,
    *,
    periodic: bool = True,
    exclude: np.ndarray | None = None,
    threshold: np.ndarray | float | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Rivers as IVT objects (the transport method; see the module's docstring).

    ``threshold`` (kg m-1 s-1, a number or a (lat, lon) field such as a per-grid-point
    percentile) defaults to ``config.ivt_threshold``, or ``config.proxy_threshold`` when the
    fields hold no IVT and the proxy is used. Returns what :func:`detect_rivers` does.
    """
    if threshold is None:
        true_ivt = "IVT" in fields or {"IVTU", "IVTV"} <= set(fields)
        threshold = config.ivt_threshold if true_ivt else config.proxy_threshold
    tropics = np.abs(np.asarray(lat, dtype=float)) < config.exclude_tropics_deg
    ivt, above = _ivt_above(fields, threshold, tropics, exclude)
    rivers, table, (where, idx) = _river_rules(
        above, fields, lat, lon, config, periodic=periodic, strength=ivt
    )
    mask = rivers > 0
    n = len(table["label"])
    if n == 0:
        return mask, _describe(rivers, 0, lat, lon, fields)
    table["max_ivt"] = _max_at(ivt.ravel()[where], idx, n)
    table["max_wind"] = (
        _max_at(np.hypot(fields["U850"].ravel()[where], fields["V850"].ravel()[where]), idx, n)
        if "U850" in fields and "V850" in fields
        else np.full(n, np.nan)
    )
    return mask, pd.DataFrame(table)


def _ivt_above(
    fields: Mapping[str, np.ndarray], threshold, rows=None, exclude=None
) -> tuple[np.ndarray, np.ndarray]:
    """The IVT (:func:`ivt_magnitude`) and where it reaches ``threshold`` (a number or a
    (lat, lon) field) outside the latitude ``rows`` (boolean) and the pixels ``exclude``
    (boolean (lat, lon)) left out; the IVT is right only there (0 elsewhere) when it comes
    from its components or the proxy.

    The square of the transport, a few multiplications, rules out nearly all the grid
    (rivers are a few per cent of it) with a margin of one per cent; :func:`numpy.hypot` runs
    only on the rest, which gives each grid point what it gives on the whole grid.
    """
    if "IVT" in fields or not ({"IVTU", "IVTV"} <= set(fields) or "TMQ" in fields):
        ivt = ivt_magnitude(fields)
        if ivt is None:
            raise ValueError("the transport method needs IVT, IVTU and IVTV, or TMQ, U850 and V850")
        above = ivt >= threshold
        if rows is not None:
            above[rows] = False
        if exclude is not None:
            above &= ~exclude
        return ivt, above
    proxy = not {"IVTU", "IVTV"} <= set(fields)
    if proxy and not {"U850", "V850"} <= set(fields):
        raise ValueError("the transport method needs IVT, IVTU and IVTV, or TMQ, U850 and V850")
    u, v = (fields["U850"], fields["V850"]) if proxy else (fields["IVTU"], fields["IVTV"])
    square = u * u
    square += v * v
    if proxy:
        square *= fields["TMQ"]
        square *= fields["TMQ"]
    near = np.square(np.maximum(threshold, 0.0) * 0.99)
    # NaN (and inf - inf) are kept for the exact test
    where = np.flatnonzero(~(square < near))
    if rows is not None:
        where = where[~rows[where // square.shape[-1]]]
    if exclude is not None:
        where = where[~exclude.ravel()[where]]
    hyp = np.hypot(u.ravel()[where], v.ravel()[where])
    value = fields["TMQ"].ravel()[where] * hyp if proxy else hyp
    ivt = np.zeros(np.shape(u), value.dtype)
    ivt.ravel()[where] = value
    above = np.zeros(ivt.shape, bool)
    limit = threshold
    if np.ndim(threshold):
        limit = np.broadcast_to(threshold, ivt.shape).ravel()[where]
    above.ravel()[where[value >= limit]] = True
    return ivt, above


def river_rules(
    mask: np.ndarray,
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: ARConfig,
    *,
    periodic: bool = True,
    strength: np.ndarray | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """The river definition's object rules (steps 3-5 of the transport method) on a mask.

    The one place these rules live: :func:`transport_rivers` applies them to its IVT objects,
    :func:`rule_classes` to a network's predicted rivers.

    1. connected components of ``mask`` (``config.connectivity``; joined across the 0/360 seam
       when ``periodic``), with ``strength`` given and ``split_ratio`` set, parted at deep IVT
       saddles (:func:`climnb.labels.components.split_at_saddles`); those smaller than
       ``min_area_km2`` left out;
    2. kept when length >= ``ivt_min_length_km``, length / width >= ``ivt_min_aspect`` and the
       centroid's ``|latitude|`` within ``ivt_lat_band``;
    3. where the meridional transport is known (``IVTV``, or ``TMQ * V850`` when the fields
       hold no ``IVT``; see :func:`rule_variables`) and ``ivt_min_poleward`` is set, kept only
       when the object's mean poleward transport reaches it.

    Parameters
    ----------
    mask : boolean (lat, lon), the candidate river pixels.
    fields : 2-D (lat, lon) arrays without NaN; only the meridional transport is read.
    lat, lon : grid coordinates (degrees).
    config : the settings (the ``ivt_*`` ones, ``min_area_km2`` and ``connectivity``).
    periodic : whether longitude wraps (a global grid).
    strength : the IVT (or proxy) the mask was thresholded from, (lat, lon); without it
        (a network's mask) objects are not parted.

    Returns
    -------
    rivers : int32 (lat, lon), 0 background and 1..n the objects kept, in label order
        (``rivers > 0`` is the mask of the rivers).
    table : one row per river kept, the columns of
        :data:`climnb.labels.components.MEASURE_COLUMNS` (``label`` 1..n).

    Examples
    --------
    Two bands 2,300 km long at 40 degrees north, one carrying vapour north, one south:

    >>> lat, lon = np.linspace(-90, 90, 73), np.arange(0, 360, 2.5)
    >>> mask = np.zeros((73, 144), bool)
    >>> mask[52:54, 10:22] = mask[52:54, 60:72] = True
    >>> v = np.zeros(mask.shape)
    >>> v[:, :40] = 5.0  # northward in the first band's longitudes
    >>> v[:, 40:] = -5.0
    >>> fields = {"TMQ": np.full(mask.shape, 30.0), "V850": v}
    >>> rivers, table = river_rules(mask, fields, lat, lon, ARConfig())
    >>> int(rivers.max()), bool((rivers[:, 10:22] == 1).any()), bool(rivers[:, 60:72].any())
    (1, True, False)
    >>> table.length_km.round(-2).tolist()
    [2300.0]
    """
    rivers, table, _ = _river_rules(
        mask, fields, lat, lon, config, periodic=periodic, strength=strength
    )
    return rivers, pd.DataFrame(table)


def _river_rules(mask, fields, lat, lon, config: ARConfig, *, periodic, strength):
    """:func:`river_rules` (the table's columns as arrays), and the rivers' pixels (flat
    indices and labels)."""
    labels, n, pixels = _label(mask, periodic, config.connectivity, pixels=True)
    if strength is not None and config.split_ratio is not None:
        labels, n, pixels = _parted(
            labels, n, pixels, mask, strength, fields, lat, lon, config, periodic
        )
    shapes, keep, where, idx = _rules(labels, n, fields, lat, lon, config, pixels)
    candidates = shapes["label"].astype(int)
    kept = candidates[keep]
    lut = np.zeros(n + 1, np.int32)
    lut[kept] = np.arange(1, kept.size + 1)
    rivers = np.zeros(labels.shape, np.int32)
    value = lut[idx]
    rivers.ravel()[where] = value
    log.debug("%d objects, %d rivers", candidates.size, kept.size)
    table = {c: shapes[c][keep] for c in MEASURE_COLUMNS}
    table["label"] = np.arange(1, kept.size + 1)
    river = value > 0
    return rivers, table, (where[river], value[river])


def _rules(labels, n, fields, lat, lon, config: ARConfig, pixels):
    """The objects' shapes (those of ``min_area_km2`` or more), which of them pass the rules,
    and the labelled pixels (``pixels``: flat indices and labels)."""
    # every step touches only the labelled pixels, not the whole grid
    where, idx = pixels
    shapes = _measure(labels, n, lat, lon, min_area_km2=config.min_area_km2, pixels=(where, idx))
    keep = _shaped(shapes, config)
    if config.ivt_min_poleward is not None and keep.any():
        transport = _poleward_at(fields, lat, where, labels.shape[1])
        if transport is not None:
            total = np.bincount(idx, weights=transport, minlength=n + 1)
            mean = total / np.maximum(np.bincount(idx, minlength=n + 1), 1)
            keep = keep & (mean[shapes["label"].astype(int)] >= config.ivt_min_poleward)
    return shapes, keep, where, idx


def _shaped(shapes: dict, config: ARConfig) -> np.ndarray:
    """Which objects (:func:`climnb.labels.components._measure`) have a river's shape:
    length, length / width and latitude."""
    lo, hi = config.ivt_lat_band
    length, width = shapes["length_km"], shapes["width_km"]
    lat = np.abs(shapes["lat"])
    return (
        (length >= config.ivt_min_length_km)
        & (length >= config.ivt_min_aspect * width)
        & (lat >= lo)
        & (lat <= hi)
    )


def _parted(whole, n_whole, pixels, mask, strength, fields, lat, lon, config: ARConfig, periodic):
    """The objects ``whole`` (their ``pixels``) with those parted at deep saddles of
    ``strength`` whose parts hold two or more of a river's shape (length, length / width and
    latitude, as in :func:`_rules`); an object with fewer is left whole. Returns the labels,
    their number and their pixels."""
    parts, n_parts, (where, idx) = _split(
        mask,
        strength,
        lat,
        lon,
        min_ratio=config.split_ratio,
        min_area_km2=config.split_min_area_km2,
        levels=config.split_levels,
        periodic=periodic,
        connectivity=config.connectivity,
        components=(whole, n_whole),
        pixels=pixels,
    )
    if n_parts <= n_whole:
        return whole, n_whole, pixels
    parent = np.zeros(n_parts + 1, np.int64)
    parent[idx] = whole.ravel()[where]
    cut = np.bincount(parent[1:], minlength=n_whole + 1) >= 2  # the objects cut in pieces
    sel = cut[parent[idx]]  # only their parts are measured
    shapes = _measure(
        parts, n_parts, lat, lon, min_area_km2=config.min_area_km2, pixels=(where[sel], idx[sel])
    )
    shaped = _shaped(shapes, config)
    rivers = np.bincount(parent[shapes["label"].astype(int)[shaped]], minlength=n_whole + 1)
    parted = rivers >= 2
    if not parted.any():
        return whole, n_whole, pixels
    log.debug("%d objects parted into %s rivers", parted.sum(), rivers[parted].tolist())
    # the objects kept whole, then the parts of those parted, numbered in that order; only
    # the objects' pixels are touched (the parts' pixels are among them)
    lut = np.where(parted, 0, np.arange(n_whole + 1))
    pick = parted[parent[idx]]
    present = np.zeros(n_whole + n_parts + 1, bool)
    present[lut[1:]] = True
    present[idx[pick] + n_whole] = True
    present[0] = False
    number = np.zeros(present.size, np.int32)
    number[present] = np.arange(1, int(present.sum()) + 1)
    out = np.zeros(whole.shape, np.int32)
    w_whole, i_whole = pixels
    out.ravel()[w_whole] = number[lut[i_whole]]
    out.ravel()[where[pick]] = number[idx[pick] + n_whole]
    value = out.ravel()[w_whole]
    return out, int(present.sum()), (w_whole[value > 0], value[value > 0])


def rule_variables(available, config: ARConfig) -> tuple[str, ...]:
    """The fields :func:`river_rules` reads: the meridional transport ``IVTV``, else ``TMQ``
    and ``V850`` (the proxy's ``TMQ * V850``); none when ``ivt_min_poleward`` is None.

    Raises
    ------
    ValueError
        Naming the missing variables, when ``available`` (variable names) holds neither.

    >>> rule_variables(["TMQ", "U850", "V850", "PSL"], ARConfig())
    ('TMQ', 'V850')
    >>> rule_variables(["TMQ", "U850"], ARConfig())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the river rules need the meridional vapour transport: ... missing V850 ...
    """
    have = set(map(str, available))
    if config.ivt_min_poleward is None:
        return ()
    if "IVTV" in have:
        return ("IVTV",)
    if {"TMQ", "V850"} <= have:
        return ("TMQ", "V850")
    missing = ", ".join(v for v in ("TMQ", "V850") if v not in have)
    raise ValueError(
        "the river rules need the meridional vapour transport: IVTV, or TMQ and V850; "
        f"missing {missing} (found {', '.join(sorted(have)) or 'no variables'}); or switch "
        "the poleward rule off (ARConfig(ivt_min_poleward=None))"
    )


def rule_classes(
    classes: np.ndarray,
    fields: Mapping[str, np.ndarray],
    lat: np.ndarray,
    lon: np.ndarray,
    config: ARConfig,
    *,
    periodic: bool = True,
) -> np.ndarray:
    """A class mask (0 background, 1 storm, 2 river; (lat, lon)) whose rivers obey the river
    definition: river pixels within ``exclude_tropics_deg`` of the equator or within
    ``storm_buffer_km`` of a storm pixel become background, then every remaining river object
    that :func:`river_rules` rejects. Storms are left as they are.

    ``fields``: what :func:`rule_variables` names, (lat, lon); missing values (NaN) are taken
    as the field's median, as the labeller does. Returns a new uint8 array.
    """
    classes = np.asarray(classes)
    river = classes == 2
    river &= ~_tropics(lat, classes.shape, config)
    river &= ~storm_surroundings(classes == 1, lat, config.storm_buffer_km)
    fields = {k: _median_filled(np.asarray(v)) for k, v in fields.items()}
    rivers, _ = river_rules(river, fields, lat, lon, config, periodic=periodic)
    return np.where(classes == 2, np.where(rivers > 0, 2, 0), classes).astype(np.uint8)


def _median_filled(f: np.ndarray) -> np.ndarray:
    bad = ~np.isfinite(f)
    if not bad.any():
        return f
    if bad.all():
        return np.zeros_like(f)
    return np.where(bad, np.median(f[~bad]), f)


def storm_surroundings(
    storm_mask: np.ndarray, lat: np.ndarray, buffer_km: float, storms=()
) -> np.ndarray:
    """The storms' masks grown by ``buffer_km``: their circulation, where the strong transport
    is the storm's own (the grid's latitude spacing sets the step).

    With ``storms`` (objects with ``rows`` and ``cols`` of their pixels), each storm is grown in
    its own box, ``steps`` pixels larger than the storm on every side: a growth by ``steps``
    cannot reach farther, and within the box it gives what growing the whole grid would (each
    pixel's path back to the storm stays inside the box).
    """
    if buffer_km <= 0 or not storm_mask.any():
        return storm_mask
    step_km = abs(float(lat[1] - lat[0])) * np.pi * 6371.0 / 180.0
    steps = int(np.ceil(buffer_km / step_km))
    if not storms:
        return ndimage.binary_dilation(storm_mask, iterations=steps)
    out = storm_mask.copy()
    for s in storms:
        if not s.rows.size:
            continue
        box = tuple(
            slice(max(int(i.min()) - steps, 0), int(i.max()) + steps + 1) for i in (s.rows, s.cols)
        )
        out[box] |= ndimage.binary_dilation(storm_mask[box], iterations=steps)
    return out


def _poleward_at(fields, lat, where: np.ndarray, ncol: int) -> np.ndarray | None:
    """Poleward vapour transport (kg m-1 s-1; northward in the north, southward in the south)
    at the flat indices ``where``, or None when the meridional transport is not known."""
    if "IVTV" in fields:
        v = fields["IVTV"].ravel()[where]
    elif "IVT" not in fields and {"TMQ", "V850"} <= set(fields):
        v = fields["TMQ"].ravel()[where] * fields["V850"].ravel()[where]
    else:
        return None
    sign = np.sign(np.asarray(lat, dtype=v.dtype))
    return v * sign[where // ncol]


def _max_at(values: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    """Maximum of ``values`` per label 1..n of ``idx`` (as floats)."""
    out = np.full(n + 1, -np.inf)
    np.maximum.at(out, idx, values.astype(float))
    return out[1:]


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
    fields : 2-D (lat, lon) arrays, ascending latitude, without NaN: ``TMQ`` (for
        ``field="tmq"`` or ``edge="half_max"``) and what :func:`ivt_magnitude` needs for
        ``field="ivt"`` (without it, TMQ is thresholded).
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
    tropics = _tropics(lat, strength.shape, config)
    exclude = tropics if exclude is None else exclude | tropics
    threshold = np.percentile(strength, config.percentile)
    above = (strength > threshold) & ~exclude
    labels, n, pixels = _label(above, periodic, config.connectivity, pixels=True)
    shapes = measure(labels, n, lat, lon, min_area_km2=config.min_area_km2, pixels=pixels)
    candidates = shapes.label.to_numpy().astype(int)
    keep = np.ones(len(shapes), bool)
    if config.edge == "half_max":
        labels, n, pixels, anomaly = _half_max(
            labels, candidates, fields["TMQ"], lat, lon, config, periodic, exclude, pixels
        )
        shapes = measure(labels, n, lat, lon, min_area_km2=config.min_area_km2, pixels=pixels)
        mean = _label_mean(anomaly, pixels, n)
        keep = mean[shapes.label.to_numpy().astype(int)] >= config.min_anomaly
    kept = shapes.label.to_numpy().astype(int)[keep & _river_like(shapes, config)]
    log.debug("%d objects above %.3g, %d river-like", candidates.size, threshold, kept.size)
    labels, n, pixels = _relabel(labels, n, kept, pixels)
    return labels > 0, _describe(labels, n, lat, lon, fields, pixels)


def _label_mean(values: np.ndarray, pixels, n: int) -> np.ndarray:
    """Mean of ``values`` over each label 1..n of the labelled ``pixels`` (flat indices and
    labels; 0 for an empty label, and for the background, label 0)."""
    where, idx = pixels
    total = np.bincount(idx, weights=values.ravel()[where], minlength=n + 1)
    return total / np.maximum(np.bincount(idx, minlength=n + 1), 1)


def _river_like(shapes: pd.DataFrame, config: ARConfig) -> np.ndarray:
    lo, hi = config.lat_band
    return (
        (shapes.length_km >= config.min_length_km)
        & (shapes.length_km >= config.min_aspect * shapes.width_km)
        & (shapes.area_km2 <= config.max_area_km2)
        & shapes.lat.abs().between(lo, hi)
    ).to_numpy()


def _relabel(labels: np.ndarray, n: int, kept: np.ndarray, pixels):
    """The labels ``kept`` numbered 1.., the others made background, and their pixels."""
    lut = np.zeros(n + 1, np.int32)
    lut[kept] = np.arange(1, kept.size + 1)
    where, idx = pixels
    value = lut[idx]
    out = np.zeros(labels.shape, np.int32)
    out.ravel()[where] = value
    return out, int(kept.size), (where[value > 0], value[value > 0])


def tmq_anomaly(tmq: np.ndarray, lat: np.ndarray, config: ARConfig) -> np.ndarray:
    """TMQ minus the zonal median of its latitude row, times the tropical damping.

    Rivers cover a small part of any latitude circle, so the median is the air around them.
    """
    return (tmq - np.median(tmq, axis=1, keepdims=True)) * _damping(lat, config)[:, None].astype(
        tmq.dtype
    )


def _half_max(labels, candidates, tmq, lat, lon, config: ARConfig, periodic, exclude, pixels):
    """Redraw each candidate's edge at ``edge_fraction`` of its local peak TMQ anomaly;
    returns :func:`_label` of the redrawn objects and the anomaly (right in the candidates'
    rows, 0 elsewhere).

    The anomaly is :func:`tmq_anomaly`, damped in the tropics like the strength field. The
    peak is local: the largest anomaly within ``edge_window_km`` (so that where two rivers
    cross, or one carries more water, the rest of the river keeps its own edge), but at least
    half the candidate's 90th percentile (so that noise beside a river is not measured against
    itself). A candidate whose 90th percentile is below ``min_anomaly`` is dropped. The redrawn
    object may not reach beyond ``grow_pixels`` of the candidate, so that it cannot run along
    unrelated moist air.

    The anomaly and its local maximum are computed only in the rows the candidates' windows
    read (and, for the maximum, the filter's reach beyond them), which gives the same values
    there as over the whole grid.
    """
    nrow = labels.shape[0]
    size = _window(lat, lon, config)
    grow = config.grow_pixels
    # each candidate's first and last row, from its pixels (raster order within a label)
    where, idx = pixels
    order = np.argsort(idx, kind="stable")
    bounds = np.searchsorted(idx[order], np.arange(int(idx.max(initial=0)) + 2))
    row = where // labels.shape[1]
    windows = {}
    for lab in candidates:
        first, last = row[order[bounds[lab]]], row[order[bounds[lab + 1] - 1]]
        windows[lab] = slice(max(int(first) - grow, 0), min(int(last) + 1 + grow, nrow))
    reach_rows = np.zeros(nrow + 1, np.int64)  # the rows within the filter's reach, as runs
    for win in windows.values():
        reach_rows[max(win.start - size[0] // 2, 0)] += 1
        reach_rows[min(win.stop + size[0] // 2, nrow)] -= 1
    needed = np.cumsum(reach_rows[:nrow]) > 0
    dtype = tmq_anomaly(tmq[:1, :1], np.asarray(lat)[:1], config).dtype
    anomaly, local = np.zeros(labels.shape, dtype), np.zeros(labels.shape, dtype)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], needed.astype(np.int8), [0]])))
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        anomaly[a:b] = tmq_anomaly(tmq[a:b], np.asarray(lat)[a:b], config)
        local[a:b] = ndimage.maximum_filter(
            anomaly[a:b], size=size, mode=("nearest", "wrap" if periodic else "nearest")
        )
    out = np.zeros(labels.shape, bool)
    for lab in candidates:
        win = windows[lab]
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
    return (*_label(out, periodic, config.connectivity, pixels=True), anomaly)


def _window(lat, lon, config: ARConfig) -> tuple[int, int]:
    """Rows and columns of a box ``2 * edge_window_km`` across at 45 degrees latitude."""
    km_per_deg = np.pi * EARTH_RADIUS_KM / 180.0
    dlat = abs(float(lat[1] - lat[0])) * km_per_deg
    dlon = abs(float(lon[1] - lon[0])) * km_per_deg * np.cos(np.radians(45.0))
    return (
        2 * int(np.ceil(config.edge_window_km / dlat)) + 1,
        2 * int(np.ceil(config.edge_window_km / dlon)) + 1,
    )


def _describe(labels, n, lat, lon, fields, pixels=None) -> pd.DataFrame:
    """The rivers' shapes, and their IVT and 850 hPa wind maxima, read at their ``pixels``
    (those of ``labels`` when not given) only."""
    if n == 0:
        shapes = measure(labels, n, lat, lon)
        return shapes.assign(max_ivt=pd.Series(dtype=float), max_wind=pd.Series(dtype=float))
    if pixels is None:
        pixels = label_pixels(labels)
    where, idx = pixels
    shapes = measure(labels, n, lat, lon, pixels=pixels)
    index = shapes.label.to_numpy().astype(int)
    nan = np.full(index.size, np.nan)
    at = {k: np.asarray(fields[k]).ravel()[where] for k in _TRANSPORT if k in fields}
    ivt = ivt_magnitude(at)
    winds = "U850" in fields and "V850" in fields
    return shapes.assign(
        max_ivt=nan if ivt is None else _label_max(ivt, idx, index),
        max_wind=_label_max(np.hypot(at["U850"], at["V850"]), idx, index) if winds else nan,
    )


#: The fields :func:`ivt_magnitude` and the wind maximum read.
_TRANSPORT = ("IVT", "IVTU", "IVTV", "TMQ", "U850", "V850")


def _label_max(values: np.ndarray, idx: np.ndarray, index: np.ndarray) -> np.ndarray:
    """:func:`climnb.labels.components.label_max` from the labelled pixels' ``values`` and
    labels ``idx``."""
    out = np.full(int(idx.max(initial=0)) + 1, -np.inf)
    np.maximum.at(out, idx, values.astype(float))
    out[~np.isfinite(out)] = np.nan
    return out[np.asarray(index, dtype=int)]
