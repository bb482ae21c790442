"""Staging where its rules decide: a node's folder is its first local rank's, the throughput
of a report (and of one that took no time), the limit on draws per file at and just over it,
and a node-local folder whose manifest cannot be read is staged again."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from climnb.data.staging import (
    MAX_DRAWS_PER_FILE,
    StagingConfig,
    StagingReport,
    stage,
    staged_files,
)
from climnb.io.samples import write_samples
from climnb.io.stats import compute_stats, write_stats


def test_a_nodes_folder_is_that_of_its_local_rank_0():
    cfg = StagingConfig(source="s", dest="/local/{node}/gpu{local_rank}")
    assert cfg.node_dir(3) == cfg.rank_dir(3, 0) == Path("/local/3/gpu0")
    assert cfg.rank_dir(3, 1) == Path("/local/3/gpu1")


def _report(written: int, seconds: float) -> StagingReport:
    return StagingReport(
        bytes_shared=written,
        bytes_needed=written,
        bytes_read=written,
        bytes_written=written,
        bytes_sent=0,
        files_written=1,
        files_skipped=0,
        seconds=seconds,
    )


def test_throughput_is_bytes_written_a_second_and_0_for_no_time():
    assert _report(3_000_000, 2.0).throughput == 1_500_000.0
    assert _report(3_000_000, 0.0).throughput == 0.0


def test_draws_per_file_are_limited_at_max_draws_per_file(toy, tmp_path):
    """4 files: 4,000 draws a rank are staged, 4,001 are refused, naming the option, before
    anything is written."""
    assert MAX_DRAWS_PER_FILE == 1000
    four = toy[0].isel(time=slice(0, 4))
    write_samples(four, four.truth, tmp_path / "shared")

    def config(samples_per_rank: int, dest: str) -> StagingConfig:
        return StagingConfig(
            source=str(tmp_path / "shared"),
            dest=str(tmp_path / dest / "node{node}"),
            n_nodes=1,
            samples_per_rank=samples_per_rank,
        )

    at = config(4000, "at")
    assert stage(at).files_written == 4
    assert len(staged_files(at.node_dir(0))) == 4000
    with pytest.raises(ValueError, match=r"--samples-per-rank .*at most 4000 \(1000 per file\)"):
        stage(config(4001, "over"))
    assert not (tmp_path / "over").exists()


def test_a_folder_whose_manifest_cannot_be_read_is_staged_again(toy, tmp_path):
    """Also: one rank a node unless asked, the report's seconds, and a shared file touched
    since (another modification time) staged again."""
    shared = tmp_path / "shared"
    files = write_samples(toy[0], toy[0].truth, shared / "train")
    write_stats(compute_stats(files), shared / "stats.h5")
    cfg = StagingConfig(
        source=str(shared / "train"),
        dest=str(tmp_path / "node{node}"),
        n_nodes=1,
        samples_per_rank=3,
        seed=3,
    )
    start = time.perf_counter()
    first = stage(cfg)
    assert 0 < first.seconds <= time.perf_counter() - start
    assert first.files_written > 0 and first.files_skipped == 0
    ranks = json.loads((cfg.node_dir(0) / "manifest.json").read_text())["ranks"]["train"]
    assert list(ranks) == ["0"]  # ranks_per_node: 1 unless asked
    again = stage(cfg)  # all there: nothing written
    assert (again.files_written, again.files_skipped) == (0, first.files_written)
    manifest = cfg.node_dir(0) / "manifest.json"
    manifest.write_text("{ not json")
    redone = stage(cfg)
    assert (redone.files_written, redone.files_skipped) == (first.files_written, 0)
    assert json.loads(manifest.read_text())["files"]  # a good manifest again


def test_a_foreign_file_touched_since_it_was_staged_is_staged_again(toy, tmp_path):
    """Files without a manifest (written elsewhere) are known by size and modification time."""
    shared = tmp_path / "shared"
    files = write_samples(toy[0], toy[0].truth, shared)
    (shared / "manifest.json").unlink()
    cfg = StagingConfig(
        source=str(shared), dest=str(tmp_path / "node{node}"), n_nodes=1, samples_per_rank=3
    )
    first = stage(cfg)
    staged = next(iter(json.loads((cfg.node_dir(0) / "manifest.json").read_text())["files"]))
    source = shared / staged
    assert source in files
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    touched = stage(cfg)
    assert (touched.files_written, touched.files_skipped) == (1, first.files_written - 1)


class _Engines:
    """What ``_engines_per_node`` asks of MPI's world: its size and every engine's host (here
    given, as engines on several hosts would report them)."""

    def __init__(self, hosts):
        self.hosts, self.size = list(hosts), len(hosts)

    def allgather(self, _mine):
        return self.hosts


def test_engines_fill_nodes_in_rank_order_one_host_each():
    from climnb.data.stageengines import _engines_per_node

    assert _engines_per_node(_Engines("aabb"), None) == (2, 2)
    assert _engines_per_node(_Engines("aaabbb"), 2) == (3, 2)
    assert _engines_per_node(_Engines("ab"), None) == (1, 2)
    with pytest.raises(ValueError, match=r"node 0 .*runs on several hosts \(a, b\)"):
        _engines_per_node(_Engines("abab"), None)
    with pytest.raises(ValueError, match="3 engines do not make 2 nodes"):
        _engines_per_node(_Engines("aab"), 2)
