"""``climnb stats``: frequency maps, events, landfall and attributed precipitation of masks;
``climnb stats compare A B``: the change between two periods or runs, with significance."""

HELP = (
    "statistics of labels or predictions (frequency, events, landfall, precipitation); "
    "'climnb stats compare A B' for the change between two periods or runs"
)
EXAMPLE = (
    "climnb stats labelled.nc --out freq.nc --by season --events events.csv "
    "--landfall landfall.csv --precip precip.csv\n"
    "  climnb stats compare historical.nc future.nc --block year --out change.nc --csv change.csv "
    "--events events_change.csv --precip precip_change.csv"
)


def add_arguments(parser):
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="mask files (NetCDF/Zarr of `climnb label`, `climnb predict`, truth, or any mask "
        "with flag_values); or `compare A B`",
    )
    parser.add_argument("--variable", help="the mask (default: prediction, labels, truth, LABELS)")
    parser.add_argument(
        "--out", help="frequency maps (NetCDF, .zarr for Zarr); with compare: the change maps"
    )
    parser.add_argument(
        "--by", choices=("all", "season", "month"), default="all", help="frequency per group"
    )
    parser.add_argument(
        "--region",
        action="append",
        default=[],
        metavar="REGION",
        help="a built-in region (california, us_west_coast, global), a box "
        "NAME=LAT0:LAT1,LON0:LON1, srex or srex:WNA,CNA (SREX regions), us_state:CA, or a "
        "shapefile/GeoJSON/GeoPackage; repeatable",
    )
    parser.add_argument("--tracks", help="CF trajectory file of the masks (default: tracked here)")
    parser.add_argument(
        "--fields",
        nargs="+",
        default=[],
        help="fields the masks were made from (default: INPUT); with compare: two, the fields "
        "of A and of B (quote globs)",
    )
    parser.add_argument(
        "--events",
        help="event table: CSV, or NetCDF for .nc; with compare: the change of event counts, "
        "landfalls and intensities",
    )
    parser.add_argument("--landfall", help="landfalls per region and year: CSV")
    parser.add_argument(
        "--precip",
        help="precipitation attributed to events: CSV; with compare: its change (CSV, or "
        "NetCDF for .nc)",
    )
    compare = parser.add_argument_group("compare A B")
    compare.add_argument(
        "--block",
        default="year",
        help="resampling block: 'year' or a number of time steps (default year)",
    )
    compare.add_argument("--alpha", type=float, default=0.05, help="test level (default 0.05)")
    compare.add_argument(
        "--resamples", type=int, default=999, help="permutations and bootstrap draws (999)"
    )
    compare.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    compare.add_argument("--csv", help="the headline table as CSV")


def run(args) -> int:
    from climnb.stats.change import CompareConfig
    from climnb.stats.change_tables import change_text
    from climnb.stats.regions import parse_region
    from climnb.stats.workflow import StatsRequest, compare_files, summarize

    regions = [r for text in args.region for r in parse_region(text)]
    if args.inputs[0] == "compare":
        if len(args.inputs) != 3:
            raise ValueError("compare takes two inputs: climnb stats compare A B")
        if args.fields and len(args.fields) != 2:
            raise ValueError(
                f"--fields: compare takes two (the fields of A and of B), got {len(args.fields)}"
            )
        block = _block(args.block)
        config = CompareConfig(
            block=block, alpha=args.alpha, n_resamples=args.resamples, seed=args.seed
        )
        result = compare_files(
            args.inputs[1],
            args.inputs[2],
            config,
            regions=regions or None,
            variable=args.variable,
            out=args.out,
            csv=args.csv,
            events=args.events,
            precip=args.precip,
            fields=tuple(args.fields) or None,
        )
        print(f"A = {args.inputs[1]}, B = {args.inputs[2]}; frequency in % of time steps")
        print(result.headline())
        sig = result.maps.significant.mean(("lat", "lon")).values
        print(
            f"grid points significant after FDR (alpha_FDR = {config.alpha_fdr:g}): "
            + ", ".join(
                f"{c} {100 * s:.1f} %"
                for c, s in zip(result.maps["class"].values, sig, strict=True)
            )
        )
        for title, table in (
            ("events (per year of the blocks; landfalls by region)", result.events),
            ("precipitation attributed to events (shares in %, rates in mm/day)", result.precip),
        ):
            if table is not None:
                print(f"\n{title}; FDR across the rows at alpha_FDR = {config.alpha_fdr:g}")
                print(change_text(table))
        return 0
    request = StatsRequest(
        inputs=tuple(args.inputs),
        out=args.out,
        by=args.by,
        variable=args.variable,
        tracks=args.tracks,
        fields=tuple(args.fields),
        events=args.events,
        landfall=args.landfall,
        precip=args.precip,
        regions=tuple(regions),
    )
    print(summarize(request))
    return 0


def _block(text: str) -> int | str:
    """``--block``: ``year`` or a positive whole number of time steps."""
    text = str(text).strip()
    if text.lower() == "year":
        return "year"
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise ValueError(
        f"--block takes 'year' or a whole number of time steps (1 or more, e.g. 8 for a day of "
        f"3-hourly steps), got {text!r}"
    )
