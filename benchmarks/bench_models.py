"""The networks against the paper, and training speed as a share of this CPU's peak.

Prints:

1. the CPU's FP32 peak: the theoretical one from ``lscpu`` (cores x GHz x FLOP per cycle, with
   the assumptions named; none, and no share of it, where the CPU's vendor, family and flags
   do not tell its FMA units) and the measured one, a large GEMM through TensorFlow / oneDNN in
   this run (float32, and bfloat16 where the CPU has AVX512_BF16 / AMX);
2. the paper presets at 768 x 1152 x 16, counted from the built graph: trainable parameters
   and training FLOP per sample next to the paper's 7.8 M / 4.2 TFLOP and 43.7 M / 14.4 TFLOP;
3. the toy presets at 96 x 144 x 16: forward and training step times (``tf.function``, after
   a warm-up), the FLOP rate, and its share of the GEMM rate measured just before and after
   the same step (robust to the load of a shared machine) and of the best GEMM of the run;
   in float32 and in ``mixed_bfloat16`` where the CPU has it natively, with the speed-up;
4. with ``--full``: one training step of each paper network at 768 x 1152 x 16, batch 1, in
   a fresh process each (so one run's memory is returned before the next), with the same
   shares. A step that would not leave 1.5 GiB of the machine's memory free is stopped and run
   again on the left half of the grid (768 x 576: same layers and channels, half the pixels),
   else on a quarter (768 x 288); said on its line. On a GPU (see ``tools/gpu_setup.sh``)
   the same, in float32 (TF32), mixed_float16 and mixed_bfloat16, next to the paper's
   per-GPU rates.

5. the roofline: a large numpy copy's bandwidth in this run, and per layer kind of each
   network the FLOP, bytes and time bound of a training step (convolutions at the GEMM rate
   or the bandwidth, element-wise layers at the bandwidth): the highest share of the GEMM
   rate any implementation could reach here;
6. ``--knobs``: what a training step gains from each knob, against the default in the same
   process, timed in turn: climnb's fused batch norm vs Keras' own (before), XLA
   (``jit_compile=True``), ``mixed_bfloat16``, batch size; with ``--knob-processes`` also
   oneDNN off and thread counts (a fresh process per setting, interleaved); and one
   convolution in NHWC (Keras', climnb's layout) vs NCHW;
7. ``--speedup``: float32 vs ``mixed_bfloat16`` training steps per second (toy and paper
   Tiramisu/DeepLabv3+ at 192 x 288), with every convolution of the same network timed alone
   in the same rounds (forward, data and weight gradient, both types): the bf16 step's share
   of its convolutions' rate and the ceiling (their float32 / bfloat16 time), each figure
   next to its goal (3.0x, toy 1.5x, 70 %);
8. ``--profile HxW``: where a paper network's training step goes, in float32 and (with native
   bfloat16) ``mixed_bfloat16``: oneDNN's primitives by kind, implementation and type from
   its verbose log (and primitives made during the step: cache misses), then TensorFlow's op
   types by time from ``tf.profiler`` (what ran outside oneDNN: casts, concatenation,
   dropout, the loss, the optimiser);
9. ``--levers``: XLA (``jit_compile=True``) and ``ONEDNN_MAX_CPU_ISA=AVX512_CORE_AMX``, each
   against the training step without it in the same run, float32 and mixed_bfloat16;
10. ``--wgrad``: the bfloat16 weight gradient of the paper Tiramisu's dense-block
   convolutions, oneDNN's primitive against TensorFlow matmul formulations (per kernel tap;
   im2col of the output gradient or of the input; NCHW), timed in turn, with their errors;
11. ``--ceiling``: the paper Tiramisu's 35 convolutions at 192 x 288 (and one at full size),
   each direction alone, float32 and bfloat16 in turn, and oneDNN's kernels for them
   (``ONEDNN_VERBOSE=1``): the most bfloat16 can give a step on this CPU;
12. ``--overhead``: the toy step's fixed cost: steps of 1, 4 and 16 samples, the step's parts
   alone (forward + gradients, the optimiser's update, the forward pass) and an empty
   compiled call, float32 and bfloat16, timed in turn.

Rows marked ``keras`` in the BN column are the step as it was before climnb's fused batch
norm (Keras 3's unfused layer); ``fused`` is the default now.

FLOP rates use ``climnb.models.flops`` with the "exact" convention (what the arithmetic is;
the paper's convention also charges TF1's padding of dilated convolutions, +11 % for
DeepLabv3+); the counts of section 2 are given in both.

Usage::

    python benchmarks/bench_models.py [--batch 4] [--steps 5] [--precision auto] [--full]
    python benchmarks/bench_models.py --knobs --knob-processes --models tiramisu
    python benchmarks/bench_models.py --speedup --models tiramisu [--knob-cases toy,paper]
    python benchmarks/bench_models.py --profile 192x288 --models tiramisu [--precision ...]
    python benchmarks/bench_models.py --wgrad --batch 1 --steps 5
    python benchmarks/bench_models.py --levers --models tiramisu --knob-cases paper --steps 3
    python benchmarks/bench_models.py --ceiling --steps 5 [--no-full]
    python benchmarks/bench_models.py --overhead --models tiramisu --steps 9
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import subprocess
import sys
import threading
import time

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np
from _args import at_least

NAMES = ("tiramisu", "deeplab")
FULL = (768, 1152, 16)
TOY = (96, 144, 16)
GIB = 2.0**30
RESERVE = 1.5 * GIB  # leave this much of the machine's memory to everyone else
ABORTED = 3  # exit status of a full-size step stopped by the memory guard


# --- the CPU's peak ------------------------------------------------------------------------------


def lscpu() -> dict[str, str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines())}


def fp32_per_cycle(info: dict[str, str]) -> tuple[int | None, str]:
    """Float32 FLOP per cycle per core from lscpu's vendor, family and flags, and the basis
    of the figure; ``None`` where lscpu cannot tell (the width and number of the FMA units
    differ between models that show the same flags)."""
    flags = set(info.get("Flags", "").split())
    amd = info.get("Vendor ID") == "AuthenticAMD"
    family = int(info.get("CPU family", 0) or 0)
    model = int(info.get("Model", 0) or 0)
    if "avx512f" in flags:
        if amd and family == 0x19:  # Zen 4: AVX-512 runs on its AVX2 units, in two halves
            return 32, "AVX-512 on Zen 4: 2 FMA units of 256 bits x 8 float32 x 2 FLOP"
        if "amx_bf16" in flags:  # Xeon since Sapphire Rapids: 2 FMA units on every model
            return 64, "AVX-512 with AMX (Xeon since Sapphire Rapids): 2 FMA units x 16 x 2"
        return None, (
            "AVX-512 on 1 or 2 FMA units, of 256 or 512 bits, by CPU model: lscpu does not say"
        )
    if "avx2" in flags and "fma" in flags:
        if amd and family == 0x17 and model < 0x30:  # Zen and Zen+: 128-bit FMA units
            return 16, "AVX2 on Zen/Zen+: 2 FMA units of 128 bits x 4 float32 x 2 FLOP"
        return 32, "AVX2: 2 FMA units x 8 float32 x 2 FLOP (a big core; Atom-class cores: 16)"
    return 8, "SSE: 2 x 4 float32 (no FMA)"


def theoretical_peak(info: dict[str, str]) -> dict:
    """Theoretical FP32 and BF16 FLOP/s from lscpu, with the assumptions behind them.

    ``fp32`` and ``bf16`` are ``None`` where the FLOP per cycle or the clock cannot be known
    from lscpu (the reason is in ``fp32_unit`` / ``bf16_unit``, or ``clock``); ``bf16`` is 0
    where the CPU has no native bfloat16."""
    flags = set(info.get("Flags", "").split())
    cores = int(info.get("Core(s) per socket", 1)) * int(info.get("Socket(s)", 1))
    if info.get("CPU max MHz"):
        ghz, clock = float(info["CPU max MHz"]) / 1e3, "lscpu's CPU max MHz (turbo)"
    elif m := re.search(r"@\s*([\d.]+)\s*GHz", info.get("Model name", "")):
        ghz, clock = float(m.group(1)), "the base clock in the model name"
    elif info.get("BogoMIPS"):
        # Linux's x86 BogoMIPS is twice the TSC (nominal) clock; boost and AVX clocks differ
        ghz, clock = (
            float(info["BogoMIPS"]) / 2e3,
            "BogoMIPS / 2: the nominal TSC clock, not a boost clock",
        )
    else:
        ghz, clock = None, "unknown: lscpu gives no clock"
    fp32, unit = fp32_per_cycle(info)
    if "amx_bf16" in flags:
        bf16, bf16_unit = 1024, "AMX-BF16: 1024 FLOP per cycle per core"
    elif "avx512_bf16" in flags:
        # a dot product of bfloat16 pairs into each float32 lane, on the float32 FMA units
        bf16 = 2 * fp32 if fp32 else None
        bf16_unit = "AVX512_BF16: 2 bf16 pairs per float32 lane, on the float32 FMA units"
    else:
        bf16, bf16_unit = 0, "no native bfloat16"

    def rate(per_cycle):
        return None if per_cycle is None or ghz is None else cores * ghz * per_cycle * 1e9

    return dict(
        cores=cores,
        ghz=ghz,
        clock=clock,
        fp32_per_cycle=fp32,
        fp32_unit=unit,
        fp32=rate(fp32),
        bf16_per_cycle=bf16,
        bf16_unit=bf16_unit,
        bf16=rate(bf16) if bf16 else bf16,
    )


def describe_peak(peak: dict) -> list[str]:
    """The lines that say the theoretical peaks, or why one is not known."""
    if peak["fp32"] is None:
        why = peak["fp32_unit"] if peak["fp32_per_cycle"] is None else f"clock {peak['clock']}"
        lines = [f"theoretical FP32: not known ({why}); no share of it is printed"]
    else:
        lines = [
            f"theoretical FP32: {peak['cores']} cores x {peak['ghz']:.2f} GHz ({peak['clock']}) "
            f"x {peak['fp32_per_cycle']} FLOP/cycle ({peak['fp32_unit']}) = "
            f"{peak['fp32'] / 1e9:.1f} GFLOP/s"
        ]
    if peak["bf16"]:
        lines.append(
            f"theoretical BF16: {peak['bf16_per_cycle']} FLOP/cycle ({peak['bf16_unit']}) = "
            f"{peak['bf16'] / 1e9:.0f} GFLOP/s"
        )
    elif peak["bf16"] is None:
        lines.append(f"theoretical BF16: not known ({peak['bf16_unit']})")
    return lines


def share_of(rate: float, peak: float | None, what: str) -> str:
    """``" = 42 % of theoretical"``, or nothing where the peak is not known."""
    return f" = {100 * rate / peak:.0f} % of {what}" if peak else ""


def gemm_rate(
    dtype: str = "float32",
    n: int = 4096,
    repeats: int = 3,
    iters: int = 1,
    form: str = "matmul",
    rates: dict | None = None,
) -> float:
    """Best FLOP/s of an n x n x n matrix product through TensorFlow (oneDNN on x86 CPUs,
    cuBLAS on GPUs), ``iters`` products per timing (queued back to back on a GPU).

    ``form`` is how TensorFlow is asked for the product: ``matmul`` (``tf.linalg.matmul`` of
    two matrices), ``batch_matmul`` (of a batch of one: BatchMatMul), ``einsum``
    (``tf.einsum("ij,jk->ik")``), ``conv1x1`` (a 1 x 1 ``Conv2D`` of a (1, n, 1, n) tensor with
    (1, 1, n, n) filters: oneDNN's 1 x 1 brgemm convolution), or ``fastest``: all of them, in
    turn ``repeats`` times, and the best rate of any (each form's best put in ``rates``, a
    dict, where given). On an AVX512_BF16 CPU all four run oneDNN's brgemm kernels in
    bfloat16, and in float32 all but ``matmul`` (oneDNN's sgemm): which wins a run is within
    its noise (docs/figures.md).
    """
    import tensorflow as tf

    products = {
        "matmul": lambda a, b: tf.linalg.matmul(a, b)[0, 0],
        "batch_matmul": lambda a, b: tf.linalg.matmul(a[None], b[None])[0, 0, 0],
        "einsum": lambda a, b: tf.einsum("ij,jk->ik", a, b)[0, 0],
        "conv1x1": lambda a, b: tf.nn.conv2d(
            tf.reshape(a, (1, n, 1, n)), tf.reshape(b, (1, 1, n, n)), 1, "VALID"
        )[0, 0, 0, 0],
    }
    forms = list(products) if form == "fastest" else [form]
    if not set(forms) <= set(products):
        raise ValueError(f"form must be one of {', '.join(products)} or fastest, got {form!r}")
    rng = np.random.default_rng(0)
    a = tf.cast(rng.standard_normal((n, n), dtype=np.float32), dtype)
    b = tf.cast(rng.standard_normal((n, n), dtype=np.float32), dtype)
    corners = {f: tf.function(products[f]) for f in forms}  # fetch one number only
    for corner in corners.values():
        corner(a, b).numpy()  # trace, create the oneDNN primitive / cuBLAS plan
    best = dict.fromkeys(forms, math.inf)
    for _ in range(repeats):
        for f, corner in corners.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                out = corner(a, b)
            out.numpy()  # waits for all of them (one stream on a GPU)
            best[f] = min(best[f], (time.perf_counter() - t0) / iters)
    found = {f: 2.0 * n**3 / t for f, t in best.items()}
    if rates is not None:
        rates.update(found)
    return max(found.values())


GEMM_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}
#: The paper's sustained rates per GPU at scale (abstract of Kurth et al., SC18): the machine
#: rate over the GPU count; parallel efficiency included, so one GPU alone ran faster.
PAPER_PER_GPU = {
    "tiramisu": "21.0 PF/s / 5300 P100 = 4.0 TFLOP/s per GPU",
    "deeplab": "FP32 325.8 PF/s / 27360 V100 = 11.9; FP16 999.0 PF/s / 27360 = 36.5 TFLOP/s",
}


def _gpu_setup(tf) -> list:
    """Visible GPUs, with memory growth so a benchmark process leaves memory to the next."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    return gpus


def _gemm_size(gpus) -> dict:
    return dict(n=8192, iters=10) if gpus else dict(n=4096, iters=1)


# --- models ---------------------------------------------------------------------------------------


def _available_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return float(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError):
        return math.inf


def memory_guard(reserve: float = RESERVE, every: float = 0.02) -> dict:
    """Stop this process (exit status ``ABORTED``) when the machine's available memory falls
    below ``reserve``, so a step too big for the machine never makes the kernel kill someone
    else's process. Returns a dict whose ``"peak"`` is this process's peak RSS so far."""
    import psutil

    proc, state = psutil.Process(), {"peak": 0}

    def watch():
        while True:
            state["peak"] = max(state["peak"], proc.memory_info().rss)
            if _available_bytes() < reserve:
                print(f"# memory guard: stopped at RSS {state['peak'] / GIB:.1f} GiB", flush=True)
                os._exit(ABORTED)
            time.sleep(every)

    threading.Thread(target=watch, daemon=True).start()
    return state


def activation_bytes(model, batch: int = 1) -> float:
    """Bytes of all layer outputs of one forward pass (float32): what backprop keeps, roughly."""
    total = 0
    for layer in model.layers:
        total += math.prod(s for s in layer.output.shape[1:])
    return 4.0 * batch * total


def training_step(model, batch: int, *, loss_scaling=False, jit_compile=False):
    """A compiled training step (Adam with LARC and gradient lag, as the paper) and a batch;
    ``jit_compile``: compiled by XLA."""
    import tensorflow as tf

    from climnb.models.losses import WeightedCrossEntropy
    from climnb.train.optim import OptimizerConfig, make_optimizer, train_step

    rng = np.random.default_rng(0)
    shape = model.input_shape[1:]
    x = rng.random((batch, *shape), dtype=np.float32)
    y = rng.integers(0, 3, size=(batch, *shape[:2])).astype(np.int32)
    opt = OptimizerConfig(larc=True, gradient_lag=True, mixed_precision=loss_scaling)
    optimizer = make_optimizer(opt)
    loss_fn = WeightedCrossEntropy()
    # a partial, not a lambda: TensorFlow counts traces per code object and warns of
    # "retracing" when several variants' steps (one trace each) share one
    step = tf.function(
        functools.partial(train_step, model, optimizer, loss_fn), jit_compile=jit_compile
    )
    return step, x, y


def time_steps(model, batch: int, steps: int, *, forward: bool = True, loss_scaling=False):
    """Median seconds of a compiled forward pass (None if not ``forward``) and of a compiled
    training step."""
    import tensorflow as tf

    step, x, y = training_step(model, batch, loss_scaling=loss_scaling)

    def median(fn, *args):
        fn(*args)  # trace and warm up
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            np.asarray(fn(*args))  # wait for the result
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    # no AutoGraph (nothing to convert): it cannot find this lambda's source beside
    # gemm_rate's and warns, naming both
    forward_pass = tf.function(lambda a: model(a, training=False), autograph=False)
    fwd = median(forward_pass, x) if forward else None
    return fwd, median(step, x, y)


def measure(name, shape, preset, precision, batch, steps, *, forward=True, fused=True) -> dict:
    """One network's step rate with the FP32 GEMM rate just before and after (and the GEMM
    rate in the precision's own type); ``fused``: climnb's fused batch norm (now), else
    Keras' own layer (before)."""
    import tensorflow as tf

    from climnb.models import build_model, count_flops

    size = _gemm_size(_gpu_setup(tf))
    model = build_model(
        name, shape, preset=preset, mixed_precision=precision, fused_batch_norm=fused
    )
    flop = count_flops(model, "exact").training * batch
    before = gemm_rate("float32", **size)
    own = GEMM_DTYPE[precision]
    before_own = gemm_rate(own, **size) if own != "float32" else before
    fwd, train = time_steps(
        model, batch, steps, forward=forward, loss_scaling=precision == "mixed_float16"
    )
    after = gemm_rate("float32", **size)
    return dict(
        name=name,
        shape=list(shape),
        precision=precision,
        bn="fused" if fused else "keras",
        fwd=fwd,
        train=train,
        rate=flop / train,
        gemm=(before + after) / 2,
        gemm_pair=[before, after],
        gemm_own=before_own,
        load=os.getloadavg()[0],
    )


def full_step(name: str, precision: str, width: int, bn: str = "fused") -> dict:
    """Run one full-size training step in a fresh process; None if it would not fit."""
    cmd = [sys.executable, __file__, "--one", name, precision, str(width), bn]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == ABORTED:
        return None
    if proc.returncode:
        sys.exit(f"full-size step of {name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _one(name: str, precision: str, width: int, bn: str) -> None:
    state = memory_guard()
    shape = (FULL[0], width, FULL[2])
    result = measure(name, shape, "paper", precision, 1, 1, forward=False, fused=bn == "fused")
    result["rss"] = state["peak"]
    print(json.dumps(result), flush=True)


PROFILE_MARK = "#climnb-profile"
OPS_MARK = "#climnb-ops"


#: Where a TensorFlow op of a training step belongs, by its type (first match wins) ...
OP_KINDS = (
    ("convolution", r"_MklNative(Fused)?Conv2D.*|Conv2D.*"),
    ("batch norm (+ ReLU forward)", r".*FusedBatchNorm.*"),
    ("ReLU", r"_?(MklNative)?Relu(Grad)?"),
    ("concatenation, slices", r"ConcatV2|ConcatOffset|Slice"),
    ("gradient sums", r"AddN"),
    ("casts", r"Cast"),
    ("pooling (strided 1x1 subsample)", r".*MaxPool.*"),
    ("loss", r"SparseSoftmaxCrossEntropyWithLogits"),
)
#: ... or by the layer or step part its name shows
OP_SCOPES = (("optimiser (LARC, lag, Adam)", "larc_adam"), ("dropout", "_drop"))


def op_category(name: str, kind: str) -> str:
    """The part of a training step a TensorFlow op (``name``, type ``kind``) belongs to.

    >>> op_category("tiramisu_1/down1_l1_drop_1/Mul", "Mul")
    'dropout'
    >>> op_category("gradient_tape/tiramisu_1/stem_conv_1/convolution/Conv2DBackpropFilter",
    ...     "_MklNativeConv2DBackpropFilter")
    'convolution'
    """
    for label, scope in OP_SCOPES:
        if scope in name:
            return label
    for label, pattern in OP_KINDS:
        if re.fullmatch(pattern, kind):
            return label
    return "other element-wise (bias, weight casts, loss gradient)"


def op_times(logdir: str) -> dict[str, dict[str, list[float]]]:
    """Seconds and calls by step part (:func:`op_category`) and TensorFlow op type in a
    ``tf.profiler`` trace written to ``logdir`` (the host's op events, ``op name:op type``;
    oneDNN's ops are ``_MklNative...``)."""
    import glob

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
        with open(path, "rb") as f:
            space.MergeFromString(f.read())
    out: dict[str, dict[str, list[float]]] = {}
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                op, sep, kind = name.rpartition(":")
                if "::" in name or not op or not re.fullmatch(r"_?[A-Z][A-Za-z0-9_]*", kind):
                    continue  # not an op kernel (executor, function and Python events)
                entry = out.setdefault(op_category(op, kind), {}).setdefault(kind, [0.0, 0])
                entry[0] += event.duration_ps / 1e12
                entry[1] += 1
    return out


def _profile_one(name: str, precision: str, height: int, width: int) -> None:
    """One training step after a warm-up, between two marks (oneDNN's verbose log around),
    then one under TensorFlow's profiler (its op times as JSON after ``OPS_MARK``).
    One inter-op thread: one op at a time, so the primitives' times add up to the step's."""
    import tempfile

    import tensorflow as tf

    from climnb.models import build_model

    tf.config.threading.set_inter_op_parallelism_threads(1)

    model = build_model(name, (height, width, FULL[2]), mixed_precision=precision)
    step, x, y = training_step(model, 1)
    np.asarray(step(x, y))
    print(PROFILE_MARK, flush=True)
    t0 = time.perf_counter()
    np.asarray(step(x, y))
    print(f"{PROFILE_MARK} {time.perf_counter() - t0}", flush=True)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        t0 = time.perf_counter()
        np.asarray(step(x, y))
        wall = time.perf_counter() - t0
        tf.profiler.experimental.stop()
        ops = op_times(logdir)
    print(OPS_MARK, json.dumps(dict(wall=wall, ops=ops)), flush=True)


def _conv_flop(desc: str, kind: str) -> float:
    """FLOP of one oneDNN (de)convolution from its problem descriptor
    (``mb1_ic16oc32_ih64oh64kh5sh1dh0ph2_iw96ow96kw5sw1dw0pw2``): 2 x MACs, any direction.

    >>> _conv_flop("mb1_ic16oc32_ih64oh64kh5sh1dh0ph2_iw96ow96kw5sw1dw0pw2", "convolution")
    157286400.0
    """
    d = {k: int(v) for k, v in re.findall(r"([a-z]+)(\d+)", desc)}
    pixels = d["ih"] * d["iw"] if kind == "deconvolution" else d["oh"] * d["ow"]
    return 2.0 * d.get("mb", 1) * d.get("g", 1) * pixels * d["kh"] * d["kw"] * d["ic"] * d["oc"]


def primitive_kind(fields: list[str]) -> str:
    """The row a oneDNN verbose ``exec`` line is counted in: convolutions by direction and
    implementation, reorders by source and destination type, others by kind and type.

    >>> primitive_kind("onednn_verbose,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core_amx,"
    ...     "forward_training,src_bf16::blocked:acdb::f0 wei_bf16::blocked:Adcb16a::f0,,,"
    ...     "mb1_ic16oc32_ih64oh64kh5sh1dh0ph2_iw96ow96kw5sw1dw0pw2,0.5".split(","))
    'convol forward brg_conv_fwd:avx512_core_amx bf16'
    """
    kind, impl, direction, descs = fields[4], fields[5], fields[6], fields[7]
    dtype = re.search(r"src_(\w+?):", descs) or re.search(r"_(\w+?):", descs)
    dtype = dtype.group(1) if dtype else "?"
    if kind in ("convolution", "deconvolution"):
        return f"{kind[:6]} {direction.replace('_training', '')} {impl} {dtype}"
    if kind == "reorder":
        types = re.findall(r"(?:src|dst)_(\w+?):", descs)
        return f"reorder {'->'.join(types)}"
    return f"{kind} {direction.replace('_training', '')} {impl} {dtype}"


def profile(name: str, precision: str, height: int, width: int) -> dict:
    """Where one training step's time goes: oneDNN primitives by kind (time, and FLOP rate
    for convolutions) against the step's wall time; the rest ran outside oneDNN (TensorFlow's
    own kernels: batch norm, ReLU, dropout, concatenation, loss, optimiser). ``ops``: a second
    step's TensorFlow op types by time (``tf.profiler``), which names those kernels too."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    cmd = [sys.executable, __file__, "--profile-one", name, precision, str(height), str(width)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        sys.exit(f"profile of {name} failed:\n{proc.stderr[-3000:]}")
    lines = proc.stdout.splitlines()
    start = lines.index(PROFILE_MARK)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(PROFILE_MARK))
    wall = float(lines[end].split()[1])
    kinds: dict[str, list[float]] = {}
    created = [0, 0.0]  # primitives made during the step (cache misses), and their seconds
    for line in lines[start + 1 : end]:
        f = line.split(",")
        if len(f) >= 8 and f[:2] == ["onednn_verbose", "primitive"] and f[2].startswith("create"):
            created[0] += f[2] == "create:cache_miss"
            created[1] += float(f[-1]) / 1e3 if f[2] == "create:cache_miss" else 0.0
        if len(f) < 8 or f[:3] != ["onednn_verbose", "primitive", "exec"]:
            continue
        conv = f[4] in ("convolution", "deconvolution")
        entry = kinds.setdefault(primitive_kind(f), [0.0, 0.0])
        entry[0] += float(f[-1]) / 1e3
        if conv:
            entry[1] += _conv_flop(f[-2], f[4])
    traced = json.loads(next(x for x in lines if x.startswith(OPS_MARK)).split(" ", 1)[1])
    return dict(wall=wall, kinds=kinds, traced=traced, created=created)


# --- roofline: what the memory traffic allows ----------------------------------------------------


def copy_bandwidth(mib: int = 512, threads: int = 2, repeats: int = 3) -> float:
    """Best bytes/s of a large numpy copy (read + write counted; the write-allocate read a
    CPU may add is not, so the true traffic is up to 1.5x this) split over ``threads``."""
    from concurrent.futures import ThreadPoolExecutor

    a = np.ones(mib * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    parts = np.array_split(np.arange(a.size), threads)
    bounds = [(p[0], p[-1] + 1) for p in parts]
    best = math.inf
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats + 1):  # the first one touches the pages
            t0 = time.perf_counter()
            list(pool.map(lambda lo_hi: np.copyto(b[slice(*lo_hi)], a[slice(*lo_hi)]), bounds))
            best = min(best, time.perf_counter() - t0)
    return 2.0 * a.nbytes / best


#: Activation passes of a training step (forward + backward) per element of a layer's output,
#: float32, the fewest an implementation can make: batch norm 3 forward (statistics, then
#: normalise) + 5 backward; ReLU 2 + 3; dropout 3 + 3 (its mask); concatenation 2 + 2.
TRAFFIC = {"BatchNormalization": 8, "FusedBatchNormalization": 8, "ReLU": 5, "Dropout": 6}
TRAFFIC["MaskDropout"] = 6
TRAFFIC["Concatenate"] = 4


def roofline(model, gemm: float, bandwidth: float) -> dict:
    """A lower bound on one training step (batch 1) from the roofline: each convolution takes
    at least max(FLOP / GEMM rate, bytes / bandwidth) (forward, data and weight gradients:
    3x the forward FLOP, input and output read or written 3 times each), each element-wise
    layer bytes / bandwidth. Bound-free implementation detail (gradient sums of the dense
    connections, the optimiser, reorders) is left out, so the bound is optimistic."""
    from climnb.models import count_flops

    flop = {layer.name: layer.flop for layer in count_flops(model, "exact").layers}
    kinds: dict[str, list[float]] = {}
    convs = []
    for layer in model.layers:
        kind = type(layer).__name__
        out = 4.0 * math.prod(layer.output.shape[1:])
        if flop.get(layer.name):
            inputs = layer.input if isinstance(layer.input, list) else [layer.input]
            ins = 4.0 * sum(math.prod(t.shape[1:]) for t in inputs)
            weights = 4.0 * sum(math.prod(w.shape) for w in layer.weights)
            f, b = 3 * flop[layer.name], 3 * (ins + out + weights)
            t = max(f / gemm, b / bandwidth)
            convs.append((layer.name, f / b, f, t))
            kind = "convolution"
        elif kind in TRAFFIC:
            f, b = 0.0, TRAFFIC[kind] * out
            t = b / bandwidth
        else:
            continue
        entry = kinds.setdefault(kind, [0.0, 0.0, 0.0])
        entry[0] += f
        entry[1] += b
        entry[2] += t
    total = sum(v[2] for v in kinds.values())
    conv_flop = kinds["convolution"][0]
    return dict(kinds=kinds, convs=convs, bound=total, share=conv_flop / total / gemm)


def print_roofline(name: str, shape, preset: str, gemm: float, bandwidth: float) -> dict:
    from climnb.models import build_model

    r = roofline(build_model(name, shape, preset=preset), gemm, bandwidth)
    print(
        f"\n### {name} ({preset}) at {shape[0]}x{shape[1]}, batch 1: roofline bound "
        f"{r['bound']:.3f} s per step -> at most {100 * r['share']:.0f} % of the GEMM rate"
    )
    print(f"  {'layers':24} {'GFLOP':>8} {'GB':>7} {'FLOP/B':>7} {'bound s':>8} {'share':>6}")
    for kind, (f, b, t) in sorted(r["kinds"].items(), key=lambda kv: -kv[1][2]):
        print(
            f"  {kind:24} {f / 1e9:8.1f} {b / 1e9:7.2f} {f / b:7.1f} {t:8.3f} "
            f"{100 * t / r['bound']:5.1f} %"
        )
    low = sorted(r["convs"], key=lambda c: c[1])[:3]
    print(
        "  lowest-intensity convolutions: "
        + ", ".join(f"{n} {ai:.0f} FLOP/B" for n, ai, _, _ in low)
    )
    return r


# --- knobs: what speeds a training step up on this CPU -------------------------------------------

KNOB_CASES = {  # name: (input shape, preset, batch)
    "toy": (TOY, "toy", 4),
    "paper": ((192, 288, 16), "paper", 1),
}


def _interleaved(variants: dict, rounds: int) -> dict[str, float]:
    """Median seconds of each variant's ``(fn, args)``, timed in turn round after round (so a
    change of the machine's load hits every variant alike), after a trace and a warm-up."""
    for fn, args in variants.values():
        np.asarray(fn(*args))
        np.asarray(fn(*args))
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for key, (fn, args) in variants.items():
            t0 = time.perf_counter()
            np.asarray(fn(*args))
            times[key].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def _variant(name, shape, preset, batch, *, precision="float32", fused=True, jit=False):
    from climnb.models import build_model

    model = build_model(
        name, shape, preset=preset, mixed_precision=precision, fused_batch_norm=fused
    )
    step, x, y = training_step(model, batch, jit_compile=jit)
    return step, (x, y)


def _flop(name, shape, preset) -> float:
    from climnb.models import build_model, count_flops

    return count_flops(build_model(name, shape, preset=preset), "exact").training


def knobs_in_process(name: str, case: str, rounds: int) -> list[tuple[str, float, float]]:
    """Variants that one process can hold side by side: (label, seconds per sample, FLOP/s)."""
    from climnb.models.precision import cpu_bf16_flags

    shape, preset, batch = KNOB_CASES[case]
    base = dict(name=name, shape=shape, preset=preset)
    variants = {
        "Keras batch norm (before)": _variant(**base, batch=batch, fused=False),
        "fused batch norm (now)": _variant(**base, batch=batch),
        "XLA, Keras batch norm": _variant(**base, batch=batch, fused=False, jit=True),
        "XLA, fused batch norm": _variant(**base, batch=batch, jit=True),
    }
    if cpu_bf16_flags():
        variants["mixed_bfloat16, Keras batch norm"] = _variant(
            **base, batch=batch, fused=False, precision="mixed_bfloat16"
        )
        variants["mixed_bfloat16, fused batch norm"] = _variant(
            **base, batch=batch, precision="mixed_bfloat16"
        )
    batches = {label: batch for label in variants}
    for b in sorted({1, 2 * batch, 4 * batch} - {batch}):
        label = f"fused batch norm, {b} samples a step"
        variants[label], batches[label] = _variant(**base, batch=b), b
    seconds = _interleaved(variants, rounds)
    flop = _flop(name, shape, preset)
    return [(k, t / batches[k], flop * batches[k] / t) for k, t in seconds.items()]


def _knob_one(name: str, case: str, intra: int, inter: int, rounds: int) -> None:
    """Child of :func:`knobs_in_processes`: the default step's median time, as JSON."""
    import tensorflow as tf

    if intra:
        tf.config.threading.set_intra_op_parallelism_threads(intra)
    if inter:
        tf.config.threading.set_inter_op_parallelism_threads(inter)
    shape, preset, batch = KNOB_CASES[case]
    t = _interleaved({"x": _variant(name, shape, preset, batch)}, rounds)["x"]
    print(json.dumps(dict(seconds=t / batch, load=os.getloadavg()[0])), flush=True)


def knobs_in_processes(name: str, case: str, rounds: int, repeats: int = 2) -> dict:
    """Knobs read when TensorFlow starts (oneDNN on/off, thread pools): one fresh process per
    setting, the settings interleaved ``repeats`` times; seconds per sample, median over the
    processes of each setting."""
    settings = {
        "default (oneDNN on, TF's threads)": ({}, 0, 0),
        "oneDNN off (TF_ENABLE_ONEDNN_OPTS=0)": ({"TF_ENABLE_ONEDNN_OPTS": "0"}, 0, 0),
        "1 intra-op thread (1 core)": ({"OMP_NUM_THREADS": "1"}, 1, 0),
        "2 intra-op, 1 inter-op thread": ({}, 2, 1),
    }
    out: dict[str, list[float]] = {k: [] for k in settings}
    for _ in range(repeats):
        for label, (env, intra, inter) in settings.items():
            cmd = [sys.executable, __file__, "--knob-one", name, case, str(intra), str(inter)]
            cmd += ["--steps", str(rounds)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
            if proc.returncode:
                print(f"# {label}: failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            out[label].append(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])
    return {k: float(np.median(v)) for k, v in out.items() if v}


def layout_micro(rounds: int) -> list[tuple[str, float, float]]:
    """One dense-block convolution of the paper Tiramisu (5x5, 256 -> 32 maps, 96 x 144),
    forward only, with the activations in NHWC (Keras' layout, climnb's) and in NCHW:
    (label, seconds, FLOP/s). NHWC: median of ``rounds`` after a warm-up; NCHW: one call after
    its trace (TensorFlow 2.18's CPU kernel took ~28 s for it, 1500x NHWC, on the 2-core
    machine, so more would only take time)."""
    import tensorflow as tf

    h, w, cin, cout, k = 96, 144, 256, 32, 5
    rng = np.random.default_rng(0)
    kernel = tf.constant(rng.standard_normal((k, k, cin, cout), dtype=np.float32) * 0.01)
    x = rng.standard_normal((1, h, w, cin), dtype=np.float32)
    flop = 2.0 * h * w * k * k * cin * cout
    rows = []
    for fmt, data, n in (("NHWC", x, rounds), ("NCHW", x.transpose(0, 3, 1, 2), 1)):
        f = tf.function(
            lambda x, kernel, fmt=fmt: tf.reduce_sum(
                tf.nn.conv2d(x, kernel, 1, "SAME", data_format=fmt)
            )
        )
        data = tf.constant(data)
        try:
            f.get_concrete_function(data, kernel)  # trace only
            times = []
            for _ in range(n + (n > 1)):
                t0 = time.perf_counter()
                np.asarray(f(data, kernel))
                times.append(time.perf_counter() - t0)
        except Exception as err:  # noqa: BLE001 - TensorFlow's CPU kernels may lack NCHW
            print(f"# {fmt} convolution not run here: {type(err).__name__}: {str(err)[:200]}")
            continue
        t = float(np.median(times[1:] if n > 1 else times))
        rows.append((fmt, t, flop / t))
    return rows


#: Goals of ``--speedup``: bfloat16 / float32 steps per second by case, and the bf16 step's
#: FLOP rate as a share of its own convolutions' bf16 rate
SPEEDUP_GOALS = {"paper": 3.0, "toy": 1.5}
SHARE_GOAL = 0.70


def _conv_variants(name: str, shape, preset: str, batch: int) -> tuple[dict, dict]:
    """The network's own convolutions (:func:`network_convs`), each direction alone, float32
    and bfloat16: ``(variants, FLOP)`` keyed ``(index, dtype, direction)``."""
    variants, flop = {}, {}
    for i, conv in enumerate(network_convs(name, shape, preset)):
        for dtype in ("float32", "bfloat16"):
            for direction, (fn_args, f) in conv_directions(dtype, conv, batch).items():
                if i == 0 and direction == "data gradient":
                    continue  # the input's gradient: not part of a training step
                variants[(i, dtype, direction)], flop[(i, dtype, direction)] = fn_args, f
    return variants, flop


def _empty_call() -> tuple:
    """A compiled function that does nothing but return one number: the fixed cost of a
    ``tf.function`` call and its fetch, as ``(fn, args)``."""
    import tensorflow as tf

    return tf.function(lambda x: x, autograph=False), (tf.constant(0.0),)


def _verdict(value: float, goal: float) -> str:
    return "met" if value >= goal else "not met"


def print_speedup(args) -> None:
    """``--speedup``: float32 and mixed_bfloat16 training steps, timed in turn in one process
    with every convolution of the same network in each direction and type alone (oneDNN's
    primitives: the fastest the step's convolutions run here). Each figure beside its goal;
    the ceiling is the convolutions' own float32 / bfloat16 time: a step whose time they are
    cannot gain more from bfloat16."""
    from climnb.models.precision import cpu_bf16_flags

    flags = cpu_bf16_flags()
    if not flags:
        sys.exit("--speedup: this CPU has no native bfloat16 (AVX512_BF16 / AMX)")
    print(
        f"# bfloat16 speed-up: load {os.getloadavg()[0]:.1f}; medians of {args.steps} rounds; "
        f"CPU bfloat16: {', '.join(sorted(flags))}"
    )
    for case in args.knob_cases.split(","):
        shape, preset, batch = KNOB_CASES[case]
        for name in _names(args):
            variants, flop = {}, {}
            for precision in ("float32", "mixed_bfloat16"):
                variants[precision] = _variant(name, shape, preset, batch, precision=precision)
                flop[precision] = _flop(name, shape, preset) * batch
            conv_variants, conv_flop = _conv_variants(name, shape, preset, batch)
            n_convs = len({k[0] for k in conv_variants})
            variants.update(conv_variants)
            variants["empty"] = _empty_call()
            t = _interleaved(variants, args.steps)
            # each convolution timed alone pays one compiled call's fixed cost, a step once
            empty = t.pop("empty")
            t.update({k: max(v - empty, 1e-9) for k, v in t.items() if isinstance(k, tuple)})
            rate = {k: flop[k] / t[k] for k in ("float32", "mixed_bfloat16")}
            conv_t = {
                d: sum(v for k, v in t.items() if isinstance(k, tuple) and k[1] == d)
                for d in ("float32", "bfloat16")
            }
            conv_f = {
                d: sum(v for k, v in conv_flop.items() if k[1] == d)
                for d in ("float32", "bfloat16")
            }
            direction_t = {
                (d, r): sum(v for k, v in t.items() if isinstance(k, tuple) and k[1:] == (d, r))
                for d in ("float32", "bfloat16")
                for r in DIRECTIONS
            }
            fp32, bf16 = t["float32"], t["mixed_bfloat16"]
            speedup, ceiling_x = fp32 / bf16, conv_t["float32"] / conv_t["bfloat16"]
            goal = SPEEDUP_GOALS.get(case, SPEEDUP_GOALS["paper"])
            print(f"\n## {name}, {preset} preset at {shape[0]}x{shape[1]}, batch {batch}")
            for k, d in (("float32", "float32"), ("mixed_bfloat16", "bfloat16")):
                print(
                    f"  {k:15} {t[k] * 1e3:8.1f} ms/step {1 / t[k]:7.2f} steps/s "
                    f"{rate[k] / 1e9:7.1f} GFLOP/s; its {n_convs} "
                    f"convolutions alone {conv_t[d] * 1e3:8.1f} ms "
                    f"({conv_f[d] / conv_t[d] / 1e9:.1f} GFLOP/s): the step is "
                    f"{100 * rate[k] / (conv_f[d] / conv_t[d]):.0f} % of their rate"
                )
            share = rate["mixed_bfloat16"] / (conv_f["bfloat16"] / conv_t["bfloat16"])
            print(
                f"  bfloat16 / float32 steps per second: {speedup:.2f}x (goal {goal:.1f}x: "
                f"{_verdict(speedup, goal)}); the ceiling, its convolutions' float32 / bfloat16 "
                f"time: {ceiling_x:.2f}x" + (" (the goal is above it)" if ceiling_x < goal else "")
            )
            print(
                f"  (convolutions net of a compiled call's fixed cost, {empty * 1e6:.0f} us a "
                "call, timed in the same rounds)"
            )
            print(
                "  by direction, float32 / bfloat16: "
                + ", ".join(
                    f"{r} {direction_t[('float32', r)] / direction_t[('bfloat16', r)]:.2f}x"
                    for r in DIRECTIONS
                )
            )
            print(
                f"  the bf16 step at {100 * share:.0f} % of its bf16 convolutions' rate (goal "
                f"{100 * SHARE_GOAL:.0f} %: {_verdict(share, SHARE_GOAL)})"
            )
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


# --- the ceiling: the network's own convolutions, float32 against bfloat16 ----------------------

#: A full-size dense-block convolution timed beside the 192 x 288 network's (``--ceiling``)
CEILING_FULL = ("Conv2D", 768, 1152, 96, 32, 5, 1, 1)
DIRECTIONS = ("forward", "data gradient", "weight gradient")


def network_convs(name: str, shape, preset: str = "paper") -> list[tuple]:
    """The (transposed) convolutions of a network as ``(kind, h, w, in, out, k, stride,
    dilation)`` (input size; all 'same'-padded), in the network's order; the first one's data
    gradient is never computed."""
    from climnb.models import build_model

    out = []
    for layer in build_model(name, shape, preset=preset).layers:
        kind = type(layer).__name__
        if kind in ("Conv2D", "Conv2DTranspose"):
            _, h, w, cin = layer.input.shape
            k, s, d = layer.kernel_size[0], layer.strides[0], layer.dilation_rate[0]
            out.append((kind, h, w, cin, layer.filters, k, s, d))
    return out


def _conv_primitive(op: str, stride: int, dilation: int, kshape: tuple, a, b, kernel):
    """One oneDNN convolution primitive by TensorFlow's op (``forward``: ``a`` * kernel;
    ``backprop input``: ``b``'s gradient into ``a``'s shape; ``backprop filter``: from input
    ``a`` and output gradient ``b``); one float32 number back, so no large fetch."""
    import tensorflow as tf

    common = dict(
        strides=[1, stride, stride, 1], padding="SAME", dilations=[1, dilation, dilation, 1]
    )
    if op == "forward":
        out = tf.raw_ops.Conv2D(input=a, filter=kernel, **common)
    elif op == "backprop input":
        out = tf.raw_ops.Conv2DBackpropInput(
            input_sizes=tf.shape(a), filter=kernel, out_backprop=b, **common
        )
    else:
        out = tf.raw_ops.Conv2DBackpropFilter(
            input=a, filter_sizes=kshape, out_backprop=b, **common
        )
    return tf.cast(out[0, 0, 0, 0], tf.float32)


def conv_directions(dtype: str, conv: tuple, batch: int = 1) -> dict[str, tuple]:
    """One convolution's three training primitives, each alone: direction -> ``((fn, args),
    FLOP)``; a transposed convolution's forward is the data gradient of its strided twin
    (which maps the transposed one's output to its input)."""
    import tensorflow as tf

    kind, h, w, cin, cout, k, s, d = conv
    oh, ow = -(-h // s), -(-w // s)  # 'same' padding
    rng = np.random.default_rng(0)

    def tensor(shape, scale=1.0):
        return tf.cast(rng.standard_normal(shape, dtype=np.float32) * scale, dtype)

    if kind == "Conv2DTranspose":  # the twin: big (h*s x w*s, cout) -> small (h x w, cin)
        big, small = tensor((batch, h * s, w * s, cout)), tensor((batch, h, w, cin))
        kshape = (k, k, cout, cin)
        ops = {  # direction: (op, its a, its b)
            "forward": ("backprop input", big, small),
            "data gradient": ("forward", big, None),
            "weight gradient": ("backprop filter", big, small),
        }
        macs = batch * h * w * k * k * cin * cout
    else:
        x, y = tensor((batch, h, w, cin)), tensor((batch, oh, ow, cout))
        kshape = (k, k, cin, cout)
        ops = {
            "forward": ("forward", x, None),
            "data gradient": ("backprop input", x, y),
            "weight gradient": ("backprop filter", x, y),
        }
        macs = batch * oh * ow * k * k * cin * cout
    kernel = tensor(kshape, 0.05)
    out = {}
    for direction, (op, a, b) in ops.items():
        # a partial, not a lambda: TensorFlow counts traces per function and warns of
        # "retracing" when one lambda is traced for many shapes
        fn = tf.function(functools.partial(_conv_primitive, op, s, d, kshape), autograph=False)
        out[direction] = ((fn, (a, b if b is not None else a[:1, :1, :1, :1], kernel)), 2.0 * macs)
    return out


def ceiling(name: str, shape, rounds: int, full: bool = True) -> dict:
    """Float32 and bfloat16 seconds of each convolution of the network at ``shape`` (batch 1)
    in each direction (and of :data:`CEILING_FULL` with ``full``), all timed in turn round
    after round, net of an empty compiled call timed with them (``"empty"``):
    ``{"convs": [(conv, {(dtype, direction): (seconds, FLOP)})], "full": ..., "empty": s}``."""
    convs = network_convs(name, shape)
    variants, flop = {}, {}
    keyed = [(i, c) for i, c in enumerate(convs)] + ([("full", CEILING_FULL)] if full else [])
    for i, conv in keyed:
        for dtype in ("float32", "bfloat16"):
            for direction, (fn_args, f) in conv_directions(dtype, conv).items():
                if i == 0 and direction == "data gradient":
                    continue  # the input's gradient: not part of a training step
                variants[(i, dtype, direction)], flop[(i, dtype, direction)] = fn_args, f
    variants["empty"] = _empty_call()
    t = _interleaved(variants, rounds)
    empty = t.pop("empty")  # each primitive timed alone pays a compiled call's fixed cost
    t = {k: max(v - empty, 1e-9) for k, v in t.items()}
    out = {"convs": [], "full": None, "empty": empty}
    for i, conv in keyed:
        times = {(d, r): (t[(i, d, r)], flop[(i, d, r)]) for (j, d, r) in t if j == i}
        if i == "full":
            out["full"] = (conv, times)
        else:
            out["convs"].append((conv, times))
    return out


def _ceiling_one(name: str, height: int, width: int) -> None:
    """Child of :func:`print_ceiling` (run with ``ONEDNN_VERBOSE=1``): every convolution of
    the network once in each type and direction, after a warm-up, between two marks."""
    convs = network_convs(name, (height, width, FULL[2]))
    fns = [
        fn_args
        for conv in convs
        for dtype in ("float32", "bfloat16")
        for fn_args, _ in conv_directions(dtype, conv).values()
    ]
    for fn, a in fns:
        np.asarray(fn(*a))
    print(PROFILE_MARK, flush=True)
    for fn, a in fns:
        np.asarray(fn(*a))
    print(PROFILE_MARK, flush=True)


def onednn_kernels(name: str, height: int, width: int) -> dict[str, list[float]]:
    """oneDNN's implementations of the network's convolutions (``ONEDNN_VERBOSE=1`` in a
    child process): row of :func:`primitive_kind` -> [seconds, FLOP, calls]."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    cmd = [sys.executable, __file__, "--ceiling-one", name, str(height), str(width)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        sys.exit(f"--ceiling: the oneDNN verbose run failed:\n{proc.stderr[-3000:]}")
    lines = proc.stdout.splitlines()
    start = lines.index(PROFILE_MARK)
    kinds: dict[str, list[float]] = {}
    for line in lines[start + 1 :]:
        f = line.split(",")
        if len(f) < 8 or f[:3] != ["onednn_verbose", "primitive", "exec"]:
            continue
        entry = kinds.setdefault(primitive_kind(f), [0.0, 0.0, 0])
        entry[0] += float(f[-1]) / 1e3
        entry[2] += 1
        if f[4] in ("convolution", "deconvolution"):
            entry[1] += _conv_flop(f[-2], f[4])
    return kinds


def summarise_ceiling(result: dict) -> dict:
    """Totals of :func:`ceiling`: per type and direction (seconds, FLOP), per type (the
    network's convolutions of one step), and the bfloat16 speed-up of each.

    >>> conv = ("Conv2D", 4, 4, 8, 8, 3, 1, 1)
    >>> times = {("float32", "forward"): (2.0, 10.0), ("bfloat16", "forward"): (1.0, 10.0),
    ...          ("float32", "weight gradient"): (4.0, 10.0),
    ...          ("bfloat16", "weight gradient"): (1.0, 10.0)}
    >>> s = summarise_ceiling({"convs": [(conv, times)], "full": None})
    >>> s["step"]["float32"], s["step"]["bfloat16"], s["speedup"]
    (6.0, 2.0, 3.0)
    >>> s["by_direction"]["weight gradient"]
    4.0
    """
    per = {}
    for _, times in result["convs"]:
        for (dtype, direction), (sec, flop) in times.items():
            entry = per.setdefault((dtype, direction), [0.0, 0.0])
            entry[0] += sec
            entry[1] += flop
    step = {
        dtype: sum(v[0] for (d, _), v in per.items() if d == dtype)
        for dtype in ("float32", "bfloat16")
    }
    by_direction = {
        direction: per[("float32", direction)][0] / per[("bfloat16", direction)][0]
        for (dtype, direction) in per
        if dtype == "float32" and ("bfloat16", direction) in per
    }
    return dict(
        per=per, step=step, speedup=step["float32"] / step["bfloat16"], by_direction=by_direction
    )


def print_ceiling(args) -> dict:
    """``--ceiling``: the paper Tiramisu's own convolutions at 192 x 288 (and one full-size
    one), forward, data and weight gradient, float32 and bfloat16 timed in turn in one
    process; their summed times are the fastest a step's convolutions can be here, and their
    ratio the most bfloat16 can give a step whose time they are. Then oneDNN's kernels."""
    from climnb.models.precision import cpu_bf16_flags

    flags = cpu_bf16_flags()
    if not flags:
        sys.exit("--ceiling: this CPU has no native bfloat16 (AVX512_BF16 / AMX)")
    h, w = 192, 288
    print(
        f"# the ceiling: paper Tiramisu's convolutions at {h}x{w}, batch 1, float32 and "
        f"bfloat16 in turn; load {os.getloadavg()[0]:.1f}; medians of {args.steps} rounds; "
        f"CPU bfloat16: {', '.join(sorted(flags))}"
    )
    result = ceiling("tiramisu", (h, w, FULL[2]), args.steps, full=not args.no_full)
    s = summarise_ceiling(result)
    print(
        f"{'direction':16} {'fp32 ms':>8} {'GFLOP/s':>8} {'bf16 ms':>8} {'GFLOP/s':>8} "
        f"{'bf16/fp32':>9}"
    )
    for direction in DIRECTIONS:
        f32, b16 = s["per"][("float32", direction)], s["per"][("bfloat16", direction)]
        print(
            f"{direction:16} {f32[0] * 1e3:8.1f} {f32[1] / f32[0] / 1e9:8.1f} "
            f"{b16[0] * 1e3:8.1f} {b16[1] / b16[0] / 1e9:8.1f} {f32[0] / b16[0]:8.2f}x"
        )
    f32, b16 = s["step"]["float32"], s["step"]["bfloat16"]
    print(f"(each net of a compiled call's fixed cost, {result['empty'] * 1e6:.0f} us a call)")
    print(
        f"{'a step (all)':16} {f32 * 1e3:8.1f} {'':8} {b16 * 1e3:8.1f} {'':8} "
        f"{s['speedup']:8.2f}x  <- the ceiling of a step's bf16 / fp32 (goal 3.0x: "
        f"{'reachable' if s['speedup'] >= 3.0 else 'not reachable here'})"
    )
    groups: dict[str, list[float]] = {}
    for conv, times in result["convs"]:
        kind, *_, k, stride, _ = conv
        label = f"{kind} {k}x{k}" + (f" stride {stride}" if stride > 1 else "")
        g = groups.setdefault(label, [0.0, 0.0])
        g[0] += sum(v[0] for (d, _), v in times.items() if d == "float32")
        g[1] += sum(v[0] for (d, _), v in times.items() if d == "bfloat16")
    for label, (a, b) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        print(f"  {label:24} fp32 {a * 1e3:7.1f} ms, bf16 {b * 1e3:7.1f} ms: {a / b:5.2f}x")
    if result["full"] is not None:
        conv, times = result["full"]
        _, hh, ww, cin, cout, k, *_ = conv
        cells = []
        for direction in DIRECTIONS:
            a, flop = times[("float32", direction)]
            b, _ = times[("bfloat16", direction)]
            cells.append(
                f"{direction} {flop / a / 1e9:.0f} -> {flop / b / 1e9:.0f} GFLOP/s ({a / b:.2f}x)"
            )
        print(f"  full size, {k}x{k} {cin}->{cout} maps at {hh}x{ww}: " + "; ".join(cells))
    kinds = onednn_kernels("tiramisu", h, w)
    print("  oneDNN's kernels (ONEDNN_VERBOSE=1, one call each, a child process):")
    for kind, (sec, flop, calls) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        if not kind.startswith(("convol", "deconv")):
            continue
        print(f"    {kind:58} {calls:4d} calls {sec * 1e3:8.1f} ms {flop / sec / 1e9:7.1f} GFLOP/s")
    amx = any("amx" in k for k in kinds)
    print(f"    AMX kernels: {'yes' if amx else 'none'}")
    print(f"# load at the end {os.getloadavg()[0]:.1f}")
    return s


# --- the toy step's fixed cost ----------------------------------------------------------------


def step_parts(name: str, shape, preset: str, batch: int, precision: str) -> dict[str, tuple]:
    """A training step and its parts, each compiled alone, as ``(fn, args)``: the whole step;
    forward, loss and gradients without the update (``gradients``); the optimiser's update
    alone with fixed gradients (``update``); the forward pass alone (``forward``)."""
    import tensorflow as tf

    from climnb.models import build_model
    from climnb.models.losses import WeightedCrossEntropy
    from climnb.train.optim import OptimizerConfig, make_optimizer

    model = build_model(name, shape, preset=preset, mixed_precision=precision)
    step, x, y = training_step(model, batch)
    loss_fn = WeightedCrossEntropy()
    variables = model.trainable_variables
    optimizer = make_optimizer(OptimizerConfig(larc=True, gradient_lag=True))
    optimizer.build(variables)
    rng = np.random.default_rng(1)
    grads = [tf.constant(rng.standard_normal(v.shape).astype(np.float32) * 1e-3) for v in variables]

    def gradients(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss + tf.add_n([tf.reduce_sum(g[..., :1]) for g in tape.gradient(loss, variables)])

    def update(*grads):
        optimizer.apply(list(grads), variables)
        return optimizer.iterations

    return {
        "step": (step, (x, y)),
        "gradients": (tf.function(gradients, autograph=False), (x, y)),
        "update": (tf.function(update, autograph=False), tuple(grads)),
        "forward": (
            tf.function(lambda x: model(x, training=False)[0, 0, 0, 0], autograph=False),
            (x,),
        ),
    }


def print_overhead(args) -> None:
    """``--overhead``: the toy step's fixed cost. Steps of 1, 4 and 16 samples (the time at
    0 samples, a straight line's intercept, is what does not grow with the batch), the step's
    parts alone and an empty compiled call, float32 and bfloat16, all timed in turn."""
    from climnb.models.precision import cpu_bf16_flags

    shape, preset, _ = KNOB_CASES["toy"]
    precisions = ["float32", "mixed_bfloat16"] if cpu_bf16_flags() else ["float32"]
    batches = (1, 4, 16)
    print(
        f"# the toy step's fixed cost: load {os.getloadavg()[0]:.1f}; medians of {args.steps} "
        "rounds, all timed in turn"
    )
    for name in _names(args):
        variants = {"empty": _empty_call()}
        for precision in precisions:
            for b in batches:
                for part, fn_args in step_parts(name, shape, preset, b, precision).items():
                    if part == "step" or b == 4:
                        variants[(precision, part, b)] = fn_args
        t = _interleaved(variants, args.steps)
        n_vars = len(variants[(precisions[0], "update", 4)][1])
        print(
            f"\n## {name}, {preset} preset at {shape[0]}x{shape[1]}; {n_vars} trainable variables"
        )
        print(f"  an empty compiled call: {t['empty'] * 1e3:.2f} ms")
        for precision in precisions:
            steps = [t[(precision, "step", b)] for b in batches]
            slope, intercept = np.polyfit(batches, steps, 1)
            cells = ", ".join(f"{b}: {s * 1e3:.1f}" for b, s in zip(batches, steps, strict=True))
            print(
                f"  {precision:15} ms a step by samples {cells}; a line through them: "
                f"{intercept * 1e3:.1f} ms + {slope * 1e3:.1f} ms a sample, so at 4 samples "
                f"{100 * intercept / t[(precision, 'step', 4)]:.0f} % is fixed cost"
            )
            parts = ", ".join(
                f"{part} {t[(precision, part, 4)] * 1e3:.1f} ms"
                for part in ("gradients", "update", "forward")
            )
            print(f"  {'':15} at 4 samples, alone: {parts}")
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


#: Levers read when TensorFlow starts (``--levers``): a fresh process each, label -> environment
ISA_LEVERS = {
    "oneDNN's own ISA choice": {},
    "ONEDNN_MAX_CPU_ISA=AVX512_CORE_AMX": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"},
}


def _lever_one(name: str, case: str, precision: str, rounds: int) -> None:
    """Child of :func:`print_levers`: the step's median seconds in this process's setting."""
    shape, preset, batch = KNOB_CASES[case]
    step = _variant(name, shape, preset, batch, precision=precision)
    t = _interleaved({"x": step}, rounds)["x"]
    print(json.dumps(dict(seconds=t, load=os.getloadavg()[0])), flush=True)


def _lever_xla(name: str, case: str, rounds: int) -> None:
    """Child of :func:`print_levers`: each precision's step with and without XLA, timed in turn
    in this process; median seconds as JSON. A child, so that XLA's own start-up lines (its C++
    logging, which TensorFlow's log level does not reach) stay out of the benchmark's output."""
    from climnb.models.precision import cpu_bf16_flags

    shape, preset, batch = KNOB_CASES[case]
    precisions = ["float32", "mixed_bfloat16"] if cpu_bf16_flags() else ["float32"]
    variants = {
        f"{precision} {jit}": _variant(name, shape, preset, batch, precision=precision, jit=jit)
        for precision in precisions
        for jit in (False, True)
    }
    t0 = time.perf_counter()
    seconds = _interleaved(variants, rounds)
    print(json.dumps(dict(seconds=seconds, total=time.perf_counter() - t0)), flush=True)


def _child(args: list[str], env: dict | None = None) -> dict | None:
    """Run this file with ``args``; its last stdout line as JSON (stderr only on failure)."""
    cmd = [sys.executable, __file__, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if proc.returncode:
        print(f"  {' '.join(args[:3])}: failed: {proc.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_levers(args) -> None:
    """``--levers``: what each lever does to a training step, against the step without it in
    the same run (float32 and mixed_bfloat16): XLA (``jit_compile=True``) timed in turn with
    the default step in one process; the oneDNN ISA in fresh processes, alternated."""
    from climnb.models.precision import cpu_bf16_flags

    precisions = ["float32", "mixed_bfloat16"] if cpu_bf16_flags() else ["float32"]
    rounds = args.steps
    print(f"# levers: load {os.getloadavg()[0]:.1f}; medians of {rounds} steps")
    for case in args.knob_cases.split(","):
        shape, preset, batch = KNOB_CASES[case]
        for name in _names(args):
            print(f"\n## {name}, {preset} preset at {shape[0]}x{shape[1]}, batch {batch}")
            r = None
            if "xla" in args.lever_list:
                r = _child(["--lever-xla", name, case, "--steps", str(rounds)])
            if r is not None:
                t = r["seconds"]
                print(f"  XLA (in turn, one process; {r['total']:.0f} s with compilation):")
                for precision in precisions:
                    off, on = t[f"{precision} False"], t[f"{precision} True"]
                    print(
                        f"  {precision:15} XLA off {off * 1e3:8.1f} ms/step, on "
                        f"{on * 1e3:8.1f}: {off / on:5.2f}x"
                    )
                if len(precisions) == 2:
                    print(
                        "  bf16 / fp32 steps per second: without XLA "
                        f"{t['float32 False'] / t['mixed_bfloat16 False']:.2f}x, with "
                        f"{t['float32 True'] / t['mixed_bfloat16 True']:.2f}x"
                    )
            if "isa" not in args.lever_list:
                continue
            print("  oneDNN's ISA (a fresh process each, alternated twice):")
            for precision in precisions:
                out: dict[str, list[float]] = {k: [] for k in ISA_LEVERS}
                for _ in range(2):
                    for label, env in ISA_LEVERS.items():
                        argv = ["--lever-one", name, case, precision, "--steps", str(rounds)]
                        r = _child(argv, env)
                        if r is not None:
                            out[label].append(r["seconds"])
                base = float(np.median(out[next(iter(ISA_LEVERS))] or [np.nan]))
                for label, times in out.items():
                    m = float(np.median(times or [np.nan]))
                    print(
                        f"  {precision:15} {label:36} {m * 1e3:8.1f} ms/step "
                        f"({', '.join(f'{x * 1e3:.0f}' for x in times)}) {base / m:5.2f}x"
                    )
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


#: Dense-block convolutions of the paper Tiramisu at 192 x 288 (``--wgrad``): (h, w, in, out,
#: k); the first four are 56 % of its convolution FLOP (the up path's last block, the first
#: block and the up path's second-last), then one of each coarser resolution.
WGRAD_SHAPES = (
    (192, 288, 224, 32, 5),
    (192, 288, 192, 32, 5),
    (192, 288, 96, 32, 5),
    (96, 144, 288, 32, 5),
    (48, 72, 416, 32, 5),
    (24, 36, 608, 32, 5),
    (12, 18, 512, 32, 5),
)


def wgrad_methods():
    """Ways to compute a 'same', stride-1 convolution's weight gradient ``(k, k, in, out)``
    from its input ``x`` (NHWC) and output gradient ``dy`` with TensorFlow's ops."""
    import tensorflow as tf

    def stock(x, dy, k):  # oneDNN's weight-gradient primitive (what tf.nn.conv2d's gradient is)
        shape = [k, k, x.shape[-1], dy.shape[-1]]
        return tf.raw_ops.Conv2DBackpropFilter(
            input=x, filter_sizes=shape, out_backprop=dy, strides=[1] * 4, padding="SAME"
        )

    def taps(x, dy, k):  # per kernel tap: shifted input (NHW x in)^T @ dy (NHW x out)
        _, h, w, cin = x.shape
        p = k // 2
        xp = tf.pad(x, [[0, 0], [p, p], [p, p], [0, 0]])
        d = tf.reshape(dy, [-1, dy.shape[-1]])
        out = [
            tf.matmul(tf.reshape(xp[:, i : i + h, j : j + w], [-1, cin]), d, transpose_a=True)
            for i in range(k)
            for j in range(k)
        ]
        return tf.reshape(tf.stack(out), [k, k, cin, -1])

    def dy_columns(x, dy, k):  # im2col of the narrow dy (k*k*out x NHW) @ x (NHW x in)
        _, h, w, cin = x.shape
        cout, p = dy.shape[-1], k // 2
        dyt = tf.pad(tf.transpose(dy, [3, 0, 1, 2]), [[0, 0], [0, 0], [p, p], [p, p]])
        cols = tf.stack(
            [
                dyt[:, :, k - 1 - i : k - 1 - i + h, k - 1 - j : k - 1 - j + w]
                for i in range(k)
                for j in range(k)
            ]
        )
        g = tf.matmul(tf.reshape(cols, [k * k * cout, -1]), tf.reshape(x, [-1, cin]))
        return tf.transpose(tf.reshape(g, [k, k, cout, cin]), [0, 1, 3, 2])

    def x_columns(x, dy, k):  # im2col of x (extract_patches: NHW x k*k*in)^T @ dy
        patches = tf.image.extract_patches(x, [1, k, k, 1], [1] * 4, [1] * 4, "SAME")
        d = tf.reshape(dy, [-1, dy.shape[-1]])
        g = tf.matmul(tf.reshape(patches, [-1, k * k * x.shape[-1]]), d, transpose_a=True)
        return tf.reshape(g, [k, k, x.shape[-1], -1])

    def nchw(x, dy, k):  # the stock op on NCHW activations
        shape = [k, k, x.shape[-1], dy.shape[-1]]
        return tf.raw_ops.Conv2DBackpropFilter(
            input=tf.transpose(x, [0, 3, 1, 2]),
            filter_sizes=shape,
            out_backprop=tf.transpose(dy, [0, 3, 1, 2]),
            strides=[1] * 4,
            padding="SAME",
            data_format="NCHW",
        )

    return {
        "stock": stock,
        "taps": taps,
        "dy-im2col": dy_columns,
        "x-im2col": x_columns,
        "NCHW": nchw,
    }


def _wgrad_sum(method, k: int, x, dy):
    """The sum of a weight gradient by ``method`` (:func:`wgrad_methods`), as float32."""
    import tensorflow as tf

    return tf.reduce_sum(tf.cast(method(x, dy, k), tf.float32))


def print_wgrad(args) -> None:
    """``--wgrad``: bfloat16 weight gradients of the paper Tiramisu's convolutions, oneDNN's
    primitive against matmul formulations (and the same shape's forward convolution), timed
    in turn; GFLOP/s and the largest error against the float32 gradient, over its largest
    entry."""
    import tensorflow as tf

    methods = wgrad_methods()
    rounds = args.steps
    print(f"# weight gradients, bfloat16: load {os.getloadavg()[0]:.1f}; medians of {rounds}")
    print("shape (h x w, in -> out, k x k), batch | forward | " + " | ".join(methods))
    rng = np.random.default_rng(0)
    for h, w, cin, cout, k in WGRAD_SHAPES:
        x32 = tf.constant(rng.standard_normal((args.batch, h, w, cin), dtype=np.float32))
        dy32 = tf.constant(rng.standard_normal((args.batch, h, w, cout), dtype=np.float32))
        x, dy = tf.cast(x32, tf.bfloat16), tf.cast(dy32, tf.bfloat16)
        exact = methods["stock"](tf.cast(x, tf.float32), tf.cast(dy, tf.float32), k).numpy()
        kernel = tf.cast(tf.fill([k, k, cin, cout], 0.01), tf.bfloat16)
        variants = {
            "forward": (
                tf.function(functools.partial(_conv_primitive, "forward", 1, 1, None)),
                (x, None, kernel),
            )
        }
        for name, fn in methods.items():
            # the timed function returns one float32 number (the sum): no large fetch; a
            # partial, not a lambda, so that TensorFlow does not warn of retracing
            variants[name] = (tf.function(functools.partial(_wgrad_sum, fn, k)), (x, dy))
        t = _interleaved(variants, rounds)
        flop = 2.0 * args.batch * h * w * k * k * cin * cout
        cells = [f"{flop / t['forward'] / 1e9:6.0f}"]
        for name in methods:
            err = np.abs(tf.cast(methods[name](x, dy, k), tf.float32).numpy() - exact).max()
            cells.append(f"{flop / t[name] / 1e9:6.0f} ({err / np.abs(exact).max():.0e})")
        print(f"{h}x{w}, {cin} -> {cout}, {k}x{k}, batch {args.batch} | " + " | ".join(cells))
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


def print_knobs(args) -> None:
    """``--knobs``: each knob against the default, timed in turn in the same run."""
    rounds = args.steps
    print(f"# knobs: load {os.getloadavg()[0]:.1f}; medians of {rounds} interleaved steps")
    gemm_before = gemm_rate("float32")
    print(f"# FP32 GEMM before: {gemm_before / 1e9:.1f} GFLOP/s")
    for name in _names(args):
        for case in args.knob_cases.split(","):
            shape, preset, batch = KNOB_CASES[case]
            print(f"\n## {name}, {preset} preset at {shape[0]}x{shape[1]}, batch {batch}")
            rows = knobs_in_process(name, case, rounds)
            ref = rows[0][1]
            now = rows[1][1]
            for label, t, rate in rows:
                print(
                    f"  {label:36} {t * 1e3:8.1f} ms/sample {rate / 1e9:7.1f} GFLOP/s "
                    f"{ref / t:5.2f}x before {now / t:5.2f}x now"
                )
            if args.knob_processes:
                procs = knobs_in_processes(name, case, rounds)
                base = next(iter(procs.values()), None)
                for label, t in procs.items():
                    print(f"  {label:36} {t * 1e3:8.1f} ms/sample  {base / t:5.2f}x default")
    print("\n## layout of one convolution (forward)")
    rows = layout_micro(rounds)
    for label, t, rate in rows:
        nhwc = rows[0][1] / t
        print(f"  {label:6} {t * 1e3:8.1f} ms {rate / 1e9:7.1f} GFLOP/s {nhwc:5.2f}x NHWC")
    gemm_after = gemm_rate("float32")
    print(f"# FP32 GEMM after: {gemm_after / 1e9:.1f} GFLOP/s; load {os.getloadavg()[0]:.1f}")


def _row(r: dict, best: float, fp32: dict | None = None) -> str:
    line = (
        f"{r['name']:9} {r['precision']:15} {r.get('bn', 'fused'):6} {_ms(r['fwd']):>8} "
        f"{r['train'] * 1e3:9.0f} "
        f"{r['rate'] / 1e9:7.1f} {r['gemm'] / 1e9:7.1f} {100 * r['rate'] / r['gemm']:6.1f} "
        f"{100 * r['rate'] / best:6.1f} {r['load']:5.1f}"
    )
    if fp32 is not None:
        line += f"  {r['rate'] / fp32['rate']:.2f}x float32 before"
    return line


def _fp32_of(rows: list[dict], name: str) -> dict | None:
    """The row of the baseline: float32 with Keras' batch norm (before), else float32."""
    base = [q for q in rows if q["name"] == name and q["precision"] == "float32"]
    return next((q for q in base if q.get("bn") == "keras"), base[0] if base else None)


def _variants(precisions: list[str]) -> list[tuple[str, bool]]:
    """(precision, fused batch norm) of the timed rows: float32 before (Keras' batch norm)
    and now, then the other precisions now."""
    return [("float32", False)] + [(p, True) for p in precisions]


def _ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.0f}"


HEADER = (
    f"{'model':9} {'precision':15} {'BN':6} {'fwd ms':>8} {'train ms':>9} {'GFLOP/s':>7} "
    f"{'GEMM':>7} {'% GEMM':>6} {'% best':>6} {'load':>5}"
)


def print_profiles(args) -> None:
    """``--profile HxW``: oneDNN's share of a paper-network training step, by primitive."""
    from climnb.models.precision import cpu_bf16_flags

    h, w = (int(v) for v in args.profile.lower().split("x"))
    precisions = choose_precisions(args.precision, gpus=0, cpu_bf16=bool(cpu_bf16_flags()))
    gemm = gemm_rate("float32")
    print(f"# FP32 GEMM {gemm / 1e9:.1f} GFLOP/s (load {os.getloadavg()[0]:.1f})")
    for name in _names(args):
        for precision in precisions:
            p = profile(name, precision, h, w)
            inside = sum(t for t, _ in p["kinds"].values())
            print(
                f"\n## {name} (paper preset) at {h}x{w}, batch 1, {precision}: step "
                f"{p['wall']:.2f} s with one inter-op thread, {100 * inside / p['wall']:.0f} % of "
                "it in oneDNN primitives"
            )
            for kind, (t, flop) in sorted(p["kinds"].items(), key=lambda kv: -kv[1][0]):
                rate = f"{flop / t / 1e9:7.1f} GFLOP/s" if flop else ""
                print(f"  {kind:44} {t:7.3f} s {100 * t / p['wall']:5.1f} %  {rate}")
            print(
                f"  {'outside oneDNN':32} {p['wall'] - inside:7.3f} s "
                f"{100 * (p['wall'] - inside) / p['wall']:5.1f} %"
            )
            print(
                f"  primitives created during the step (cache misses): {p['created'][0]}, "
                f"{p['created'][1]:.3f} s"
            )
            traced = p["traced"]
            parts = {
                part: sum(t for t, _ in kinds.values()) for part, kinds in traced["ops"].items()
            }
            total = sum(parts.values())
            print(
                f"  a second step under tf.profiler: {traced['wall']:.2f} s, its ops "
                f"{total:.2f} s; by part (op types by time):"
            )
            for part, t in sorted(parts.items(), key=lambda kv: -kv[1]):
                kinds = sorted(traced["ops"][part].items(), key=lambda kv: -kv[1][0])
                names = ", ".join(f"{k} {v[0]:.3f}" for k, v in kinds[: args.profile_ops])
                print(f"    {part:36} {t:7.3f} s {100 * t / total:5.1f} %  ({names})")


def _names(args) -> list[str]:
    names = args.models.split(",")
    unknown = set(names) - set(NAMES)
    if unknown:
        sys.exit(f"--models: unknown {', '.join(sorted(unknown))}; choose from {', '.join(NAMES)}")
    return names


def choose_precisions(choice: str, *, gpus: int, cpu_bf16: bool) -> list[str]:
    """The precisions to time: float32 first (the baseline of the speed-ups).

    >>> choose_precisions("auto", gpus=0, cpu_bf16=True)
    ['float32', 'mixed_bfloat16']
    >>> choose_precisions("auto", gpus=0, cpu_bf16=False)
    ['float32']
    >>> choose_precisions("auto", gpus=1, cpu_bf16=False)
    ['float32', 'mixed_float16', 'mixed_bfloat16']
    >>> choose_precisions("mixed_float16", gpus=0, cpu_bf16=True)
    ['float32', 'mixed_float16']
    """
    if choice == "auto":
        if gpus:
            return ["float32", "mixed_float16", "mixed_bfloat16"]
        return ["float32", "mixed_bfloat16"] if cpu_bf16 else ["float32"]
    if choice == "all":
        return ["float32", "mixed_float16", "mixed_bfloat16"]
    return ["float32"] if choice == "float32" else ["float32", choice]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=at_least(1), default=4, help="toy batch size (default 4)")
    parser.add_argument("--steps", type=at_least(1), default=5, help="timed toy steps (default 5)")
    parser.add_argument(
        "--precision",
        choices=["auto", "float32", "mixed_bfloat16", "mixed_float16", "all"],
        default="auto",
        help="compute precision of the timed steps; auto (default): float32 and mixed_bfloat16 "
        "on a CPU with native bfloat16, float32, mixed_float16 and mixed_bfloat16 on a GPU",
    )
    parser.add_argument("--full", action="store_true", help="one full-size step of each network")
    parser.add_argument(
        "--profile",
        metavar="HxW",
        help="instead: oneDNN's time by primitive for one paper-network step at HxW (e.g. 192x288)",
    )
    parser.add_argument(
        "--profile-ops", type=int, default=4, help="--profile: op types named per step part"
    )
    parser.add_argument("--models", default="tiramisu,deeplab", help="networks to time")
    parser.add_argument(
        "--knobs",
        action="store_true",
        help="instead: fused batch norm, XLA, bfloat16, batch size, layout, and with "
        "--knob-processes oneDNN on/off and threads, each against the default in the same run",
    )
    parser.add_argument(
        "--speedup",
        action="store_true",
        help="instead: float32 vs mixed_bfloat16 steps per second (--knob-cases, --models) "
        "with the network's own convolutions timed in the same rounds (the ceiling), each "
        "figure next to its goal",
    )
    parser.add_argument(
        "--levers",
        action="store_true",
        help="instead: XLA (jit_compile) and ONEDNN_MAX_CPU_ISA=AVX512_CORE_AMX, each against "
        "the step without it in the same run, float32 and mixed_bfloat16 (--knob-cases, "
        "--models, --steps)",
    )
    parser.add_argument(
        "--wgrad",
        action="store_true",
        help="instead: bfloat16 weight gradients of the paper Tiramisu's convolutions, oneDNN's "
        "against matmul formulations (--batch, --steps rounds)",
    )
    parser.add_argument(
        "--knob-cases", default="toy,paper", help="toy (96x144) and/or paper (192x288)"
    )
    parser.add_argument(
        "--knob-processes",
        action="store_true",
        help="with --knobs: also oneDNN off and thread counts (a fresh process each, slower)",
    )
    parser.add_argument("--knob-one", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument(
        "--lever-list", default="xla,isa", help="--levers: which (xla, isa; default both)"
    )
    parser.add_argument("--lever-one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--lever-xla", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # name precision width bn
    parser.add_argument("--profile-one", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="instead: the paper Tiramisu's own convolutions at 192x288 (and one full-size), "
        "each direction, float32 and bfloat16 in turn: the most bfloat16 can give a step here",
    )
    parser.add_argument(
        "--no-full", action="store_true", help="--ceiling: without the full-size convolution"
    )
    parser.add_argument("--ceiling-one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--overhead",
        action="store_true",
        help="instead: the toy step's fixed cost (steps of 1, 4, 16 samples, the step's parts "
        "alone, an empty compiled call; --models, --steps)",
    )
    args = parser.parse_args(argv)
    if args.ceiling_one:
        name, h, w = args.ceiling_one
        return _ceiling_one(name, int(h), int(w))
    if args.ceiling:
        return print_ceiling(args)
    if args.overhead:
        return print_overhead(args)
    if args.one:
        return _one(args.one[0], args.one[1], int(args.one[2]), args.one[3])
    if args.profile_one:
        name, precision, h, w = args.profile_one
        return _profile_one(name, precision, int(h), int(w))
    if args.profile:
        return print_profiles(args)
    if args.knob_one:
        name, case, intra, inter = args.knob_one
        return _knob_one(name, case, int(intra), int(inter), args.steps)
    if args.knobs:
        return print_knobs(args)
    if args.lever_one:
        return _lever_one(*args.lever_one, args.steps)
    if args.lever_xla:
        return _lever_xla(*args.lever_xla, args.steps)
    if args.levers:
        return print_levers(args)
    if args.speedup:
        return print_speedup(args)
    if args.wgrad:
        return print_wgrad(args)

    import tensorflow as tf

    from climnb.models import PAPER_FIGURES, build_model, count_flops, count_params
    from climnb.models.precision import cpu_bf16_flags

    gpus = _gpu_setup(tf)
    precisions = choose_precisions(args.precision, gpus=len(gpus), cpu_bf16=bool(cpu_bf16_flags()))
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    print(
        f"# climnb model benchmark: {os.cpu_count()} CPUs, TF intra-op threads {threads}, "
        f"{len(gpus)} GPU(s); precisions {', '.join(precisions)}"
    )
    size = _gemm_size(gpus)
    n = size["n"]
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        cc = ".".join(map(str, details.get("compute_capability", ("?",))))
        print(f"\n## Peak of this GPU ({details.get('device_name', '?')}, compute capability {cc})")
        tf.config.experimental.enable_tensor_float_32_execution(False)
        strict = gemm_rate("float32", repeats=5, **size)
        tf.config.experimental.enable_tensor_float_32_execution(True)
        print(f"measured FP32 GEMM {n}^3 without TF32: {strict / 1e12:.1f} TFLOP/s")
        fp32_gemm = gemm_rate("float32", repeats=5, **size)
        print(
            f"measured FP32 GEMM {n}^3 with TF32 (TensorFlow's default, also for the float32 "
            f"networks below): {fp32_gemm / 1e12:.1f} TFLOP/s"
        )
        for precision in precisions[1:]:
            rate = gemm_rate(GEMM_DTYPE[precision], repeats=5, **size)
            print(f"measured {GEMM_DTYPE[precision]} GEMM {n}^3: {rate / 1e12:.1f} TFLOP/s")
    else:
        info = lscpu()
        peak = theoretical_peak(info)
        print(f"\n## Peak of this CPU ({info.get('Model name', '?')})")
        print("\n".join(describe_peak(peak)))
        # a peak at a clock the cores may exceed (boost) is not a ceiling: said with the share
        at = " at the nominal clock" if "nominal" in peak["clock"] else ""
        fp32_gemm = gemm_rate("float32", repeats=5, **size)
        print(
            f"measured FP32 GEMM {n}^3 (TF/oneDNN, best of 5): {fp32_gemm / 1e9:.1f} GFLOP/s"
            f"{share_of(fp32_gemm, peak['fp32'], 'theoretical' + at)} "
            f"(load {os.getloadavg()[0]:.1f})"
        )
        if "mixed_bfloat16" in precisions:
            bf16_gemm = gemm_rate("bfloat16", repeats=5, **size)
            print(
                f"measured BF16 GEMM {n}^3: {bf16_gemm / 1e9:.1f} GFLOP/s = "
                f"{bf16_gemm / fp32_gemm:.1f}x FP32 GEMM"
                + share_of(bf16_gemm, peak["bf16"], "theoretical BF16" + at)
            )

    print("\n## Paper presets at 768x1152x16, counted (never run)")
    print(
        f"{'model':10} {'params':>9} {'paper':>7} {'ratio':>6} {'TFLOP/sample':>13} "
        f"{'paper':>6} {'ratio':>6} {'exact':>6}"
    )
    for name in NAMES:
        model = build_model(name, FULL)
        params, train = count_params(model), count_flops(model).training
        exact = count_flops(model, "exact").training
        ref = PAPER_FIGURES[name]
        print(
            f"{name:10} {params / 1e6:8.2f}M {ref['params'] / 1e6:6.1f}M "
            f"{params / ref['params']:6.3f} {train / 1e12:13.3f} {ref['train_flop'] / 1e12:6.1f} "
            f"{train / ref['train_flop']:6.3f} {exact / 1e12:6.2f}"
        )

    if not gpus:
        bandwidth = copy_bandwidth()
        print(
            "\n## Roofline (float32, training, batch 1): copy bandwidth "
            f"{bandwidth / 1e9:.1f} GB/s "
            f"(numpy, 512 MiB, 2 threads; load {os.getloadavg()[0]:.1f}); machine balance "
            f"{fp32_gemm / bandwidth:.0f} FLOP/B at the measured GEMM rate"
            + (f", {peak['fp32'] / bandwidth:.0f} at the theoretical peak" if peak["fp32"] else "")
        )
        for name in _names(args):
            print_roofline(name, FULL, "paper", fp32_gemm, bandwidth)
            print_roofline(name, TOY, "toy", fp32_gemm, bandwidth)
            if peak["fp32"]:
                bound = roofline(build_model(name, FULL), peak["fp32"], bandwidth)["share"]
                print(f"  (paper at the theoretical peak: at most {100 * bound:.0f} % of it)")

    print(
        f"\n## Toy presets at 96x144x16, batch {args.batch}, median of {args.steps} steps; "
        "GEMM: float32 GEMM GFLOP/s just before and after (mean); % best: of the best FP32 "
        "GEMM of the run"
    )
    rows = []
    for name in _names(args):
        for precision, fused in _variants(precisions):
            rows.append(measure(name, TOY, "toy", precision, args.batch, args.steps, fused=fused))
    best = max([fp32_gemm] + [g for r in rows for g in r["gemm_pair"]])
    print(HEADER)
    for r in rows:
        fp32 = _fp32_of(rows, r["name"])
        print(_row(r, best, fp32 if r is not fp32 else None))

    if not args.full:
        return
    print(
        "\n## Paper networks at 768x1152x16, batch 1, one training step after a warm-up step, "
        "each in a fresh process"
    )
    print(HEADER + "  peak RSS")
    full = []
    for name in _names(args):
        for precision, fused in _variants(precisions):
            for part in (1, 2, 4):  # the whole grid, else its left half, else a quarter
                r = full_step(name, precision, FULL[1] // part, "fused" if fused else "keras")
                if r is not None:
                    break
            if r is None:
                print(f"{name:9} {precision:15} not run: even a quarter of the grid does not fit")
                continue
            note = (
                f" (768x{FULL[1] // part}: 1/{part} of the grid; all of it would leave "
                "< 1.5 GiB free)"
                if part > 1
                else ""
            )
            full.append(r)
            best = max([best, *r["gemm_pair"]])
            fp32 = _fp32_of(full, name)
            print(
                _row(r, best, fp32 if fp32 is not r else None)
                + f"  {r['rss'] / GIB:.1f} GiB"
                + note
            )
    print(f"best FP32 GEMM of the run: {best / 1e9:.1f} GFLOP/s")
    if gpus:
        for name in _names(args):
            print(f"paper, {name}: {PAPER_PER_GPU[name]}")


if __name__ == "__main__":
    main()
