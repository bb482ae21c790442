"""Node-local staging: the plan, read-once over MPI, manifest and resume, ipyparallel engines."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from climnb.cli import main
from climnb.io.samples import write_samples
from climnb.io.stats import compute_stats, write_stats
from climnb.staging import (
    StagingConfig,
    _read_shared,
    plan_staging,
    stage,
    stage_on_engines,
    staged_files,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shared(toy, tmp_path_factory):
    """A 'shared file system': 8 toy sample files in train/ and stats.h5 beside it."""
    root = tmp_path_factory.mktemp("shared")
    files = write_samples(toy[0], toy[0].truth, root / "train")
    write_stats(compute_stats(files), root / "stats.h5")
    return root / "train"


class CountingRead:
    """The shared-FS read, instrumented: counts the reads of each file."""

    def __init__(self, fail_after: int | None = None):
        self.reads: Counter = Counter()
        self.fail_after = fail_after

    def __call__(self, path, out):
        if self.fail_after is not None and sum(self.reads.values()) >= self.fail_after:
            raise KeyboardInterrupt("job killed")
        self.reads[Path(path).name] += 1
        _read_shared(path, out)


def config(shared, dest, **kw):
    kw = {"n_nodes": 2, "ranks_per_node": 2, "samples_per_rank": 5, "seed": 3, **kw}
    return StagingConfig(source=str(shared), dest=str(dest / "node{node}"), **kw)


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_nodes(cfg, shared):
    """Every node holds what its ranks need, byte-identical to the source, as the manifest says."""
    names = sorted(p.name for p in shared.glob("data-*.h5"))
    plan = plan_staging(
        names,
        [1] * len(names),
        n_nodes=cfg.n_nodes,
        ranks_per_node=cfg.ranks_per_node,
        samples_per_rank=cfg.samples_per_rank,
        seed=cfg.seed,
    )
    needed = set()
    for node in range(cfg.n_nodes):
        d = cfg.node_dir(node)
        manifest = json.loads((d / "manifest.json").read_text())
        want = {plan.names[i] for i in plan.needs(node)} | {"stats.h5"}
        assert set(manifest["files"]) == want
        assert {p.name for p in d.glob("*.h5")} == want
        for name, entry in manifest["files"].items():
            src = shared / name if name != "stats.h5" else shared.parent / name
            assert entry["sha256"] == sha(d / name) == sha(src)
        for r in range(cfg.ranks_per_node):
            got = [p.name for p in staged_files(d, r)]
            assert got == [plan.names[i] for i in plan.rank_files[node][r]]
            assert len(got) == cfg.samples_per_rank
        needed |= want
    return needed


def test_plan_draws_with_replacement_per_rank():
    names = [f"f{i}" for i in range(4)]
    plan = plan_staging(names, [10] * 4, n_nodes=3, ranks_per_node=2, samples_per_rank=50, seed=0)
    assert plan == plan_staging(
        names, [10] * 4, n_nodes=3, ranks_per_node=2, samples_per_rank=50, seed=0
    )
    lists = [r for node in plan.rank_files for r in node]
    assert len(lists) == 6 and all(len(r) == 50 for r in lists)
    assert all(len(set(r)) < len(r) for r in lists)  # repeats: drawn with replacement
    assert len({r for r in lists}) == 6  # each rank its own shuffled draw
    with pytest.raises(ValueError, match="samples_per_rank"):
        plan_staging(names, [1] * 4, n_nodes=1, ranks_per_node=1, samples_per_rank=0)


def test_each_file_read_at_most_once(shared, tmp_path):
    cfg = config(shared, tmp_path)
    read = CountingRead()
    report = stage(cfg, read=read)
    needed = check_nodes(cfg, shared)
    assert set(read.reads) == needed and max(read.reads.values()) == 1
    assert report.reads == dict(read.reads) and report.max_reads_per_file == 1
    assert (
        report.bytes_read
        == report.bytes_needed
        == sum(
            (shared / n if n != "stats.h5" else shared.parent / n).stat().st_size for n in needed
        )
    )
    assert report.bytes_written > report.bytes_read  # shared files went to both nodes
    assert report.files_skipped == 0 and report.throughput > 0


def test_resume_verifies_and_skips(shared, tmp_path):
    cfg = config(shared, tmp_path)
    first = CountingRead(fail_after=4)
    with pytest.raises(KeyboardInterrupt):
        stage(cfg, read=first)
    assert not (cfg.node_dir(0) / "manifest.json").exists()
    second = CountingRead()
    report = stage(cfg, read=second)
    check_nodes(cfg, shared)
    assert not set(first.reads) & set(second.reads)  # what got written is not read again
    assert report.files_skipped > 0

    node0 = cfg.node_dir(0)
    victims = sorted(node0.glob("data-*.h5"))[:2]
    victims[0].unlink()
    with open(victims[1], "r+b") as f:  # same size, different bytes
        f.seek(5000)
        f.write(b"\xff" * 16)
    third = CountingRead()
    report = stage(cfg, read=third)
    check_nodes(cfg, shared)
    assert set(third.reads) == {v.name for v in victims}
    assert report.files_written == 2


def test_one_process_needs_node_placeholder(shared, tmp_path):
    cfg = StagingConfig(source=str(shared), dest=str(tmp_path / "local"), n_nodes=2)
    with pytest.raises(ValueError, match=r"\{node\}"):
        stage(cfg)


def test_stage_command_without_mpi(shared, tmp_path, capsys):
    report = tmp_path / "report.json"
    assert (
        main(
            [
                "stage",
                "--no-mpi",
                "--source",
                str(shared),
                "--dest",
                str(tmp_path / "node{node}"),
                "--nodes",
                "2",
                "--ranks-per-node",
                "2",
                "--samples-per-rank",
                "5",
                "--seed",
                "3",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    assert "each file read at most 1x" in capsys.readouterr().out
    assert json.loads(report.read_text())["max_reads_per_file"] == 1
    check_nodes(config(shared, tmp_path), shared)
    assert (
        main(
            [
                "stage",
                "--no-mpi",
                "--source",
                str(tmp_path / "empty"),
                "--dest",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )


@pytest.mark.mpi
def test_stage_under_mpirun_reads_once(shared, tmp_path, mpi_env):
    report = tmp_path / "report.json"
    cmd = [
        "mpirun",
        "-np",
        "2",
        sys.executable,
        "-m",
        "climnb",
        "stage",
        "--source",
        str(shared),
        "--dest",
        str(tmp_path / "node{node}"),
        "--ranks-per-node",
        "2",
        "--samples-per-rank",
        "5",
        "--seed",
        "3",
        "--report",
        str(report),
    ]
    subprocess.run(cmd, env=mpi_env, check=True, timeout=180, cwd=ROOT)
    rep = json.loads(report.read_text())
    needed = check_nodes(config(shared, tmp_path), shared)
    assert set(rep["reads"]) == needed and rep["max_reads_per_file"] == 1
    assert rep["bytes_read"] == rep["bytes_needed"]
    assert rep["bytes_sent"] > 0  # files both nodes need went over MPI, not the shared FS
    assert rep["bytes_written"] == rep["bytes_read"] + rep["bytes_sent"]


@pytest.mark.mpi
@pytest.mark.slow
def test_stage_on_ipyparallel_mpi_engines(shared, tmp_path, mpi_environ):
    ipp = pytest.importorskip("ipyparallel")
    cfg = config(shared, tmp_path)
    cluster = ipp.Cluster(engines="mpi", n=2, log_level=40)
    client = cluster.start_and_connect_sync()
    try:
        client[:].execute("from mpi4py import MPI; rank = MPI.COMM_WORLD.rank", block=True)
        assert client[:].pull("rank", block=True) == client.ids == [0, 1]  # id == MPI rank
        report = stage_on_engines(client[:], cfg)
    finally:
        cluster.stop_cluster_sync()
    needed = check_nodes(cfg, shared)
    assert set(report.reads) == needed and report.max_reads_per_file == 1
    assert report.bytes_sent > 0


@pytest.mark.notebook
@pytest.mark.mpi
@pytest.mark.slow
def test_notebook_02_runs(tmp_path, mpi_env):
    pytest.importorskip("papermill")
    env = {**mpi_env, "IPP_NONINTERACTIVE": "1"}
    out = tmp_path / "out.ipynb"
    cmd = [
        sys.executable,
        "-m",
        "papermill",
        str(ROOT / "notebooks" / "02_data_staging.ipynb"),
        str(out),
        "-k",
        "python3",
        "-p",
        "workdir",
        str(tmp_path / "work"),
    ]
    subprocess.run(cmd, env=env, check=True, timeout=300, cwd=ROOT, capture_output=True)
    text = out.read_text()
    assert "each file read at most 1x" in text
    assert os.path.isdir(tmp_path / "work" / "node1")
