"""Parameters and FLOP of the paper's networks against the paper, and step times at toy size.

Prints, for Tiramisu and DeepLabv3+:

1. the paper presets at 768 x 1152 x 16, counted from the built graph (never run): trainable
   parameters and training FLOP per sample, next to the paper's 7.8 M / 4.2 TFLOP and
   43.7 M / 14.4 TFLOP, with their ratios;
2. the toy presets at 96 x 144 x 16: forward and training step times (compiled with
   ``tf.function``, after a warm-up) and the FLOP rate they reach -- the baseline against which
   the full-size estimate below is made;
3. for the full-size networks: the activation memory of one sample and the time one training
   step would take at the toy FLOP rate; with ``--full`` it runs one training step of each at
   batch 1 when the memory estimate fits in the available memory.

Usage::

    python benchmarks/bench_models.py [--batch 4] [--steps 5] [--full]
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

NAMES = ("tiramisu", "deeplab")
FULL = (768, 1152, 16)
TOY = (96, 144, 16)


def _available_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return float(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError):
        return math.inf


def activation_bytes(model, batch: int = 1) -> float:
    """Bytes of all layer outputs of one forward pass (float32): what backprop keeps, roughly."""
    total = 0
    for layer in model.layers:
        shape = layer.output.shape
        total += math.prod(s for s in shape[1:])
    return 4.0 * batch * total


def time_steps(model, batch: int, steps: int):
    """Median seconds of a compiled forward pass and of a compiled training step."""
    import tensorflow as tf

    from climnb.models.losses import WeightedCrossEntropy
    from climnb.train.optim import OptimizerConfig, make_optimizer, train_step

    rng = np.random.default_rng(0)
    shape = model.input_shape[1:]
    x = rng.random((batch, *shape), dtype=np.float32)
    y = rng.integers(0, 3, size=(batch, *shape[:2])).astype(np.int32)
    optimizer = make_optimizer(OptimizerConfig(larc=True, gradient_lag=True))
    loss_fn = WeightedCrossEntropy()
    forward = tf.function(lambda a: model(a, training=False))
    step = tf.function(lambda a, b: train_step(model, optimizer, loss_fn, a, b))

    def median(fn, *args):
        fn(*args)  # trace and warm up
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            out = fn(*args)
            np.asarray(out)  # wait for the result
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    return median(forward, x), median(step, x, y)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4, help="toy batch size (default 4)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    parser.add_argument("--full", action="store_true", help="run one full-size training step")
    args = parser.parse_args(argv)

    from climnb.models import PAPER_FIGURES, build_model, count_flops, count_params

    threads = os.environ.get("TF_NUM_INTRAOP_THREADS", "default")
    print(f"# climnb model benchmark (TF intra-op threads: {threads}, {os.cpu_count()} CPUs)")
    print("\n## Paper presets at 768x1152x16, counted (never run)")
    print(
        f"{'model':10} {'params':>9} {'paper':>7} {'ratio':>6} {'TFLOP/sample':>13} "
        f"{'paper':>6} {'ratio':>6} {'exact':>6}  build s"
    )
    paper = {}
    for name in NAMES:
        t0 = time.perf_counter()
        paper[name] = model = build_model(name, FULL)
        built = time.perf_counter() - t0
        params, train = count_params(model), count_flops(model).training
        exact = count_flops(model, "exact").training
        ref = PAPER_FIGURES[name]
        print(
            f"{name:10} {params / 1e6:8.2f}M {ref['params'] / 1e6:6.1f}M "
            f"{params / ref['params']:6.3f} {train / 1e12:13.3f} {ref['train_flop'] / 1e12:6.1f} "
            f"{train / ref['train_flop']:6.3f} {exact / 1e12:6.2f}  {built:6.1f}"
        )

    print(f"\n## Toy presets at 96x144x16, batch {args.batch}, median of {args.steps} steps")
    print(f"{'model':10} {'params':>9} {'fwd ms':>8} {'train ms':>9} {'train GFLOP/s':>14}")
    rates = {}
    for name in NAMES:
        model = build_model(name, TOY, preset="toy")
        fwd, train = time_steps(model, args.batch, args.steps)
        flop = count_flops(model).training * args.batch
        rates[name] = flop / train
        print(
            f"{name:10} {count_params(model) / 1e3:8.0f}k {fwd * 1e3:8.1f} {train * 1e3:9.1f} "
            f"{rates[name] / 1e9:14.1f}"
        )

    print("\n## Full size, batch 1: activation memory and estimated step time at the toy rate")
    available = _available_bytes()
    for name, model in paper.items():
        mem = activation_bytes(model)
        estimate = count_flops(model).training / rates[name]
        fits = 2.5 * mem < available  # activations + gradients + workspace, roughly
        line = (
            f"{name:10} activations {mem / 2**30:5.1f} GiB (available "
            f"{available / 2**30:5.1f} GiB), estimated train step {estimate:7.1f} s"
        )
        if args.full and fits:
            fwd, train = time_steps(model, 1, 1)
            rate = count_flops(model).training / train
            line += f"; measured {train:7.1f} s ({rate / 1e9:.1f} GFLOP/s, forward {fwd:.1f} s)"
        elif args.full:
            line += "; not run: would not fit in the available memory"
        print(line, flush=True)


if __name__ == "__main__":
    main()
