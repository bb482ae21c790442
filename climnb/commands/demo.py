"""``climnb demo``: the whole workflow on toy data, as executed notebooks and HTML reports."""

import time
from pathlib import Path

from climnb.demo import WORKFLOW, DemoConfig, demo_folders, headlines, run_demo

HELP = "run the numbered notebooks in order on toy data into reports/ (papermill)"
EXAMPLE = "climnb demo --reports reports --only 00"


def add_arguments(parser):
    parser.add_argument(
        "--notebooks",
        default=None,
        help="folder of NN_*.ipynb, run in place (default: ./notebooks in a clone, else the "
        "notebooks that came with climnb, run in the current folder)",
    )
    parser.add_argument("--reports", default="reports", help="output folder (default reports)")
    parser.add_argument(
        "--only",
        nargs="*",
        default=(),
        metavar="NN",
        help="run only notebooks starting with these prefixes",
    )
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per cell")
    parser.add_argument(
        "--kernel", default="python3", help="Jupyter kernel (e.g. climnb; default python3)"
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="training epochs in notebook 04 (default: the workflow's, climnb.demo.WORKFLOW)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep data/toy and runs/toy of an earlier run",
    )


def run(args) -> int:
    start = time.perf_counter()
    notebooks, workdir = demo_folders(args.notebooks)
    print(f"notebooks from {notebooks}, working directory {workdir}", flush=True)
    parameters = {k: dict(v) for k, v in WORKFLOW.items()}
    if args.epochs:
        parameters["04"]["epochs"] = args.epochs
    config = DemoConfig(
        notebooks=notebooks,
        reports=Path(args.reports),
        workdir=workdir,
        only=tuple(args.only),
        timeout=args.timeout,
        kernel=args.kernel,
        parameters=parameters,
        clean=not args.keep,
    )
    runs = run_demo(config, progress=lambda msg: print(msg, flush=True))
    print(f"\nclimnb demo finished in {time.perf_counter() - start:.0f} s; reports:")
    for r in runs:
        print(f"  {r.html}  ({r.seconds:.0f} s)")
    figures = headlines(workdir)
    if figures:
        print("\nheadline results:")
        width = max(map(len, figures))
        for name, value in figures.items():
            shown = f"{value:.3f}" if isinstance(value, float) else value
            print(f"  {name:<{width}} {shown}")
    return 0
