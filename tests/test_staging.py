"""Node-local staging: the plan, read-once over MPI, manifest and resume, ipyparallel engines."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from climnb.cli import main
from climnb.data.exchange import read_shared
from climnb.data.staging import (
    StagingConfig,
    files_per_rank,
    plan_staging,
    stage,
    stage_on_engines,
    staged_files,
)
from climnb.data.synthetic import make_dataset
from climnb.io.reader import SampleReader
from climnb.io.samples import SampleError, write_samples
from climnb.io.sampleset import SampleSet, StagedSet, write_sample_set
from climnb.io.stats import compute_stats, write_stats

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
        read_shared(path, out)


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
        want = {plan.names[i] for i in plan.needs(node)}
        assert set(manifest["files"]) == want
        assert {p.name for p in d.glob("*.h5")} == want | {"stats.h5"}
        for name, entry in manifest["files"].items():
            assert entry["sha256"] == sha(d / name) == sha(shared / name)
        assert manifest["stats"]["sha256"] == sha(d / "stats.h5") == sha(shared.parent / "stats.h5")
        for r in range(cfg.ranks_per_node):
            got = [p.name for p in staged_files(d, r)]
            assert got == [plan.names[i] for i in plan.rank_files[node][r]]
            assert len(got) == cfg.samples_per_rank
        needed |= want | {"stats.h5"}
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


def test_shard_deals_every_file_to_one_rank():
    names = [f"f{i}" for i in range(11)]
    kw = dict(n_nodes=2, ranks_per_node=2, seed=4, draw="shard")
    plan = plan_staging(names, [1] * 11, samples_per_rank=250, **kw)
    lists = [r for node in plan.rank_files for r in node]
    assert sorted(i for r in lists for i in r) == list(range(11))  # each file once
    assert [len(r) for r in lists] == files_per_rank(11, 4, 250, "shard") == [3, 3, 3, 2]
    assert plan != plan_staging(names, [1] * 11, samples_per_rank=250, **{**kw, "seed": 5})
    assert lists[0] != [0, 4, 8]  # dealt from a seeded permutation, not in name order
    capped = plan_staging(names, [1] * 11, samples_per_rank=2, **kw)
    flat = [i for node in capped.rank_files for r in node for i in r]
    assert len(flat) == len(set(flat)) == 8  # at most samples_per_rank each, still no repeats
    with pytest.raises(ValueError, match="draw .*'replacement', 'shard'.*'random'"):
        StagingConfig(source="s", dest="d", draw="random")


def test_shard_staging_covers_the_training_split(shared, tmp_path):
    """Staged with draw="shard", the ranks' files are the shared training files, each once:
    with the paper's draws, 2 x 4 random files of these 8 leave some out."""
    names = sorted(p.name for p in shared.glob("data-*.h5"))
    cfg = config(shared, tmp_path, n_nodes=2, ranks_per_node=1, draw="shard")
    stage(cfg)
    got = [p.name for node in range(2) for p in staged_files(cfg.node_dir(node))]
    assert sorted(got) == names
    paper = config(shared, tmp_path / "paper", n_nodes=2, ranks_per_node=1, samples_per_rank=4)
    stage(paper)
    drawn = {p.name for node in range(2) for p in staged_files(paper.node_dir(node))}
    assert drawn < set(names)


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
    before = sorted(shared.iterdir())
    with pytest.raises(ValueError, match="is inside the input"):  # the one output rule
        stage(StagingConfig(source=str(shared), dest=str(shared / "n{node}"), n_nodes=1))
    with pytest.raises(ValueError, match="is an input"):
        stage(StagingConfig(source=str(shared), dest=str(shared), n_nodes=1))
    assert sorted(shared.iterdir()) == before


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


# --- staged sample sets, digests, leftovers, shared dest ------------------------------------


@pytest.fixture(scope="module")
def split_master(tmp_path_factory):
    """The split sample set and its fields, written once; each test gets a copy."""
    ds = make_dataset(n_time=40, seed=5)[0]
    return write_sample_set(ds, "truth", tmp_path_factory.mktemp("master") / "shared"), ds


@pytest.fixture
def split_set(split_master, tmp_path):
    """A split sample set (train 18 / validation 4 / test 4) on the 'shared file system': a
    copy of :func:`split_master`'s, which the test may change."""
    master, ds = split_master
    shutil.copytree(master.root, tmp_path / "shared")
    return SampleSet.open(tmp_path / "shared"), ds


def test_staged_set_per_node_with_validation_shards(split_set, tmp_path):
    ss, _ = split_set
    cfg = StagingConfig(
        source=str(ss.root),
        dest=str(tmp_path / "local" / "{node}"),
        n_nodes=2,
        ranks_per_node=2,
        samples_per_rank=6,
    )
    stage(cfg)
    val = sorted(f.name for f in ss.files("validation"))
    seen = []
    for rank in range(4):
        staged = StagedSet.for_rank(cfg.dest, rank=rank, local_size=2)
        assert staged.root == tmp_path / "local" / str(rank // 2)
        train, mine = staged.files("train"), staged.files("validation")
        assert len(train) == 6 and all(f.parent == staged.root for f in train + mine)
        assert [f.name for f in mine] == val[rank::4]
        seen += [f.name for f in mine]
        staged.verify()
        assert staged.stats().summarises == ss.digest("train")  # checked against the source
        np.testing.assert_array_equal(staged.class_counts(), ss.stats().class_counts)
    assert sorted(seen) == val
    with pytest.raises(SampleError, match="staged for 2 ranks per node"):
        StagedSet.for_rank(cfg.dest, rank=0, local_size=4)


def test_training_reads_only_the_node_copies(split_set, tmp_path):
    """After staging, a rank opens its staged set and reads every batch: no file under the
    shared folder is opened (counted with an audit hook)."""
    ss, _ = split_set
    cfg = StagingConfig(
        source=str(ss.root),
        dest=str(tmp_path / "n{node}"),
        n_nodes=2,
        ranks_per_node=1,
        samples_per_rank=5,
    )
    stage(cfg)
    shared = str(ss.root)
    opened = []
    AUDIT["hook"] = lambda event, args: (
        opened.append(args[0])
        if event == "open" and isinstance(args[0], str | Path) and str(args[0]).startswith(shared)
        else None
    )
    try:
        for rank in range(2):
            staged = StagedSet.for_rank(cfg.dest, rank=rank, local_size=1)
            for split in ("train", "validation"):
                reader = SampleReader(staged.files(split), staged.stats())
                x, y, _ = reader.read(range(len(reader)))
                assert np.isfinite(x).all() and y.max() <= 2
    finally:
        AUDIT["hook"] = None
    assert opened == []


AUDIT = {"hook": None}
sys.addaudithook(lambda event, args: AUDIT["hook"] and AUDIT["hook"](event, args))


def test_same_size_change_is_restaged_with_stats(split_set, tmp_path):
    ss, ds = split_set
    cfg = StagingConfig(
        source=str(ss.root), dest=str(tmp_path / "n{node}"), n_nodes=2, samples_per_rank=6
    )
    stage(cfg)
    node0 = cfg.node_dir(0)
    old = {p.name: sha(p) for p in node0.glob("*.h5")}
    changed = ds.copy(deep=True)
    changed["TMQ"] = changed.TMQ * 1.01  # same names, same sizes, other bytes
    write_sample_set(changed, "truth", ss.root, overwrite=True)

    def src(name):
        return next(ss.root.glob(f"*/{name}"))

    data = [n for n in old if n != "stats.h5"]
    assert all(src(n).stat().st_size == (node0 / n).stat().st_size for n in data)
    read = CountingRead()
    report = stage(cfg, read=read)
    assert report.files_skipped == 0 and "stats.h5" in read.reads
    for node in range(2):
        d = cfg.node_dir(node)
        for p in d.glob("data-*.h5"):
            assert sha(p) == sha(src(p.name)) != old.get(p.name)
        assert sha(d / "stats.h5") == sha(ss.root / "stats.h5") != old["stats.h5"]
    again = stage(cfg, read=CountingRead())
    assert again.files_written == 0 and again.bytes_read == 0  # unchanged now: all skipped


def test_flipped_bytes_in_shared_file_refused(split_set, tmp_path):
    ss, _ = split_set
    victim = ss.files("train")[0]
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0x40  # inside climate/data: values change, the file still parses
    victim.write_bytes(bytes(raw))
    cfg = StagingConfig(
        source=str(ss.root), dest=str(tmp_path / "n{node}"), n_nodes=1, samples_per_rank=200
    )
    with pytest.raises(SampleError, match=f"{victim.name}: content differs from its manifest"):
        stage(cfg)
    assert not (cfg.node_dir(0) / victim.name).exists()


def test_killed_run_leftovers_removed(shared, tmp_path):
    cfg = config(shared, tmp_path)
    node0 = cfg.node_dir(0)
    node0.mkdir(parents=True)
    leftover = node0 / ".data-2000-01-01-00-1.h5.1a2b3c4d.tmp"
    leftover.write_bytes(b"half a file")
    stage(cfg)
    assert not leftover.exists() and not list(node0.glob(".*.tmp"))
    check_nodes(cfg, shared)


def test_local_rank_placeholder_gives_a_folder_per_rank(shared, tmp_path):
    cfg = StagingConfig(
        source=str(shared),
        dest=str(tmp_path / "n{node}" / "gpu{local_rank}"),
        n_nodes=1,
        ranks_per_node=2,
        samples_per_rank=3,
    )
    stage(cfg)
    for r in range(2):
        staged = StagedSet.open(cfg.dest, node=0, local_rank=r)
        assert staged.root == tmp_path / "n0" / f"gpu{r}"
        names = {f.name for f in staged.files("train")}
        assert {p.name for p in staged.root.glob("data-*.h5")} == names
        assert (staged.root / "stats.h5").is_file()


@pytest.mark.mpi
def test_shared_dest_without_node_is_refused_under_mpirun(shared, tmp_path, mpi_env):
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
        str(tmp_path / "local"),
        "--samples-per-rank",
        "3",
    ]
    out = subprocess.run(cmd, env=mpi_env, timeout=180, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0
    assert "one folder shared by several MPI processes" in out.stderr
    assert "Put {node} in --dest" in out.stderr
    assert not list((tmp_path / "local").glob("data-*.h5"))  # refused before any write


@pytest.mark.slow
def test_stage_killed_at_random_moments_then_rerun_equals_clean_run(split_set, tmp_path):
    """kill -9 at seeded random moments of ``climnb stage``; the rerun finishes the job and the
    node folders are byte-identical to an uninterrupted run's, with no temporary files left."""
    ss, _ = split_set

    def cmd(dest):
        args = ["stage", "--no-mpi", "--source", str(ss.root), "--dest", str(dest / "n{node}")]
        args += ["--nodes", "2", "--ranks-per-node", "2", "--samples-per-rank", "6"]
        return [sys.executable, "-m", "climnb", *args, "--no-progress"]

    subprocess.run(cmd(tmp_path / "clean"), check=True, capture_output=True, timeout=300)
    rng = np.random.default_rng(7)
    # three kills within a run's seconds (a kill after the run ended kills nothing);
    # benchmarks/bench_faults.py kills many more times
    for delay in rng.uniform(0.5, 3.0, size=3):
        p = subprocess.Popen(cmd(tmp_path / "killed"), stdout=subprocess.DEVNULL)
        time.sleep(delay)
        p.kill()
        p.wait()
    subprocess.run(cmd(tmp_path / "killed"), check=True, capture_output=True, timeout=300)

    def digests(root):
        return {str(p.relative_to(root)): sha(p) for p in sorted(root.rglob("*")) if p.is_file()}

    assert digests(tmp_path / "killed") == digests(tmp_path / "clean")


@pytest.mark.parametrize("victim", ["train", "validation", "stats.h5"])
def test_opening_a_staged_set_verifies_what_the_rank_reads(split_set, tmp_path, victim):
    """Flipped bytes in a node's copy are refused when a rank opens its staged set, before
    training reads anything; ``verify=False`` opens it unchecked."""
    ss, _ = split_set
    cfg = StagingConfig(
        source=str(ss.root), dest=str(tmp_path / "n{node}"), ranks_per_node=2, samples_per_rank=6
    )
    stage(cfg)
    staged = StagedSet.for_rank(cfg.dest, rank=1, local_size=2)  # intact: opens
    path = staged.stats_path if victim == "stats.h5" else staged.files(victim)[0]
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x40  # the file still parses; values change
    path.write_bytes(bytes(raw))
    with pytest.raises(SampleError, match=f"{path}: content"):
        StagedSet.for_rank(cfg.dest, rank=1, local_size=2)
    with pytest.raises(SampleError, match=f"{path.name}: content"):
        StagedSet.open(cfg.dest, node=0, local_rank=1)
    assert StagedSet.for_rank(cfg.dest, rank=1, local_size=2, verify=False).files("train")


def test_a_truncated_source_file_is_refused_before_anything_is_staged(shared, tmp_path):
    """Every source file's size is checked against its manifest, drawn for a rank or not."""
    import shutil

    source = tmp_path / "train"
    shutil.copytree(shared, source)
    last = sorted(source.glob("data-*.h5"))[-1]
    last.write_bytes(last.read_bytes()[:1000])
    cfg = StagingConfig(source=str(source), dest=str(tmp_path / "local" / "node{node}"))
    with pytest.raises(SampleError, match=f"{last.name}: 1000 bytes.*truncated"):
        stage(cfg)
    assert not (tmp_path / "local").exists()


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"n_nodes": 0}, "n_nodes must be at least 1"), ({"stats": "nothere.h5"}, "no such file")],
)
def test_bad_options_are_refused(shared, tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        stage(config(shared, tmp_path, **kw))
    assert list(tmp_path.iterdir()) == []


def test_a_run_killed_before_its_first_file_leaves_no_empty_folder(shared, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        stage(config(shared, tmp_path / "local"), read=CountingRead(fail_after=0))
    assert list(tmp_path.iterdir()) == []
