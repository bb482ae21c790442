"""``climnb train``: data-parallel training on every rank (mpirun, srun, horovodrun, or alone)."""

import json

HELP = "train Tiramisu or DeepLabv3+ on sample files, data-parallel with Horovod"
EXAMPLE = (
    "mpirun -np 2 python -m climnb train --data data/toy/samples --out runs/toy "
    "--model tiramisu --preset toy --epochs 4 --batch-size 2"
)


def add_arguments(parser):
    parser.add_argument("--data", required=True, help="folder of data-*.h5 and stats.h5")
    parser.add_argument("--out", required=True, help="run folder (checkpoints, model bundle)")
    parser.add_argument("--model", default="tiramisu", choices=["tiramisu", "deeplab"])
    parser.add_argument("--preset", default="toy", help="toy, small or paper (default toy)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=2, help="per rank (default 2)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--lr", type=float, default=1e-3, help="per-rank learning rate")
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument(
        "--lr-decay",
        choices=["linear", "none"],
        default="linear",
        help="linear decay to 0 at the last step (default), or none",
    )
    parser.add_argument("--larc", action="store_true", help="layer-wise adaptive rate clipping")
    parser.add_argument("--gradient-lag", action="store_true", help="apply last step's gradient")
    parser.add_argument("--mixed-precision", action="store_true", help="float16 compute")
    parser.add_argument("--checkpoint-every", type=int, default=50, help="steps")
    parser.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    parser.add_argument("--threads", type=int, default=None, help="compute threads per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", help="JSON file of TrainConfig fields (flags override)")


def run(args) -> int:
    from climnb.train.config import TrainConfig
    from climnb.train.loop import train

    base = {}
    if args.config:
        with open(args.config) as f:
            base = json.load(f)
    optimizer = {
        **base.pop("optimizer", {}),
        "learning_rate": args.lr,
        "warmup_steps": args.warmup_steps,
        "larc": args.larc,
        "gradient_lag": args.gradient_lag,
        "mixed_precision": args.mixed_precision,
    }
    config = TrainConfig.from_dict(
        {
            **base,
            "data_dir": args.data,
            "out_dir": args.out,
            "model": args.model,
            "preset": args.preset,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "max_steps": args.max_steps,
            "checkpoint_every": args.checkpoint_every,
            "resume": not args.no_resume,
            "threads": args.threads,
            "seed": args.seed,
            "lr_decay": args.lr_decay,
            "optimizer": optimizer,
        }
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
    if result.bundle:
        print(f"model bundle: {result.bundle}")
    return 0
