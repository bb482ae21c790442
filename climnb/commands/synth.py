"""``climnb synth``: write a synthetic CAM5-like data set with known storms and rivers."""

from climnb.io.outputs import check_outputs

HELP = "generate synthetic CAM5-like fields with tropical cyclones and atmospheric rivers"
EXAMPLE = "climnb synth --out data/toy/fields.nc --n-time 16 --seed 0"


def add_arguments(parser):
    parser.add_argument("--out", required=True, help="NetCDF file to write (fields and truth)")
    parser.add_argument("--events", help="CSV file for the event catalogue (default: beside OUT)")
    parser.add_argument("--n-time", type=int, default=16, help="time steps (default 16)")
    parser.add_argument("--shape", default="96x144", help="LATxLON grid (default 96x144)")
    parser.add_argument("--n-tc", type=int, default=3, help="cyclones per step (default 3)")
    parser.add_argument("--n-ar", type=int, default=3, help="rivers per step (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ivt",
        action="store_true",
        help="also write the generated vapour transport IVT, IVTU, IVTV (the rivers' truth is "
        "their region of IVT >= 250 kg m-1 s-1)",
    )
    future = parser.add_argument_group(
        "a second climate with known changes (climnb.data.synthetic.Future)",
        "e.g. --more-rivers 2 --storm-intensity 1.3 --river-shift 5 for a 'future' to compare "
        "with `climnb stats compare`",
    )
    future.add_argument(
        "--more-rivers", type=int, default=0, help="rivers added at every step (default 0)"
    )
    future.add_argument(
        "--storm-intensity",
        type=float,
        default=1.0,
        help="factor on the storms' pressure drops (default 1)",
    )
    future.add_argument(
        "--river-shift",
        type=float,
        default=0.0,
        metavar="DEG",
        help="degrees by which rivers form closer to their pole (default 0)",
    )
    parser.add_argument(
        "--like",
        choices=("era5", "merra2", "cam5", "ivt", "tmq"),
        help="write the fields as that source names and shapes them (implies --ivt)",
    )


def run(args) -> int:
    from climnb.data.synthetic import Future, make_dataset, save_dataset, summarize

    check_outputs({"--out": args.out, "--events": args.events})  # before any work
    n_lat, n_lon = _shape(args.shape)
    ds, events = make_dataset(
        n_time=args.n_time,
        n_lat=n_lat,
        n_lon=n_lon,
        n_tc=args.n_tc,
        n_ar=args.n_ar,
        seed=args.seed,
        ivt=args.ivt or args.like is not None,
        future=Future(
            more_rivers=args.more_rivers,
            storm_intensity=args.storm_intensity,
            river_shift_deg=args.river_shift,
        ),
    )
    summary = summarize(ds, events, path=args.out)
    if args.like:
        from climnb.data.lookalike import dress

        ds = dress(ds, args.like)
        summary += f"\n  written as {args.like} names them"
    save_dataset(ds, events, args.out, events_path=args.events)
    print(summary)
    return 0


def _shape(text: str) -> tuple[int, int]:
    try:
        n_lat, n_lon = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--shape must look like 96x144 (LATxLON), got {text!r}") from None
    return n_lat, n_lon
