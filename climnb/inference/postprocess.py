"""A network's rivers put through the river definition: the network proposes, the rules decide.

:func:`apply_river_rules` takes a predicted class mask (0 background, 1 tropical cyclone, 2
atmospheric river) and the input fields of the same steps, and keeps only the predicted rivers
that the atmospheric-river definition the teacher labels with accepts
(:func:`climnb.labels.ar.rule_classes`, the same code as the labeller's
:func:`climnb.labels.ar.river_rules`):

* no river pixel within ``exclude_tropics_deg`` of the equator or ``storm_buffer_km`` of a
  predicted storm;
* each river object (connected, joined across the 0/360 seam on a global grid) at least
  ``ivt_min_length_km`` long, ``ivt_min_aspect`` times as long as wide, its centroid within
  ``ivt_lat_band``, and carrying a mean poleward vapour transport of at least
  ``ivt_min_poleward`` (``IVTV``, or the proxy ``TMQ * V850``, from the input at prediction
  time); objects that fail become background.

Storms are left as predicted, and so are the probabilities, when asked for. This is the
standard detector design of a segmentation network followed by the object rules of the
definition (a hybrid detector): where the network has learnt the shapes but not a rule over a
whole object (the sign of its mean transport), the rule is applied exactly. Against the
teacher the gain is by construction; the figures are the hybrid's, not the network's
(docs/network_quality.md).

Which settings: those of :class:`climnb.labels.ARConfig` (transport method), given, or by
:func:`river_config` the teacher's recorded in the model bundle (``extra["label_config"]``),
else ``ARConfig()``'s defaults, which are the labeller's defaults and the demo's teacher.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> ruled = apply_river_rules(ds.truth, ds)  # the truth's rivers through the teacher's rules
>>> ruled.dims, ruled.dtype.name, bool(((ruled == 2) <= (ds.truth == 2)).all())
(('time', 'lat', 'lon'), 'uint8', True)
"""

from __future__ import annotations

import logging

import numpy as np
import xarray as xr

from climnb.io.grid import to_caller_grid
from climnb.io.netcdf import normalize
from climnb.labels.ar import rule_classes, rule_variables
from climnb.labels.config import ARConfig, LabelConfig
from climnb.labels.sphere import is_periodic

__all__ = ["apply_river_rules", "river_config", "teacher_config", "describe_rules"]

log = logging.getLogger(__name__)


def river_config(bundle) -> tuple[ARConfig, str]:
    """The river settings for a model bundle's predictions, and where they came from.

    The teacher's :class:`~climnb.labels.ARConfig` when the bundle records it
    (``bundle.extra["label_config"]["ar"]``, a :meth:`climnb.labels.LabelConfig.to_dict`),
    else ``ARConfig()``: the labeller's defaults, the demo's teacher. Training records them
    when the sample set's ``stats.h5`` does (sets written from labels that
    :func:`climnb.labels.label_dataset` or ``climnb label`` made); older sets and expert
    labels carry none.
    """
    recorded = teacher_config(bundle)
    if recorded is None:
        return ARConfig(), "ARConfig() defaults (the bundle records no teacher settings)"
    return recorded.ar, "the teacher's ARConfig recorded in the bundle"


def teacher_config(bundle) -> LabelConfig | None:
    """The :class:`~climnb.labels.LabelConfig` the bundle's training labels were made with
    (``bundle.extra["label_config"]``), or None where it records none."""
    recorded = bundle.extra.get("label_config")
    if not recorded:
        return None
    try:
        return LabelConfig.from_dict(recorded)
    except (TypeError, ValueError, AttributeError) as err:
        where = getattr(bundle, "path", "the model bundle")
        raise ValueError(
            f"{where}: the teacher's settings it records (extra label_config) are not "
            f"a LabelConfig: {err}"
        ) from None


def describe_rules(config: ARConfig, variables: tuple[str, ...] = ("TMQ", "V850")) -> str:
    """One line saying which rules a river passed (for the output's attributes and logs).

    >>> describe_rules(ARConfig())  # doctest: +ELLIPSIS
    'river objects >= 2000 km long, length / width >= 2, centroid at 20-80 deg, ...'
    """
    lo, hi = config.ivt_lat_band
    parts = [
        f"river objects >= {config.ivt_min_length_km:g} km long",
        f"length / width >= {config.ivt_min_aspect:g}",
        f"centroid at {lo:g}-{hi:g} deg",
    ]
    if config.ivt_min_poleward is not None:
        source = "IVTV" if "IVTV" in variables else "TMQ x V850"
        parts.append(f"mean poleward transport ({source}) >= {config.ivt_min_poleward:g}")
    parts.append(f"no river pixel within {config.storm_buffer_km:g} km of a storm")
    parts.append(f"or {config.exclude_tropics_deg:g} deg of the equator")
    return ", ".join(parts) + " (climnb.labels.ar.river_rules)"


def apply_river_rules(
    prediction: xr.DataArray, fields: xr.Dataset, config: ARConfig | None = None
) -> xr.DataArray:
    """``prediction`` with the rivers that the river definition rejects set to background.

    Lazy where either input is (dask): one task per time chunk of ``prediction``.

    Parameters
    ----------
    prediction : class ids (time, lat, lon): 0 background, 1 tropical cyclone, 2 atmospheric
        river (what :func:`climnb.inference.predict.predict` returns), on any grid convention
        :func:`climnb.io.netcdf.normalize` understands.
    fields : the input fields of those steps (on the same grid, any convention) with the
        meridional transport: ``IVTV``, or ``TMQ`` and ``V850`` (:func:`rule_variables`);
        other variables are not read.
    config : the river settings; default ``ARConfig()`` (see :func:`river_config`).

    Returns
    -------
    xarray.DataArray
        uint8, on the grid of ``prediction``, its attributes plus ``river_rules``
        (:func:`describe_rules`).

    Raises
    ------
    ValueError
        Naming the missing variables, when ``fields`` lacks the transport; when it lacks time
        steps of ``prediction``, or lies on another grid.
    """
    config = config or ARConfig()
    names = rule_variables(normalize(fields).data_vars, config)
    canon = normalize(fields, required=names)
    name = prediction.name or "prediction"
    pred = normalize(prediction.to_dataset(name=name), required=[name], mask_fill=False)[name]
    _check_grid(canon, pred)
    canon = _same_steps(canon[list(names)], pred) if names else canon[[]]
    if any(v.chunks is not None for v in (pred, *canon.data_vars.values())):
        pred = pred.chunk({"lat": -1, "lon": -1})
        canon = canon.chunk({"time": pred.chunks[0], "lat": -1, "lon": -1})
    lat, lon = pred.lat.values.astype(float), pred.lon.values.astype(float)
    out = xr.apply_ufunc(
        _rule_steps,
        pred,
        *(canon[n] for n in names),
        input_core_dims=[["lat", "lon"]] * (1 + len(names)),
        output_core_dims=[["lat", "lon"]],
        dask="parallelized",
        output_dtypes=[np.uint8],
        kwargs={"names": names, "lat": lat, "lon": lon, "config": config},
    )
    rules = describe_rules(config, names)
    log.info("river rules on the prediction: %s", rules)
    out = out.transpose("time", "lat", "lon").rename(name)
    out.attrs = {**prediction.attrs, "river_rules": rules}
    return to_caller_grid(out, prediction)


def _rule_steps(classes: np.ndarray, *fields: np.ndarray, names, lat, lon, config) -> np.ndarray:
    """:func:`climnb.labels.ar.rule_classes` on each (lat, lon) step of a block."""
    out = np.empty(classes.shape, np.uint8)
    periodic = is_periodic(lon)
    for k in np.ndindex(classes.shape[:-2]):
        step = {n: f[k] for n, f in zip(names, fields, strict=True)}
        out[k] = rule_classes(classes[k], step, lat, lon, config, periodic=periodic)
    return out


def _same_steps(fields: xr.Dataset, prediction: xr.DataArray) -> xr.Dataset:
    """``fields`` at the time steps of ``prediction`` (by time where both have a time axis
    with values, else by position)."""
    if "time" in fields.indexes and "time" in prediction.indexes:
        times = prediction.time.values
        missing = ~np.isin(times, fields.time.values)
        if missing.any():
            raise ValueError(
                f"the fields lack {int(missing.sum())} of the prediction's {times.size} time "
                f"steps (the first: {times[missing][0]})"
            )
        return fields.sel(time=times)
    if fields.sizes["time"] != prediction.sizes["time"]:
        raise ValueError(
            f"the fields have {fields.sizes['time']} time steps, the prediction "
            f"{prediction.sizes['time']}"
        )
    return fields


def _check_grid(fields: xr.Dataset, prediction: xr.DataArray) -> None:
    for dim in ("lat", "lon"):
        a, b = fields[dim].values, prediction[dim].values
        if a.shape != b.shape or not np.allclose(a, b, rtol=0, atol=1e-4):
            raise ValueError(
                f"the fields' grid is not the prediction's: {fields.sizes['lat']} x "
                f"{fields.sizes['lon']} against {prediction.sizes['lat']} x "
                f"{prediction.sizes['lon']} ({dim} differs)"
            )
