"""Peak memory of ``climnb predict`` as the period grows: streamed (lazy) against loaded whole.

For each grid and number of steps, NetCDF input files are written first (4 steps a file, so
that making the data never holds the whole period), then a fresh Python process runs the toy
Tiramisu bundle (untrained weights: the cost does not depend on them) over all the files:

* ``streamed``: ``predict(..., probabilities=True)`` then :func:`climnb.store.write` to a Zarr
  store, what ``climnb predict --probabilities --out x.zarr`` does (toy: ``batch_size`` 4 and
  2 dask threads; full size: 1 and 1, see below);
* ``loaded``: the same ``.load()``-ed: the whole result in memory (classes and float32
  probabilities, 10.6 MB a full-size step), as climnb did before predict became lazy (the
  baseline).

Each process reports its resident memory after TensorFlow is imported and the network built
for the grid (``base``) and its peak (``ru_maxrss``), so ``peak - base`` is what the
prediction itself costs. The ratios compare the longer period with the shorter one on the
same grid: bounded memory means a ratio near 1 for ``streamed``.

    .venv/bin/python benchmarks/bench_predict.py            # toy 8 vs 64, full 4 vs 16
    .venv/bin/python benchmarks/bench_predict.py --toy-only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

CHILD = r"""
import json, resource, sys, time
import psutil
from climnb.bundle import load_bundle
from climnb.predict import predict
from climnb.store import write

bundle_path, out, mode, lat, lon, batch, workers = sys.argv[1:8]
files = sys.argv[8:]
bundle = load_bundle(bundle_path)
bundle.model(int(lat), int(lon))  # build the network for this grid before the baseline
base = psutil.Process().memory_info().rss
start = time.perf_counter()
pred = predict(bundle, files, batch_size=int(batch), probabilities=True)
if mode == "streamed":
    write(pred, out, encoding={"prediction": {"dtype": "u1"}}, workers=int(workers))
else:
    import dask

    with dask.config.set(scheduler="threads", num_workers=int(workers)):
        pred = pred.load()
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"base": base, "peak": peak, "seconds": seconds}))
"""


def make_inputs(folder: Path, n_steps: int, shape: tuple[int, int]) -> list[Path]:
    from climnb.synthetic import make_dataset

    files = []
    for k in range(0, n_steps, 4):
        ds, _ = make_dataset(n_time=4, n_lat=shape[0], n_lon=shape[1], seed=k)
        times = pd.date_range("2000-01-01", periods=n_steps, freq="3h")[k : k + 4]
        path = folder / f"fields-{k:04d}.nc"
        ds.drop_vars("truth").assign_coords(time=times).to_netcdf(path)
        files.append(path)
    return files


def make_bundle(folder: Path, files: list[Path]) -> Path:
    import xarray as xr

    from climnb.bundle import save_bundle
    from climnb.channels import CHANNEL_NAMES
    from climnb.models import build_model

    with xr.open_dataset(files[0]) as ds:
        lo = [float(ds[c].min()) for c in CHANNEL_NAMES]
        hi = [float(ds[c].max()) for c in CHANNEL_NAMES]
    model = build_model("tiramisu", (96, 144, 16), preset="toy")
    return save_bundle(
        model,
        folder / "model",
        channels=CHANNEL_NAMES,
        minval=lo,
        maxval=hi,
        name="tiramisu",
        preset="toy",
    )


def run_case(bundle: Path, files: list[Path], out: Path, mode: str, shape, batch, workers):
    argv = [sys.executable, "-c", CHILD, str(bundle), str(out), mode, *map(str, shape)]
    argv += [str(batch), str(workers)]
    done = subprocess.run([*argv, *map(str, files)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy-only", action="store_true", help="skip the full-size grid")
    args = parser.parse_args(argv)
    # full size: one step per batch and one worker, so that the network's activations (about
    # 1.5 GB a step for the toy Tiramisu on the CPU) stay well inside a 24 GB machine
    cases = [("toy", (96, 144), (8, 64), 4, 2)]
    if not args.toy_only:
        cases.append(("full", (768, 1152), (4, 16), 1, 1))
    mib = 2.0**-20
    print(
        f"{'grid':>5} {'steps':>5} {'mode':>9} {'base MiB':>9} {'peak MiB':>9} "
        f"{'peak-base':>10} {'s':>6}"
    )
    for name, shape, steps, batch, workers in cases:
        with tempfile.TemporaryDirectory(prefix="bench_predict_") as tmp:
            tmp = Path(tmp)
            inputs = make_inputs(tmp, max(steps), shape)
            bundle = make_bundle(tmp, inputs)
            growth = {}
            for mode in ("streamed", "loaded"):
                for n in steps:
                    files = inputs[: n // 4]
                    out = tmp / f"out-{mode}-{n}.zarr"
                    r = run_case(bundle, files, out, mode, shape, batch, workers)
                    extra = (r["peak"] - r["base"]) * mib
                    growth[mode, n] = extra
                    print(
                        f"{name:>5} {n:>5} {mode:>9} {r['base'] * mib:9.0f} "
                        f"{r['peak'] * mib:9.0f} {extra:10.0f} {r['seconds']:6.1f}",
                        flush=True,
                    )
            for mode in ("streamed", "loaded"):
                a, b = (growth[mode, n] for n in steps)
                print(
                    f"{name}: {mode}: peak-base at {steps[1]} steps / at {steps[0]} steps = "
                    f"{b / max(a, 1e-9):.2f} (steps ratio {steps[1] / steps[0]:.0f})"
                )
    print(f"measured {time.strftime('%Y-%m-%d %H:%M')} with numpy {np.__version__}")


if __name__ == "__main__":
    main()
