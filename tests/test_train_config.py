"""``climnb train`` settings: typed flags > ``--config`` file > TrainConfig defaults; bad values
end in one line naming the problem, exit status 2, before any work."""

from __future__ import annotations

import json

import pytest

from climnb.cli import build_parser, main
from climnb.commands.train import config_from_args
from climnb.train.config import TrainConfig

FILE = {"epochs": 30, "batch_size": 8, "optimizer": {"learning_rate": 0.01, "larc": True}}


def _config(argv):
    return config_from_args(build_parser().parse_args(["train", *argv]))


@pytest.fixture
def run_json(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(FILE))
    return path


def test_config_file_wins_over_defaults(run_json):
    config = _config(["--data", "d", "--config", str(run_json)])
    assert (config.epochs, config.batch_size) == (30, 8)
    assert config.optimizer.learning_rate == 0.01 and config.optimizer.larc
    # what neither the file nor a flag names comes from the dataclass
    default = TrainConfig(data_dir="d")
    assert config.seed == default.seed and config.out_dir == default.out_dir
    assert config.optimizer.warmup_steps == default.optimizer.warmup_steps


def test_typed_flags_win_over_the_file(run_json):
    config = _config(
        ["--data", "d", "--config", str(run_json), "--epochs", "3", "--lr", "0.5", "--no-resume"]
    )
    assert (config.epochs, config.batch_size, config.resume) == (3, 8, False)
    assert config.optimizer.learning_rate == 0.5 and config.optimizer.larc  # the rest kept


def test_precision_flag_and_file(tmp_path):
    from climnb.models.precision import resolve_precision

    assert _config(["--data", "d"]).precision == resolve_precision("auto")[0]  # the hardware's
    assert _config(["--data", "d", "--precision", "float32"]).precision == "float32"
    assert _config(["--data", "d", "--precision", "mixed_bfloat16"]).precision == "mixed_bfloat16"
    path = tmp_path / "bf16.json"
    path.write_text(json.dumps({"precision": "mixed_bfloat16"}))
    assert _config(["--data", "d", "--config", str(path)]).precision == "mixed_bfloat16"
    assert _config(["--data", "d", "--config", str(path), "--precision", "float32"]).precision == (
        "float32"
    )


def test_no_file_no_flags_gives_the_dataclass_defaults():
    assert _config(["--data", "d"]) == TrainConfig(data_dir="d")


def test_a_file_asking_30_epochs_batch_8_lr_001_trains_with_them(tmp_path, run_json):
    """Real training from the command line; the bundle records the settings it used."""
    from _training import TINY, write_toy_samples

    data = write_toy_samples(tmp_path / "samples", n_time=12, seed=3)
    settings = {**FILE, "model_overrides": TINY}
    settings["split_method"] = "random"  # 10 training files of 12: one batch of 8
    run_json.write_text(json.dumps(settings))
    out = tmp_path / "run"
    argv = ["train", "--config", str(run_json), "--data", str(data), "--out", str(out)]
    assert main([*argv, "--max-steps", "1", "--threads", "1"]) == 0
    used = json.loads((out / "model" / "climnb.json").read_text())["extra"]["train_config"]
    assert (used["epochs"], used["batch_size"], used["max_steps"]) == (30, 8, 1)
    assert used["optimizer"]["learning_rate"] == 0.01
    history = (out / "history.csv").read_text().splitlines()
    assert len(history) == 2  # header and the one step asked for


BAD = {
    "batch-size 0": (["--batch-size", "0"], "batch_size must be at least 1"),
    "epochs -1": (["--epochs", "-1"], "epochs must be at least 1"),
    "max-steps 0": (["--max-steps", "0"], "max_steps must be at least 1"),
    "threads 0": (["--threads", "0"], "threads must be at least 1"),
    "keep 0": (["--keep-checkpoints", "0"], "keep_checkpoints must be at least 1"),
    "checkpoint-every 0": (["--checkpoint-every", "0"], "checkpoint_every must be at least 1"),
    "lr 0": (["--lr", "0"], "learning_rate > 0"),
    "preset": (["--preset", "huge"], "unknown preset 'huge' for tiramisu"),
    "no data": ([], "give --data"),
}


@pytest.mark.parametrize("argv, message", BAD.values(), ids=BAD.keys())
def test_bad_values_one_line_exit_2(argv, message, tmp_path, capsys):
    out = tmp_path / "run"
    data = ["--data", str(tmp_path)] if argv else []
    assert main(["train", *data, "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("climnb train: error:"), err
    assert message in err
    assert not out.exists(), "nothing written before the settings are checked"


BAD_FILES = {
    "missing": (None, "No such file"),
    "not json": ("epochs: 30", "is not valid JSON"),
    "a list": ("[1, 2]", "must hold a JSON object"),
    "unknown field": ('{"epoch": 30}', "unknown training settings ['epoch']"),
    "string epochs": ('{"epochs": "30"}', "epochs must be at least 1 (a whole number), got '30'"),
    "bad optimizer": ('{"optimizer": {"lr": 1}}', "unexpected keyword argument 'lr'"),
    "bad override": ('{"model_overrides": {"depth": 1}}', "no field(s) depth"),
}


@pytest.mark.parametrize("text, message", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_config_files_are_named(text, message, tmp_path, capsys):
    path = tmp_path / "run.json"
    if text is not None:
        path.write_text(text)
    assert main(["train", "--data", str(tmp_path), "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert str(path) in err


def test_precision_auto_is_resolved_with_its_reason(monkeypatch):
    from climnb.models import precision

    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda: ("amx_bf16",))
    monkeypatch.setattr(precision.glob, "glob", lambda pattern: [])
    c = TrainConfig(data_dir="x")
    assert (c.precision, "amx_bf16" in c.precision_reason) == ("mixed_bfloat16", True)
    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda: ())
    c = TrainConfig(data_dir="x")
    assert c.precision == "float32" and "without native bfloat16" in c.precision_reason
    assert TrainConfig(data_dir="x", precision="float32").precision_reason == "as requested"
    # a saved config (resolved) reloads as it was, whatever the machine
    assert TrainConfig.from_dict(c.to_dict()) == c


def test_augment_is_roll_or_nothing():
    assert TrainConfig(data_dir="x", augment="roll").augment == "roll"
    with pytest.raises(ValueError, match="augment"):
        TrainConfig(data_dir="x", augment="flip")
