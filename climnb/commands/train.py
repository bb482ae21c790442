"""``climnb train``: data-parallel training on every rank (mpirun, srun, horovodrun, or alone).

Without Horovod it says so in one line and trains in one process (the same loop, one rank, the
same model bundle); several processes started by a launcher are refused then, in one line.

Settings come from three places, highest first: the flags typed on the command line, the
``--config`` JSON file, then the defaults of :class:`climnb.train.config.TrainConfig` (the one
place defaults live: no flag has a default of its own here).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from climnb.doctor import install_hint
from climnb.train.config import CLASS_WEIGHTINGS, TrainConfig
from climnb.train.together import launched_ranks

HELP = "train Tiramisu or DeepLabv3+ on sample files, data-parallel with Horovod"
EXAMPLE = (
    "mpirun -np 2 python -m climnb train --data data/toy/samples --staged '/local/{node}' "
    "--out runs/toy --model tiramisu --preset toy --epochs 4 --batch-size 2"
)

# flag destination -> TrainConfig field (or "optimizer.<field>")
_FIELDS = {
    "data": "data_dir",
    "staged": "staged_dir",
    "ranks_per_node": "ranks_per_node",
    "stage_first": "stage_first",
    "samples_per_rank": "samples_per_rank",
    "draw": "draw",
    "out": "out_dir",
    "model": "model",
    "preset": "preset",
    "epochs": "epochs",
    "batch_size": "batch_size",
    "max_steps": "max_steps",
    "checkpoint_every": "checkpoint_every",
    "keep_checkpoints": "keep_checkpoints",
    "resume": "resume",
    "threads": "threads",
    "seed": "seed",
    "lr_decay": "lr_decay",
    "lr": "optimizer.learning_rate",
    "warmup_steps": "optimizer.warmup_steps",
    "larc": "optimizer.larc",
    "gradient_lag": "optimizer.gradient_lag",
    "mixed_precision": "optimizer.mixed_precision",
    "precision": "precision",
    "augment": "augment",
    "class_weighting": "class_weighting",
    "init_from": "init_from",
    "freeze_blocks": "freeze_blocks",
}


def add_arguments(parser):
    # every default is SUPPRESS: a flag not typed leaves the config file's value or the
    # TrainConfig default in place
    add = parser.add_argument
    d = argparse.SUPPRESS
    add("--data", default=d, help="sample set folder (train/, validation/, stats.h5)")
    add(
        "--staged",
        default=d,
        help="train from node-local staged copies, e.g. '/local/{node}' ({node} and "
        "{local_rank} filled in per rank; stage them first with `climnb stage`)",
    )
    add("--ranks-per-node", type=int, default=d, help="default: Horovod's local size")
    add(
        "--stage-first",
        action="store_true",
        default=d,
        help="stage --data into --staged at the start (one reader per node, over MPI)",
    )
    add("--samples-per-rank", type=int, default=d, help="files drawn per rank when staging")
    add(
        "--draw",
        default=d,
        choices=["replacement", "shard"],
        help="how --stage-first gives ranks their files: replacement (default, the paper's "
        "random draws) or shard (each training file to one rank, once)",
    )
    add("--out", default=d, help="run folder (checkpoints, model bundle)")
    add("--model", default=d, choices=["tiramisu", "deeplab"])
    add("--preset", default=d, help="toy, small or paper")
    add("--epochs", type=int, default=d)
    add("--batch-size", type=int, default=d, help="samples per rank per step")
    add("--max-steps", type=int, default=d)
    add("--lr", type=float, default=d, help="per-rank learning rate")
    add("--warmup-steps", type=int, default=d)
    add("--lr-decay", choices=["linear", "none"], default=d, help="linear decay to 0, or none")
    add("--larc", action="store_true", default=d, help="layer-wise adaptive rate clipping")
    add("--gradient-lag", action="store_true", default=d, help="apply last step's gradient")
    add("--mixed-precision", action="store_true", default=d, help="float16 compute")
    add(
        "--precision",
        default=d,
        choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"],
        help="compute precision, float32 weights (default auto: mixed_bfloat16 on CPUs with "
        "AVX512_BF16/AMX, else float32; the run logs and records what it chose and why)",
    )
    add(
        "--augment",
        # climnb.train.pipeline.AUGMENTS (h5py: not here)
        choices=["roll", "mirror", "roll+mirror"],
        default=d,
        help="roll training samples by a random number of longitude columns (global grids); "
        "mirror half of them north to south, meridional winds negated; or both",
    )
    add(
        "--class-weighting",
        choices=list(CLASS_WEIGHTINGS),
        default=d,
        help="per-class loss weights from the class frequencies (default inverse_sqrt, the "
        "paper's; deepcam: freq^-0.125, milder)",
    )
    add(
        "--init-from",
        default=d,
        metavar="RUN_OR_BUNDLE",
        help="fine-tune: start from a trained network's weights (a run folder or its model "
        "bundle, as `climnb predict --model` takes); any grid size, a subset of its channels "
        "(mapped by name); the new bundle records it. Example: climnb train --data expert/set "
        "--out runs/tuned --init-from runs/toy --lr 5e-4 --epochs 8 --freeze-blocks 1",
    )
    add(
        "--freeze-blocks",
        type=int,
        default=d,
        help="with --init-from: keep the first N encoder blocks' weights fixed (default 0)",
    )
    add("--checkpoint-every", type=int, default=d, help="steps between checkpoints")
    add("--keep-checkpoints", type=int, default=d, help="newest checkpoints kept")
    add(
        "--no-resume",
        dest="resume",
        action="store_false",
        default=d,
        help="ignore existing checkpoints",
    )
    add("--threads", type=int, default=d, help="compute threads per rank")
    add("--seed", type=int, default=d)
    add("--config", default=d, help="JSON file of TrainConfig fields (typed flags override it)")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's :class:`TrainConfig`: typed flags > ``--config`` file > dataclass defaults."""
    settings = _read_config_file(args.config) if "config" in args else {}
    optimizer = dict(settings.pop("optimizer", None) or {})
    for dest, name in _FIELDS.items():
        if dest not in args:
            continue
        value = getattr(args, dest)
        if name.startswith("optimizer."):
            optimizer[name.removeprefix("optimizer.")] = value
        else:
            settings[name] = value
    if optimizer:
        settings["optimizer"] = optimizer
    if "data_dir" not in settings:
        raise ValueError("no sample set: give --data DIR (or data_dir in the --config file)")
    if "init_from" in settings:  # the parent's network unless one is named
        from climnb.train.init_from import parent_architecture  # numpy, h5py: not for --help

        settings = parent_architecture(settings)
    return TrainConfig.from_dict(settings)


def _read_config_file(path: str) -> dict:
    try:
        settings = json.loads(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"config file {path}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"config file {path} is not valid JSON: {err}") from err
    if not isinstance(settings, dict):
        raise ValueError(f"config file {path} must hold a JSON object of TrainConfig fields")
    try:  # the file's own mistakes are named as the file's
        TrainConfig.from_dict({"data_dir": ".", **settings})
    except ValueError as err:
        raise ValueError(f"config file {path}: {err}") from err
    return settings


def run(args) -> int:
    from climnb.train.loop import train  # TensorFlow, pandas, h5py: not for `climnb --help`

    config = config_from_args(args)
    if importlib.util.find_spec("horovod") is None and launched_ranks() == 1:
        print(
            "climnb train: Horovod is not installed: training in one process without it "
            f"(to train on several: {install_hint('horovod')})",
            file=sys.stderr,
            flush=True,
        )

    def progress(record):
        if record["kind"] == "validation" and record["rank"] == 0:
            print(
                f"epoch {record['epoch']} step {record['step']}: validation mean IoU "
                f"{record['mean_iou']:.3f}",
                flush=True,
            )

    result = train(config, on_record=progress)
    last = result.history.iloc[-1] if len(result.history) else None
    loss = f"loss {last.loss_avg:.4f}" if last is not None else "no steps"
    print(
        f"rank {result.rank} of {result.size}: {len(result.history)} steps, {loss}, "
        f"weights {result.checksum[:16]}" + (" (stopped)" if result.stopped else ""),
        flush=True,
    )
    if result.finished_before and result.rank == 0:
        print(
            f"{config.out_dir}: this run had finished; left as it is, nothing trained. To "
            "train further, raise --max-steps or --epochs; to start over, use another --out",
            flush=True,
        )
    if result.bundle:
        print(f"model bundle: {result.bundle}")
    return 0
