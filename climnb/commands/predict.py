"""``climnb predict``: segment new climate data with a trained model bundle, to NetCDF or Zarr.

The output is streamed: each worker segments one batch of time steps at a time while the next
batch is read and checked and the last one written, so the network does not wait for the
input, and memory does not grow with the length of the period. The output path is checked before any
work (never an input, never a directory, writable). ``--river-rules`` puts the predicted rivers
through the river definition's object rules (:mod:`climnb.inference.postprocess`) in the same pass.
"""

from pathlib import Path

from climnb.bundle import META_FILE, load_bundle
from climnb.io.atomic import claims, remove_leftovers
from climnb.io.outputs import check_outputs
from climnb.progress import NO_PROGRESS_HELP

#: GB the command holds whatever the batches: Python, TensorFlow's runtime, the network's
#: weights and graphs, dask and the writer (0.55-0.6 GB measured; benchmarks/bench_predict.py)
RUNTIME_GB = 0.8
#: Peak resident memory (GB) of a worker over full-size steps of the paper Tiramisu,
#: ``--batch-size 1``, by precision: (one worker, the runtime included; each of two workers);
#: benchmarks/bench_throughput.py --only predict (the next batch read meanwhile included)
PEAK_GB = {"mixed_bfloat16": (2.7, 1.9), "float32": (3.8, 3.1)}

HELP = "run a trained model over NetCDF, Zarr or DeepCAM sample files, writing NetCDF or Zarr"
EXAMPLE = (
    "climnb predict --model runs/toy/model data/new/*.nc --out predictions.zarr [--river-rules]"
)


def add_arguments(parser):
    parser.add_argument(
        "--model",
        required=True,
        help="model bundle directory: RUN/model, which `climnb train --out RUN` writes at the end",
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="NetCDF files or globs, Zarr stores (*.zarr), DeepCAM sample files (*.h5), a folder "
        "of them or a sample set (checked against its manifests)",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="file to write: *.zarr for a Zarr store, anything else NetCDF (never an input)",
    )
    parser.add_argument("--batch-size", type=int, default=4, help="time steps per batch")
    parser.add_argument(
        "--probabilities", action="store_true", help="also write per-class probabilities"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="batches segmented at once (default 2); one batch more is read and written meanwhile",
    )
    parser.add_argument(
        "--no-range-check",
        dest="check_range",
        action="store_false",
        help="accept channels far outside their training range (refused by default: wrong "
        "units, such as PSL in hPa, would give nonsense classes)",
    )
    parser.add_argument(
        "--river-rules",
        action="store_true",
        help="keep only the predicted rivers that the river definition's object rules accept "
        "(as the labeller's transport method: objects >= 2000 km long, length/width >= 2, "
        "centroid at 20-80 deg, a poleward mean transport, away from storms and the tropics; "
        "the teacher's settings if the bundle records them, else the defaults), judged on the "
        "input's TMQ and V850 (or IVTV), which it must hold; rejected rivers become "
        "background. Use it when the rivers must meet that definition (a network trained on "
        "few steps does not learn the rule on an object's mean transport); the figures are "
        "then a hybrid detector's, not the network's alone",
    )
    parser.add_argument(
        "--memory",
        type=float,
        metavar="GB",
        help="the most memory the command should hold, all workers together (default: no "
        f"limit). Each worker gets (GB - {RUNTIME_GB}) / --workers for its batch; a batch that "
        "does not fit runs one step at a time, then in longitude tiles that carry the "
        "network's receptive field of their neighbours (the whole step's classes; in "
        "mixed_bfloat16 up to its rounding). "
        "Without it, full-size 768 x 1152 steps of the paper Tiramisu with --batch-size 1 "
        f"peak at about {PEAK_GB['mixed_bfloat16'][0]} GB in mixed_bfloat16 and "
        f"{PEAK_GB['float32'][0]} GB in float32 with one worker (the runtime included), "
        f"{PEAK_GB['mixed_bfloat16'][1]} and {PEAK_GB['float32'][1]} GB a worker with two; "
        "the peak does not grow with the number of steps",
    )
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)


def run(args) -> int:
    from climnb.io.files import expand_paths

    for option in ("batch_size", "workers"):
        if getattr(args, option) < 1:
            flag = "--" + option.replace("_", "-")
            raise ValueError(f"{flag} must be at least 1, got {getattr(args, option)}")
    memory = None
    if args.memory is not None:
        memory = (args.memory - RUNTIME_GB) / args.workers
        if memory <= 0:
            raise ValueError(
                f"--memory {args.memory:g} GB is less than the runtime alone (about "
                f"{RUNTIME_GB} GB: TensorFlow and the network); raise --memory"
            )
    inputs = [Path(p) for p in expand_paths(args.inputs)]
    # before any work, against every input (the model bundle's files too): nothing is read yet
    out = check_outputs({"--out": args.out}, [*inputs, *_files(args.model)])["--out"]
    with claims([out]):  # one run at a time into this output
        return _run(args, inputs, out, memory)


def _run(args, inputs, out, memory) -> int:
    import xarray as xr

    from climnb.inference.predict import network_slots, predict
    from climnb.io.files import write

    remove_leftovers(out.parent, out.name)  # what a killed earlier run of this output left
    bundle = load_bundle(args.model)
    result = predict(
        bundle,
        inputs,
        batch_size=args.batch_size,
        probabilities=args.probabilities,
        check_range=args.check_range,
        river_rules=args.river_rules,
        memory=memory,
    )
    ds = result if isinstance(result, xr.Dataset) else result.to_dataset()
    encoding = {"prediction": {"dtype": "u1", "zlib": True}}
    if "probability" in ds:
        encoding["probability"] = {"zlib": True}
    # one thread more than --workers: the next batch is read and checked, and the last one
    # written, while the network runs (at most --workers forward passes at once)
    with network_slots(args.workers):
        write(
            ds,
            out,
            encoding=encoding,
            progress=not args.no_progress,
            workers=args.workers + 1,
            desc="predict",
        )
    # counted from what was written (one uint8 pass): counted beside the write, every step's
    # forward pass ran twice, as xarray's write graph holds copies of the tasks under new names
    counts = _class_counts(out, bundle.n_classes)
    total = max(sum(int(c) for c in counts), 1)
    shares = ", ".join(
        f"{n} {100 * int(c) / total:.2f}%" for n, c in zip(bundle.class_names, counts, strict=True)
    )
    rules = f"\n  river rules: {ds.prediction.attrs['river_rules']}" if args.river_rules else ""
    print(
        f"{ds.sizes['time']} steps segmented with {bundle.name} ({bundle.preset}) "
        f"-> {out}\n  {shares}{rules}"
    )
    return 0


def _files(model) -> list:
    """The files of a model bundle (none of a folder that is not one: loading it says so)."""
    model = Path(model)
    if not (model / META_FILE).is_file():
        return []
    return [p for p in model.rglob("*") if p.is_file()]


def _class_counts(path, n_classes: int) -> list[int]:
    """Pixels of each class in the ``prediction`` of a written NetCDF file or Zarr store."""
    import dask
    import xarray as xr

    zarr = str(path).endswith(".zarr")
    opened = xr.open_zarr(path, consolidated=False) if zarr else xr.open_dataset(path, chunks={})
    with opened as ds:
        pred = ds.prediction.data
        return [int(c) for c in dask.compute(*[(pred == k).sum() for k in range(n_classes)])]
