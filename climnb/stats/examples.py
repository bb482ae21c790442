"""Notebook 06's steps as functions: the masks of labels and prediction, a planted change.

:func:`labels_and_prediction` opens what notebooks 01 and 04 wrote (or makes toy labels when
they are missing, so that the notebook also runs alone); :func:`planted_change` draws today and
a synthetic future with known changes from the same generator and compares them: frequency
maps, event counts and intensities, and attributed precipitation.

Examples
--------
>>> masks = labels_and_prediction(None, n_steps=4)
>>> masks.prediction_name, masks.labels.sizes["time"]
('truth', 4)
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import xarray as xr

from climnb.bundle import load_bundle
from climnb.data.synthetic import Future, make_dataset
from climnb.io.files import open_fields
from climnb.labels import label_dataset
from climnb.stats.change import CompareConfig, Comparison, compare
from climnb.stats.change_tables import compare_events, compare_precip
from climnb.stats.masks import class_mask
from climnb.stats.precip import precipitation
from climnb.stats.regions import BUILTIN, Region

__all__ = ["Masks", "labels_and_prediction", "planted_change", "PLANTED"]

log = logging.getLogger(__name__)

#: The future of :func:`planted_change`: four more rivers at every step (six instead of two),
#: storms 50 % deeper, rivers forming 6 degrees closer to their pole.
PLANTED = Future(more_rivers=4, storm_intensity=1.5, river_shift_deg=6.0)


@dataclass
class Masks:
    """Fields, heuristic labels and a prediction (the network's, else the synthetic truth)."""

    fields: xr.Dataset
    labels: xr.DataArray
    prediction: xr.DataArray
    prediction_name: str
    note: str = ""

    def __str__(self) -> str:
        size = f"{self.labels.sizes['lat']} x {self.labels.sizes['lon']}"
        text = f"{self.labels.sizes['time']} steps of {size}; labels and {self.prediction_name}"
        return f"{self.note}\n{text}" if self.note else text


def labels_and_prediction(
    labels_path: str | os.PathLike | None,
    *,
    fields_path: str | os.PathLike | None = None,
    model_path: str | os.PathLike | None = None,
    n_steps: int | None = None,
) -> Masks:
    """Labels and a prediction on the same steps, loaded.

    Parameters
    ----------
    labels_path : fields with heuristic labels (``climnb label``, notebook 01's ``out_path``);
        ``None`` or missing: ``n_steps`` synthetic steps are labelled here (a missing file is
        named in the note).
    fields_path : the fields, when ``labels_path`` holds only labels.
    model_path : a model bundle (notebook 04): its prediction; without one the synthetic
        truth stands in (and says so).
    n_steps : the first steps used (default all).
    """
    notes = []
    steps = slice(0, n_steps)
    if labels_path is not None and Path(labels_path).exists():
        ds = open_fields(labels_path).isel(time=steps)
    else:
        if labels_path is None:
            notes.append(
                f"labels of {n_steps or 8} synthetic steps made here (labels_path: a file of "
                "notebook 01's out_path, for its labels)"
            )
        else:
            notes.append(f"no {labels_path}: labelled {n_steps or 8} new synthetic steps")
        ds, _ = make_dataset(n_time=n_steps or 8, seed=0)
        ds = ds.assign(labels=label_dataset(ds)[0].load())
    if "TMQ" not in ds and fields_path is not None and Path(fields_path).exists():
        fields = open_fields(fields_path).isel(time=steps)
        ds = fields.assign(labels=ds.labels.assign_coords(time=fields.time))
    source = "synthetic steps" if labels_path is None else str(labels_path)
    labels = class_mask(ds, "labels", source=source).load()
    if model_path is not None and Path(model_path, "climnb.json").exists():
        from climnb.inference.predict import predict

        bundle = load_bundle(model_path)
        prediction = class_mask(predict(bundle, ds).load())
        name = f"{bundle.name} prediction"
    else:
        notes.append(
            f"NO TRAINED MODEL at {model_path!r}: the synthetic truth stands in for a prediction"
        )
        prediction, name = class_mask(ds, "truth").load(), "truth"
    return Masks(ds, labels, prediction, name, "\n".join(notes))


def planted_change(
    n_steps: int,
    config: CompareConfig,
    *,
    future: Future = PLANTED,
    regions: list[Region] | None = None,
    seeds: tuple[int, int] = (100, 101),
    events: bool = True,
) -> Comparison:
    """Today and a synthetic ``future`` (same generator, other seed) compared.

    Returns the :class:`~climnb.stats.change.Comparison` of the frequency maps, with the change
    of events (``events``: counts, landfalls, intensities; when asked) and of the attributed
    precipitation on it.
    """
    regions = regions or [BUILTIN["global"], BUILTIN["us_west_coast"]]
    common = dict(n_time=n_steps, n_tc=2, n_ar=2, ivt=True)
    # only what the comparison reads: the mask, the fields of the intensities (the lowest
    # winds and IVT come first there) and the precipitation: 6 of the generator's 20
    # variables, so that two long periods fit a Binder session
    keep = ["truth", "UBOT", "VBOT", "PSL", "IVT", "PRECT"]
    today = make_dataset(seed=seeds[0], **common)[0][keep]
    later = make_dataset(seed=seeds[1], future=future, **common)[0][keep]
    a, b = class_mask(today), class_mask(later)
    names = ("today", "future")
    result = compare(a, b, config, regions=regions, names=names)
    if events:
        result.events = compare_events(
            a, b, config, fields=(today, later), regions=regions, names=names
        )
    result.precip = compare_precip(
        a, precipitation(today), b, precipitation(later), config, regions=regions, names=names
    )
    return result
