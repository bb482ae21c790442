"""``climnb samples``: write DeepCAM-style sample files, a split and stats.h5 from NetCDF."""

HELP = "write one HDF5 sample file per time step (train/validation/test) and stats.h5"
EXAMPLE = "climnb samples --input data/toy/fields.nc --out data/toy/samples --seed 0"


def add_arguments(parser):
    parser.add_argument(
        "--input",
        required=True,
        nargs="+",
        help="NetCDF file(s) or glob with the 16 channels and a label variable",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="directory: OUT/train, OUT/validation, OUT/test and OUT/stats.h5",
    )
    parser.add_argument("--labels", help="label variable (default: 'labels', else 'truth')")
    parser.add_argument("--seed", type=int, default=0, help="seed of the 80/10/10 split")
    parser.add_argument("--run", type=int, default=1, help="the N of data-YYYY-MM-DD-HH-N.h5")


def run(args) -> int:
    from pathlib import Path

    from climnb.io.netcdf import open_dataset
    from climnb.io.samples import SampleError
    from climnb.io.split import write_split_samples
    from climnb.io.stats import STATS_NAME

    out = Path(args.out)
    ds = open_dataset(args.input)  # lazily, one time step per chunk
    name = args.labels or next((v for v in ("labels", "truth") if v in ds), None)
    if name is None or name not in ds:
        raise SampleError(f"{args.input}: no label variable ({args.labels or 'labels or truth'})")
    split = write_split_samples(ds, name, out, seed=args.seed, run=args.run)
    print(
        f"{len(ds.time)} sample files -> {out} ("
        + ", ".join(f"{k} {len(v)}" for k, v in split.items())
        + f"); statistics of the training files -> {out / STATS_NAME}"
    )
    return 0
