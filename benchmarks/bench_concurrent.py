"""Two ``climnb label`` runs into one ``--out``, started at the same moment, N times over.

Each try starts two real processes over a barrier (``tests/_concurrent.py``: both import
climnb, then wait for one file; they start within a millisecond of each other) on a toy file
and counts the outcomes: one run writes and the other is refused with one line (the exclusive
claim of :func:`climnb.io.atomic.claim`), or both exit 0 (a result lost), or anything else.

    .venv/bin/python benchmarks/bench_concurrent.py [--tries 20] [--steps 4]

How the figures could be wrong: the barrier starts the commands together, but the claim is
taken after the argument parsing and the output checks, which take the same few milliseconds
in both; a run that finished before the other reached its claim would be two sequential runs
(both exit 0, both correct) and is counted apart as "one after the other".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--steps", type=int, default=4, help="time steps of the toy file")
    args = parser.parse_args()

    import xarray as xr
    from _concurrent import start_together

    from climnb.cli import main as climnb

    tally: Counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        fields = Path(tmp) / "fields.nc"
        with contextlib.redirect_stdout(io.StringIO()):
            assert climnb(["synth", "--out", str(fields), "--n-time", str(args.steps)]) == 0
        for i in range(args.tries):
            folder = Path(tmp) / f"try{i}"
            folder.mkdir()
            out = folder / "labels.nc"
            argv = ["label", str(fields), "--out", str(out), "--no-progress"]
            t0 = time.perf_counter()
            done = start_together([argv, argv], folder)
            statuses = sorted(d.status for d in done)
            refused = [d.stderr.strip() for d in done if d.status == 2]
            if statuses == [0, 2] and "another run" in refused[0]:
                with xr.open_dataset(out) as ds:
                    whole = ds.sizes["time"] == args.steps
                outcome = "one wrote, one refused" if whole else "refused, but the file is short"
            elif statuses == [0, 0]:
                outcome = "both exit 0"
            else:
                outcome = f"other: {statuses}"
            tally[outcome] += 1
            print(f"try {i + 1:2d}: {outcome} ({time.perf_counter() - t0:.1f} s)", flush=True)
            if refused and i == 0:
                print(f"  the refusal: {refused[0].splitlines()[-1]}")
    print(f"\n{args.tries} tries of two label runs started together into one --out:")
    for outcome, n in tally.most_common():
        print(f"  {outcome}: {n}")


if __name__ == "__main__":
    main()
