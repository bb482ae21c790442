"""Heuristic labels of tropical cyclones (1) and atmospheric rivers (2) in climate fields.

Step 1 of the workflow: raw fields (xarray) in, pixel labels (xarray) and an event table out.

* :mod:`~climnb.labels.config` - frozen settings (:class:`LabelConfig`, :class:`ARConfig`,
  :class:`TCConfig`);
* :mod:`~climnb.labels.sphere`, :mod:`~climnb.labels.dynamics`, :mod:`~climnb.labels.ivt` -
  grid geometry, vorticity on the sphere, vapour transport;
* :mod:`~climnb.labels.components` - connected components joined across the 0/360 seam;
* :mod:`~climnb.labels.ar`, :mod:`~climnb.labels.tc` - the two detectors;
* :mod:`~climnb.labels.plan` - what an input allows to label (:func:`plan_labels`);
* :mod:`~climnb.labels.step` - one time step labelled (:func:`label_step`);
* :mod:`~climnb.labels.dataset` - :func:`label_dataset`, lazily with dask, one task per time
  chunk; :mod:`~climnb.labels.workers` - the processes those tasks run in;
* :mod:`~climnb.labels.schema` - the one event-table schema and the names label products share;
* :mod:`~climnb.labels.events` - the events of any class mask, one row per region and step;
* :mod:`~climnb.labels.inputs` - what the labeller reads: files as they come, or toy fields;
* :mod:`~climnb.labels.writer` - :func:`~climnb.labels.writer.write_labels`: labels and
  events to NetCDF or Zarr in one pass, in parallel, atomically;
* :mod:`~climnb.labels.scores` - IoU, recall and precision against a known truth, and
  agreement with another detector;
* :mod:`~climnb.labels.expert` - expert labels in the ClimateNet layout (one file per step and
  labeller), their consensus, and a synthetic folder of them;
* :mod:`~climnb.labels.reference` - IPART (optional extra), an independent river detector.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.labels import LabelConfig, compute, label_dataset
>>> ds, truth_events = make_dataset(n_time=2)
>>> labels, events = compute(*label_dataset(ds, LabelConfig()))
"""

from climnb.labels.config import ARConfig, LabelConfig, TCConfig

__all__ = [
    "ARConfig",
    "TCConfig",
    "LabelConfig",
    "label_dataset",
    "compute",
    "label_step",
    "required_variables",
    "save_labelled",
]

#: Names taken from :mod:`climnb.labels.dataset` when first used: it imports xarray, dask and
#: SciPy, which ``import climnb.labels.schema`` (the command line's help) need not pay for.
_FROM_DATASET = ("compute", "label_dataset", "label_step", "required_variables", "save_labelled")


def __getattr__(name: str):
    if name in _FROM_DATASET:
        from climnb.labels import dataset

        return getattr(dataset, name)
    raise AttributeError(f"module 'climnb.labels' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
