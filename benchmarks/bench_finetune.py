"""Fine-tuning on expert labels: do a few truth-labelled steps beat the teacher and the network?

1. Pretrain, as notebook 04 does (toy Tiramisu with the two transport inputs, class weighting
   ``deepcam``, longitude rolls), on the heuristic teacher's labels of ``--samples`` synthetic
   steps (generator seed 0), in one process.
2. For each seed: fine-tune from that bundle (:func:`climnb.train.finetune.fine_tune`, i.e.
   ``init_from``) on ``--tune-steps`` steps of another series of the generator (seed
   2000 + seed), one every ``--tune-every`` steps (a day apart: more distinct storms),
   labelled by its truth, the stand-in for an expert.
3. Score on ``--heldout`` held-out steps (generator seed 1000, the independent series of
   notebook 05; settings are chosen on another, ``--heldout-seed 1500``) against the truth:
   the teacher, the pretrained network, each fine-tuned one, IoU per class from the summed
   counts with a 5-95 % bootstrap interval over the steps
   (:func:`climnb.train.finetune.scores_with_spread`).

The verdict per class: the fine-tuned network beats the teacher and the pretrained network on
its worst seed. ``--ceiling`` also trains the pretrained network's recipe on the truth of the
pretraining steps: what the network reaches with ten times the expert labels.

    .venv/bin/python benchmarks/bench_finetune.py [--samples 160] [--pretrain-epochs 8]
        [--tune-steps 16] [--tune-every 8] [--epochs 12] [--lr 1e-3] [--freeze-blocks 0]
        [--class-weighting deepcam] [--dice-weight 1] [--seeds 0 1 2] [--heldout 64]
        [--heldout-seed 1000] [--ceiling] [--parent BUNDLE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import pandas as pd
from _args import at_least, fewest_split_steps

from climnb.data.synthetic import make_dataset
from climnb.demo import WORKFLOW
from climnb.inference.predict import predict
from climnb.io.sampleset import write_sample_set
from climnb.labels import LabelConfig, compute, label_dataset
from climnb.train.config import TrainConfig
from climnb.train.finetune import (
    FineTune,
    expert_stand_in,
    fine_tune,
    heldout_series,
    scores_with_spread,
)
from climnb.train.loop import train


def pretrain(root: Path, n_time: int, epochs: int, labels: str = "teacher") -> Path:
    """The network pretrained on ``n_time`` steps labelled by the teacher (or, for the
    network's own ceiling, by the truth)."""
    ds, _ = make_dataset(n_time=n_time, seed=0)
    if labels == "teacher":
        ds["truth"], _ = compute(*label_dataset(ds, LabelConfig()))
    write_sample_set(ds, "truth", root / f"samples-{labels}", seed=0)
    config = TrainConfig(
        data_dir=str(root / f"samples-{labels}"),
        out_dir=str(root / ("pretrained" if labels == "teacher" else f"on-{labels}")),
        model_overrides=WORKFLOW["04"]["model_overrides"],
        epochs=epochs,
        batch_size=2,
        class_weighting="deepcam",
        augment="roll",
        read_workers=0,
        optimizer={"learning_rate": 2.5e-3, "warmup_steps": 10},
    )
    return Path(train(config).bundle)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=160, help="pretraining steps (teacher labels)")
    p.add_argument("--pretrain-epochs", type=at_least(1), default=8)
    p.add_argument("--tune-steps", type=int, default=16, help="truth-labelled steps")
    p.add_argument("--epochs", type=at_least(1), default=12, help="of fine-tuning")
    p.add_argument("--lr", type=float, default=1e-3, help="of fine-tuning")
    p.add_argument("--freeze-blocks", type=at_least(0), default=0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--heldout", type=at_least(1), default=64, help="held-out steps scored")
    p.add_argument(
        "--heldout-seed",
        type=int,
        default=1000,
        help="generator seed of the scored steps (another, e.g. 1500, to choose settings on)",
    )
    p.add_argument(
        "--tune-every",
        type=at_least(1),
        default=8,
        help="truth-labelled steps taken every so many steps of their series (more storms)",
    )
    p.add_argument(
        "--ceiling",
        action="store_true",
        help="also train the network as pretrained but on the truth: its own ceiling",
    )
    p.add_argument("--class-weighting", default="deepcam", help="of fine-tuning")
    p.add_argument("--dice-weight", type=float, default=1.0, help="of fine-tuning")
    p.add_argument("--root", default=None, help="working folder (default: a temporary one)")
    p.add_argument("--parent", default=None, help="a pretrained bundle: no pretraining")
    args = p.parse_args(argv)
    # both trainings validate and take batches of 2: their sample sets need a batch of
    # training steps and a validation step (the pretraining's split as climnb samples
    # splits, the fine-tuning's as fine_tune does)
    checks = [("--tune-steps", args.tune_steps, TUNE_SPLIT)]
    if not args.parent or args.ceiling:
        checks.insert(0, ("--samples", args.samples, {"train": 2, "test": 0}))
    for name, value, split in checks:
        if value < (least := fewest_split_steps(**split)):
            p.error(
                f"argument {name}: must be at least {least} (a batch of {split['train']} "
                f"training steps and a validation step), got {value}"
            )
    return args


#: how :func:`climnb.train.finetune.fine_tune` splits the expert steps
TUNE_SPLIT = {
    "method": "random",
    "fractions": (1 - FineTune.validation, FineTune.validation, 0.0),
    "train": FineTune.batch_size,
    "test": 0,
}


def main(argv=None) -> None:
    args = parse_args(argv)
    root = Path(args.root or tempfile.mkdtemp(prefix="bench-finetune-"))
    t0 = time.perf_counter()
    parent = (
        Path(args.parent) if args.parent else pretrain(root, args.samples, args.pretrain_epochs)
    )
    t_pre = time.perf_counter() - t0
    ds, teacher = heldout_series(parent, n_time=args.heldout, seed=args.heldout_seed)
    masks = {"heuristic teacher": teacher, "network before": predict(parent, ds).load()}
    if args.ceiling:
        on_truth = pretrain(root, args.samples, args.pretrain_epochs, labels="truth")
        masks["network trained on the truth"] = predict(on_truth, ds).load()
    seconds = []
    for seed in args.seeds:
        t = time.perf_counter()
        expert_stand_in(
            root / f"expert-{seed}", n_time=args.tune_steps, seed=2000 + seed, every=args.tune_every
        )
        settings = FineTune(
            epochs=args.epochs,
            learning_rate=args.lr,
            freeze_blocks=args.freeze_blocks,
            seed=seed,
            class_weighting=args.class_weighting,
            dice_weight=args.dice_weight,
        )
        tuned = fine_tune(parent, root / f"expert-{seed}", root / f"tuned-{seed}", settings)
        seconds.append(time.perf_counter() - t)
        masks[f"network after, seed {seed}"] = predict(tuned, ds).load()
    table = scores_with_spread(ds.truth, masks)
    pd.set_option("display.precision", 3)
    pd.set_option("display.width", 120)
    print(
        (
            f"pretrained: {parent}"
            if args.parent
            else f"pretrained on the teacher's labels of "
            f"{args.samples} steps, {args.pretrain_epochs} epochs ({t_pre:.0f} s)"
        )
        + f"; fine-tuned on {args.tune_steps} truth-labelled steps, "
        f"{args.epochs} epochs, lr {args.lr:g}, freeze_blocks {args.freeze_blocks} "
        f"({min(seconds):.0f}-{max(seconds):.0f} s each); scored on {args.heldout} held-out "
        "steps against the truth (IoU, 5-95 % bootstrap over steps):"
    )
    print(table)
    truth = ds.truth.values == 1
    for name, mask in masks.items():  # where storm IoU is lost: edge points left out or added
        found = mask.sel(time=ds.time).values == 1
        print(
            f"storm points of {name}: {int((truth & ~found).sum())} missed, "
            f"{int((found & ~truth).sum())} added, of {int(truth.sum())}"
        )
    after = table[table.index.str.startswith("network after")]
    for k in ("TC", "AR"):
        worst = after[k].min()
        others = {n: table.loc[n, k] for n in ("heuristic teacher", "network before")}
        verdict = all(worst > v for v in others.values())
        print(
            f"{k}: after {after[k].mean():.3f} (seeds {after[k].min():.3f}-{after[k].max():.3f})"
            f" vs teacher {others['heuristic teacher']:.3f}, before "
            f"{others['network before']:.3f}: {'PASS' if verdict else 'FAIL'} (worst seed)"
        )


if __name__ == "__main__":
    main()
