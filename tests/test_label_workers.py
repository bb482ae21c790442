"""The processes ``climnb label --workers N`` labels in (climnb.labels.workers): all N start
as the block opens (before any task, so the command can open them before its input and they
import the labeller meanwhile), a block of the same N inside finds them, and an error leaves
the block without waiting for them."""

from __future__ import annotations

import os

import psutil
import pytest

from climnb.labels.dataset import worker_processes
from climnb.labels.workers import run_task


def _workers() -> list[psutil.Process]:
    """This process's pool processes (not the resource tracker)."""
    return [
        p for p in psutil.Process().children() if "--multiprocessing-fork" in " ".join(p.cmdline())
    ]


@pytest.mark.slow  # two processes started and waited for (a few seconds)
def test_all_processes_start_before_any_task():
    before = {p.pid for p in _workers()}
    with worker_processes(2) as pool:
        started = [p for p in _workers() if p.pid not in before]
        assert len(started) == 2  # spawned as the block opened, no task submitted yet
        pids = {pool.submit(os.getpid).result() for _ in range(6)}
        assert pids <= {p.pid for p in started}


@pytest.mark.slow
def test_an_inner_block_of_the_same_size_finds_the_outer_processes():
    with worker_processes(2) as outer:
        with worker_processes(2) as inner:
            assert inner is outer
            assert run_task(os.getpid) != os.getpid()  # sent to the outer block's processes
        assert run_task(os.getpid) != os.getpid()  # and still open after the inner block
        with worker_processes(1) as other:
            assert other is not outer
    assert run_task(os.getpid) == os.getpid()


def test_an_error_leaves_without_waiting_for_the_processes():
    """They are still importing the labeller (a second or more) when the error comes out."""
    before = {p.pid for p in _workers()}
    with pytest.raises(ValueError, match="bad input"):
        with worker_processes(2):
            raise ValueError("bad input")
    assert [p for p in _workers() if p.pid not in before and p.is_running()]
