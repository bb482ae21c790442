"""``climnb demo``: the whole workflow on toy data, as executed notebooks and HTML reports."""

import time
from pathlib import Path

HELP = "run the numbered notebooks in order on toy data into reports/ (papermill)"
EXAMPLE = "climnb demo --reports reports --only 00"


def add_arguments(parser):
    parser.add_argument("--notebooks", default="notebooks", help="folder of NN_*.ipynb")
    parser.add_argument("--reports", default="reports", help="output folder (default reports)")
    parser.add_argument("--only", nargs="*", default=(), metavar="NN",
                        help="run only notebooks starting with these prefixes")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per cell")


def run(args) -> int:
    from climnb.demo import DemoConfig, run_demo
    from climnb.synthetic import summarize

    start = time.perf_counter()
    config = DemoConfig(notebooks=Path(args.notebooks), reports=Path(args.reports),
                        only=tuple(args.only), timeout=args.timeout)
    runs = run_demo(config, progress=lambda msg: print(msg, flush=True))
    print(f"\nclimnb demo finished in {time.perf_counter() - start:.0f} s; reports:")
    for r in runs:
        print(f"  {r.html}  ({r.seconds:.0f} s)")
    _headlines(Path(args.notebooks), summarize)
    return 0


def _headlines(notebooks: Path, summarize) -> None:
    import pandas as pd
    import xarray as xr

    fields = notebooks / "data" / "toy" / "fields.nc"
    if fields.exists():
        with xr.open_dataset(fields) as ds:
            events = pd.read_csv(fields.with_suffix(".events.csv"))
            print("\ntoy data set:\n" + summarize(ds, events, path=fields))
