"""``climnb train``: data-parallel training on every rank (mpirun, srun, horovodrun, or alone).

Without Horovod it says so in one line and trains in one process (the same loop, one rank, the
same model bundle); several processes started by a launcher are refused then, in one line.

Settings come from three places, highest first: the flags typed on the command line, the
``--config`` JSON file, then the defaults of :class:`climnb.train.config.TrainConfig` (the one
place defaults live: no flag has a default of its own here). The flags become a
:class:`TrainConfig` in the package (:meth:`TrainConfig.from_args`), and one call,
:func:`climnb.train.loop.train`, runs the training.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys

from climnb.doctor import install_hint
from climnb.train.config import CLASS_WEIGHTINGS, TrainConfig, config_from_args
from climnb.train.together import launched_ranks

HELP = "train Tiramisu or DeepLabv3+ on sample files, data-parallel with Horovod"
EXAMPLE = (
    "mpirun -np 2 python -m climnb train --data data/toy/samples --staged '/local/{node}' "
    "--out runs/toy --model tiramisu --preset toy --epochs 4 --batch-size 2"
)

__all__ = ["add_arguments", "config_from_args", "run"]


def add_arguments(parser):
    # every default is SUPPRESS: a flag not typed leaves the config file's value or the
    # TrainConfig default in place
    add = functools.partial(parser.add_argument, default=argparse.SUPPRESS)
    _data_flags(add)
    _run_flags(add)
    _optimiser_flags(add)
    _learning_flags(add)
    _saving_flags(add)


def _data_flags(add) -> None:
    add("--data", help="sample set folder (train/, validation/, stats.h5)")
    add(
        "--staged",
        help="train from node-local staged copies, e.g. '/local/{node}' ({node} and "
        "{local_rank} filled in per rank; stage them first with `climnb stage`)",
    )
    add("--ranks-per-node", type=int, help="default: Horovod's local size")
    add(
        "--stage-first",
        action="store_true",
        help="stage --data into --staged at the start (one reader per node, over MPI)",
    )
    add("--samples-per-rank", type=int, help="files drawn per rank when staging")
    add(
        "--draw",
        choices=["replacement", "shard"],
        help="how --stage-first gives ranks their files: replacement (default, the paper's "
        "random draws) or shard (each training file to one rank, once)",
    )


def _run_flags(add) -> None:
    add("--out", help="run folder (checkpoints, model bundle)")
    add("--model", choices=["tiramisu", "deeplab"])
    add("--preset", help="toy, small or paper")
    add("--epochs", type=int)
    add("--batch-size", type=int, help="samples per rank per step")
    add("--max-steps", type=int)


def _optimiser_flags(add) -> None:
    add("--lr", type=float, help="per-rank learning rate")
    add("--warmup-steps", type=int)
    add("--lr-decay", choices=["linear", "none"], help="linear decay to 0, or none")
    add("--larc", action="store_true", help="layer-wise adaptive rate clipping")
    add("--gradient-lag", action="store_true", help="apply last step's gradient")
    add("--mixed-precision", action="store_true", help="float16 compute")
    add(
        "--precision",
        choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"],
        help="compute precision, float32 weights (default auto: mixed_bfloat16 on CPUs with "
        "AVX512_BF16/AMX, else float32; the run logs and records what it chose and why)",
    )


def _learning_flags(add) -> None:
    add(
        "--augment",
        # climnb.train.pipeline.AUGMENTS (h5py: not here)
        choices=["roll", "mirror", "roll+mirror"],
        help="roll training samples by a random number of longitude columns (global grids); "
        "mirror half of them north to south, meridional winds negated; or both",
    )
    add(
        "--class-weighting",
        choices=list(CLASS_WEIGHTINGS),
        help="per-class loss weights from the class frequencies (default inverse_sqrt, the "
        "paper's; deepcam: freq^-0.125, milder)",
    )
    add(
        "--init-from",
        metavar="RUN_OR_BUNDLE",
        help="fine-tune: start from a trained network's weights (a run folder or its model "
        "bundle, as `climnb predict --model` takes); any grid size, a subset of its channels "
        "(mapped by name); the new bundle records it. Example: climnb train --data expert/set "
        "--out runs/tuned --init-from runs/toy --lr 5e-4 --epochs 8 --freeze-blocks 1",
    )
    add(
        "--freeze-blocks",
        type=int,
        help="with --init-from: keep the first N encoder blocks' weights fixed (default 0)",
    )


def _saving_flags(add) -> None:
    add("--checkpoint-every", type=int, help="steps between checkpoints")
    add("--keep-checkpoints", type=int, help="newest checkpoints kept")
    add("--no-resume", dest="resume", action="store_false", help="ignore existing checkpoints")
    add("--threads", type=int, help="compute threads per rank")
    add("--seed", type=int)
    add("--config", help="JSON file of TrainConfig fields (typed flags override it)")


def run(args) -> int:
    from climnb.train.loop import train  # TensorFlow, pandas, h5py: not for `climnb --help`

    config = TrainConfig.from_args(args)
    _note_without_horovod()
    _report(train(config, on_record=_progress), config)
    return 0


def _note_without_horovod() -> None:
    if importlib.util.find_spec("horovod") is None and launched_ranks() == 1:
        print(
            "climnb train: Horovod is not installed: training in one process without it "
            f"(to train on several: {install_hint('horovod')})",
            file=sys.stderr,
            flush=True,
        )


def _progress(record) -> None:
    if record["kind"] == "validation" and record["rank"] == 0:
        print(
            f"epoch {record['epoch']} step {record['step']}: validation mean IoU "
            f"{record['mean_iou']:.3f}",
            flush=True,
        )


def _report(result, config: TrainConfig) -> None:
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
