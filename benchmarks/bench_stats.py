"""Benchmark of climnb.stats: the frequency pass against the raw read rate of the same file,
peak memory, growth with the period's length, and the false-positive rate of ``compare``.

What it does:

1. writes masks of ``--shape`` (default the paper's 768 x 1152) for ``--years`` years of
   3-hourly steps (2,920 a year), once, as climnb writes labels (uint8, zlib, one chunk per
   ``--chunk`` steps). The masks are the synthetic generator's truth (one day at full size)
   moved along longitude from day to day, so that every step differs and compresses as real
   masks do;
2. for each file, in a fresh process each (so that peak memory is the pass's own), times
   (a) the raw read: every chunk read and decompressed (a ``max`` over the mask, on the same
   dask threads), then (b) the seasonal frequency pass of :func:`climnb.stats.frequency`; and
   reports throughput (steps/s, MB/s of uncompressed mask), the ratio (b)/(a) (goal >= 80 %),
   and the peak resident memory (goal <= 2 GB);
3. compares ``--pairs`` pairs of runs of the same synthetic climate (different seeds) with
   :func:`climnb.stats.compare` and reports the fraction of grid points flagged at p < alpha
   (expected about alpha) and after FDR (expected about none);
4. compares ``--table-pairs`` such pairs with :func:`climnb.stats.compare_events` and
   :func:`climnb.stats.compare_precip` and reports, per quantity, the fraction of rows
   flagged at p < alpha and after FDR across each table's rows (rows whose value is the same
   in both runs, e.g. no storm ever over a region, are left out).

Usage::

    python benchmarks/bench_stats.py                     # 1 and 2 years at full size, 20 pairs
    python benchmarks/bench_stats.py --years 1 --shape 384x576 --pairs 20   # reduced
    python benchmarks/bench_stats.py --years --pairs 0 --table-pairs 20      # tables only

How the figures could be wrong: the file sits in the page cache after it is written, so the
"raw read" is decompression plus memory copies, not disk (both measurements share this, so the
ratio is fair, but the absolute rate is not a disk's); other processes on the machine change
both rates (they are measured back to back, raw first); the masks repeat one day's events
shifted, so their compression ratio is that of masks with about 2 % of pixels in a class.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np
from _args import at_least, synthetic_grid

STEPS_PER_YEAR = 2920


def write_masks(path: Path, years: int, shape: tuple[int, int], chunk: int) -> float:
    """Write ``years`` years of masks to ``path`` (NetCDF, uint8, zlib); returns seconds."""
    import netCDF4

    from climnb.data.synthetic import make_dataset

    day, _ = make_dataset(n_time=8, n_lat=shape[0], n_lon=shape[1], seed=0)
    truth = day.truth.values
    n = years * STEPS_PER_YEAR
    start = time.perf_counter()
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", n)
        nc.createDimension("lat", shape[0])
        nc.createDimension("lon", shape[1])
        t = nc.createVariable("time", "f8", ("time",))
        t.units, t.calendar = "hours since 2000-01-01", "noleap"
        t[:] = np.arange(n) * 3.0
        for name, values, units in (
            ("lat", day.lat.values, "degrees_north"),
            ("lon", day.lon.values, "degrees_east"),
        ):
            v = nc.createVariable(name, "f8", (name,))
            v.units = units
            v[:] = values
        labels = nc.createVariable(
            "labels", "u1", ("time", "lat", "lon"), zlib=True, chunksizes=(chunk, *shape)
        )
        labels.flag_values = np.array([0, 1, 2], np.uint8)
        labels.flag_meanings = "background tropical_cyclone atmospheric_river"
        for s in range(0, n, chunk):
            k = np.arange(s, min(s + chunk, n))
            block = truth[k % 8]
            shift = (k // 8) * 7 % shape[1]  # a new position each day
            labels[s : s + len(k)] = np.stack(
                [np.roll(b, int(d), axis=1) for b, d in zip(block, shift, strict=True)]
            )
    return time.perf_counter() - start


def measure(path: str, what: str, chunk: int, workers: int) -> dict:
    """In this process: time one pass over the file; peak memory from the OS."""
    import dask
    import xarray as xr

    from climnb.stats import class_mask, frequency

    ds = xr.open_dataset(path, chunks={"time": chunk})
    mask = class_mask(ds, "labels", source=path)
    start = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=workers):
        if what == "raw":
            mask.data.max().compute()
        else:
            frequency(mask, "season").compute()
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "peak_mb": peak_kb / 1024, "steps": mask.sizes["time"]}


def _in_fresh_process(path: Path, what: str, chunk: int, workers: int) -> dict:
    cmd = [sys.executable, __file__, "--_measure", what, str(path), str(chunk), str(workers)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def false_positives(pairs: int, n_time: int, block: int, resamples: int) -> list[dict]:
    from climnb.data.synthetic import make_dataset
    from climnb.stats import CompareConfig, class_mask, compare

    rows = []
    for i in range(pairs):
        a, _ = make_dataset(n_time=n_time, seed=1000 + 2 * i)
        b, _ = make_dataset(n_time=n_time, seed=1001 + 2 * i)
        maps = compare(
            class_mask(a), class_mask(b), CompareConfig(block=block, n_resamples=resamples)
        ).maps
        for c in maps["class"].values:
            m = maps.sel({"class": c})
            active = (m.a > 0) | (m.b > 0)  # elsewhere both are 0 and p = 1
            rows.append(
                {
                    "pair": i,
                    "class": str(c),
                    "local": float(m.significant_local.mean()),
                    "local_where_present": float(m.significant_local.where(active).mean()),
                    "fdr": float(m.significant.mean()),
                }
            )
        print(f"  pair {i + 1}/{pairs} done", flush=True)
    return rows


def table_false_positives(pairs: int, n_time: int, block: int, resamples: int) -> list[dict]:
    """Rows of the event and precipitation change tables flagged between runs of one climate."""
    from climnb.data.synthetic import make_dataset
    from climnb.stats import (
        BUILTIN,
        CompareConfig,
        class_mask,
        compare_events,
        compare_precip,
        precipitation,
    )

    config = CompareConfig(block=block, n_resamples=resamples)
    regions = [BUILTIN["global"], BUILTIN["us_west_coast"]]
    rows = []
    for i in range(pairs):
        a, _ = make_dataset(n_time=n_time, seed=1000 + 2 * i, ivt=True)
        b, _ = make_dataset(n_time=n_time, seed=1001 + 2 * i, ivt=True)
        ma, mb = class_mask(a), class_mask(b)
        events = compare_events(ma, mb, config, fields=(a, b), regions=regions)
        precip = compare_precip(ma, precipitation(a), mb, precipitation(b), config, regions=regions)
        for table in (events, precip):
            table = table[table.a != table.b]
            rows += [
                {
                    "pair": i,
                    "quantity": r.quantity,
                    "local": r.significant,
                    "fdr": r.significant_fdr,
                }
                for r in table.itertuples()
            ]
        print(f"  pair {i + 1}/{pairs} done", flush=True)
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--years", type=at_least(1), nargs="*", default=[1, 2])
    p.add_argument("--shape", type=synthetic_grid, default=(768, 1152), help="LATxLON")
    p.add_argument("--chunk", type=at_least(1), default=8, help="time steps per chunk (default 8)")
    p.add_argument("--workers", type=at_least(1), default=2)
    p.add_argument("--pairs", type=at_least(0), default=20)
    p.add_argument("--table-pairs", type=at_least(0), default=20)
    p.add_argument("--pair-steps", type=at_least(2), default=160)
    p.add_argument("--block", type=at_least(1), default=16)
    # CompareConfig's own floor: fewer permutations cannot give p < 0.05
    p.add_argument("--resamples", type=at_least(19), default=999)
    p.add_argument("--workdir", default=None)
    p.add_argument("--_measure", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.years and args.chunk > (steps := min(args.years) * STEPS_PER_YEAR):
        p.error(f"argument --chunk: must be at most {steps} (the shortest file's steps)")
    if (args.pairs or args.table_pairs) and args.pair_steps <= args.block:
        # compare() resamples whole blocks: a period needs at least two of them
        p.error(
            f"argument --pair-steps: must be at least --block + 1 ({args.block + 1}: two "
            f"bootstrap blocks), got {args.pair_steps}"
        )
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args._measure:
        what, path, chunk, workers = args._measure
        print(json.dumps(measure(path, what, int(chunk), int(workers))))
        return
    shape = args.shape
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_stats_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"masks {shape[0]} x {shape[1]}, chunks of {args.chunk} steps, {args.workers} threads")
    results = []
    for years in args.years:
        path = work / f"masks_{years}y.nc"
        written = write_masks(path, years, shape, args.chunk)
        raw_mb = years * STEPS_PER_YEAR * shape[0] * shape[1] / 2**20
        size_mb = path.stat().st_size / 2**20
        print(
            f"{years} year(s): wrote {raw_mb:.0f} MB of masks as {size_mb:.0f} MB "
            f"({raw_mb / size_mb:.0f}x) in {written:.0f} s"
        )
        raw = _in_fresh_process(path, "raw", args.chunk, args.workers)
        freq = _in_fresh_process(path, "frequency", args.chunk, args.workers)
        row = {"years": years, "raw": raw, "frequency": freq, "mb": raw_mb}
        results.append(row)
        print(
            f"  raw read: {raw['seconds']:.1f} s = {raw_mb / raw['seconds']:.0f} MB/s, "
            f"peak {raw['peak_mb']:.0f} MB\n"
            f"  frequency by season: {freq['seconds']:.1f} s = "
            f"{raw_mb / freq['seconds']:.0f} MB/s "
            f"({freq['steps'] / freq['seconds']:.0f} steps/s), peak {freq['peak_mb']:.0f} MB\n"
            f"  throughput / raw read rate: {100 * raw['seconds'] / freq['seconds']:.0f} % "
            f"(goal >= 80 %); peak memory goal <= 2048 MB"
        )
        path.unlink()
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(
            f"growth {a['years']} -> {b['years']} years: time x"
            f"{b['frequency']['seconds'] / a['frequency']['seconds']:.2f} "
            f"(steps x{b['years'] / a['years']:.0f}), peak memory "
            f"{a['frequency']['peak_mb']:.0f} -> {b['frequency']['peak_mb']:.0f} MB"
        )
    if args.pairs:
        print(
            f"false positives: {args.pairs} pairs of the same climate, {args.pair_steps} steps "
            f"each, blocks of {args.block}, {args.resamples} resamples, alpha 0.05"
        )
        rows = false_positives(args.pairs, args.pair_steps, args.block, args.resamples)
        import pandas as pd

        cols = ["local", "local_where_present", "fdr"]
        t = pd.DataFrame(rows).groupby("class")[cols].agg(["mean", "max"])
        # "-": a class that never occurs in a pair (no grid point where it is present)
        print((100 * t).round(2).to_string(na_rep="-"))
        print(
            "  (percent of grid points with p < 0.05: at most about 5 where the class occurs; "
            "after FDR about 0)"
        )
    if args.table_pairs:
        print(
            f"false positives of the change tables: {args.table_pairs} pairs, "
            f"{args.pair_steps} steps each, blocks of {args.block}, {args.resamples} resamples"
        )
        rows = table_false_positives(args.table_pairs, args.pair_steps, args.block, args.resamples)
        import pandas as pd

        if not rows:
            print("  no row differs between the runs of a pair: nothing tested (more --pair-steps)")
            return
        t = pd.DataFrame(rows).groupby("quantity")[["local", "fdr"]].agg(["mean", "size"])
        print((100 * t.xs("mean", axis=1, level=1)).round(1).assign(rows=t[("local", "size")]))
        frame = pd.DataFrame(rows)
        print(
            f"  all rows: {100 * frame.local.mean():.1f} % at p < 0.05 (expected about 5), "
            f"{100 * frame.fdr.mean():.1f} % after FDR; pairs with any row after FDR: "
            f"{frame.groupby('pair').fdr.any().sum()} of {args.table_pairs}"
        )


if __name__ == "__main__":
    main()
