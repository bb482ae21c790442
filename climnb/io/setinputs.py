"""The inputs of a sample set: field files and label files, joined by time.

:func:`open_inputs` opens what ``climnb samples --input`` names: files with the channels and,
optionally, label files (what ``climnb label`` writes), recognised by their variables and
joined to the fields by time; overlapping or mismatched inputs are refused naming the files.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np

from climnb.io.channels import CHANNEL_NAMES
from climnb.io.samples import SampleError

__all__ = ["LABEL_NAMES", "open_inputs"]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike

LABEL_NAMES = ("labels", "truth")


def open_inputs(files: Sequence[PathLike], labels: str | None = None):
    """Open the inputs of a sample set lazily: ``(dataset, label variable name)``.

    ``files`` are field files (the channels, maybe with a label variable) and, optionally,
    label files (a label variable and none of the channels: what ``climnb label`` writes from
    the same fields), recognised by their variables. Label files are joined to the fields by
    time: the same times and the same grid, or the input is refused naming both files.
    Field files that share a time step are refused, naming both files and the first repeated
    time. ``labels``: the label variable (default ``labels``, else ``truth``).
    """
    from climnb.io.netcdf import open_fields  # xarray: only here

    files = [str(f) for f in files]
    fields, masks, kinds = [], [], {}
    for f in files:
        part = open_fields(f)
        has_channels = any(c in part.data_vars for c in CHANNEL_NAMES)
        label = _label_name(part, labels)
        if has_channels:
            fields.append(f)
        elif label is not None:
            masks.append(f)
        else:
            raise SampleError(
                f"{f}: holds neither channels ({', '.join(CHANNEL_NAMES[:3])}, ...) nor a label "
                f"variable ({labels or ' or '.join(LABEL_NAMES)}); it has "
                f"{', '.join(map(str, part.data_vars)) or 'no variables'}"
            )
        kinds[f] = part
    if not fields:
        raise SampleError(f"{', '.join(files)}: no input holds the channels; give the fields too")
    _check_overlap(fields, kinds)
    _check_overlap(masks, kinds)
    ds = kinds[fields[0]] if len(fields) == 1 else open_fields(fields)
    if masks:
        mask = kinds[masks[0]] if len(masks) == 1 else open_fields(masks)
        name = _label_name(mask, labels)
        _check_same_steps(ds, mask, fields, masks)
        var = mask[name]
        ds = ds.assign({name: (var.dims, var.data, var.attrs)})
        log.info("labels %s of %s joined to the fields by time", name, ", ".join(masks))
    else:
        name = _label_name(ds, labels)
    if name is None:
        raise SampleError(
            f"{', '.join(fields)}: no label variable ({labels or ' or '.join(LABEL_NAMES)}); "
            "give the labels file too (climnb label FIELDS --out labels.nc; climnb samples "
            "--input FIELDS labels.nc ...)"
        )
    ds.attrs["climnb_sources"] = files
    return ds, name


def _label_name(ds, labels: str | None) -> str | None:
    names = (labels,) if labels else LABEL_NAMES
    return next((n for n in names if n in ds.data_vars), None)


def _times_text(ds) -> list[str]:
    return [str(t) for t in ds.time.values] if "time" in ds.coords else []


def _check_overlap(files: Sequence[str], parts: dict) -> None:
    """Refuse files that share a time step, naming both files and the first repeated time."""
    seen: dict[str, str] = {}
    for f in files:
        for t in _times_text(parts[f]):
            if t in seen and seen[t] != f:
                raise SampleError(
                    f"{seen[t]} and {f} both hold time {t}: the inputs overlap in time "
                    "(each time step must come from one file)"
                )
            seen.setdefault(t, f)


def _check_same_steps(ds, mask, fields: Sequence[str], masks: Sequence[str]) -> None:
    """The label file(s) must have the fields' times and grid."""
    a, b = _times_text(ds), _times_text(mask)
    where = f"{', '.join(masks)} (labels) and {', '.join(fields)} (fields)"
    if a != b:
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        detail = (
            f"{len(b)} and {len(a)} time steps"
            if first is None
            else f"time step {first} is {b[first]} and {a[first]}"
        )
        raise SampleError(f"{where} do not have the same times: {detail}")
    for c in ("lat", "lon"):
        x, y = np.asarray(ds[c].values, float), np.asarray(mask[c].values, float)
        if x.shape != y.shape or not np.allclose(x, y, atol=1e-4):
            raise SampleError(
                f"{where} are not on the same grid: {c} has {y.size} values "
                f"{y[:1].tolist()}... and {x.size} values {x[:1].tolist()}..."
            )
