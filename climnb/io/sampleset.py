"""The on-disk sample set: one owner of its layout, names, split folders, stats and manifests.

Layout of a sample set (what ``climnb samples`` writes; DeepCAM's layout plus manifests)::

    ROOT/stats.h5                    statistics of the training files (climnb.io.stats)
    ROOT/train/data-*.h5             one file per time step (climnb.io.samples)
    ROOT/train/manifest.json         size, SHA-256, time, class counts of each file; channels,
                                     grid; the digest of ROOT/stats.h5 (climnb.io.manifest)
    ROOT/validation/...              the same
    ROOT/test/...                    the same

A *flat* set is one folder of ``data-*.h5`` (a DeepCAM download, or a split folder on its own),
with ``stats.h5`` in it or in its parent and a manifest where climnb wrote it. Foreign folders
without a manifest open too: their digests are then unknown and verification says so.

A *staged* set (:class:`StagedSet`) is what :mod:`climnb.data.staging` writes on a node: the files
the node's ranks train and validate on, ``stats.h5`` and a manifest whose ``ranks`` lists each
local rank's training files (drawn with replacement, in training order) and its share of the
validation files. Training opens it from a folder pattern with ``{node}`` and ``{local_rank}``
placeholders, resolved per rank, and reads nothing else.

API (stable; used by staging, the pipeline, training, predict, the demo and notebook 02), all
importable from here: :class:`SampleSet` reads a set (:mod:`climnb.io.setread`),
:class:`StagedSet` a node's staged copy (:mod:`climnb.io.setstaged`), and this module writes sets:

* ``SampleSet.open(folder)``; ``.files(split)``, ``.split(...)``, ``.splits``,
  ``.stats_path``, ``.stats()`` (checked: channel order, finite values, the files summarised),
  ``.channels``, ``.grid``, ``.class_counts(split)``, ``.manifest(split)``, ``.digest(split)``,
  ``.verify(split)`` (SHA-256 of every file against its manifest);
* ``write_sample_set(ds, labels, out, ...)``: write a whole split set atomically (into a folder
  beside ``out``, then swapped in; a non-empty ``out`` only with ``overwrite=True``);
* ``StagedSet.open(pattern, node=, local_rank=)`` or ``StagedSet.for_rank(pattern, rank=,
  local_size=)`` (both hash what the rank reads unless ``verify=False``); ``.files("train")`` /
  ``.files("validation")`` (this rank's, in order), ``.stats()``, ``.class_counts()``,
  ``.verify()``, ``.verify_reads()``; ``resolve_folder(pattern, node=, local_rank=)``.

Examples
--------
>>> import tempfile, pathlib
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=40, seed=0)
>>> out = pathlib.Path(tempfile.mkdtemp()) / "samples"
>>> ss = write_sample_set(ds, "truth", out)
>>> ss.splits, [len(ss.files(s)) for s in ss.splits]
(('train', 'validation', 'test'), [18, 4, 4])
>>> ss.grid, len(ss.channels), ss.stats().channels == ss.channels
((96, 144), 16, True)
>>> ss.verify()  # every file's SHA-256 matches its manifest
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from climnb.io.atomic import atomic_path
from climnb.io.channels import CHANNEL_NAMES
from climnb.io.manifest import MANIFEST_NAME, Entry, sha256_file
from climnb.io.outputs import OutputError, check_output
from climnb.io.samples import (
    SAMPLE_GLOB,
    SampleError,
    has_dates,
    sample_names,
    source_of,
    write_samples,
)
from climnb.io.setinputs import open_inputs
from climnb.io.setread import SampleSet
from climnb.io.setrun import RUN_RECORD, clean_leftovers, partial_folder, run_key, swap_in
from climnb.io.setstaged import StagedSet, resolve_folder
from climnb.io.split import SPLITS, split_steps
from climnb.io.stats import STATS_NAME, compute_stats, write_stats

__all__ = [
    "MANIFEST_NAME",
    "SAMPLE_GLOB",
    "SPLITS",
    "STATS_NAME",
    "SampleSet",
    "StagedSet",
    "check_sample_folder",
    "open_inputs",
    "resolve_folder",
    "write_heldout",
    "write_sample_set",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
Progress = Callable[[int], None]


def write_sample_set(
    ds,
    labels,
    out: PathLike,
    *,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    method: str = "blocks",
    gap_hours: float = 24.0,
    seed: int = 0,
    run: int = 1,
    channels: Sequence[str] = CHANNEL_NAMES,
    overwrite: bool = False,
    progress: Progress | None = None,
    names: Sequence[str] | None = None,
    soft=None,
    expert: Sequence[dict] | None = None,
) -> SampleSet:
    """Write ``ds`` as a split sample set in ``out``: the files, their manifests and stats.h5.

    Parameters
    ----------
    ds : xarray.Dataset with the channels on (time, lat, lon) (may be lazy). Its ``time``
        may repeat (one sample per labeller of a step, :mod:`climnb.labels.expert`): the
        split works on the distinct times, so all samples of a step go to one set.
    labels : (time, lat, lon) class indices, or the name of a variable of ``ds``. Its
        attribute ``climnb_config`` (the labeller's settings as JSON, which
        :func:`climnb.labels.label_dataset` sets) is recorded in ``stats.h5``, whence training
        copies it into the model bundle.
    out : the set's folder. A non-empty ``out`` is refused unless ``overwrite``; either way the
        set is written into a folder beside it and swapped in at the end, so a reader never
        sees a half-written or mixed set, and an interrupted run leaves ``out`` as it was.
    overwrite : replace a set in ``out``, and discard what an interrupted run with other
        inputs or options left beside ``out``.

    Resuming: the folder beside ``out`` is named by a digest of the inputs and options (the
    data's dask token, which covers each input file's path and modification time, or the
    values of in-memory data; the steps of each split; run; channels; labels). A rerun with
    the same ones continues in it (:func:`climnb.io.samples.write_samples` with
    ``resume=True``: files written before the kill are kept once their SHA-256 matches the
    journal, the rest written; statistics are computed again), then swaps. What a run with
    other inputs or options left is never mixed in: it is refused, or with ``overwrite``
    removed.
    fractions, method, gap_hours, seed : the split (:func:`climnb.io.split.split_steps`):
        contiguous time blocks with >= ``gap_hours`` between sets by default.
    run : the ``N`` of the file names.
    channels : channels to write, in order.
    progress : called with 1 after each file written and each file summarised.
    names : the samples' file names (default :func:`climnb.io.samples.sample_names`, one per
        time); given names must be unique.
    soft : (time, class_id, lat, lon) per-class shares, a soft target stored beside
        ``labels`` (:func:`climnb.io.samples.write_samples`).
    expert : per sample, where its target came from, for the manifests (``labeller``, or
        ``labellers`` and ``consensus``).
    """
    out = Path(out)
    labels, label_name, names = _checked_inputs(
        ds, labels, out, run=run, channels=channels, names=names, overwrite=overwrite
    )
    parts = _split(ds, fractions=fractions, method=method, gap_hours=gap_hours, seed=seed)
    key = run_key(
        ds, labels, label_name, parts, run=run, channels=channels, extra=(names, soft, expert)
    )
    tmp = partial_folder(out, key, overwrite=overwrite)
    resume = tmp.is_dir()
    if resume:
        log.warning("%s: resuming the interrupted run in %s", out, tmp)
    record = {"key": key, "out": str(out), "pid": os.getpid()}
    samples = {"run": run, "channels": channels, "progress": progress, "resume": resume}
    _write_into(tmp, record, ds, labels, parts, names=names, soft=soft, expert=expert, **samples)
    # a kill or Ctrl-C (and a full disk once files are written) leaves ``tmp`` to resume
    return _swap_finished(tmp, out)


def _split(ds, **split) -> tuple:
    """The steps of each split of ``ds`` (:func:`climnb.io.split.split_steps` with ``split``'s
    fractions, method, gap and seed), by its times where it has dates, else by position."""
    return split_steps(ds.time.values if has_dates(ds) else None, n=ds.sizes["time"], **split)


def _swap_finished(tmp: Path, out: Path) -> SampleSet:
    """Put the finished set in ``tmp`` in place of ``out`` and open it there."""
    (tmp / RUN_RECORD).unlink()
    swap_in(tmp, out)
    ss = SampleSet.open(out)
    log.info("wrote %r", ss)
    return ss


def _write_into(tmp: Path, record: dict, ds, labels, parts, **samples) -> None:
    """The whole set in the folder ``tmp`` beside the output: the run's record, the splits'
    files (:func:`_write_splits`), a check that no step is in two sets, and the statistics.
    Bad input removes ``tmp``; an ``OSError`` keeps the files finished, for the rerun."""
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / RUN_RECORD).write_text(json.dumps(record))
        _write_splits(tmp, ds, labels, parts, **samples)
        written = SampleSet(tmp)
        written.check_disjoint()  # no step in two sets, whatever the options
        _write_stats(written, samples["progress"], _label_config(labels))
    except ValueError:  # bad input (SampleError, a damaged Zarr chunk, ...): a rerun cannot
        # succeed with it, nothing worth keeping
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except OSError as err:  # a full disk, ...: keep finished files for the rerun, if any
        if not any(tmp.glob(f"*/{SAMPLE_GLOB}")):
            shutil.rmtree(tmp, ignore_errors=True)
        if err.filename is None:  # a failed write does not name its file
            raise OSError(err.errno, err.strerror, str(tmp)) from err
        raise


def _checked_inputs(ds, labels, out: Path, *, run, channels, names, overwrite):
    """``(labels as a DataArray, its name, the samples' file names)``, once what killed runs
    left beside ``out`` is gone and ``out``, the labels, channels and names are checked."""
    if run < 0:
        raise SampleError(f"run must be >= 0 (the N of data-...-N.h5), got {run}")
    clean_leftovers(out)
    check_sample_folder(out, overwrite=overwrite)
    label_name = labels if isinstance(labels, str) else labels.name
    if isinstance(labels, str):
        if labels not in ds:
            raise SampleError(f"data set has no label variable {labels!r}")
        labels = ds[labels]
    missing = [c for c in channels if c not in ds]
    if missing:
        raise SampleError(f"{source_of(labels)}: lacks channel(s) {', '.join(missing)}")
    if ds.sizes.get("time", 0) == 0:
        raise SampleError("the data have no time steps: nothing to write")
    if names is None:
        return labels, label_name, sample_names(ds, run)  # clashing names refused before work
    names = list(names)
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if len(names) != ds.sizes["time"] or twice:
        raise SampleError(
            f"{out}: {len(names)} sample names for {ds.sizes['time']} samples"
            + (f", {twice} twice" if twice else "")
        )
    return labels, label_name, names


def _write_splits(folder: Path, ds, labels, parts, *, names, soft, expert, **samples) -> None:
    """The sample files of each split in its folder under ``folder`` (``samples``:
    :func:`climnb.io.samples.write_samples`'s ``run``, ``channels``, ``progress``, ``resume``)."""
    for split, idx in zip(SPLITS, parts, strict=True):
        (folder / split).mkdir(exist_ok=True)
        if len(idx):
            sel = {"time": idx}
            write_samples(
                ds.isel(sel),
                labels.isel(sel),
                folder / split,
                names=[names[i] for i in idx],  # unique across the splits
                soft=None if soft is None else soft.isel(sel),
                expert=None if expert is None else [expert[i] for i in idx],
                **samples,
            )


def check_sample_folder(
    out: PathLike,
    *,
    overwrite: bool = False,
    inputs: PathLike | Sequence[PathLike] = (),
    option: str = "out",
) -> None:
    """Refuse ``out`` for a new sample set before any work, by the output rule of
    :func:`climnb.io.outputs.check_output` for a folder: a file; a non-empty folder unless
    ``overwrite``; and, even then, a folder holding anything but a sample set (an input
    file, say), which replacing the set would delete. Raises :class:`SampleError`."""
    try:
        check_output(
            out,
            inputs,
            kind="folder",
            option=option,
            overwrite=overwrite,
            contents=(*SPLITS, STATS_NAME),
            what="a sample set",
        )
    except OutputError as err:
        raise SampleError(str(err)) from None


def _label_config(labels) -> dict | None:
    """The labeller's settings recorded on ``labels`` (attribute ``climnb_config``), if any."""
    text = labels.attrs.get("climnb_config")
    try:
        config = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        log.warning("%s: attribute climnb_config is not JSON: not recorded", source_of(labels))
        return None
    return config if isinstance(config, dict) else None


def _write_stats(ss: SampleSet, progress: Progress | None, label_config=None) -> None:
    files = ss.files("train")
    if not files:
        raise SampleError(f"{ss.root}: no training files to compute statistics from")
    digest = ss.digest("train")
    stats = compute_stats(files, progress=progress)
    path = write_stats(stats, ss.stats_path, summarises=digest, label_config=label_config)
    m = ss.manifest("train")
    entry = Entry(bytes=path.stat().st_size, sha256=sha256_file(path))
    m.with_files({}, stats=(f"../{STATS_NAME}", entry)).write(ss.folder("train"))


def write_heldout(
    sample_set: PathLike | SampleSet,
    fields: PathLike,
    out: PathLike,
    *,
    split: str = "test",
    labels_out: PathLike | None = None,
) -> Path:
    """Write the steps of ``fields`` that form ``split`` of a sample set to ``out`` (NetCDF).

    The held-out block of an honest evaluation: a split set's ``test`` steps are a time block
    that training and validation never saw, at least the split's gap away from them
    (:func:`climnb.io.split.split_steps`). ``fields`` is the file the set was written from
    (with ``truth`` where it has one). ``labels_out``: also write its ``labels`` (the teacher's
    masks) of those steps there.

    Raises
    ------
    ValueError
        When the set has no such split, its files carry no times, or ``fields`` lacks some of
        its steps.
    """
    import xarray as xr

    ss = sample_set if isinstance(sample_set, SampleSet) else SampleSet.open(sample_set)
    if split not in ss.splits or not ss.files(split):
        raise ValueError(f"{ss.root}: no {split!r} split to hold out")
    times = ss.times(split)
    if times is None:
        raise ValueError(f"{ss.folder(split)}: sample files without times: cannot find the steps")
    with xr.open_dataset(fields) as ds:
        have = np.isin(times, ds.time.values.astype("datetime64[s]"))
        if not have.all():
            raise ValueError(
                f"{fields} lacks {int((~have).sum())} of the {times.size} {split} steps of "
                f"{ss.root}, e.g. {times[~have][0]}: not the fields the set was written from"
            )
        block = ds.sel(time=times.astype(ds.time.dtype)).load()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        block.drop_vars("labels", errors="ignore").to_netcdf(tmp)
    if labels_out is not None and "labels" in block:
        with atomic_path(Path(labels_out)) as tmp:
            block[["labels"]].to_netcdf(tmp)
    log.info("wrote the %d %s steps of %s to %s", times.size, split, ss.root, out)
    return out


def __getattr__(name: str):
    if name == "check_output":  # the name before climnb.io.files.check_output was the one rule
        warnings.warn(
            "climnb.io.sampleset.check_output is now check_sample_folder; import that",
            DeprecationWarning,
            stacklevel=2,
        )
        return check_sample_folder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
