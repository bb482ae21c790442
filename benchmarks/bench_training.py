"""Distributed training: quality in a time budget, weak scaling, epoch turnover.

1. Quality: toy Tiramisu trained on two MPI ranks (``mpirun -np 2 python -m climnb train``) on
   toy data with the synthetic truth as labels; prints the validation mean IoU (target >= 0.70)
   and the wall time (target: within 10 minutes on the 2-core machine).
2. Weak scaling: the same per-rank batch on 1 and on 2 ranks, one compute thread each; the
   baseline (1 rank) is measured in the same run. Efficiency = rate(2) / (2 x rate(1))
   (target >= 85 %).
3. Epoch turnover: the time from an epoch's last step to the next epoch's first (the
   validation in between included), on two MPI ranks with TensorFlow's default threads, as
   on notebook engines; with tf.data's autotuner (the baseline, measured in the same run: it
   made tearing down an epoch's iterator wait ~5 s at random) and without it (climnb's
   default, ``PipelineConfig.autotune``).
4. Checkpoint safety cost (``--checkpoint``): a paper-size Tiramisu's checkpoint (weights and
   Adam moments; the weights do not depend on the grid, so the network is built on a small
   grid) written as before (``np.savez``, atomic rename: the baseline, measured in the same run)
   and as now (finite-weights check, then read back and CRC-checked before older ones go), and
   a checked load.

    .venv/bin/python benchmarks/bench_training.py [--samples 160] [--epochs 12] [--skip-quality]
        [--skip-scaling] [--skip-turnover] [--checkpoint]
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

import pandas as pd

from climnb.cluster import mpi_settings
from climnb.io.samples import write_samples
from climnb.io.stats import compute_stats, write_stats
from climnb.synthetic import make_dataset


def mpi_env(ranks: int) -> dict:
    env = {**os.environ, **mpi_settings(ranks)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def make_samples(folder: Path, n: int, seed: int) -> Path:
    ds, _ = make_dataset(n_time=n, seed=seed)
    files = write_samples(ds, "truth", folder)
    write_stats(compute_stats(files), folder / "stats.h5")
    return folder


def train(
    ranks: int, data: Path, out: Path, *extra: str, pinned: bool = True
) -> tuple[float, pd.DataFrame, str]:
    """``climnb train`` under mpirun; ``pinned``: one core and one compute thread per rank
    (else TensorFlow's default threads and no binding, as on notebook engines)."""
    binding = ["--bind-to", "core"] if pinned else ["--bind-to", "none"]
    threads = ["--threads", "1"] if pinned else []
    cmd = [
        "mpirun",
        "-np",
        str(ranks),
        *binding,
        sys.executable,
        "-m",
        "climnb",
        "train",
        "--data",
        str(data),
        "--out",
        str(out),
        *threads,
        "--no-resume",
        *extra,
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=mpi_env(ranks), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"training failed:\n{proc.stderr[-3000:]}")
    return seconds, pd.read_csv(out / "history.csv"), proc.stdout


def quality(work: Path, args) -> None:
    data = make_samples(work / "quality", args.samples, seed=1)
    warmup = 20
    config = work / "quality.json"  # the learning rate decays linearly to 0 after the warm-up
    config.write_text(json.dumps({"validate_every": max(args.epochs // 4, 1)}))
    seconds, history, stdout = train(
        2,
        data,
        work / "run-quality",
        "--epochs",
        str(args.epochs),
        "--batch-size",
        "2",
        "--lr",
        str(args.lr),
        "--warmup-steps",
        str(warmup),
        "--config",
        str(config),
    )
    val = pd.read_csv(work / "run-quality" / "validation.csv")
    best = val.mean_iou.max()
    print(
        f"quality: toy Tiramisu, 2 MPI ranks, {args.samples} samples, {args.epochs} epochs, "
        f"lr {args.lr:g} x 2 ranks, linear decay, "
        f"{int(history.step.max())} steps in {seconds:.0f} s (target <= 600 s)"
    )
    print("  validation mean IoU by epoch: " + ", ".join(f"{v:.3f}" for v in val.mean_iou))
    last = val.iloc[-1]
    print(
        f"  final mean IoU {last.mean_iou:.3f} (background {last.iou_0:.3f}, "
        f"TC {last.iou_1:.3f}, AR {last.iou_2:.3f}); best {best:.3f} (target >= 0.70): "
        f"{'OK' if last.mean_iou >= 0.70 and seconds <= 600 else 'MISSED'}"
    )


def scaling(work: Path, args) -> None:
    data = make_samples(work / "scaling", 96, seed=2)
    # each rank reads in its own process (no reader workers), so a rank uses exactly one core
    config = work / "scaling.json"
    config.write_text(json.dumps({"read_workers": 0}))
    rates = {}
    for ranks in (1, 2):
        _, history, _ = train(
            ranks,
            data,
            work / f"run-scaling-{ranks}",
            "--epochs",
            "100",
            "--batch-size",
            "2",
            "--max-steps",
            str(args.scaling_steps),
            "--config",
            str(config),
        )
        steady = history.iloc[5:]  # leave out tracing and warm-up
        rates[ranks] = float(steady.samples_per_s.median())
        print(
            f"weak scaling: {ranks} rank(s), batch 2 per rank, 1 thread each: "
            f"{rates[ranks]:.2f} samples/s (median of {len(steady)} steps)"
        )
    efficiency = rates[2] / (2 * rates[1])
    print(
        f"weak-scaling efficiency 1 -> 2 ranks: {100 * efficiency:.1f} % (target >= 85 %): "
        f"{'OK' if efficiency >= 0.85 else 'MISSED'}"
    )


def turnover(work: Path, args) -> None:
    data = make_samples(work / "turnover", 80, seed=3)
    results = {}
    for autotune in (True, False):
        config = work / f"turnover-{autotune}.json"
        config.write_text(json.dumps({"data_autotune": autotune}))
        seconds, history, _ = train(
            2,
            data,
            work / f"run-turnover-{autotune}",
            "--epochs",
            str(args.turnover_epochs),
            "--batch-size",
            "2",
            "--config",
            str(config),
            pinned=False,
        )
        steps = history[(history.kind == "step") & (history["rank"] == 0)].copy()
        steps["gap"] = steps.time.diff()
        first = steps.groupby("epoch").head(1).gap.dropna()  # includes the validation
        inside = steps.gap[~steps.index.isin(first.index)].dropna()
        results[autotune] = (seconds, first)
        label = "with the autotuner (baseline)" if autotune else "without (climnb default)"
        print(
            f"epoch turnover {label}: first-step gaps "
            f"{', '.join(f'{g:.1f}' for g in first)} s (median step gap "
            f"{inside.median():.2f} s); {seconds:.0f} s for {args.turnover_epochs} epochs"
        )
    (base_s, base), (ours_s, ours) = results[True], results[False]
    print(
        f"epoch turnover: median {ours.median():.2f} s vs {base.median():.2f} s baseline "
        f"({base.median() / ours.median():.1f}x), total {ours_s:.0f} s vs {base_s:.0f} s "
        f"({base_s / ours_s:.2f}x)"
    )


def checkpoint_cost(work: Path, args) -> None:
    import numpy as np

    from climnb.atomic import atomic_path
    from climnb.models import build_model
    from climnb.train.checkpoint import load_checkpoint, save_checkpoint
    from climnb.train.optim import OptimizerConfig, make_optimizer

    model = build_model("tiramisu", (96, 144, 16), preset="paper")
    optimizer = make_optimizer(OptimizerConfig())
    optimizer.build(model.trainable_variables)
    folder = work / "checkpoints"

    def baseline(step):
        arrays = {f"w{i:05d}": np.asarray(w) for i, w in enumerate(model.get_weights())}
        arrays.update({f"o{i:05d}": np.asarray(v) for i, v in enumerate(optimizer.variables)})
        with atomic_path(folder / f"base-{step}.npz") as tmp, open(tmp, "wb") as f:
            np.savez(f, **arrays)

    def timed(fn, repeats=5):
        times = []
        for i in range(repeats):
            t0 = time.perf_counter()
            fn(i)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    folder.mkdir()
    base = timed(baseline)
    ours = timed(lambda i: save_checkpoint(folder, i + 1, model, optimizer, {}, keep=2))
    path = sorted(folder.glob("ckpt-*.npz"))[-1]
    load = timed(lambda i: load_checkpoint(path))
    mb = path.stat().st_size / 1e6
    print(
        f"checkpoint, paper Tiramisu ({mb:.0f} MB): save {ours:.2f} s with the checks and "
        f"read-back vs {base:.2f} s plain ({ours / base:.2f}x); checked load {load:.2f} s "
        f"(median of 5)"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=160)
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3, help="per rank (x2 for 2 ranks)")
    parser.add_argument("--scaling-steps", type=int, default=40)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-turnover", action="store_true")
    parser.add_argument("--turnover-epochs", type=int, default=8)
    parser.add_argument("--checkpoint", action="store_true", help="only the checkpoint cost")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="climnb-bench-train-"))
    try:
        if args.checkpoint:
            checkpoint_cost(work, args)
            return
        if not args.skip_scaling:
            scaling(work, args)
        if not args.skip_turnover:
            turnover(work, args)
        if not args.skip_quality:
            quality(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
