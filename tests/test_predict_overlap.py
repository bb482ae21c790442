"""Inference at the hardware's rate: the network's call normalises the raw fields itself (the
same values as :meth:`Bundle.normalise`), the range check counts before it sorts, and the
command reads and writes the batches around the one the network runs, with at most
``--workers`` forward passes and one batch more in flight.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from climnb.bundle import BundleError, save_bundle
from climnb.cli import main
from climnb.io.channels import CHANNEL_NAMES

keras = pytest.importorskip(
    "keras", reason="inference needs TensorFlow/Keras: pip install 'climnb[train]'"
)


@pytest.fixture(scope="module")
def identity(tmp_path_factory):
    """A bundle whose network returns its (normalised) input; one constant channel."""
    inp = keras.Input((None, None, 16))
    model = keras.Model(inp, keras.layers.Identity()(inp))
    lo = np.linspace(-3.0, 90000.0, 16)
    hi = lo * 1.5 + 7.0
    hi[3] = lo[3]  # a constant channel normalises to 0
    path = tmp_path_factory.mktemp("bundles") / "identity"
    return save_bundle(
        model,
        path,
        channels=CHANNEL_NAMES,
        minval=lo,
        maxval=hi,
        name="identity",
        preset="test",
        stride=8,
    )


def test_the_networks_call_normalises_as_the_bundle_does(identity):
    from climnb.bundle import load_bundle
    from climnb.inference.predict import _forward_function

    bundle = load_bundle(identity)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 16, 32, 16)) * 1e5).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 1e38]
    network = _forward_function(bundle.model(16, 32), *bundle.normalisation())
    got = network(x).numpy()
    want = bundle.normalise(x.copy())
    assert got.dtype == want.dtype == np.float32
    assert got.tobytes() == want.tobytes()  # the same float32 values, bit for bit
    assert x[0, 0, 0, 0] != x[0, 0, 0, 0]  # the input is not changed (its NaN is still there)


def _bundle(lo, hi):
    return type(
        "B", (), {"channels": ("PSL",), "minval": np.array([lo]), "maxval": np.array([hi])}
    )()


@pytest.mark.parametrize(
    ("values", "refused"),
    [
        ([0.0, 0.0, 25.0, 25.0], False),  # median 12.5: inside 0..10 widened by 10
        ([0.0, 0.0, 30.0, 32.0], False),  # half the values above 20, the median 15 inside
        ([0.0, 19.0, 22.0, 100.0], True),  # half above, and the median 20.5 too
        ([0.0, 10.0, 30.0, 32.0], False),  # median 20: at the edge, accepted
        ([-30.0, -25.0, -9.0, 0.0], True),  # median -17 below -10
        ([np.nan, np.inf, 30.0, 32.0, 33.0], True),  # infinities and NaN are not values
        ([-np.inf, -np.inf, np.inf, 5.0], False),  # the one finite value is inside
    ],
)
def test_range_check_decides_on_the_median_of_the_finite_values(values, refused):
    from climnb.inference.predict import check_ranges

    median = float(np.median(np.asarray(values)[np.isfinite(values)]))
    assert refused == (not -10.0 <= median <= 20.0)  # the rule, worked out here
    x = np.asarray(values, np.float32).reshape(1, -1, 1, 1)
    if refused:
        with pytest.raises(BundleError, match=f"median {median:.4g}"):
            check_ranges(_bundle(0.0, 10.0), x, where="x")
    else:
        check_ranges(_bundle(0.0, 10.0), x, where="x")


def test_network_slots_bound_the_forward_passes(identity, monkeypatch):
    """Three threads, one slot: one forward pass at a time; the others wait holding their
    batch."""
    import climnb.inference.predict as predict_module
    from climnb.bundle import load_bundle
    from climnb.inference.predict import network_slots, predict_batch

    running, most, lock = [0], [0], threading.Lock()
    real = predict_module._forward_function

    def slow(*args):
        network = real(*args)

        def call(x):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            try:
                return network(x)
            finally:
                with lock:
                    running[0] -= 1

        return call

    monkeypatch.setattr(predict_module, "_forward_function", slow)
    bundle = load_bundle(identity)
    x = np.ones((1, 16, 32, 16), np.float32)
    with network_slots(1):
        threads = [
            threading.Thread(target=predict_batch, args=(bundle, x), kwargs={"check_range": False})
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert most[0] == 1
    with pytest.raises(ValueError, match="at least 1"), network_slots(0):
        pass


@pytest.mark.parametrize("workers", [1, 2])
def test_command_reads_the_next_batch_while_the_network_runs(
    identity, toy, tmp_path, monkeypatch, workers
):
    """With --workers W, a batch enters predict while the network runs another (the read and
    the checks overlap it), never more than W forward passes run at once, and the classes are
    those of one batch at a time."""
    import xarray as xr

    import climnb.inference.predict as predict_module

    ds, _ = toy
    src = tmp_path / "in.nc"
    ds.isel(time=slice(0, 6)).drop_vars("truth").to_netcdf(src)
    events, lock = [], threading.Lock()
    real_batch, real_forward = predict_module.predict_batch, predict_module._forward_function

    def batch(*args, **kwargs):
        with lock:
            events.append(("batch", time.perf_counter()))
        return real_batch(*args, **kwargs)

    def forward(*args):
        network = real_forward(*args)

        def call(x):
            t = time.perf_counter()
            time.sleep(0.1)  # a network slow beside the reading, as at full size
            y = network(x)
            with lock:
                events.append(("network", t, time.perf_counter()))
            return y

        return call

    monkeypatch.setattr(predict_module, "predict_batch", batch)
    monkeypatch.setattr(predict_module, "_forward_function", forward)
    out = tmp_path / "out.zarr"
    argv = ["predict", "--model", str(identity), str(src), "--out", str(out), "--no-progress"]
    assert main([*argv, "--batch-size", "1", "--workers", str(workers), "--no-range-check"]) == 0
    calls = sorted(e[1:] for e in events if e[0] == "network")
    entered = [e[1] for e in events if e[0] == "batch"]
    assert len(calls) == len(entered) == 6
    # a batch entered while a forward pass ran: the next batch was read meanwhile
    assert any(a < t < b for a, b in calls for t in entered)
    # never more than --workers forward passes at once
    edges = sorted([(a, 1) for a, _ in calls] + [(b, -1) for _, b in calls])
    assert max(np.cumsum([d for _, d in edges])) <= workers
    with xr.open_zarr(out, consolidated=False) as saved:
        assert saved.prediction.shape == (6, *ds.TMQ.shape[1:])


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_tiramisu_probabilities_are_those_of_the_numpy_normalised_pass(toy, tmp_path, precision):
    """The toy Tiramisu's probabilities, bit for bit, whether NumPy normalises the batch
    before the network's graph (as inference did) or the graph does it itself."""
    import tensorflow as tf

    from climnb.bundle import load_bundle
    from climnb.inference.predict import _is_probability, _softmax, predict_batch
    from climnb.models import build_model

    ds, _ = toy
    x = np.stack([ds[c].values[:2, 32:64, :48] for c in CHANNEL_NAMES], axis=-1)
    x = x.astype(np.float32)
    x[0, 3, 5, 2] = np.nan
    mp = precision if precision != "float32" else False
    model = build_model("tiramisu", x.shape[1:], preset="toy", mixed_precision=mp)
    lo, hi = np.nanmin(x.reshape(-1, 16), 0), np.nanmax(x.reshape(-1, 16), 0)
    path = save_bundle(
        model,
        tmp_path / "b",
        channels=CHANNEL_NAMES,
        minval=lo,
        maxval=hi,
        name="tiramisu",
        preset="toy",
    )
    bundle = load_bundle(path)
    graph = tf.function(lambda v: bundle.model()(v, training=False))
    want = np.asarray(graph(bundle.normalise(x.copy())), np.float32)
    got = predict_batch(bundle, x, probabilities=True, check_range=False)
    want = want if _is_probability(want) else _softmax(want)
    assert got.tobytes() == want.tobytes()
