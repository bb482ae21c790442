"""What notebook 05 explores: held-out fields and a segmentation of them to compare with.

:func:`heldout_fields` opens the held-out fields (making the toy ones, from a seed training
never saw, where the file is missing); :func:`segment_heldout` segments them with the trained
network's bundle, or, without one, stands the heuristic labels in for the prediction and says
so. Both only call the package's readers, :mod:`climnb.predict` and :mod:`climnb.labels`.

Examples
--------
>>> from climnb.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> seg = segment_heldout(ds, "no/model/here")
>>> seg.titles
{'label_name': 'truth', 'prediction_name': 'heuristic labels'}
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import xarray as xr

import climnb.accessor  # noqa: F401  (ds.climnb)
from climnb import synthetic
from climnb.bundle import load_bundle
from climnb.io.netcdf import open_dataset

__all__ = ["Segmentation", "heldout_fields", "segment_heldout", "PREDICTION_FILE"]

log = logging.getLogger(__name__)

#: Where :func:`segment_heldout` writes the network's prediction, beside the model's folder
#: (``climnb demo`` scores it from there).
PREDICTION_FILE = "heldout_prediction.nc"


@dataclass(frozen=True)
class Segmentation:
    """A segmentation of held-out fields and the reference it is compared with.

    Attributes
    ----------
    reference : the reference mask (the synthetic truth).
    prediction : the network's mask, or the heuristic labels without a network.
    titles : the two masks' names, as the explorers take them (``label_name``,
        ``prediction_name``).
    note : one line saying what segmented the fields.
    """

    reference: xr.DataArray
    prediction: xr.DataArray
    titles: dict
    note: str


def heldout_fields(
    path: str | os.PathLike, time_start: str | None = None, time_stop: str | None = None
) -> xr.Dataset:
    """The held-out fields from ``path`` between two times; where ``path`` is missing, new toy
    fields (8 steps from seed 1000, which training never used) are written there first."""
    if not Path(path).exists():
        log.info("writing toy held-out fields to %s", path)
        synthetic.save_dataset(*synthetic.make_dataset(n_time=8, seed=1000), path)
    return open_dataset(path).sel(time=slice(time_start, time_stop))


def segment_heldout(
    ds: xr.Dataset, model_path: str | os.PathLike, *, batch_size: int = 4
) -> Segmentation:
    """Segment ``ds`` with the model bundle at ``model_path`` and compare with ``ds.truth``.

    The prediction (``ds.climnb.predict``, loaded) is also written to :data:`PREDICTION_FILE`
    beside the bundle's folder. Without a bundle at ``model_path`` nothing is predicted: the
    heuristic labels (``ds.climnb.label()``) stand in for the prediction, and the note says so.
    """
    if not Path(model_path, "climnb.json").exists():
        note = (
            f"NO TRAINED MODEL at {str(model_path)!r}: nothing is predicted. Showing the "
            "heuristic labels (climnb.labels) in place of a prediction, against the synthetic "
            "truth.\nTrain a network (notebook 04 or `climnb train`) and rerun with model_path "
            "set to its bundle to see the network's segmentation."
        )
        titles = {"label_name": "truth", "prediction_name": "heuristic labels"}
        return Segmentation(ds.truth, ds.climnb.label().load(), titles, note)
    bundle = load_bundle(model_path)
    prediction = ds.climnb.predict(bundle, batch_size=batch_size).load()
    prediction.to_dataset().to_netcdf(Path(model_path).parent / PREDICTION_FILE)
    titles = {"label_name": "truth", "prediction_name": f"{bundle.name} prediction"}
    note = f"segmented with {bundle.name} ({bundle.preset}) from {model_path}"
    return Segmentation(ds.truth, prediction, titles, note)
