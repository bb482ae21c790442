"""The convolution ceiling of benchmarks/bench_models.py (``--ceiling``, ``--speedup``): each
timed primitive computes what the network's training step computes for that layer."""

import numpy as np
import pytest
from _benchmarks import load_benchmark


@pytest.fixture(scope="module")
def bench_models():
    return load_benchmark("bench_models")


def _reference(conv, x, y, kernel):
    """Forward, and the input and kernel gradients for output gradient ``y``, from the
    Keras-style ops a network uses (``tf.nn.conv2d`` / ``conv2d_transpose``) under a tape."""
    import tensorflow as tf

    kind, h, w, cin, cout, k, s, d = conv
    with tf.GradientTape() as tape:
        tape.watch([x, kernel])
        if kind == "Conv2DTranspose":
            out = tf.nn.conv2d_transpose(x, kernel, [x.shape[0], h * s, w * s, cout], s, "SAME")
        else:
            out = tf.nn.conv2d(x, kernel, s, "SAME", dilations=d)
    dx, dk = tape.gradient(out, [x, kernel], output_gradients=y)
    return out, dx, dk


@pytest.mark.parametrize(
    "conv",
    [
        ("Conv2D", 8, 12, 4, 6, 3, 1, 1),
        ("Conv2D", 8, 12, 4, 6, 3, 2, 1),
        ("Conv2D", 8, 12, 4, 6, 3, 1, 2),
        ("Conv2DTranspose", 4, 6, 6, 4, 3, 2, 1),
    ],
)
def test_conv_directions_compute_the_layers_training_primitives(bench_models, conv):

    fns = bench_models.conv_directions("float32", conv, batch=2)
    (fwd, (a, b, kernel)), flop = fns["forward"]
    kind, h, w, cin, cout, k, s, d = conv
    if kind == "Conv2DTranspose":  # its input is the twin's output (small), its output big
        x, y = b, a
    else:
        x, y = a, fns["data gradient"][0][1][1]
    out, dx, dk = _reference(conv, x, y, kernel)
    assert float(fwd(a, b, kernel)) == pytest.approx(float(out[0, 0, 0, 0]), rel=1e-5)
    (dgrad, args), _ = fns["data gradient"]
    assert float(dgrad(*args)) == pytest.approx(float(dx[0, 0, 0, 0]), rel=1e-5)
    (wgrad, args), _ = fns["weight gradient"]
    assert float(wgrad(*args)) == pytest.approx(float(dk[0, 0, 0, 0]), rel=1e-5)
    oh, ow = (h * s, w * s) if kind == "Conv2DTranspose" else (-(-h // s), -(-w // s))
    pixels = h * w if kind == "Conv2DTranspose" else oh * ow
    assert flop == 2.0 * 2 * pixels * k * k * cin * cout


def test_network_convs_lists_every_convolution_with_its_input(bench_models):
    convs = bench_models.network_convs("tiramisu", (96, 144, 16), "toy")
    kinds = {c[0] for c in convs}
    assert kinds == {"Conv2D", "Conv2DTranspose"}
    assert convs[0][1:4] == (96, 144, 16)  # the stem sees the input
    assert all(len(c) == 8 and c[-1] >= 1 for c in convs)


def test_summarise_ceiling_sums_a_step(bench_models):
    conv = ("Conv2D", 4, 4, 8, 8, 3, 1, 1)
    times = {
        ("float32", "forward"): (3.0, 30.0),
        ("bfloat16", "forward"): (1.0, 30.0),
        ("float32", "weight gradient"): (1.0, 30.0),
        ("bfloat16", "weight gradient"): (1.0, 30.0),
    }
    s = bench_models.summarise_ceiling({"convs": [(conv, times), (conv, times)], "full": None})
    assert s["step"] == {"float32": 8.0, "bfloat16": 4.0}
    assert s["speedup"] == 2.0
    assert s["by_direction"] == {"forward": 3.0, "weight gradient": 1.0}
    assert np.isclose(s["per"][("bfloat16", "forward")][1], 60.0)
