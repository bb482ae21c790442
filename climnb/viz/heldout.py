"""What notebook 05 explores: held-out fields and a segmentation of them to compare with.

:func:`heldout_fields` opens the held-out fields (making the toy ones, from a seed training
never saw, where the file is missing); :func:`segment_heldout` segments them with the trained
network's bundle, or, without one, stands the heuristic labels in for the prediction and says
so. :func:`heldout_confusion` tabulates the confusion per class of the segmentation against
the truth and against the teacher (the heuristic labels the network learnt from).
:func:`independent_scores` scores the network on an independent series of another seed of the
generator, a larger test than a held-out block of a few correlated steps, with and without
the river definition's rules on the predicted rivers (:mod:`climnb.inference.postprocess`).
They only call the package's readers, :mod:`climnb.inference.predict`,
:mod:`climnb.inference.postprocess` and :mod:`climnb.labels`.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> seg = segment_heldout(ds, "no/model/here")
>>> seg.titles
{'label_name': 'truth', 'prediction_name': 'heuristic labels'}
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from climnb.bundle import META_FILE, load_bundle
from climnb.data import synthetic
from climnb.inference.postprocess import apply_river_rules, teacher_config
from climnb.inference.predict import predict
from climnb.io.atomic import atomic_path
from climnb.io.files import open_fields
from climnb.labels import LabelConfig, compute, label_dataset
from climnb.labels.scores import class_iou, confusion_table, network_teacher_truth

__all__ = [
    "Segmentation",
    "heldout_fields",
    "segment_heldout",
    "heldout_teacher",
    "heldout_confusion",
    "independent_scores",
    "PREDICTION_FILE",
    "INDEPENDENT_FILE",
    "INDEPENDENT_SEED",
    "INDEPENDENT_STEPS",
]

log = logging.getLogger(__name__)

#: Where :func:`segment_heldout` writes the network's prediction, beside the model's folder
#: (``climnb demo`` scores it from there).
PREDICTION_FILE = "heldout_prediction.nc"
#: Where :func:`independent_scores` writes its figures, beside the model's folder (``climnb
#: demo`` prints them from there).
INDEPENDENT_FILE = "independent_scores.json"
#: The generator's seed of the independent series (no toy training series uses it).
INDEPENDENT_SEED = 1000
#: Its steps by default.
INDEPENDENT_STEPS = 64


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
    return open_fields(path).sel(time=slice(time_start, time_stop))


def segment_heldout(
    ds: xr.Dataset, model_path: str | os.PathLike, *, batch_size: int = 4
) -> Segmentation:
    """Segment ``ds`` with the model bundle at ``model_path`` and compare with ``ds.truth``.

    The prediction (:func:`climnb.inference.predict.predict`, loaded) is also written to
    :data:`PREDICTION_FILE` beside the bundle's folder. Without a bundle at ``model_path``
    nothing is predicted: the heuristic labels (:func:`climnb.labels.label_dataset`) stand in
    for the prediction, and the note says so.
    """
    if not Path(model_path, META_FILE).exists():
        note = (
            f"NO TRAINED MODEL at {str(model_path)!r}: nothing is predicted. Showing the "
            "heuristic labels (climnb.labels) in place of a prediction, against the synthetic "
            "truth.\nTrain a network (notebook 04 or `climnb train`) and rerun with model_path "
            "set to its bundle to see the network's segmentation."
        )
        titles = {"label_name": "truth", "prediction_name": "heuristic labels"}
        return Segmentation(ds.truth, label_dataset(ds)[0].load(), titles, note)
    bundle = load_bundle(model_path)
    prediction = predict(bundle, ds, batch_size=batch_size).load()
    prediction.to_dataset().to_netcdf(Path(model_path).parent / PREDICTION_FILE)
    titles = {"label_name": "truth", "prediction_name": f"{bundle.name} prediction"}
    note = f"segmented with {bundle.name} ({bundle.preset}) from {model_path}"
    return Segmentation(ds.truth, prediction, titles, note)


def heldout_teacher(path: str | os.PathLike, ds: xr.Dataset) -> xr.DataArray | None:
    """The teacher's labels (notebook 04 writes them beside the held-out block) of the steps of
    ``ds``, or ``None`` where ``path`` is missing or holds none of those steps."""
    if not Path(path).exists():
        return None
    with xr.open_dataset(path) as lab:
        missing = int((~np.isin(ds.time.values, lab.time.values)).sum())
        if missing:
            log.warning("%s lacks %d of the steps shown: no teacher", path, missing)
            return None
        return lab.labels.sel(time=ds.time.values).load()


def heldout_confusion(prediction: xr.DataArray, references: dict) -> pd.DataFrame:
    """The confusion per class of ``prediction`` against each reference mask (``{name: mask}``,
    ``None`` skipped), stacked: rows (reference, its class), columns the class predicted, each
    row as fractions of the reference class's pixels (recall on the diagonal), and the IoU of
    the class in the last column.

    >>> import numpy as np
    >>> t = heldout_confusion(np.array([0, 1, 1, 2]), {"truth": np.array([0, 1, 0, 2])})
    >>> t.round(2).loc["truth"].values.tolist()
    [[0.5, 0.5, 0.0, 0.5], [0.0, 1.0, 0.0, 0.5], [0.0, 0.0, 1.0, 1.0]]
    """
    tables = {}
    for name, reference in references.items():
        if reference is None:
            continue
        table = confusion_table(prediction, reference)
        table["IoU"], _ = class_iou(prediction, reference)
        tables[name] = table
    return pd.concat(tables, names=["against"])


def independent_scores(
    model_path: str | os.PathLike,
    *,
    n_time: int = INDEPENDENT_STEPS,
    seed: int = INDEPENDENT_SEED,
    n_lat: int = 96,
    n_lon: int = 144,
    batch_size: int = 4,
    config=None,
) -> pd.DataFrame | None:
    """The network's IoU per class against its teacher and against the truth, and the teacher's
    own against the truth, on an independent series: ``n_time`` synthetic steps of generator
    ``seed`` on an ``n_lat`` x ``n_lon`` grid, labelled by the teacher (:mod:`climnb.labels`
    with ``config``, default the teacher's settings the bundle records, else
    :class:`~climnb.labels.LabelConfig`, notebook 01's default); and
    the same for the network's segmentation put through the teacher's river rules
    (:func:`climnb.inference.postprocess.apply_river_rules` with ``config.ar``: the predicted
    rivers that the river definition rejects become background).

    A held-out block is a few correlated steps; its handful of events decide its figures (the
    demo's network: AR 0.46 against the teacher on its 16-step block, 0.71 on 64 steps of this
    series; docs/network_quality.md). This series shares no step with a training series of
    another seed.

    Returns a table (rows ``network vs teacher``, ``network vs truth``, ``teacher vs truth``,
    ``network + river rules vs teacher``, ``network + river rules vs truth``; columns ``TC``,
    ``AR``; NaN for a class in neither mask), also written as JSON to
    :data:`INDEPENDENT_FILE` beside the model's folder; ``None`` (nothing written) without a
    model bundle at ``model_path`` or with ``n_time`` 0.
    """
    if not n_time:
        return None
    if not Path(model_path, META_FILE).exists():
        log.info("no model bundle at %s: no independent scores", model_path)
        return None
    bundle = load_bundle(model_path)
    config = config or teacher_config(bundle) or LabelConfig()
    ds, _ = synthetic.make_dataset(n_time=n_time, seed=seed, n_lat=n_lat, n_lon=n_lon)
    teacher, _ = compute(*label_dataset(ds, config))
    prediction = predict(bundle, ds, batch_size=batch_size).load()
    ruled = apply_river_rules(prediction, ds, config.ar).values
    rows = network_teacher_truth(prediction.values, teacher.values, ds.truth.values, ruled)
    record = {"n_time": n_time, "seed": seed, "grid": [n_lat, n_lon], "iou": rows}
    with atomic_path(Path(model_path).parent / INDEPENDENT_FILE) as tmp:
        Path(tmp).write_text(json.dumps(record, indent=1))
    table = pd.DataFrame(rows).T
    table.index.name = f"IoU on {n_time} steps of seed {seed}"
    return table
