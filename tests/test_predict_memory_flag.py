"""``climnb predict --memory GB``: the budget, less the runtime and shared by ``--workers``,
decides how each batch runs; the output is the same as without it.

``test_predict_tiles.py`` shows the planner's tiles give the whole step's output; here the
flag is followed through the command line: a budget that only tiles fit writes the same
probabilities as no budget, and one that no tile fits (for the whole command, or once
shared by two workers) is refused before anything is written.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from climnb.bundle import save_bundle
from climnb.cli import main
from climnb.commands.predict import RUNTIME_GB
from climnb.data.synthetic import make_dataset
from climnb.inference.predict import forward_bytes
from climnb.io.channels import CHANNEL_NAMES

keras = pytest.importorskip(
    "keras", reason="inference needs TensorFlow/Keras: pip install 'climnb[train]'"
)

SHAPE = (96, 144)
#: the toy Tiramisu with three blocks: stride 4 and a receptive radius of 23 columns, so its
#: narrowest tile (4 columns and a 24-column halo either side) is 52 of the 144 columns
SMALL = {"blocks": (1, 1, 1)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from climnb.bundle import load_bundle
    from climnb.models import build_model

    root = tmp_path_factory.mktemp("predict-memory")
    ds, _ = make_dataset(n_time=2, seed=0)
    src = root / "in.nc"
    ds.to_netcdf(src)
    flat = ds[list(CHANNEL_NAMES)].to_array("channel").values.reshape(len(CHANNEL_NAMES), -1)
    model = build_model("tiramisu", (*SHAPE, 16), preset="toy", mixed_precision="float32", **SMALL)
    path = save_bundle(
        model,
        root / "bundle",
        channels=CHANNEL_NAMES,
        minval=flat.min(1),
        maxval=flat.max(1),
        name="tiramisu",
        preset="toy",
        overrides={"blocks": [1, 1, 1]},
    )
    whole_gb = forward_bytes(load_bundle(path), *SHAPE) / 1e9  # one step's pass, one worker
    return {"root": root, "src": src, "bundle": path, "whole_gb": whole_gb}


def _predict(setup, name, *flags):
    out = setup["root"] / name
    argv = ["predict", "--model", str(setup["bundle"]), str(setup["src"]), "--out", str(out)]
    return main([*argv, "--probabilities", "--batch-size", "2", "--no-progress", *flags]), out


def test_a_budget_that_only_tiles_fit_writes_what_no_budget_writes(setup, capsys):
    code, whole = _predict(setup, "whole.nc", "--workers", "1")
    assert code == 0
    # 0.6 of one step's pass a worker: neither the batch of 2 nor one whole step fits
    budget = RUNTIME_GB + 0.6 * setup["whole_gb"]
    code, tiled = _predict(setup, "tiled.nc", "--workers", "1", "--memory", f"{budget:.9f}")
    assert code == 0, capsys.readouterr().err
    with xr.open_dataset(whole) as a, xr.open_dataset(tiled) as b:
        assert a.probability.std() > 0  # not a constant field, where any tiling agrees
        np.testing.assert_array_equal(b.probability.values, a.probability.values)  # float32
        np.testing.assert_array_equal(b.prediction.values, a.prediction.values)


def test_a_budget_no_tile_fits_is_refused_and_workers_share_it(setup, capsys):
    capsys.readouterr()
    # the same budget, shared by two workers: 0.3 of a step each, under the narrowest tile's
    # 52 / 144 of it
    budget = RUNTIME_GB + 0.6 * setup["whole_gb"]
    code, out = _predict(setup, "two.nc", "--workers", "2", "--memory", f"{budget:.9f}")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "too little" in err and "raise --memory or lower --workers" in err
    assert not out.exists()
    code, out = _predict(setup, "tiny.nc", "--workers", "1", "--memory", f"{RUNTIME_GB + 1e-6}")
    err = capsys.readouterr().err
    assert code == 2 and "narrowest tile" in err and not out.exists()
