"""Stage once, then train from the node-local copies: two simulated nodes, two MPI ranks.

After staging, the shared sample set is moved away, so any open of a file in it during training
(h5py, reader processes, stats, anything) would fail; an audit hook on each rank also records
every file it opens, to show each rank read its own node's copies and nothing else.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
from _training import TINY

from climnb.data.staging import StagingConfig, stage
from climnb.data.synthetic import make_dataset
from climnb.io.sampleset import StagedSet, write_sample_set
from climnb.train.config import TrainConfig
from climnb.train.loop import plan

# each rank: record every path opened (open() and os.open both raise the "open" audit event)
RANK = textwrap.dedent(
    """
    import json, os, sys
    opened = []
    sys.addaudithook(lambda e, a: opened.append(str(a[0])) if e == "open" and a else None)
    from climnb.cli import main
    code = main(sys.argv[2:])
    rank = os.environ["OMPI_COMM_WORLD_RANK"]
    with open(os.path.join(sys.argv[1], f"opened-{rank}.json"), "w") as f:
        json.dump(opened, f)
    sys.exit(code)
    """
)


@pytest.mark.mpi
@pytest.mark.horovod
def test_two_nodes_train_from_their_staged_copies_only(tmp_path, mpi_env):
    shared, local, out = tmp_path / "shared", tmp_path / "local", tmp_path / "run"
    ds, _ = make_dataset(n_time=40, seed=8)
    write_sample_set(ds, "truth", shared)
    pattern = str(local / "node{node}")
    stage(StagingConfig(str(shared), pattern, n_nodes=2, ranks_per_node=1, samples_per_rank=6))
    staged = [StagedSet.open(pattern, node=n) for n in (0, 1)]
    assert all(len(s.files("train")) == 6 for s in staged)
    shared.rename(tmp_path / "moved-away")  # from here on, the shared set does not exist

    settings = {"model_overrides": TINY, "read_workers": 0}
    (tmp_path / "run.json").write_text(json.dumps(settings))
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    argv = ["train", "--data", str(shared), "--staged", pattern, "--ranks-per-node", "1"]
    argv += ["--out", str(out), "--epochs", "1", "--batch-size", "2", "--threads", "1"]
    argv += ["--config", str(tmp_path / "run.json")]
    proc = subprocess.run(
        ["mpirun", "-np", "2", "--bind-to", "none", sys.executable, str(script), str(tmp_path)]
        + argv,
        capture_output=True,
        text=True,
        env=mpi_env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "model" / "climnb.json").exists()
    history = (out / "history.csv").read_text().splitlines()
    assert len(history) == 1 + 3  # 6 staged files per rank, batch 2
    for rank in (0, 1):
        opened = json.loads((tmp_path / f"opened-{rank}.json").read_text())
        assert not [p for p in opened if p.startswith(str(shared))], "opened the shared set"
        samples = {p for p in opened if p.endswith(".h5") and "data-" in p}
        mine = {str(f) for f in staged[rank].files("train")}
        assert mine <= samples, "read its node's staged training files"
        other = str(local / f"node{1 - rank}")
        assert not [p for p in samples if p.startswith(other)], "read another node's copies"


def test_plan_counts_what_staging_will_deal_out(tmp_path):
    """Before anything is staged, the progress bar's plan counts each rank's files as the
    draw will give them: with ``draw="shard"`` the training split shared out, not
    ``samples_per_rank`` each."""
    ds, _ = make_dataset(n_time=40, seed=9)
    sset = write_sample_set(ds, "truth", tmp_path / "shared")
    n = len(sset.files("train"))
    kw = dict(data_dir=str(sset.root), staged_dir=str(tmp_path / "n{node}"), stage_first=True)
    shard = plan(TrainConfig(**kw, draw="shard", batch_size=2), 2)
    assert shard["train_files"] == n and shard["steps_per_epoch"] == (n // 2) // 2
    paper = plan(TrainConfig(**kw, samples_per_rank=6, batch_size=2), 2)
    assert paper == {"train_files": 12, "steps_per_epoch": 3, "total_steps": 3 * 4}
    with pytest.raises(ValueError, match="draw must be one of"):
        TrainConfig(**kw, draw="partition")


@pytest.mark.mpi
@pytest.mark.horovod
def test_stage_first_then_train_in_one_command(tmp_path, mpi_env):
    """``climnb train --stage-first`` over two MPI ranks: each stages its node, then both train
    and end with identical weights (this was also test_train.py's
    test_two_mpi_ranks_end_with_identical_weights, which paid for one more two-rank run)."""
    shared, local, out = tmp_path / "shared", tmp_path / "local", tmp_path / "run"
    ds, _ = make_dataset(n_time=40, seed=9)
    write_sample_set(ds, "truth", shared)
    pattern = str(local / "node{node}")
    (tmp_path / "run.json").write_text(json.dumps({"model_overrides": TINY}))
    argv = ["train", "--data", str(shared), "--staged", pattern, "--ranks-per-node", "1"]
    argv += ["--stage-first", "--samples-per-rank", "4", "--draw", "shard"]
    argv += ["--out", str(out), "--epochs", "1"]
    argv += ["--batch-size", "2", "--threads", "1", "--config", str(tmp_path / "run.json")]
    # each rank's stdout in its own file: mpirun's merged stdout may interleave the ranks' lines
    logs = tmp_path / "logs"
    mpirun = ["mpirun", "-np", "2", "--bind-to", "none", "--output-filename", str(logs)]
    proc = subprocess.run(
        [*mpirun, sys.executable, "-m", "climnb", *argv],
        capture_output=True,
        text=True,
        env=mpi_env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    staged = [StagedSet.open(pattern, node=n) for n in (0, 1)]
    assert [len(s.files("train")) for s in staged] == [4, 4]
    names = [f.name for s in staged for f in s.files("train")]
    assert len(set(names)) == 8  # dealt out: no file twice, on one rank or across the two
    staged[0].verify()  # the copies match the source manifest's digests
    assert len((out / "history.csv").read_text().splitlines()) == 1 + 2  # 4 files, batch 2
    stdout = "\n".join(f.read_text() for f in sorted(logs.glob("*/rank.*/stdout")))
    ranks = dict(re.findall(r"rank (\d) of 2: 2 steps, loss \S+, weights (\w+)", stdout))
    assert set(ranks) == {"0", "1"}, stdout
    assert ranks["0"] == ranks["1"], "weights differ between ranks"
    assert (out / "model" / "climnb.json").exists()


@pytest.mark.mpi
@pytest.mark.slow
def test_stage_on_engines_two_engines_on_one_simulated_node(tmp_path, mpi_environ):
    """Two engines (two training ranks) on one node: the node is staged once, by its first
    engine, with both ranks' files; no second node appears (it did when node n was staged by
    engine n % engines, the engines counting as nodes)."""
    ipp = pytest.importorskip("ipyparallel")
    from climnb.data.staging import stage_on_engines

    shared, local = tmp_path / "shared", tmp_path / "local"
    ds, _ = make_dataset(n_time=40, seed=8)
    write_sample_set(ds, "truth", shared)
    pattern = str(local / "node{node}")
    cfg = StagingConfig(str(shared), pattern, ranks_per_node=2, samples_per_rank=3)
    cluster = ipp.Cluster(engines="mpi", n=2, log_level=40)
    client = cluster.start_and_connect_sync()
    try:
        report = stage_on_engines(client[:], cfg)
    finally:
        cluster.stop_cluster_sync()
    assert sorted(p.name for p in local.iterdir()) == ["node0"]
    ranks = [StagedSet.for_rank(pattern, rank=r, local_size=2) for r in (0, 1)]
    assert [r.node for r in ranks] == [0, 0] and [len(r.files("train")) for r in ranks] == [3, 3]
    needed = {f.name for r in ranks for f in r.files("train") + r.files("validation")}
    assert report.files_written == len(needed) + 1  # and stats.h5
    assert report.max_reads_per_file == 1
