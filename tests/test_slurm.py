# ruff: noqa: F811  (pytest fixtures are arguments named like the imported fixture)
"""climnb on a real Slurm cluster (one node on localhost, see slurm_cluster.py): engines inside an
allocation, engines submitted as a batch job, the README's batch recipe, cancellation."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from _training import TINY, write_toy_samples
from slurm_cluster import slurm  # noqa: F401  (the session fixture, used by name)

from climnb.runtime.cluster import (
    Engines,
    EnginesLostError,
    EngineStartError,
    slurm_mpi_args,
)
from climnb.runtime.launch import srun_mpi_types

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PY = sys.executable


def _env(slurm, **extra):
    """This process's environment outside any allocation, with the test cluster's SLURM_CONF."""
    env = {k: v for k, v in slurm.env.items() if not k.startswith("SLURM_")}
    env.update(SLURM_CONF=str(slurm.conf), IPP_NONINTERACTIVE="1", **extra)
    env["PATH"] = f"{os.path.dirname(PY)}{os.pathsep}{env['PATH']}"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


@pytest.fixture(autouse=True)
def no_jobs_left(slurm):
    """Every test starts and ends with an empty queue."""
    slurm.wait_idle()
    yield
    slurm.wait_idle(timeout=90)


def test_cluster_runs_tasks_and_offers_pmix(slurm):
    assert slurm.run("srun", "-n", "2", "hostname").split() == [slurm.node] * 2
    srun_mpi_types.cache_clear()
    assert "pmix" in srun_mpi_types(slurm.run("which", "srun").strip())
    assert slurm_mpi_args() == ["--mpi=pmix"]
    assert slurm_mpi_args(["--mpi=pmi2"]) == []  # the user's choice stays
    assert slurm_mpi_args(env={"SLURM_MPI_TYPE": "pmi2"}) == []


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """Toy sample files (train/validation/test) with their stats (here: a subprocess writing
    them cost 3 s more for Python and its imports)."""
    return write_toy_samples(tmp_path_factory.mktemp("samples"), n_time=10, seed=21)


INSIDE_ALLOCATION = """
import ast, json, os, signal, sys, time
from climnb.runtime.cluster import Engines, EnginesLostError
from climnb.train.config import TrainConfig
from climnb.train.engines import train_on_engines

config = TrainConfig(data_dir=sys.argv[1], out_dir=sys.argv[2], batch_size=2, max_steps=2,
                     split_method="random",
                     threads=1, model_overrides=ast.literal_eval(sys.argv[3]))
t0 = time.perf_counter()
with Engines() as engines:
    ready = time.perf_counter() - t0
    table = engines.init_horovod()
    horovod = time.perf_counter() - t0 - ready
    results = train_on_engines(engines, config)
    trained = time.perf_counter() - t0 - ready - horovod
    out = {"launcher": engines.launcher, "n": engines.n, "ready_s": ready,
           "horovod_s": horovod, "train_s": trained,
           "repr": repr(engines), "table": table.to_dict("list"),
           "steps": [len(r.history) for r in results],
           "checksums": [r.checksum for r in results]}
    engines.check()  # all there
    os.kill(int(table["pid"][1]), signal.SIGKILL)  # an engine dies
    killed = time.monotonic()
    while time.monotonic() - killed < 60:
        try:
            engines.check()
        except EnginesLostError as err:
            out["lost_s"], out["lost"] = time.monotonic() - killed, str(err)
            break
        time.sleep(0.2)
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.mark.horovod
@pytest.mark.mpi
def test_engines_inside_salloc_train_with_horovod_over_mpi(slurm, samples, tmp_path):
    script = [PY, "-c", INSIDE_ALLOCATION, str(samples), str(tmp_path / "run"), repr(TINY)]
    out = subprocess.run(
        ["salloc", "-n", "2", *script],
        env=_env(slurm),
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = re.search(r"^RESULT (.*)$", out.stdout, re.M)
    assert out.returncode == 0 and found, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(found.group(1))
    print(
        f"srun engines ready after {result['ready_s']:.1f} s, Horovod {result['horovod_s']:.1f} s,"
        f" training {result['train_s']:.1f} s"
    )
    assert result["launcher"] == "slurm" and result["n"] == 2
    table = result["table"]
    assert table["rank"] == [0, 1] and table["size"] == [2, 2]
    assert table["controller"] == ["mpi", "mpi"], "Horovod over MPI"
    assert table["engine_id"] == [0, 1], "engine id is the MPI rank"
    assert result["steps"] == [2, 2]
    assert result["checksums"][0] == result["checksums"][1], "weights differ between ranks"
    assert "allocation" in result["repr"] and "2 of 2 running" in result["repr"]
    print(f"killed engine reported after {result['lost_s']:.1f} s: {result['lost']}")
    assert result["lost_s"] < 30 and "slurm engines are gone" in result["lost"]


ONE_CPU = """
from climnb.runtime.cluster import Engines
with Engines(n=1, launcher="slurm") as engines:
    print("RESULT", engines.threads, len(engines.client.ids))
"""


def test_an_engine_in_an_allocation_smaller_than_the_node_fits_it(slurm):
    """salloc -n 1 on a 2-CPU node sets only SLURM_JOB_CPUS_PER_NODE=1: the engine's threads
    come from it, not from the node's cores (srun refused 2 CPUs a task: "More processors
    requested than permitted")."""
    assert slurm.cpus >= 2, "the node has more CPUs than the allocation"
    out = subprocess.run(
        ["salloc", "-n", "1", PY, "-c", ONE_CPU],
        env=_env(slurm),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "RESULT 1 1" in out.stdout, (
        out.stdout[-2000:] + out.stderr[-3000:]
    )


def test_a_bare_srun_without_pmix_fails_in_mpi_init(slurm):
    """Why Engines passes --mpi=pmix: Debian's OpenMPI cannot initialise under srun's default."""
    code = "from mpi4py import MPI; print(MPI.COMM_WORLD.size)"
    bare = subprocess.run(
        ["srun", "-n", "2", "--mpi=none", PY, "-c", code],
        env=_env(slurm),
        capture_output=True,
        text=True,
        timeout=120,
    )
    with_pmix = subprocess.run(
        ["srun", "-n", "2", *slurm_mpi_args(), PY, "-c", code],
        env=_env(slurm),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert with_pmix.returncode == 0 and with_pmix.stdout.split() == ["2", "2"], with_pmix.stderr
    assert bare.returncode != 0 or bare.stdout.split() != ["2", "2"]


@pytest.mark.horovod
@pytest.mark.mpi
def test_srun_stage_and_train_as_the_readme_says(slurm, samples, tmp_path):
    """The README's batch recipe (stage, then train from the staged copies), with
    SLURM_MPI_TYPE=pmix exported as it says."""
    env = _env(slurm, SLURM_MPI_TYPE="pmix")
    stage = subprocess.run(
        ["srun", "-n", "2", PY, "-m", "climnb", "stage", "--source", str(samples),
         "--dest", str(tmp_path / "node{node}"), "--ranks-per-node", "1",
         "--samples-per-rank", "4", "--report", str(tmp_path / "stage.json")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert stage.returncode == 0, stage.stdout[-2000:] + stage.stderr[-3000:]
    report = json.loads((tmp_path / "stage.json").read_text())
    assert report, "rank 0 wrote the staging report"
    for node in (0, 1):
        assert len(list((tmp_path / f"node{node}").rglob("data-*.h5"))) >= 1
    logs = tmp_path / "logs"
    logs.mkdir()
    train = subprocess.run(
        ["srun", "-n", "2", f"--output={logs}/rank%t.out", PY, "-m", "climnb", "train",
         "--data", str(samples), "--staged", str(tmp_path / "node{node}"),
         "--ranks-per-node", "1", "--out", str(tmp_path / "run"), "--max-steps", "2",
         "--batch-size", "2", "--threads", "1", "--config", str(_small_config(tmp_path))],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    text = "\n".join(p.read_text() for p in sorted(logs.glob("rank*.out")))
    assert train.returncode == 0, text[-3000:] + train.stderr[-3000:]
    ranks = dict(re.findall(r"rank (\d) of 2: 2 steps, loss \S+, weights (\w+)", text))
    assert set(ranks) == {"0", "1"}, text
    assert ranks["0"] == ranks["1"], "weights differ between ranks"


def _small_config(folder):
    path = folder / "small.json"
    path.write_text(json.dumps({"model_overrides": TINY}))
    return path


# --- engines submitted from outside any allocation --------------------------------------------


def _squeue(slurm, job_id, fmt):
    return slurm.run("squeue", "-h", "-j", str(job_id), "-o", fmt, check=False).strip()


@pytest.mark.mpi
@pytest.mark.horovod
def test_submitted_engines_register_run_horovod_and_a_killed_engine_shows_within_seconds(slurm):
    """Engines submitted as a batch job register, run Horovod over MPI, report an engine that
    dies within seconds; leaving the with block (stop()) returns once the job is gone.
    (One submitted job for what were two tests, each starting its own.)"""
    engines = Engines(
        n=2,
        launcher="sbatch",
        walltime="10",
        partition="debug",
        account="climate",
        sbatch_options=("--comment=climnb test",),
        timeout=120,
    )
    t0 = time.perf_counter()
    with engines:
        print(f"submitted engines ready after {time.perf_counter() - t0:.1f} s")
        job = engines.job_id
        assert slurm.jobs() == [job]
        assert _squeue(slurm, job, "%j|%P|%a|%l|%k|%D|%C|%T") == (
            f"{engines.job_name}|debug|climate|10:00|climnb test|1|2|RUNNING"
        )
        table = engines.init_horovod()
        assert list(table["rank"]) == [0, 1] and set(table.controller) == {"mpi"}
        assert list(table.engine_id) == [0, 1]
        assert engines.check_allreduce() == [3.0, 3.0]
        engines.check()  # all there: no error
        text = repr(engines)
        assert f"job={job}" in text and "2 of 2 running" in text and "partition=debug" in text
        assert f"<td style='text-align:left'>{job} (" in engines._repr_html_()
        assert not list(Path.cwd().glob("*.sbatch")), "no batch script left in the cwd"

        pids = engines.view.apply(os.getpid)
        os.kill(pids[1], signal.SIGKILL)
        killed = time.monotonic()
        with pytest.raises(EnginesLostError, match=rf"engines are gone.*job {job}"):
            while time.monotonic() - killed < 60:
                engines.check()
                time.sleep(0.2)
        print(f"killed engine reported after {time.monotonic() - killed:.1f} s")
        assert time.monotonic() - killed < 30
    assert slurm.jobs() == [], "stop() (leaving the with block) returns once the job is gone"
    assert "0 of 2 running" in repr(engines)
    engines.stop()  # idempotent


def test_a_pending_job_times_out_naming_the_job_and_its_reason(slurm):
    engines = Engines(n=2, launcher="sbatch", partition="closed", pending_timeout=2)
    with pytest.raises(EngineStartError, match=r"job (\d+) .*still pending after 2 s") as err:
        engines.start()
    assert "reason: PartitionDown" in str(err.value)
    assert engines.job_id in str(err.value)
    assert slurm.jobs() == [], "the pending job was cancelled"


def test_a_job_sbatch_refuses_says_why(slurm):
    with pytest.raises(EngineStartError, match="nosuchpartition|invalid partition"):
        Engines(n=2, launcher="sbatch", partition="nosuchpartition", timeout=20).start()

    # the controller, stopped while still starting, leaves nothing behind (it once left its
    # schedulers running): they carry this test's name in their environment
    def ours(proc):
        try:
            here = "sbatch_refuses" in proc.environ().get("PYTEST_CURRENT_TEST", "")
            return here and "ipyparallel" in " ".join(proc.cmdline())
        except psutil.Error:
            return False

    left = [p.pid for p in psutil.process_iter() if ours(p)]
    assert not left, f"controller processes left running: {left}"


KERNEL = """
import json, os, time
from climnb.runtime.cluster import Engines
engines = Engines(n=2, launcher="sbatch", walltime="5").start()
pids = engines.view.apply(os.getpid)
print(json.dumps({"job": engines.job_id, "pids": pids}), flush=True)
time.sleep(600)
"""


def test_a_killed_kernel_cancels_the_submitted_job(slurm, tmp_path):
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        kernel = subprocess.Popen(
            [PY, "-c", KERNEL],
            env=_env(slurm),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    try:
        line = kernel.stdout.readline()
        assert line, f"the kernel stand-in failed: {err.read_text()[-3000:]}"
        started = json.loads(line)
        job, engine_pids = started["job"], started["pids"]
        assert slurm.jobs() == [job]
    finally:
        os.killpg(kernel.pid, signal.SIGKILL)  # no clean-up runs in the kernel
        kernel.wait()
    deadline = time.monotonic() + 60
    while slurm.jobs() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.jobs() == [], slurm.run("squeue")
    assert "cancelled Slurm jobs named climnb-engines-" in err.read_text()
    assert not [pid for pid in engine_pids if psutil.pid_exists(pid)], "engines still running"


# --- dask-jobqueue workers as Slurm jobs ------------------------------------------------------

LABEL_ON_SLURM = """
import json, os
import numpy as np
from climnb.labels import compute as compute_locally, label_dataset
from climnb.runtime.scheduler import compute, dask_client
from climnb.data.synthetic import make_dataset

if __name__ == "__main__":
    ds, _ = make_dataset(n_time=4, seed=3)
    labels, events = label_dataset(ds)
    with dask_client("slurm", jobs=1, cores=1, processes=1, memory="2GB", walltime="00:10:00",
                     queue="debug", account="climate", job_extra_directives=["--comment=dask"],
                     scheduler_options={"dashboard_address": ":0"}) as client:
        client.wait_for_workers(1, timeout=120)
        workers = client.scheduler_info()["workers"]
        job_ids = list(client.run(lambda: os.environ.get("SLURM_JOB_ID")).values())
        lab, table = compute(client, labels, events, progress=False)
        script = client.cluster.job_script()
    ref_labels, ref_events = compute_locally(*label_dataset(ds), scheduler="sync")
    print("RESULT " + json.dumps({
        "n_workers": len(workers), "job_ids": job_ids,
        "same_labels": bool(np.array_equal(lab, ref_labels)),
        "events": len(table), "ref_events": len(ref_events), "script": script}), flush=True)
"""


def test_dask_jobqueue_workers_run_as_slurm_jobs_and_label(slurm, tmp_path):
    script = tmp_path / "label_on_slurm.py"
    script.write_text(LABEL_ON_SLURM)
    out = subprocess.run(
        [PY, str(script)], env=_env(slurm), capture_output=True, text=True, timeout=400,
        cwd=tmp_path,
    )  # fmt: skip
    found = re.search(r"^RESULT (.*)$", out.stdout, re.M)
    assert out.returncode == 0 and found, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(found.group(1))
    assert result["n_workers"] == 1 and result["same_labels"]
    assert result["job_ids"][0] and result["job_ids"][0].isdigit(), "the worker runs in a job"
    assert result["events"] == result["ref_events"] > 0
    for directive in ("-p debug", "-A climate", "-t 00:10:00", "--comment=dask"):
        assert f"#SBATCH {directive}" in result["script"], result["script"]
    deadline = time.monotonic() + 30
    while slurm.jobs() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.jobs() == [], "closing the client cancelled the worker job"
