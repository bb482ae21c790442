"""``climnb score``: IoU per class of a mask against expert labels (ClimateNet layout)."""

from __future__ import annotations

from climnb.io.atomic import atomic_path, claims
from climnb.io.outputs import check_outputs
from climnb.labels.schema import CONSENSUS, MASK_VARIABLES

HELP = "score a mask (labels, a prediction) against expert labels in the ClimateNet layout"
EXAMPLE = (
    "climnb score data/labels.nc --expert 'climatenet/data-*.nc' --csv scores.csv\n"
    "  climnb score prediction.nc --expert climatenet/ --consensus majority union"
)


def add_arguments(parser):
    parser.add_argument(
        "mask",
        metavar="MASK",
        help="NetCDF or Zarr file with class ids (time, lat, lon): 0 background, 1 TC, 2 AR",
    )
    parser.add_argument(
        "--expert",
        required=True,
        nargs="+",
        metavar="PATH",
        help="expert label files data-YYYY-MM-DD-HH-1_N.nc (N: the labeller): a folder, glob "
        "pattern(s) or files; scored on the time steps they share with MASK",
    )
    parser.add_argument(
        "--variable",
        help=f"the mask's variable (default: the first of {', '.join(MASK_VARIABLES)})",
    )
    parser.add_argument(
        "--consensus",
        nargs="+",
        choices=[c for c in CONSENSUS if c != "mean"],
        default=["majority"],
        help="consensus of the labellers to score against too (default: majority; a tie goes "
        "to background)",
    )
    parser.add_argument("--csv", help="also write the table to this CSV file")


def run(args) -> int:
    # every input: the mask and the expert files (a folder, its files, glob members)
    outputs = check_outputs({"--csv": args.csv}, [args.mask, *args.expert])
    with claims(outputs.values()):
        return _run(args)


def _run(args) -> int:
    from climnb.labels.scores import score_files  # xarray, SciPy: not for the help

    table = score_files(args.mask, args.expert, variable=args.variable, rules=tuple(args.consensus))
    print(
        "IoU per class (NaN: the class is in neither mask; left out of the mean)\n"
        + table.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="NaN")
    )
    if args.csv:
        with atomic_path(args.csv) as tmp:
            table.to_csv(tmp, index=False)
    return 0
