"""``climnb label``: heuristic TC/AR labels for CAM5 / ClimateNet NetCDF files."""

from __future__ import annotations

import json
import logging

HELP = "label tropical cyclones and atmospheric rivers in CAM5-style NetCDF files"
EXAMPLE = "climnb label data/toy/fields.nc --out data/toy/labels.nc --workers 2"

log = logging.getLogger(__name__)


def add_arguments(parser):
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="NetCDF file(s), glob pattern(s) or Zarr store(s), joined along time",
    )
    parser.add_argument(
        "--out", required=True, help="file to write the labels to: NetCDF, or Zarr (*.zarr)"
    )
    parser.add_argument("--events", help="CSV file for the event table (default: beside OUT)")
    parser.add_argument(
        "--recipe",
        choices=("default", "paper"),
        default="default",
        help="'paper' uses the paper's percentile masks (default: half-maximum "
        "edges, which reach the quality targets)",
    )
    parser.add_argument("--ar-percentile", type=float, help="river percentile (default 95)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="dask threads labelling time steps in parallel (default 1)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _config(args):
    from dataclasses import replace

    from climnb.labels import LabelConfig

    config = LabelConfig.paper() if args.recipe == "paper" else LabelConfig()
    if args.ar_percentile is not None:
        config = replace(config, ar=replace(config.ar, percentile=args.ar_percentile))
    return config


def run(args) -> int:
    from pathlib import Path

    from climnb.atomic import atomic_path
    from climnb.labels import label_dataset, required_variables
    from climnb.store import check_output, expand, open_fields, write

    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    config = _config(args)
    inputs = expand(args.inputs)
    out = check_output(args.out, inputs)  # before any work
    events_path = Path(args.events) if args.events else out.with_suffix(".events.csv")
    check_output(events_path, [*inputs, out], option="--events")
    ds = open_fields(inputs, required=required_variables(config))
    labels, events = label_dataset(ds, config)
    labels.attrs["climnb_config"] = json.dumps(config.to_dict())
    # threads: the NetCDF writer holds a lock that cannot go to other processes, and labelling
    # spends most of its time in numpy/scipy code that releases the GIL; one pass computes the
    # file and the event table (each step labelled once)
    _, table = write(
        labels.to_dataset(),
        out,
        encoding={"labels": {"dtype": "u1", "zlib": True}},
        also=[events],
        progress=_progress(labels.sizes["time"], args.no_progress),
        workers=args.workers,
    )
    with atomic_path(events_path) as tmp:
        table.to_csv(tmp, index=False)
    counts = table.class_name.value_counts()
    print(
        f"{labels.sizes['time']} time steps labelled -> {out}\n"
        f"  tropical cyclones: {counts.get('tropical_cyclone', 0)}, "
        f"atmospheric rivers: {counts.get('atmospheric_river', 0)} -> {events_path}"
    )
    return 0


def _progress(total: int, disable: bool):
    from dask.callbacks import Callback
    from tqdm.auto import tqdm

    class _Bar(Callback):
        def __enter__(self):
            self.bar = tqdm(total=total, unit="step", desc="labelling", disable=disable)
            return super().__enter__()

        def __exit__(self, *exc):
            self.bar.close()
            return super().__exit__(*exc)

        def _posttask(self, key, result, dsk, state, worker_id):
            name = key[0] if isinstance(key, tuple) else key
            if str(name).startswith("label-step"):
                self.bar.update(1)

    return _Bar()
