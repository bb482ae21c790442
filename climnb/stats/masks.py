"""Class masks as climnb and others write them: labels, predictions, truth, ClimateNet ``LABELS``.

A class mask is an integer (time, lat, lon) variable whose ``flag_values`` and
``flag_meanings`` say which value is which class. :func:`class_mask` finds it in a Dataset,
checks the flags and returns it with climnb's class ids (0 background, 1 tropical cyclone,
2 atmospheric river), lazily; per-class probabilities (``climnb predict --probabilities``)
become the most probable class. :func:`mask_classes` says which classes a mask holds, and
:func:`check_same_grid` refuses masks and fields on different grids.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> m = class_mask(ds)
>>> m.name, m.dtype.name, mask_classes(m)
('truth', 'uint8', ('tropical_cyclone', 'atmospheric_river'))
"""

from __future__ import annotations

import logging

import numpy as np
import xarray as xr

from climnb.io.channels import CLASS_NAMES

__all__ = [
    "MASK_NAMES",
    "MISSING",
    "MISSING_LIMIT",
    "class_mask",
    "mask_classes",
    "check_same_grid",
    "check_missing",
    "CLASS_ALIASES",
]

log = logging.getLogger(__name__)

#: The class id of a missing value (NaN in a float mask): neither background nor a class.
MISSING = 255
#: The largest share of missing values a mask or a field may have; more is refused.
MISSING_LIMIT = 0.05

#: Variables looked for, in order, when no variable is named.
MASK_NAMES = ("prediction", "labels", "truth", "LABELS", "probability")

#: Spellings of the class names in the ``flag_meanings`` of masks from elsewhere.
CLASS_ALIASES = {
    "background": "background",
    "bg": "background",
    "none": "background",
    "tropical_cyclone": "tropical_cyclone",
    "tc": "tropical_cyclone",
    "tropical_cyclones": "tropical_cyclone",
    "atmospheric_river": "atmospheric_river",
    "ar": "atmospheric_river",
    "atmospheric_rivers": "atmospheric_river",
}


def class_mask(
    ds: xr.Dataset | xr.DataArray, variable: str | None = None, *, source: str = "input"
) -> xr.DataArray:
    """The class mask of ``ds`` with climnb's class ids, lazy, uint8, dims (time, lat, lon).

    Parameters
    ----------
    ds : a Dataset holding a mask (found by ``variable``, else the first of
        :data:`MASK_NAMES`, else the only variable with ``flag_values``), or the mask itself.
    variable : the mask's name.
    source : what to call the input in error messages (its path).

    Raises
    ------
    ValueError
        Naming ``source``: no mask, a mask without ``flag_values``/``flag_meanings``, a
        meaning climnb does not know, or values that are not integers.
    """
    da = ds if isinstance(ds, xr.DataArray) else _find(ds, variable, source)
    if da.name == "probability" or "class" in da.dims:
        return _argmax(da, source)
    values, meanings = _flags(da, source)
    ids = [CLASS_NAMES.index(CLASS_ALIASES[m]) for m in meanings]
    if not np.issubdtype(da.dtype, np.integer) and not np.issubdtype(da.dtype, np.floating):
        raise ValueError(f"{source}: mask {da.name} has dtype {da.dtype}; expected integers")
    out = _as_ids(da) if list(values) == ids else _remap(da, values, ids)
    if "time" not in out.dims:
        out = out.expand_dims("time")
    out = out.transpose("time", "lat", "lon")
    present = _present(da, ids)
    return out.assign_attrs(
        flag_values=np.arange(len(CLASS_NAMES), dtype=np.uint8),
        flag_meanings=" ".join(CLASS_NAMES),
        classes=" ".join(present),
        source_file=str(source),
    ).rename(da.name)


def mask_classes(mask: xr.DataArray) -> tuple[str, ...]:
    """The classes (names, not background) a mask from :func:`class_mask` was made for."""
    return tuple(mask.attrs.get("classes", " ".join(CLASS_NAMES[1:])).split())


def check_same_grid(a: xr.DataArray | xr.Dataset, b, names: tuple[str, str]) -> None:
    """Refuse two objects whose latitudes or longitudes differ; ``names`` name them."""
    for dim in ("lat", "lon"):
        x, y = np.asarray(a[dim].values, float), np.asarray(b[dim].values, float)
        if x.shape != y.shape or not np.allclose(x, y, rtol=0, atol=1e-4):
            raise ValueError(
                f"{names[1]}: grid does not match {names[0]}: {dim} has {y.size} values "
                f"({y.min():g}..{y.max():g}) against {x.size} ({x.min():g}..{x.max():g}); "
                "put both on the same grid first"
            )


def _find(ds: xr.Dataset, variable: str | None, source: str) -> xr.DataArray:
    if variable is not None:
        if variable not in ds.data_vars:
            raise ValueError(
                f"{source}: no variable {variable!r}; it has {', '.join(map(str, ds.data_vars))}"
            )
        return ds[variable]
    for name in MASK_NAMES:
        if name in ds.data_vars:
            return ds[name]
    flagged = [n for n, v in ds.data_vars.items() if "flag_values" in v.attrs]
    if len(flagged) == 1:
        return ds[flagged[0]]
    raise ValueError(
        f"{source}: no class mask (looked for {', '.join(MASK_NAMES)} or one variable with "
        f"flag_values); it has {', '.join(map(str, ds.data_vars)) or 'no variables'}; name it "
        "with --variable"
    )


def _flags(da: xr.DataArray, source: str) -> tuple[list[int], list[str]]:
    values, meanings = da.attrs.get("flag_values"), da.attrs.get("flag_meanings")
    if values is None or meanings is None:
        raise ValueError(
            f"{source}: mask {da.name} has no flag_values/flag_meanings attributes, so its "
            "classes are unknown; set flag_values = 0, 1, 2 and flag_meanings = "
            f"'{' '.join(CLASS_NAMES)}'"
        )
    values = [int(v) for v in np.atleast_1d(values)]
    meanings = str(meanings).split()
    unknown = [m for m in meanings if m.lower() not in CLASS_ALIASES]
    if len(values) != len(meanings) or unknown:
        raise ValueError(
            f"{source}: mask {da.name} has flag_values {values} and flag_meanings "
            f"{' '.join(meanings)!r}, which climnb cannot read as {', '.join(CLASS_NAMES)}"
        )
    return values, [m.lower() for m in meanings]


def check_missing(
    values: xr.DataArray, *, source: str, limit: float = MISSING_LIMIT, missing=None
) -> str:
    """Count the missing values of ``values`` (NaN, or the mask's :data:`MISSING`) per step:
    more than ``limit`` of them is refused with a line naming the variable and the steps;
    else a note of how many there are (empty when none). ``missing``: the per-step counts,
    if computed already. One pass over ``values`` (none for an integer field: no NaN)."""
    if missing is None:
        if values.dtype.kind == "u" and values.dtype.itemsize == 1:  # a class mask
            bad = values == MISSING
        elif values.dtype.kind == "f":
            bad = values.isnull()
        else:
            return ""
        missing = np.asarray(bad.sum([d for d in values.dims if d != "time"]).values)
    missing = np.atleast_1d(missing)
    total = int(missing.sum())
    if total == 0:
        return ""
    size = values.size
    steps = np.flatnonzero(missing)
    share = total / size
    times = values.time.values if "time" in values.dims else np.arange(missing.size)
    where = ", ".join(str(i) for i in steps[:5]) + (" ..." if steps.size > 5 else "")
    text = (
        f"{values.name} has {total} missing values (NaN) in {steps.size} of {missing.size} "
        f"steps ({100 * share:.2g} % of its values; steps {where}, first at {times[steps[0]]})"
    )
    if share > limit:
        raise ValueError(
            f"{source}: {text}: more than {100 * limit:g} %, so the statistics would stand on "
            "what is left; fill them, or give the steps without them (a shorter period)"
        )
    return f"{text}; left out: the statistics use the valid values only"


def _as_ids(da: xr.DataArray) -> xr.DataArray:
    """The mask as uint8 class ids; a float mask's NaN becomes :data:`MISSING`, not 0."""
    if not np.issubdtype(da.dtype, np.floating):
        return da.astype(np.uint8)
    return da.fillna(MISSING).astype(np.uint8)


def _remap(da: xr.DataArray, values: list[int], ids: list[int]) -> xr.DataArray:
    table = np.zeros(max(values) + 1, np.uint8)
    table[values] = ids

    def remap(x):
        x = np.asarray(x, np.float64)
        found = table[np.clip(np.nan_to_num(x), 0, table.size - 1).astype(np.int64)]
        return np.where(np.isnan(x), np.uint8(MISSING), found)  # NaN: missing, not background

    return xr.apply_ufunc(
        remap,
        da,
        dask="parallelized",
        output_dtypes=[np.uint8],
        keep_attrs=True,
    )


def _present(da: xr.DataArray, ids: list[int]) -> tuple[str, ...]:
    """Classes the mask was made for: the labels' own ``classes`` attribute, else its flags."""
    said = da.attrs.get("classes")
    if said:
        return tuple(CLASS_ALIASES.get(c.lower(), c) for c in str(said).split())
    return tuple(CLASS_NAMES[i] for i in sorted(set(ids)) if i > 0)


def _argmax(da: xr.DataArray, source: str) -> xr.DataArray:
    names = [CLASS_ALIASES.get(str(c).lower()) for c in da["class"].values]
    if None in names:
        raise ValueError(
            f"{source}: probabilities of classes {list(da['class'].values)}, which climnb "
            f"cannot read as {', '.join(CLASS_NAMES)}"
        )
    ids = np.array([CLASS_NAMES.index(n) for n in names], np.uint8)
    out = xr.apply_ufunc(
        lambda p: ids[np.argmax(p, axis=-1)],
        da,
        input_core_dims=[["class"]],
        dask="parallelized",
        output_dtypes=[np.uint8],
    )
    out = out.transpose("time", "lat", "lon").rename("prediction")
    return out.assign_attrs(
        flag_values=np.arange(len(CLASS_NAMES), dtype=np.uint8),
        flag_meanings=" ".join(CLASS_NAMES),
        classes=" ".join(n for n in CLASS_NAMES[1:] if n in names),
        source_file=str(source),
    )
