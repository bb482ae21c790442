"""Without Horovod (a hub environment that lacks it) training says so in one line and runs in
one process: the same loop, one rank, the same model bundle. Several processes are refused in
one line.

Horovod is hidden from the processes started here by a ``sitecustomize`` on ``PYTHONPATH``
that sets ``sys.modules["horovod"] = None``: ``import horovod`` then fails as if it were not
installed, in the command and in every engine it starts (they inherit ``PYTHONPATH``).
tests/test_install.py runs notebook 04 from the wheel in a virtualenv that has no Horovod.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _training import config_file, toy_settings, write_toy_samples

from climnb.bundle import load_bundle

ROOT = Path(__file__).resolve().parents[1]
HIDE_HOROVOD = "import sys\nsys.modules['horovod'] = None  # import horovod: ModuleNotFoundError\n"
LAUNCHER_VARIABLES = ("OMPI_", "PMI_", "PMIX_", "SLURM_", "HOROVOD_")


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """20 toy sample files (16 train, 2 validation, 2 test) and their stats."""
    return write_toy_samples(tmp_path_factory.mktemp("samples"), n_time=20, seed=5)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """This environment, with Horovod hidden and no launcher's variables."""
    folder = tmp_path_factory.mktemp("hide-horovod")
    (folder / "sitecustomize.py").write_text(HIDE_HOROVOD)
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARIABLES)}
    env.update(PYTHONPATH=f"{folder}{os.pathsep}{ROOT}", TF_CPP_MIN_LOG_LEVEL="2")
    return env


def _python(code: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_horovod_is_hidden(env):
    code = (
        "import importlib.util\nprint(importlib.util.find_spec('horovod'))\n"
        "import horovod.tensorflow"
    )
    done = _python(code, env)
    assert done.stdout.strip() == "None"
    assert "ModuleNotFoundError" in done.stderr


def _train(samples, out: Path, env: dict, *flags: str) -> subprocess.CompletedProcess:
    config = config_file(out.parent / "config.json", batch_size=2, epochs=1, threads=1)
    argv = ["train", "--data", str(samples), "--out", str(out), "--config", str(config), *flags]
    return subprocess.run(
        [sys.executable, "-m", "climnb", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.mark.slow
def test_climnb_train_says_so_and_trains_in_one_process(samples, tmp_path, env):
    out = tmp_path / "run"
    done = _train(samples, out, env, "--max-steps", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if "Horovod" in line]
    assert len(said) == 1, said
    assert said[0].startswith(
        "climnb train: Horovod is not installed: training in one process without it "
        "(to train on several: "
    )
    assert "pip install --no-build-isolation --no-deps horovod==0.28.1" in said[0]
    assert "rank 0 of 1: 2 steps" in done.stdout
    bundle = load_bundle(out / "model")
    assert bundle.name == "tiramisu"


def test_several_launched_processes_are_refused_in_one_line(samples, tmp_path, env):
    out = tmp_path / "run"
    as_rank = {**env, "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"}
    done = _train(samples, out, as_rank, "--max-steps", "2")
    assert done.returncode == 2
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith(
        "climnb train: error: Horovod is not installed, so the 2 processes the launcher "
        "started cannot train together: run one process"
    ), done.stderr[-2000:]
    assert not (out / "model").exists()


def test_engines_without_horovod_default_to_one_and_refuse_several(monkeypatch):
    """Decided before any engine starts: the default count, the summary, the refusal."""
    import climnb.runtime.cluster as cluster

    real = cluster.has_module
    monkeypatch.setattr(cluster, "has_module", lambda name: name != "horovod" and real(name))
    monkeypatch.delenv("MEM_LIMIT", raising=False)
    alone = cluster.Engines(launcher="local", threads_per_engine=1)
    assert (alone.n, alone.horovod) == (1, False)
    assert alone.summary.startswith("1 local engine, 1 thread(s) each; Horovod is not installed")
    two = cluster.Engines(n=2, launcher="local")
    with pytest.raises(cluster.EngineStartError, match="so 2 engines cannot train together"):
        two.init_horovod()
    monkeypatch.setattr(cluster, "has_module", real)
    assert cluster.Engines(launcher="local").summary.count(";") == 0  # with Horovod: one fact


ENGINES = """
import json, sys
from climnb.runtime.cluster import EngineStartError, Engines
from climnb.train.config import TrainConfig
from climnb.train.engines import train_on_engines

config = TrainConfig(**json.loads(sys.argv[1]))
try:  # decided before any engine is used: none is started for it
    Engines(n=2, launcher="local").init_horovod()
except EngineStartError as err:
    print("REFUSED", err)
with Engines(launcher="local", timeout=300) as engines:
    print("SUMMARY", engines.summary)
    table = engines.init_horovod()
    print("TABLE", table[["rank", "size", "controller"]].values.tolist())
    [result] = train_on_engines(engines, config)
    print("RESULT", result.rank, result.size, len(result.history))
"""


@pytest.mark.slow
@pytest.mark.notebook  # an ipyparallel engine is an IPython kernel
def test_one_engine_trains_alone(samples, tmp_path, env):
    """What notebook 04 does: the default is one engine, which says so and trains alone;
    two engines are refused, since without Horovod they could not train together."""
    out = tmp_path / "run"
    settings = toy_settings(data_dir=str(samples), out_dir=str(out), max_steps=2)
    done = _python(ENGINES, env, json.dumps(settings))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines()}
    assert lines["REFUSED"].startswith(
        "Horovod is not installed, so 2 engines cannot train together: start one engine (n=1)"
    )
    assert lines["SUMMARY"].startswith("1 local engine, ")
    assert (
        "; Horovod is not installed: training in one process without it (to train on "
        in (lines["SUMMARY"])
    )
    assert lines["TABLE"] == "[[0, 1, 'none']]"
    assert lines["RESULT"] == "0 1 2"
    assert load_bundle(out / "model").name == "tiramisu"
