"""Distributed training: quality in a time budget, weak scaling, epoch turnover.

1. Quality: toy Tiramisu trained on two MPI ranks (``mpirun -np 2 python -m climnb train``) on
   toy data with the synthetic truth as labels; prints the validation mean IoU (target >= 0.70)
   and the wall time (target: within 10 minutes on the 2-core machine).
2. Weak scaling: the same per-rank batch on 1 and on 2 ranks, each rank on its own core with
   one compute thread, reading in its own process, with the 2-rank run's MPI settings; the
   1-rank baseline alone and as two independent runs side by side (each rank's surroundings
   in the 2-rank run, without the gradient exchange), so the efficiency splits into the cost
   of sharing the machine and the cost of the exchange; three repetitions, min/median/max.
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
5. Precision: the quality run (1.) in float32 and in ``mixed_bfloat16`` with the same seed:
   step-time speed-up and validation mean IoU (target: within 0.01 of float32).
6. Held-out quality (``--heldout``, default 3 seeds): the demo's training (notebook 04's
   parameters in :data:`climnb.demo.WORKFLOW`, on 2 MPI ranks with staging, as notebook 04) on
   the heuristic labels of the demo's synthetic fields, scored by the demo's own
   :func:`climnb.demo.heldout_scores` on the sample set's test block (a time block the run never
   saw, the split's gap away): IoU per class against the teacher (target >= 0.8) and against
   the truth (target: within 0.05 of the teacher's own); mean, min and max over the seeds, and
   the verdict taken on the worst seed, so that a lucky seed cannot pass. Each model is also
   scored on an independent series (another seed of the generator, 64 steps, labelled by the
   same teacher: :func:`climnb.viz.heldout.independent_scores`): a second, larger test than the
   one held-out block, whose figures depend on which events fall into its few steps. Both
   tests also score the network's segmentation with the teacher's river rules on its rivers
   (:func:`climnb.inference.postprocess.apply_river_rules`: a hybrid detector, "model + river
   rules"), and the verdicts name the network and the hybrid apart.

    .venv/bin/python benchmarks/bench_training.py [--samples 160] [--epochs 12] [--skip-quality]
        [--skip-scaling] [--scaling-runs 3] [--skip-turnover] [--skip-precision] [--checkpoint]
        [--heldout [--seeds 0 1 2] [--series 1000 2000 ...] [--settings JSON]]
        [--screen JSON [JSON ...] [--data-root DIR]] [--n-time N]
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
import pandas as pd
import xarray as xr
from _args import at_least

from climnb.data.synthetic import make_dataset
from climnb.io.samples import write_samples
from climnb.io.stats import compute_stats, write_stats
from climnb.runtime.cluster import mpi_settings


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


def _start_training(ranks: int, data: Path, out: Path, config: Path, steps: int, cpus: str):
    """``climnb train`` under mpirun on the cores ``cpus``, one per rank, one thread each."""
    cmd = [
        "mpirun",
        "-np",
        str(ranks),
        "--cpu-set",
        cpus,
        "--bind-to",
        "core",
        sys.executable,
        "-m",
        "climnb",
        "train",
        "--data",
        str(data),
        "--out",
        str(out),
        "--threads",
        "1",
        "--no-resume",
        "--epochs",
        "100",
        "--batch-size",
        "2",
        "--max-steps",
        str(steps),
        "--config",
        str(config),
    ]
    # the 1-rank baseline gets the MPI settings of the 2-rank run (yield while waiting)
    env = mpi_env(2)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


#: the first steps of a run trace the graph and warm up: left out of its rate
WARMUP_STEPS = 5


def _finish_training(started) -> pd.DataFrame:
    proc, out = started
    _, err = proc.communicate()
    if proc.returncode:
        sys.exit(f"training failed:\n{err[-3000:]}")
    steps = pd.read_csv(out / "history.csv")
    steps = steps[(steps.kind == "step") & (steps["rank"] == 0)]
    return steps.iloc[WARMUP_STEPS:]


def _overlap(*histories: pd.DataFrame) -> list[pd.DataFrame]:
    """The steps of concurrent runs that ran while all of them were stepping."""
    lo = max(h.time.min() for h in histories)
    hi = min(h.time.max() for h in histories)
    return [h[(h.time >= lo) & (h.time <= hi)] for h in histories]


def weak_scaling(alone: pd.DataFrame, pair: list[pd.DataFrame], both: pd.DataFrame):
    """(samples/s alone, of the pair together and of the 2 ranks; efficiency, sharing,
    exchange) from the timed steps of one repetition, or why they cannot be measured."""
    if alone.empty or both.empty:
        return f"no step after the first {WARMUP_STEPS} (more --scaling-steps)"
    if any(h.empty for h in pair):
        return "the pair's timed steps did not overlap (more --scaling-steps)"
    r_alone = float(alone.samples_per_s.median())
    r_pair = sum(float(h.samples_per_s.median()) for h in pair)
    r_two = float(both.samples_per_s.median())
    return r_alone, r_pair, r_two, r_two / (2 * r_alone), r_pair / (2 * r_alone), r_two / r_pair


def scaling(work: Path, args) -> None:
    """Weak scaling 1 -> 2 ranks with a baseline as each rank of the 2-rank run sees it.

    Every run pins each rank to its own core with one compute thread, reads in the rank's own
    process (no reader workers) and uses the MPI settings of the 2-rank run. Per repetition:

    * ``alone``: 1 rank on core 0, the other core left to the rest of the machine;
    * ``pair``: two independent 1-rank runs at once, on cores 0 and 1: each rank of the
      2-rank run computes and reads next to a twin, sharing memory bandwidth, caches and
      clocks, with no gradient exchange;
    * ``2 ranks``: one run on cores 0 and 1 (gradients averaged with Horovod every step).

    Efficiency = rate(2 ranks) / (2 x rate(alone)) = sharing x exchange, where
    sharing = rate(pair, both) / (2 x rate(alone)) is what running two at once costs and
    exchange = rate(2 ranks) / rate(pair, both) what the allreduce and the wait for the
    slower rank cost.
    """
    data = make_samples(work / "scaling", 96, seed=2)
    config = work / "scaling.json"
    config.write_text(json.dumps({"read_workers": 0}))
    steps = args.scaling_steps
    results = []
    for rep in range(args.scaling_runs):
        run = work / f"scaling-{rep}"
        alone = _finish_training(_start_training(1, data, run / "alone", config, steps, "0"))
        load_alone = os.getloadavg()[0]
        pair = [_start_training(1, data, run / f"pair{c}", config, steps, str(c)) for c in (0, 1)]
        pair = _overlap(*[_finish_training(p) for p in pair])
        both = _finish_training(_start_training(2, data, run / "two", config, steps, "0,1"))
        load_both = os.getloadavg()[0]
        measured = weak_scaling(alone, pair, both)
        if isinstance(measured, str):
            print(f"weak scaling run {rep + 1}: not measured: {measured}", flush=True)
            continue
        r_alone, r_pair, r_two, eff, sharing, exchange = measured
        results.append((eff, sharing, exchange))
        print(
            f"weak scaling run {rep + 1}: alone {r_alone:.2f}, pair {r_pair:.2f} "
            f"({min(len(h) for h in pair)} overlapping steps), 2 ranks {r_two:.2f} samples/s; "
            f"efficiency {100 * eff:.1f} % = sharing {100 * sharing:.1f} % x exchange "
            f"{100 * exchange:.1f} % (load {load_alone:.1f} / {load_both:.1f})",
            flush=True,
        )
    if not results:
        print(f"weak scaling: none of the {args.scaling_runs} runs measured")
        return
    table = np.array(results) * 100
    for i, label in enumerate(("efficiency", "sharing", "exchange")):
        lo, med, hi = np.min(table[:, i]), np.median(table[:, i]), np.max(table[:, i])
        print(
            f"weak scaling {label}, {len(results)} runs: min {lo:.1f} / median {med:.1f} / "
            f"max {hi:.1f} %"
        )
    med = float(np.median(table[:, 0]))
    print(
        f"weak-scaling efficiency 1 -> 2 ranks (median): {med:.1f} % (target >= 85 %): "
        f"{'OK' if med >= 85 else 'MISSED'}"
    )


def precision(work: Path, args) -> None:
    """The quality run in float32 and in mixed_bfloat16, same data, seed and settings."""
    data = make_samples(work / "precision", args.samples, seed=1)
    results = {}
    for name in ("float32", "mixed_bfloat16"):
        config = work / f"precision-{name}.json"
        config.write_text(json.dumps({"validate_every": 1, "precision": name}))
        out = work / f"run-precision-{name}"
        seconds, history, _ = train(
            2,
            data,
            out,
            "--epochs",
            str(args.epochs),
            "--batch-size",
            "2",
            "--lr",
            str(args.lr),
            "--warmup-steps",
            "20",
            "--seed",
            "0",
            "--config",
            str(config),
        )
        val = pd.read_csv(out / "validation.csv")
        steps = history[(history.kind == "step") & (history["rank"] == 0)].iloc[5:]
        results[name] = (seconds, float(steps.seconds.median()), val)
        print(
            f"precision {name}: {seconds:.0f} s, median step {1e3 * results[name][1]:.0f} ms, "
            f"validation mean IoU by epoch "
            + ", ".join(f"{v:.3f}" for v in val.mean_iou)
            + f" (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
    (s32, t32, v32), (s16, t16, v16) = results["float32"], results["mixed_bfloat16"]
    final = v16.mean_iou.iloc[-1] - v32.mean_iou.iloc[-1]
    print(
        f"mixed_bfloat16 vs float32: step {t32 / t16:.2f}x faster, run {s32 / s16:.2f}x; final "
        f"mean IoU {v16.mean_iou.iloc[-1]:.3f} vs {v32.mean_iou.iloc[-1]:.3f} "
        f"(difference {final:+.3f}, target within 0.01: {'OK' if abs(final) <= 0.01 else 'MISSED'})"
        f"; best {v16.mean_iou.max():.3f} vs {v32.mean_iou.max():.3f}"
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

    from climnb.io.atomic import atomic_path
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


#: notebook 04's parameter -> ``climnb train`` flag, for the held-out runs
_DEMO_FLAGS = {
    "epochs": "--epochs",
    "batch_size": "--batch-size",
    "learning_rate": "--lr",
    "warmup_steps": "--warmup-steps",
    "samples_per_rank": "--samples-per-rank",
    "draw": "--draw",
    "augment": "--augment",
    "class_weighting": "--class-weighting",
}


#: notebook 04's parameters passed in a ``--config`` file (no flag of their own)
_DEMO_CONFIG = ("patience", "validate_every", "model_overrides")


def demo_training() -> dict:
    """Notebook 04's parameters as the demo runs it: the notebook's defaults, then
    :data:`climnb.demo.WORKFLOW`'s."""
    import ast

    import papermill as pm

    from climnb.demo import WORKFLOW

    nb = Path(__file__).resolve().parents[1] / "notebooks" / "04_distributed_training.ipynb"
    found = pm.inspect_notebook(str(nb))
    return {**{k: ast.literal_eval(v["default"]) for k, v in found.items()}, **WORKFLOW["04"]}


def demo_fields(root: Path, n_time: int | None = None) -> Path:
    """The demo's fields with the teacher's labels (notebooks 00 and 01), its sample set
    (notebook 02) and its held-out block (notebook 04), under ``root`` as the demo lays them out.
    """
    from climnb.demo import HELDOUT_FIELDS, HELDOUT_TEACHER, WORKFLOW
    from climnb.io.sampleset import write_heldout, write_sample_set
    from climnb.labels import LabelConfig, compute, label_dataset, save_labelled

    ds, _ = make_dataset(n_time=n_time or WORKFLOW["00"]["n_time"], seed=0)
    labels, events = compute(*label_dataset(ds, LabelConfig()))
    fields = save_labelled(ds, labels, events, root / WORKFLOW["01"]["out_path"])
    data = root / WORKFLOW["04"]["data_dir"]
    write_sample_set(ds.assign(labels=labels), "labels", data)
    write_heldout(data, fields, root / HELDOUT_FIELDS, labels_out=root / HELDOUT_TEACHER)
    return data


def independent_scores(model: Path, series: list[int] | None = None) -> dict[str, float]:
    """IoU per class of the bundle ``model`` against the teacher and the truth (and the
    teacher's against the truth) on the independent series, as notebook 05 scores it
    (:func:`climnb.viz.heldout.independent_scores`): a series of another generator seed, so no
    step is correlated with the training series. ``series``: generator seeds of more such
    series (``--series``), named ``series SEED`` in the figures."""
    from climnb.demo import headline_figures
    from climnb.viz.heldout import INDEPENDENT_SEED
    from climnb.viz.heldout import independent_scores as score

    out = {}
    for seed in series or [INDEPENDENT_SEED]:
        rows = score(model, seed=seed).to_dict(orient="index")
        out.update(headline_figures(rows, _series_name(seed)))
    return out


def _series_name(seed: int) -> str:
    """How the figures name the independent series of generator ``seed``."""
    from climnb.viz.heldout import INDEPENDENT_SEED

    return "independent" if seed == INDEPENDENT_SEED else f"series {seed}"


def heldout_run(
    root: Path, data: Path, seed: int, settings: dict | None = None, series=None
) -> dict:
    """Notebook 04's training with ``seed`` on 2 MPI ranks, then notebook 05's prediction of
    the held-out block, scored by :func:`climnb.demo.heldout_scores`; with the run's wall time
    and its median step (rank 0, the first 5 left out). ``settings``: TrainConfig fields over
    the notebook's (``--settings``), for trying a setting the demo's way before adopting it."""
    from climnb.demo import HELDOUT_FIELDS, HELDOUT_PREDICTION, heldout_scores
    from climnb.inference.predict import predict

    params = demo_training()
    flags = [
        f
        for k, v in params.items()
        if k in _DEMO_FLAGS and v is not None
        for f in (_DEMO_FLAGS[k], str(v))
    ]
    out = root / params["out_dir"]
    shutil.rmtree(out, ignore_errors=True)
    config = root / "train.json"  # the notebook's settings that have no flag
    config.write_text(
        json.dumps({**{k: params[k] for k in _DEMO_CONFIG if k in params}, **(settings or {})})
    )
    staged = root / "data/toy/staged/node{node}"
    seconds, history, _ = train(
        2,
        data,
        out,
        "--staged",
        str(staged),
        "--ranks-per-node",
        "1",
        "--stage-first",
        "--seed",
        str(seed),
        "--threads",  # as notebook 04's engines: the cores shared out, one thread each here
        str(max(1, (os.cpu_count() or 2) // 2)),
        "--config",
        str(config),
        *flags,
        pinned=False,
    )
    with xr.open_dataset(root / HELDOUT_FIELDS) as ds:
        prediction = predict(out / "model", ds.load()).load()
    prediction.to_dataset().to_netcdf(root / HELDOUT_PREDICTION)
    steps = history[(history.kind == "step") & (history["rank"] == 0)].iloc[5:]
    timing = {"train s": seconds, "s per step": float(steps.seconds.median())}
    return {**heldout_scores(root), **independent_scores(out / "model", series), **timing}


def heldout(work: Path, args) -> None:
    root = work / "heldout"
    data = demo_fields(root, args.n_time)
    rows, settings = {}, json.loads(args.settings or "{}")
    for seed in args.seeds:
        rows[seed] = heldout_run(root, data, seed, settings, args.series)
        print(f"  seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in rows[seed].items()))
    table = pd.DataFrame(rows).T
    print(
        f"held-out quality over seeds {list(args.seeds)} (load {_load()}), {demo_training()}, "
        f"settings {args.settings or '{}'}:"
    )
    print(table.agg(["mean", "min", "max"]).T.to_string(float_format="{:.3f}".format))
    from climnb.viz.heldout import INDEPENDENT_SEED, INDEPENDENT_STEPS

    series = {"held-out block": "held-out"}
    for s in args.series or [INDEPENDENT_SEED]:
        series[f"independent series ({INDEPENDENT_STEPS} steps of seed {s})"] = _series_name(s)
    for what, where in series.items():
        for name, model in (("network", "model"), ("network + river rules", "model + river rules")):
            print(f"  {name} on the {what}: " + _verdict(table, model, where))


def _verdict(table: pd.DataFrame, model: str, where: str) -> str:
    """Whether ``model`` (a figure name's first words) meets the goals on ``where``: the worst
    seed >= 0.8 against the teacher per class, every seed within 0.05 of the teacher against
    the truth."""
    worst = table.min()
    ok = all(worst[f"{model} {where} IoU {c} vs teacher"] >= 0.8 for c in ("TC", "AR"))
    close = all(
        (
            table[f"{model} {where} IoU {c} vs truth"]
            >= table[f"teacher {where} IoU {c} vs truth"] - 0.05
        ).all()
        for c in ("TC", "AR")
    )
    figures = ", ".join(
        f"{c} {worst[f'{model} {where} IoU {c} vs teacher']:.3f}" for c in ("TC", "AR")
    )
    return (
        f"worst seed vs teacher >= 0.8 per class ({figures}): {'OK' if ok else 'MISSED'}; "
        f"every seed vs truth within 0.05 of the teacher: {'OK' if close else 'MISSED'}"
    )


def screen(work: Path, args) -> None:
    """One single-process training per ``--screen`` JSON (TrainConfig fields over the demo's
    settings), each on the demo's training split (no staging) with 2 threads, scored on the
    held-out block: a quick screen, not the demo's route (that is ``--heldout``)."""
    from climnb.demo import HELDOUT_FIELDS, HELDOUT_PREDICTION, heldout_scores
    from climnb.inference.predict import predict
    from climnb.train.config import TrainConfig
    from climnb.train.loop import train as train_here

    root = Path(args.data_root) if args.data_root else work / "screen"
    data = root / "data/toy/shared"
    if not (data / "stats.h5").exists():
        demo_fields(root, args.n_time)
    params = demo_training()
    for text in args.screen:
        settings = {
            "data_dir": str(data),
            "out_dir": str(work / "run-screen"),
            "epochs": params["epochs"],
            "batch_size": params["batch_size"] * 2,  # the demo's global batch of 2 ranks
            "augment": params["augment"],
            "class_weighting": params["class_weighting"],
            "threads": 2,
            "resume": False,
            "precision": "float32",
            "optimizer": {
                "learning_rate": params["learning_rate"] * 2,
                "warmup_steps": params["warmup_steps"],
            },
        }
        settings.update(json.loads(text))
        config = TrainConfig.from_dict(settings)
        shutil.rmtree(config.out_dir, ignore_errors=True)
        start = time.perf_counter()
        result = train_here(config)
        seconds = time.perf_counter() - start
        with xr.open_dataset(root / HELDOUT_FIELDS) as ds:
            prediction = predict(Path(config.out_dir) / "model", ds.load()).load()
        (root / HELDOUT_PREDICTION).parent.mkdir(parents=True, exist_ok=True)
        prediction.to_dataset().to_netcdf(root / HELDOUT_PREDICTION)
        model = Path(config.out_dir) / "model"
        scores = {**heldout_scores(root), **independent_scores(model)}
        steps = result.history
        val = result.validation
        best = val[val.best].iloc[-1] if "best" in val and val.best.any() else val.iloc[-1]
        print(
            f"screen {text}: {int(steps.step.max())} steps in {seconds:.0f} s, median step "
            f"{steps.seconds.iloc[3:].median():.3f} s (load {_load()}); best validation TC "
            f"{best.iou_1:.3f} AR {best.iou_2:.3f} at epoch {int(best.epoch) + 1} of "
            f"{int(val.epoch.max()) + 1}; held-out "
            + ", ".join(f"{k} {v:.3f}" for k, v in scores.items()),
            flush=True,
        )


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=at_least(2), default=160)
    parser.add_argument("--epochs", type=at_least(1), default=16)
    parser.add_argument("--lr", type=float, default=1e-3, help="per rank (x2 for 2 ranks)")
    parser.add_argument(
        "--scaling-steps",
        type=at_least(WARMUP_STEPS + 1),
        default=40,
        help=f"steps of each run (the first {WARMUP_STEPS} are not timed)",
    )
    parser.add_argument(
        "--scaling-runs", type=at_least(1), default=3, help="repetitions (default 3)"
    )
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-turnover", action="store_true")
    parser.add_argument(
        "--skip-precision", action="store_true", help="skip the float32 vs bfloat16 quality run"
    )
    parser.add_argument(
        "--turnover-epochs",
        type=at_least(2),
        default=8,
        help="epochs of the turnover runs (the first epoch has no turnover before it)",
    )
    parser.add_argument("--checkpoint", action="store_true", help="only the checkpoint cost")
    parser.add_argument(
        "--heldout", action="store_true", help="only the demo's held-out quality over --seeds"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--series",
        type=int,
        nargs="+",
        metavar="SEED",
        help="with --heldout: generator seeds of the independent series each network is scored "
        "on (default: notebook 05's one, seed 1000), so that a lucky series cannot pass either",
    )
    parser.add_argument(
        "--screen",
        nargs="+",
        metavar="JSON",
        help="only quick single-process screens: TrainConfig fields over the demo's settings, "
        "e.g. '{\"epochs\": 8}'; scored on the held-out block",
    )
    parser.add_argument(
        "--data-root", help="--screen: keep the demo's data in this folder (made if missing)"
    )
    parser.add_argument(
        "--n-time",
        type=int,
        help="--heldout, --screen: steps of the synthetic series (default: the demo's, "
        "climnb.demo.WORKFLOW)",
    )
    parser.add_argument(
        "--settings",
        metavar="JSON",
        help="--heldout: TrainConfig fields over notebook 04's (its --config file), e.g. "
        "'{\"dice_weight\": 1.0}', to try a setting the demo's way",
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="climnb-bench-train-"))
    try:
        if args.checkpoint:
            checkpoint_cost(work, args)
            return
        if args.screen:
            screen(work, args)
            return
        if args.heldout:
            if len(args.seeds) < 3:
                parser.error("--seeds: give at least 3 seeds, so that a lucky one cannot pass")
            heldout(work, args)
            return
        if not args.skip_scaling:
            scaling(work, args)
        if not args.skip_turnover:
            turnover(work, args)
        if not args.skip_quality:
            quality(work, args)
        if not args.skip_precision:
            precision(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
