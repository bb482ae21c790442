"""Start several ``climnb`` commands at the same moment, in real processes.

Each process imports climnb, says it is ready and waits at a barrier (a file the parent makes
once all are ready, polled every 0.1 ms), then runs :func:`climnb.cli.main`: the commands
start within a millisecond of each other, after the seconds of imports. Used by
``tests/test_output_claim.py`` and ``benchmarks/bench_concurrent.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finished", "start_together"]

_CHILD = r"""
import os, sys, time
from pathlib import Path
import climnb.cli  # the imports before the barrier
import climnb.commands.label, climnb.labels.dataset, climnb.labels.writer  # noqa: F401
barrier, name = Path(sys.argv[1]), sys.argv[2]
(barrier.parent / f"ready-{name}").touch()
while not barrier.exists():
    time.sleep(1e-4)
sys.exit(climnb.cli.main(sys.argv[3:]))
"""


@dataclass
class Finished:
    """A process's exit status and what it wrote to stderr."""

    status: int
    stderr: str


def start_together(commands: list[list[str]], folder: Path, timeout: float = 300) -> list[Finished]:
    """Run ``commands`` (``climnb`` argument lists) in processes started together in
    ``folder`` (their working directory, where the barrier's files go); their outcomes."""
    folder = Path(folder)
    sync = folder / ".barrier"
    sync.mkdir(exist_ok=True)
    barrier = sync / "go"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(barrier), str(i), *argv],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, argv in enumerate(commands)
    ]
    deadline = time.monotonic() + timeout
    while not all((sync / f"ready-{i}").exists() for i in range(len(procs))):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    barrier.touch()
    done = [Finished(p.wait(timeout=timeout), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    for f in sync.iterdir():
        f.unlink()
    sync.rmdir()
    return done
