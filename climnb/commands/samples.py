"""``climnb samples``: write a DeepCAM-style sample set (split folders, stats.h5, manifests)."""

from climnb.progress import NO_PROGRESS_HELP, progress

HELP = "write one HDF5 sample file per time step (train/validation/test), manifests and stats.h5"
EXAMPLE = (
    "climnb samples --input data/toy/fields.nc --out data/toy/samples --seed 0\n"
    "  climnb samples --input fields.nc labels.nc --out samples   "
    "(labels.nc from `climnb label fields.nc --out labels.nc`)\n"
    "  climnb samples --input climatenet/ --out samples --labellers mean   "
    "(expert labels, ClimateNet layout)"
)

LABELLERS_HELP = (
    "expert labels in the ClimateNet layout (data-YYYY-MM-DD-HH-1_N.nc, N the labeller): what "
    "the labellers of one time step become. each: one sample per labeller; majority: one "
    "sample, the class most labellers gave each pixel (ties to background); union: one "
    "sample, an event wherever any labeller drew one; mean: one sample whose target is the "
    "share of labellers giving each class (a soft target the weighted loss trains on; its "
    "class ids, for the metrics, are the majority). Default majority: one target per step, "
    "so the 16 fields of a step are not repeated as correlated copies (each), nor events "
    "widened to their largest drawing (union); mean keeps the disagreement, at the cost of "
    "soft-target training. Every labeller of a step goes to the same split"
)


def add_arguments(parser):
    parser.add_argument(
        "--input",
        required=True,
        nargs="+",
        help="NetCDF file(s) or glob with the 16 channels and a label variable; or the fields "
        "plus the file(s) `climnb label` wrote from them (labels only: recognised and merged "
        "by time); or a ClimateNet folder or glob of data-YYYY-MM-DD-HH-1_N.nc (one file per "
        "time step and labeller N; see --labellers)",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="directory: OUT/train, OUT/validation, OUT/test (each with manifest.json) and "
        "OUT/stats.h5",
    )
    parser.add_argument(
        "--labels",
        help="label variable (default: 'labels', else 'truth'; LABELS for ClimateNet files)",
    )
    parser.add_argument(
        "--labellers",
        choices=("each", "majority", "union", "mean"),
        help=LABELLERS_HELP,
    )
    parser.add_argument(
        "--split",
        choices=("blocks", "random"),
        default="blocks",
        help="contiguous time blocks with a gap between sets (default), or a seeded shuffle",
    )
    parser.add_argument(
        "--gap-hours", type=float, default=24.0, help="least time between sets (blocks; 24)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of a random split")
    parser.add_argument("--run", type=int, default=1, help="the N of data-YYYY-MM-DD-HH-N.h5")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing sample set in OUT (as a whole, atomically), and discard what "
        "an interrupted run with other inputs or options left beside OUT (a killed run resumes "
        "when the same command is run again)",
    )
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)


def run(args) -> int:
    import math
    from pathlib import Path

    from climnb.io.files import expand_paths
    from climnb.io.samples import SampleError
    from climnb.io.sampleset import check_sample_folder, write_sample_set
    from climnb.io.setinputs import open_inputs
    from climnb.labels.expert import DEFAULT_LABELLERS, in_layout, write_expert_set

    if not math.isfinite(args.gap_hours) or args.gap_hours < 0:
        raise ValueError(
            f"--gap-hours must be a finite number of hours >= 0, got {args.gap_hours}: a "
            "negative gap would put the same time steps in two sets"
        )
    if args.run < 0:
        raise ValueError(f"--run must be >= 0 (the N of data-...-N.h5), got {args.run}")
    out = Path(args.out)
    files = [Path(f).resolve() for f in expand_paths(args.input)]
    # a ClimateNet folder: its files (any other folder, a Zarr store, is an input as it is)
    files = [g for f in files for g in ((f.is_dir() and sorted(f.glob("data-*.nc"))) or [f])]
    expert = in_layout(files)
    if args.labellers and not expert:
        raise ValueError(
            f"--labellers {args.labellers}: {files[0]} is not in the ClimateNet layout "
            "(data-YYYY-MM-DD-HH-1_N.nc, N the labeller); the option is for expert labels"
        )
    check_sample_folder(
        out, overwrite=args.overwrite, inputs=files, option="--out"
    )  # before any work
    twice = next((f for i, f in enumerate(files) if f in files[:i]), None)
    if twice is not None:  # its time steps would clash
        raise SampleError(f"{twice}: given twice in --input (the same time steps twice)")
    split = dict(
        method=args.split,
        gap_hours=args.gap_hours,
        seed=args.seed,
        run=args.run,
        overwrite=args.overwrite,
    )
    if expert:  # ClimateNet files: one sample per labeller or one consensus per step
        labellers = args.labellers or DEFAULT_LABELLERS
        ss = _write(
            args,
            write_expert_set,
            files,
            out,
            labellers=labellers,
            variable=args.labels or "LABELS",
            **split,
        )
        counts = {s: len(ss.files(s)) for s in ss.splits}
        steps = {s: len(ss.times(s)) for s in ss.splits}
        print(
            f"{len(files)} expert files, {sum(steps.values())} time steps in the sets -> {out} "
            f"(labellers: {labellers}; "
            + ", ".join(f"{k} {counts[k]} samples of {steps[k]} steps" for k in counts)
            + f"); statistics of the training files -> {ss.stats_path}"
        )
        return 0
    ds, name = open_inputs(files, args.labels)  # lazily; a label file merged by time
    n = ds.sizes["time"]
    ss = _write(args, write_sample_set, ds, name, out, **split)
    counts = {s: len(ss.files(s)) for s in ss.splits}
    left = n - sum(counts.values())
    print(
        f"{n} time steps -> {out} ("
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + (f"; {left} in the gaps between sets left out" if left else "")
        + f"); statistics of the training files -> {ss.stats_path}"
    )
    return 0


def _write(args, writer, *inputs, **options):
    """Run ``writer`` (a sample-set writer) showing the progress of files written, then of
    training files summarised (the split decides how many of those)."""
    shown = progress(desc="write + summarise", unit="file", enabled=not args.no_progress)
    with shown:
        return writer(*inputs, progress=shown.update, **options)
