"""Input pipeline and staging speed at full size (768 x 1152 x 16), against baselines.

Writes ``--n-files`` full-size synthetic sample files (57 MB each) under ``--dir`` (kept for the
next run unless ``--clean``), reads them once so that every contender sees the same warm page
cache, then measures, interleaved over ``--rounds`` rounds so that load from other processes
falls on all of them alike (the medians are printed):

* ``h5py``: plain h5py reads of data and labels, one file after another, one process (the raw
  rate the pipeline should sustain: target >= 90 %);
* ``naive``: a serial ``tf.py_function`` h5py read, then TensorFlow normalisation, labels and
  weights, then batch (target: the pipeline at >= 2x);
* ``climnb``: :func:`climnb.train.pipeline.make_dataset` (reader processes writing into shared
  memory, handed to TensorFlow without a copy);
* alternatives that were considered for the parallel read: ``tf-raw`` (``tf.io.read_file`` and
  ``decode_raw`` at the known offsets, all in TensorFlow), ``h5py-threads`` (h5py in a
  ``tf.numpy_function`` map with ``num_parallel_calls``) and ``climnb-0`` (climnb's reader
  with no worker processes, in TensorFlow's thread).

Then stages the files onto two simulated nodes (``mpirun -np 2 python -m climnb stage``) and
prints bytes read from the "shared" directory, bytes written and throughput; stages again (every
copy intact: each is hashed and compared with the source manifest's SHA-256, nothing is read
from the shared folder) and prints the rerun's time against the first run's; and prints the
SHA-256 rate over the sample files, the cost that content digests add to each write and to
each verified rerun, against the plain h5py read rate of the same files.

Run: ``.venv/bin/python benchmarks/bench_pipeline.py --n-files 32 --clean``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np
from _args import at_least

FULL = (768, 1152)


def make_files(out: Path, n_files: int, batch: int = 8) -> list[Path]:
    """Full-size synthetic sample files and ``stats.h5`` (reused when already there)."""
    import pandas as pd

    from climnb.data.synthetic import make_dataset
    from climnb.io.samples import list_samples, write_samples
    from climnb.io.stats import STATS_NAME, compute_stats, write_stats

    have = sorted(out.glob("data-*.h5")) if out.is_dir() else []
    if len(have) < n_files:
        for k in range(0, n_files, batch):
            ds, _ = make_dataset(
                n_time=min(batch, n_files - k),
                n_lat=FULL[0],
                n_lon=FULL[1],
                seed=k,
                start=str(pd.Timestamp("2000-01-01") + pd.Timedelta(days=k)),
            )
            write_samples(ds, "truth", out)
    files = list_samples(out)[:n_files]
    write_stats(compute_stats(files), out / STATS_NAME)
    return files


def h5py_rate(files) -> float:
    import h5py

    t = time.perf_counter()
    for f in files:
        with h5py.File(f, "r") as h:
            h["climate/data"][...]
            h["climate/labels_0"][...]
    return len(files) / (time.perf_counter() - t)


def dataset_rate(ds) -> float:
    """Samples per second, timed from the first batch on (tracing and start-up excluded)."""
    it = iter(ds)
    n = 0
    next(it)
    t = time.perf_counter()
    for x, *_ in it:
        n += int(x.shape[0])
    return n / (time.perf_counter() - t)


def naive(files, stats, weights, batch):
    """A serial tf.py_function pipeline: what one writes first."""
    import h5py
    import tensorflow as tf

    lo = tf.constant(stats.minval, tf.float32)
    span = tf.constant(stats.maxval - stats.minval, tf.float32)

    def read(path):
        with h5py.File(path.numpy().decode(), "r") as h:
            return h["climate/data"][...], h["climate/labels_0"][...]

    def load(path):
        x, y = tf.py_function(read, [path], [tf.float32, tf.uint8])
        x = (tf.ensure_shape(x, [*FULL, 16]) - lo) / span
        y = tf.cast(tf.ensure_shape(y, FULL), tf.int32)
        return x, y, tf.gather(weights, y)

    paths = [str(f) for f in files]
    return tf.data.Dataset.from_tensor_slices(paths).map(load).batch(batch)


def tf_raw(files, stats, weights, batch):
    """Everything in TensorFlow: read_file, then decode the bytes at the known offsets."""
    import tensorflow as tf

    from climnb.io.samples import inspect_sample

    infos = [inspect_sample(f) for f in files]
    n = FULL[0] * FULL[1] * 16 * 4
    lo = tf.constant(stats.minval, tf.float32)
    scale = tf.constant(1 / (stats.maxval - stats.minval), tf.float32)

    def load(path, data_off, label_off):
        raw = tf.io.decode_raw(tf.io.read_file(path), tf.uint8)
        x = tf.bitcast(tf.reshape(raw[data_off : data_off + n], [*FULL, 16, 4]), tf.float32)
        y = tf.cast(tf.reshape(raw[label_off : label_off + FULL[0] * FULL[1]], FULL), tf.int32)
        return (x - lo) * scale, y, tf.gather(weights, y)

    slices = (
        [str(i.path) for i in infos],
        [i.data_offset for i in infos],
        [i.labels_offset for i in infos],
    )
    return (
        tf.data.Dataset.from_tensor_slices(slices)
        .map(load, num_parallel_calls=2)
        .batch(batch)
        .prefetch(2)
    )


def h5py_threads(files, stats, weights, batch):
    """h5py in a parallel numpy_function map: the threads queue on h5py's lock and the GIL."""
    import h5py
    import tensorflow as tf

    lo, scale = (
        stats.minval.astype(np.float32),
        (1 / (stats.maxval - stats.minval)).astype(np.float32),
    )
    w = np.asarray(weights, np.float32)

    def read(path):
        with h5py.File(path.decode(), "r") as h:
            x, y = h["climate/data"][...], h["climate/labels_0"][...].astype(np.int32)
        x -= lo
        x *= scale
        return x, y, w[y]

    def load(path):
        x, y, wt = tf.numpy_function(read, [path], [tf.float32, tf.int32, tf.float32])
        return tf.ensure_shape(x, [*FULL, 16]), tf.ensure_shape(y, FULL), tf.ensure_shape(wt, FULL)

    paths = [str(f) for f in files]
    return (
        tf.data.Dataset.from_tensor_slices(paths)
        .map(load, num_parallel_calls=2)
        .batch(batch)
        .prefetch(2)
    )


def bench_pipeline(files, stats_path, args) -> dict[str, list[float]]:
    import tensorflow as tf

    from climnb.io.stats import read_stats
    from climnb.train.pipeline import PipelineConfig, make_dataset

    stats = read_stats(stats_path)
    weights = tf.constant([1.0, 20.0, 5.0])
    cfg = PipelineConfig(batch_size=args.batch_size, workers=args.workers)
    contenders = {
        "h5py": lambda: h5py_rate(files),
        "climnb": lambda: dataset_rate(
            make_dataset(files, stats, class_weights=[1.0, 20.0, 5.0], config=cfg)
        ),
        "naive": lambda: dataset_rate(naive(files, stats, weights, args.batch_size)),
    }
    if args.alternatives:
        contenders["tf-raw"] = lambda: dataset_rate(tf_raw(files, stats, weights, args.batch_size))
        contenders["h5py-threads"] = lambda: dataset_rate(
            h5py_threads(files, stats, weights, args.batch_size)
        )
        cfg0 = PipelineConfig(batch_size=args.batch_size, workers=0)
        contenders["climnb-0"] = lambda: dataset_rate(
            make_dataset(files, stats, class_weights=[1.0, 20.0, 5.0], config=cfg0)
        )
    h5py_rate(files)  # warm the page cache for everyone
    rates: dict[str, list[float]] = {k: [] for k in contenders}
    for r in range(args.rounds):
        for name, fn in contenders.items():
            rates[name].append(fn())
        print(
            f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}/s" for k, v in rates.items()),
            flush=True,
        )
    return rates


def bench_staging(shared: Path, args) -> dict:
    """Stage onto two simulated nodes under mpirun; returns the job's report."""
    work = Path(tempfile.mkdtemp(prefix="climnb-stage-", dir=args.dir.parent))
    from climnb.runtime.cluster import mpi_settings

    env = {**os.environ, **mpi_settings(2)}
    report = work / "report.json"
    cmd = [
        "mpirun",
        "-np",
        "2",
        sys.executable,
        "-m",
        "climnb",
        "stage",
        "--source",
        str(shared),
        "--dest",
        str(work / "node{node}"),
        "--nodes",
        "2",
        "--ranks-per-node",
        str(args.ranks_per_node),
        "--samples-per-rank",
        str(args.samples_per_rank),
        "--report",
        str(report),
    ]
    print("  " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    out = json.loads(report.read_text())
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)  # all intact now
    out["rerun"] = json.loads(report.read_text())
    shutil.rmtree(work)
    return out


def digest_rate(files) -> float:
    """Samples per second hashed with SHA-256 (what a verified rerun and each write add)."""
    from climnb.io.manifest import sha256_file

    t0 = time.perf_counter()
    for f in files:
        sha256_file(f)
    return len(files) / (time.perf_counter() - t0)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()) / "climnb-bench" / "shared"
    )
    p.add_argument("--n-files", type=at_least(2), default=32)
    p.add_argument("--batch-size", type=at_least(1), default=2)
    p.add_argument(
        "--workers", type=at_least(0), default=2, help="reader processes of the pipeline"
    )
    p.add_argument("--rounds", type=at_least(1), default=5)
    p.add_argument("--ranks-per-node", type=at_least(1), default=2)
    p.add_argument("--samples-per-rank", type=at_least(1), default=8)
    p.add_argument("--no-alternatives", dest="alternatives", action="store_false")
    p.add_argument("--no-staging", dest="staging", action="store_false")
    p.add_argument("--clean", action="store_true", help="remove the files afterwards")
    args = p.parse_args(argv)
    if args.n_files < 2 * args.batch_size:
        # the first batch (tracing, start-up) is not timed: a rate needs a second one
        p.error(
            f"argument --n-files: must be at least 2 x --batch-size ({2 * args.batch_size}) "
            f"for a timed batch after the first, got {args.n_files}"
        )
    return args


def main(argv=None) -> int:
    args = parse_args(argv)

    files = make_files(args.dir, args.n_files)
    mb = os.path.getsize(files[0]) / 1e6
    print(
        f"{len(files)} files of {FULL[0]}x{FULL[1]}x16 ({mb:.1f} MB each) in {args.dir}; "
        f"batch {args.batch_size}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}"
    )
    try:
        rates = bench_pipeline(files, args.dir / "stats.h5", args)
        med = {k: float(np.median(v)) for k, v in rates.items()}
        print(
            "median samples/s (MB/s): "
            + ", ".join(f"{k} {v:.1f} ({v * mb:.0f})" for k, v in med.items())
        )
        print(f"climnb / h5py  = {med['climnb'] / med['h5py']:.2f}  (target >= 0.90)")
        print(f"climnb / naive = {med['climnb'] / med['naive']:.2f}  (target >= 2)")
        sha = digest_rate(files)
        print(
            f"SHA-256: {sha:.1f} samples/s ({sha * mb:.0f} MB/s); / h5py read rate = "
            f"{sha / med['h5py']:.2f}"
        )
        if args.staging:
            rep = bench_staging(args.dir, args)
            print(f"staging: {rep['summary']}")
            again = rep["rerun"]
            print(
                f"staging rerun, all intact: {again['seconds']:.2f} s "
                f"({again['files_skipped']} files verified by SHA-256, "
                f"{again['bytes_read'] / 1e6:.0f} MB read from the shared FS) vs first run "
                f"{rep['seconds']:.2f} s: ratio {again['seconds'] / rep['seconds']:.2f}"
            )
    finally:
        if args.clean:
            shutil.rmtree(args.dir.parent if args.dir.parent.name == "climnb-bench" else args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
