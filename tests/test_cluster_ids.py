"""Each start of engines gets a cluster id of its own, whatever the process did to Python's
``random``: processes that seed it alike (Keras' ``set_random_seed``) drew the same ids from
ipyparallel, and two starting engines in the same second would share connection files."""

from __future__ import annotations

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
