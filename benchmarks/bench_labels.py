"""Quality, speed and memory of the heuristic labels (climnb.labels).

Prints, on synthetic data whose truth comes from the generator's event geometry:

* quality at toy (96 x 144) and full (768 x 1152) size over >= 50 steps from several seeds:
  pixel IoU per class and event recall / precision (targets: IoU(AR) >= 0.85 at both sizes,
  IoU(TC) >= 0.85 full / 0.70 toy, recall and precision >= 0.95);
* seconds per full-size step on one core (target <= 0.5 s), next to a baseline measured in the
  same run: one ``np.percentile`` plus one ``scipy.ndimage.label`` of the grid, the least a
  percentile-and-components labeller must spend;
* the 1-worker vs 2-worker speed-up of ``label_dataset`` through dask (threads and processes)
  on a series read lazily from NetCDF;
* peak memory (RSS) of labelling a lazily opened series of NetCDF files to NetCDF, for a short
  and a 4x longer series: bounded memory means the peak does not grow with the length.

    .venv/bin/python benchmarks/bench_labels.py [--steps 50] [--seeds 5] [--quick]

The machine's cores may be shared; the speed-up is only meaningful on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy import ndimage

from climnb.io.netcdf import open_dataset
from climnb.labels import LabelConfig, compute, label_dataset, label_step, required_variables
from climnb.labels.scores import score
from climnb.synthetic import FULL_SHAPE, TOY_SHAPE, make_dataset

TARGETS = {
    "toy": {"tropical_cyclone": 0.70, "atmospheric_river": 0.85},
    "full": {"tropical_cyclone": 0.85, "atmospheric_river": 0.85},
}


def quality(shape, steps: int, seeds: int, config: LabelConfig) -> pd.DataFrame:
    """Scores over ``steps`` steps split across ``seeds`` seeds (generated in small batches)."""
    per_seed = int(np.ceil(steps / seeds))
    labels, truth, found, true = [], [], [], []
    for seed in range(seeds):
        ds, events = make_dataset(n_time=per_seed, n_lat=shape[0], n_lon=shape[1], seed=100 + seed)
        lab, ev = compute(*label_dataset(ds, config), scheduler="sync")
        # distinct times per seed so that events of different seeds never meet
        shift = pd.Timedelta(days=365 * seed)
        labels.append(lab.assign_coords(time=lab.time + shift))
        truth.append(ds.truth.assign_coords(time=ds.time + shift))
        found.append(ev.assign(time=ev.time + shift))
        true.append(events.assign(time=events.time + shift))
    return score(
        xr.concat(labels, "time"), xr.concat(truth, "time"), pd.concat(found), pd.concat(true)
    )


def print_quality(name, shape, table, steps, seeds):
    print(f"\n{name} {shape[0]} x {shape[1]}: {steps} steps from {seeds} seeds")
    for cls, row in table.iterrows():
        target = TARGETS[name][cls]
        ok = row.iou >= target and row.recall >= 0.95 and row.precision >= 0.95
        print(
            f"  {cls:<18} IoU {row.iou:.3f} (>= {target})  recall {row.recall:.3f}  "
            f"precision {row.precision:.3f}  events {row.n_true}/{row.n_found} true/found  "
            f"{'OK' if ok else 'BELOW TARGET'}"
        )


def step_speed(repeat: int = 5) -> float:
    ds, _ = make_dataset(n_time=2, n_lat=FULL_SHAPE[0], n_lon=FULL_SHAPE[1], seed=7)
    names = required_variables()
    lat, lon = ds.lat.values, ds.lon.values
    steps = [{k: ds[k].values[t] for k in names} for t in range(2)]
    label_step(steps[0], lat, lon)  # warm up
    times = []
    for i in range(repeat):
        start = time.perf_counter()
        label_step(steps[i % 2], lat, lon)
        times.append(time.perf_counter() - start)
    tmq = steps[0]["TMQ"]
    start = time.perf_counter()
    for _ in range(repeat):
        ndimage.label(tmq > np.percentile(tmq, 95))
    base = (time.perf_counter() - start) / repeat
    best, median = min(times), float(np.median(times))
    print(
        f"\nfull-size step on one core: best {best:.3f} s, median {median:.3f} s "
        f"(target <= 0.5 s: {'OK' if median <= 0.5 else 'SLOW'}); baseline percentile + "
        f"ndimage.label {base:.3f} s, ratio {median / base:.1f}x"
    )
    return median


def scaling(paths: list[Path]) -> None:
    """1 vs 2 workers labelling a lazily opened series (each task reads its own step)."""
    ds = open_dataset([str(p) for p in paths], required=required_variables())
    n_time = ds.sizes["time"]
    print(
        f"\ndask speed-up over {n_time} full-size steps read lazily from NetCDF (one task per "
        "step):"
    )
    for scheduler in ("threads", "processes"):
        seconds = {}
        for workers in (1, 2):
            labels, events = label_dataset(ds)
            start = time.perf_counter()
            compute(labels, events, scheduler=scheduler, num_workers=workers)
            seconds[workers] = time.perf_counter() - start
        print(
            f"  {scheduler:<9} 1 worker {seconds[1] / n_time:.3f} s/step, 2 workers "
            f"{seconds[2] / n_time:.3f} s/step: speed-up {seconds[1] / seconds[2]:.2f}x "
            f"(ideal 2.00x)"
        )


def write_series(folder: Path, n_time: int, shape) -> list[Path]:
    """One NetCDF file per 4 steps, with the channels labelling needs."""
    paths = []
    for k in range(0, n_time, 4):
        ds, _ = make_dataset(
            n_time=4,
            n_lat=shape[0],
            n_lon=shape[1],
            seed=200 + k,
            start=str(pd.Timestamp("2000-01-01") + pd.Timedelta(hours=3 * k)),
        )
        path = folder / f"fields-{k:04d}.nc"
        ds[list(required_variables())].to_netcdf(path)
        paths.append(path)
    return paths


def stream_child(inputs: list[str], out: str) -> None:
    """Label files to NetCDF through the CLI path, then print this process's peak RSS (MiB)."""
    from climnb.cli import main

    main(["label", *inputs, "--out", out, "--workers", "2", "--no-progress"])
    print(f"PEAK_MIB {_peak_rss_mib():.0f}")


def _peak_rss_mib() -> float:
    """This process's peak RSS. ``ru_maxrss`` would do, but Linux carries it over from the
    parent across fork + exec, so the parent's size would show; VmHWM starts afresh."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(folder: Path, paths: list[Path], short: int) -> None:
    print(
        f"\npeak memory labelling a lazily opened full-size series ({short} vs {4 * short} "
        "steps, 2 threads, written to NetCDF):"
    )
    per_step = sum(p.stat().st_size for p in paths) / (4 * short) / 2**20
    peaks = {}
    for n in (short, 4 * short):
        inputs = [str(p) for p in paths[: n // 4]]
        cmd = [sys.executable, __file__, "--stream-child", str(folder / f"out{n}.nc"), *inputs]
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        peaks[n] = float(result.stdout.split("PEAK_MIB")[-1])
        print(f"  {n:>3} steps ({n * per_step:6.0f} MiB of input): peak RSS {peaks[n]:.0f} MiB")
    grow = peaks[4 * short] / peaks[short]
    print(
        f"  peak ratio {grow:.2f}x for 4x the steps "
        f"({'bounded' if grow < 1.3 else 'GROWS with the series'})"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="steps per size for quality")
    parser.add_argument("--seeds", type=int, default=5, help="seeds the steps are split over")
    parser.add_argument("--scaling-steps", type=int, default=32)
    parser.add_argument("--memory-steps", type=int, default=8)
    parser.add_argument("--recipe", choices=("default", "paper"), default="default")
    parser.add_argument("--quick", action="store_true", help="toy quality and speed only")
    parser.add_argument("--stream-child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stream_child:
        return stream_child(args.stream_child[1:], args.stream_child[0])
    config = LabelConfig.paper() if args.recipe == "paper" else LabelConfig()
    print(f"recipe: {args.recipe}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    sizes = [("toy", TOY_SHAPE)] + ([] if args.quick else [("full", FULL_SHAPE)])
    for name, shape in sizes:
        table = quality(shape, args.steps, args.seeds, config)
        steps = int(np.ceil(args.steps / args.seeds)) * args.seeds
        print_quality(name, shape, table, steps, args.seeds)
    step_speed()
    if not args.quick:
        with tempfile.TemporaryDirectory() as tmp:
            paths = write_series(Path(tmp), 4 * args.memory_steps, FULL_SHAPE)
            scaling(paths[: max(args.scaling_steps // 4, 1)])
            memory(Path(tmp), paths, args.memory_steps)


if __name__ == "__main__":
    main()
