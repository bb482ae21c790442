"""The command line, called through ``climnb.cli.main`` on temporary files."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from climnb.cli import build_parser, main
from climnb.data.synthetic import make_dataset


def test_synth_writes_what_make_dataset_makes(tmp_path, capsys):
    out = tmp_path / "toy" / "fields.nc"
    assert main(["synth", "--out", str(out), "--n-time", "3", "--seed", "4"]) == 0
    assert "3 time steps of 96 x 144 x 16 channels" in capsys.readouterr().out
    expected, events = make_dataset(n_time=3, seed=4)
    with xr.open_dataset(out) as ds:
        xr.testing.assert_allclose(ds.load(), expected)
        assert ds.truth.dtype == np.uint8
    written = pd.read_csv(out.with_suffix(".events.csv"), parse_dates=["time"])
    np.testing.assert_allclose(written.lat, events.lat)
    assert not list(tmp_path.rglob("*.tmp")), "no temporary files left behind"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shape", "96by144"], "--shape must look like 96x144"),
        (["--shape", "8x8"], "too small"),
        (["--n-time", "0"], "n_time must be a positive integer"),
    ],
    ids=["shape-syntax", "tiny", "no-time"],
)
def test_synth_bad_arguments(tmp_path, capsys, argv, message):
    out = tmp_path / "x.nc"
    assert main(["synth", "--out", str(out), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_every_subcommand_has_help_and_example():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert {"synth", "versions"} <= set(subparsers.choices)
    for name, sub in subparsers.choices.items():
        assert sub.description, name
        assert sub.epilog.startswith("example:\n  "), name
        assert re.search(rf"climnb {name}\b", sub.epilog), name
