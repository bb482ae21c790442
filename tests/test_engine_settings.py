"""What engines are started with, whatever the process around them: a cluster id of their own
(processes that seed Python's ``random`` alike, as Keras' ``set_random_seed`` does, drew the
same ids from ipyparallel, and two starting engines in the same second would share connection
files), and, in a Slurm allocation, threads that fit the CPUs it has."""

from __future__ import annotations

import os
import random

import pytest

from climnb.runtime.cluster import Engines, new_cluster_id


def test_ids_differ_after_the_same_seed():
    ids = set()
    for _ in range(3):
        random.seed(0)
        ids.add(new_cluster_id().split("-", 1)[1])
    assert len(ids) == 3, ids


@pytest.mark.slow
def test_engines_started_after_the_same_seed_get_their_own_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ids = []
    for _ in range(2):
        random.seed(0)
        with Engines(n=1, launcher="local", threads_per_engine=1) as engines:
            assert engines.client.ids, "the engine registered"
            ids.append(engines.cluster.cluster_id)
    suffixes = {i.split("-", 1)[1] for i in ids}
    assert len(suffixes) == 2, f"two starts after random.seed(0) drew the same ids: {ids}"


def test_an_allocation_s_cpus_come_from_salloc_s_variable_too(monkeypatch):
    """Inside salloc only SLURM_JOB_CPUS_PER_NODE says the CPUs (SLURM_CPUS_ON_NODE comes with
    job steps): the fewest on any node sizes each engine's threads."""
    from climnb.runtime.cluster import SlurmAllocation

    base = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1"}
    alloc = SlurmAllocation.from_env
    assert alloc({**base, "SLURM_JOB_CPUS_PER_NODE": "1"}).cpus_on_node == 1
    assert alloc({**base, "SLURM_JOB_CPUS_PER_NODE": "36(x2),18"}).cpus_on_node == 18
    both = {**base, "SLURM_JOB_CPUS_PER_NODE": "36(x2)", "SLURM_CPUS_ON_NODE": "36"}
    assert alloc(both).cpus_on_node == 36
    assert alloc(base).cpus_on_node is None
    for k in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(k)
    for k, v in {**base, "SLURM_JOB_CPUS_PER_NODE": "1"}.items():
        monkeypatch.setenv(k, v)
    assert Engines(n=1, launcher="slurm").threads == 1
