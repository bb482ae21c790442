"""Peak memory of each ``climnb predict`` worker over full-size steps, against the goals.

Full-size (768 x 1152 x 16) NetCDF input is written first (2 steps a file), then each case
runs the real command, ``climnb predict --batch-size 1 --out x.zarr`` with an untrained paper
Tiramisu bundle (the cost does not depend on the weights), in a fresh Python process that
reports its own peak resident memory (``VmHWM``: the kernel's high-water mark, exact, not
sampled) and its resident memory at the start (Python and climnb, before TensorFlow).
Workers are threads of that one process,
so a worker's figure is the process's peak over ``--workers`` (with one worker: the whole
process, runtime included). Cases, in each precision:

* ``eager``: the network called eagerly, as predict ran it before (the baseline, same run):
  Keras keeps every layer's output until the call returns;
* ``graph``: as the command runs it now (one graph function: activations freed once read),
  over 2 and 4 steps (memory flat in the number of steps) and with 2 workers;
* ``tiled`` (the first precision only: tiles cost 4-6x the time of a whole step): with
  ``--memory`` below what a whole step needs, so that each step runs in longitude tiles; its
  classes are compared with the untiled run's.

    .venv/bin/python benchmarks/bench_predict.py                 # bf16 (where native), fp32
    .venv/bin/python benchmarks/bench_predict.py --precisions mixed_bfloat16 --preset toy
    .venv/bin/python benchmarks/bench_predict.py --precisions mixed_bfloat16 --modes graph,tiled

How the figures could mislead: one run each, and other work on the machine changes the
seconds (the load is printed) though hardly the memory; the peak depends on how oneDNN lays out
and reorders the tensors, which differs between CPUs and TensorFlow versions; synthetic,
smooth input and an untrained network (the memory depends on neither); 2-4 steps, not a
month (flatness is shown between 2 and 4 steps, each step's memory freed before the next).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np
import pandas as pd

SHAPE = (768, 1152)
GB = 1e9
#: per-worker peak goals (GB), by precision
GOALS = {"mixed_bfloat16": 3.0, "float32": 4.0}

CHILD = r"""
import json, resource, sys, time
import numpy as np
import psutil
import climnb.inference.predict
from climnb.cli import main

bundle, out, mode, workers, memory, *files = sys.argv[1:]
if mode == "eager":  # the baseline: the network called eagerly, every activation kept
    def eager(model, offset, scale):
        return lambda x: model(np.nan_to_num((x - offset) * scale), training=False)
    climnb.inference.predict._forward_function = eager
base = psutil.Process().memory_info().rss
argv = ["predict", "--model", bundle, "--out", out, "--batch-size", "1", "--workers", workers,
        "--no-progress", *files]
if memory != "-":
    argv += ["--memory", memory]
t0 = time.perf_counter()
status = main(argv)
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # VmHWM
print(json.dumps({"status": status, "base": base, "peak": peak, "seconds": seconds}))
"""


def make_inputs(folder: Path, n_steps: int, shape: tuple[int, int]) -> list[Path]:
    """NetCDF files of 2 steps each (the data never held whole)."""
    from climnb.data.synthetic import make_dataset

    files = []
    for k in range(0, n_steps, 2):
        ds, _ = make_dataset(n_time=2, n_lat=shape[0], n_lon=shape[1], seed=k)
        times = pd.date_range("2000-01-01", periods=n_steps, freq="3h")[k : k + 2]
        path = folder / f"fields-{k:04d}.nc"
        ds.drop_vars("truth").assign_coords(time=times).to_netcdf(path)
        files.append(path)
    return files


def make_bundle(folder: Path, preset: str, precision: str, shape) -> Path:
    from climnb.bundle import save_bundle
    from climnb.io.channels import CHANNEL_NAMES
    from climnb.models import build_model

    mp = precision if precision != "float32" else False
    model = build_model("tiramisu", (*shape, 16), preset=preset, mixed_precision=mp)
    return save_bundle(
        model,
        folder / f"model-{precision}",
        channels=CHANNEL_NAMES,
        minval=np.full(16, -1e6),  # wide: an untrained network, no range refused
        maxval=np.full(16, 1e6),
        name="tiramisu",
        preset=preset,
    )


def run_case(bundle: Path, files, out: Path, mode: str, workers: int, memory) -> dict:
    argv = [sys.executable, "-c", CHILD, str(bundle), str(out), mode, str(workers)]
    argv += ["-" if memory is None else f"{memory:g}", *map(str, files)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    # climnb's own log lines aside, the command should print nothing on stderr: show the rest
    noise = [line for line in done.stderr.splitlines() if line.strip() and " climnb." not in line]
    if noise:
        print("  stderr: " + "\n  stderr: ".join(noise[:5]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def classes(path: Path) -> np.ndarray:
    import xarray as xr

    with xr.open_zarr(path, consolidated=False) as ds:
        return ds.prediction.values


def tiled_memory(bundle_path: Path, shape) -> float:
    """A --memory (GB) that makes one worker tile a step: between the narrowest tile's need
    and the whole step's."""
    from climnb.bundle import load_bundle
    from climnb.commands.predict import RUNTIME_GB
    from climnb.inference.predict import forward_bytes

    bundle = load_bundle(bundle_path)
    whole = forward_bytes(bundle, *shape)
    return round(RUNTIME_GB + 0.85 * whole / GB, 2)


def main(argv=None) -> None:
    from climnb.models.precision import cpu_bf16_flags

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="mixed_bfloat16,float32")
    parser.add_argument("--preset", default="paper", help="Tiramisu preset (toy: a quick check)")
    parser.add_argument(
        "--modes",
        default="eager,graph,steps4,workers2,tiled",
        help="cases to run (default: all): eager, graph (2 steps), steps4, workers2, tiled",
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: /tmp)")
    args = parser.parse_args(argv)
    precisions = args.precisions.split(",")
    if "mixed_bfloat16" in precisions and not cpu_bf16_flags():
        print("mixed_bfloat16 skipped: no native bfloat16 on this CPU")
        precisions.remove("mixed_bfloat16")
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").open()
            if "model name" in line
        ),
        "CPU ?",
    )
    print(
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores ({cpu}), "
        f"{time.strftime('%Y-%m-%d %H:%M')}; {args.preset} Tiramisu, {SHAPE[0]} x {SHAPE[1]} "
        "x 16, `climnb predict --batch-size 1` to Zarr"
    )
    head = f"{'precision':>14} {'mode':>6} {'workers':>7} {'steps':>5} {'--memory':>8}"
    print(f"{head} {'start GB':>8} {'peak GB':>7} {'/worker':>7} {'goal':>5} {'s/step':>6}")
    with tempfile.TemporaryDirectory(prefix="bench_predict_", dir=args.dir) as tmp:
        tmp = Path(tmp)
        inputs = make_inputs(tmp, 4, SHAPE)
        for precision in precisions:
            bundle = make_bundle(tmp, args.preset, precision, SHAPE)
            budget = tiled_memory(bundle, SHAPE)
            goal = GOALS[precision]
            cases = {
                "eager": ("eager", 1, 2, None),
                "graph": ("graph", 1, 2, None),
                "steps4": ("graph", 1, 4, None),
                "workers2": ("graph", 2, 4, None),
            }
            if precision == precisions[0]:  # tiles cost about twice the time: one precision
                cases["tiled"] = ("tiled", 1, 2, budget)
            cases = [c for k, c in cases.items() if k in args.modes.split(",")]
            peaks = {}
            for mode, workers, steps, memory in cases:
                out = tmp / f"{precision}-{mode}-{workers}-{steps}.zarr"
                files = inputs[: steps // 2]
                r = run_case(bundle, files, out, mode, workers, memory)
                per = r["peak"] / workers / GB
                peaks[mode, workers, steps] = per
                print(
                    f"{precision:>14} {mode:>6} {workers:>7} {steps:>5} "
                    f"{'-' if memory is None else f'{memory:g}':>8} {r['base'] / GB:8.2f} "
                    f"{r['peak'] / GB:7.2f} {per:7.2f} {'<=' + str(goal):>5} "
                    f"{r['seconds'] / steps:6.1f}",
                    flush=True,
                )
            if {("eager", 1, 2), ("graph", 1, 2), ("graph", 1, 4)} <= set(peaks):
                flat = peaks["graph", 1, 4] / peaks["graph", 1, 2]
                worst = max(v for (m, _, _), v in peaks.items() if m != "eager")
                print(
                    f"{precision}: per-worker peak at most {worst:.2f} GB (goal <= {goal} GB: "
                    f"{'met' if worst <= goal else 'NOT met'}); eager baseline "
                    f"{peaks['eager', 1, 2]:.2f} GB; 4 steps / 2 steps = {flat:.2f} (goal: "
                    f"flat, <= 1.05: {'met' if flat <= 1.05 else 'NOT met'})",
                    flush=True,
                )
            if {("tiled", 1, 2), ("graph", 1, 2)} <= set(peaks):
                untiled = classes(tmp / f"{precision}-graph-1-2.zarr")
                tiled = classes(tmp / f"{precision}-tiled-1-2.zarr")
                print(
                    f"{precision}: tiled (--memory {budget:g}) vs whole steps: "
                    f"{int((untiled != tiled).sum())} of {untiled.size} pixels' classes differ "
                    "(float32: none expected; bfloat16: pixels whose two best classes are "
                    "within its rounding)",
                    flush=True,
                )
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
