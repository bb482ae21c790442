"""`climnb train --class-weighting` sets TrainConfig.class_weighting; a typed flag beats the
config file, and an unknown scheme is refused by the parser (exit status 2)."""

from __future__ import annotations

import argparse
import json

import pytest

from climnb.commands.train import add_arguments, config_from_args


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_flag_sets_the_scheme_and_beats_the_config_file(tmp_path):
    assert config_from_args(_parse(["--data", "d"])).class_weighting == "inverse_sqrt"
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"class_weighting": "inverse"}))
    assert config_from_args(_parse(["--data", "d", "--config", str(cfg)])).class_weighting == (
        "inverse"
    )
    args = _parse(["--data", "d", "--config", str(cfg), "--class-weighting", "deepcam"])
    assert config_from_args(args).class_weighting == "deepcam"


def test_an_unknown_scheme_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        _parse(["--data", "d", "--class-weighting", "sqrt"])
    assert exit_.value.code == 2
    assert "--class-weighting" in capsys.readouterr().err
