"""Peak memory of the toy workflow, summed over all its processes, default vs Binder-sized.

mybinder.org gives a session at most 2 GB. This runs the notebooks the way ``make demo`` does
(``climnb demo`` on a copy of ``notebooks/``: papermill, one kernel per notebook) twice:

* ``default``: as on a workstation;
* ``binder``: with ``MEM_LIMIT=2147483648`` in the environment, as JupyterHub and Binder set it
  (climnb then starts one engine, :class:`climnb.cluster.SessionLimits`).

Every 0.5 s it sums the proportional set size (PSS: shared pages split between the processes
sharing them, so the sum is what the session costs) of every process of the run: the kernel,
ipcontroller, the engines, mpiexec and the papermill driver. The processes are found by a tag in
their environment (``CLIMNB_BENCH_TAG``) that every descendant inherits, engines started by
``mpiexec`` included, so processes of other work on the machine are not counted. Printed: the
peak of each run, what made it up (by kind of process), and the ratio Binder / default.

    nice .venv/bin/python benchmarks/bench_memory.py [--only 04] [--epochs 2]

Needs root (or the same user) to read other processes' PSS and environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
BINDER = {"MEM_LIMIT": str(2 * 2**30)}
MIB = 2**20


def _kind(proc: psutil.Process) -> str:
    cmd = " ".join(proc.cmdline())
    for needle, kind in (
        ("ipykernel", "kernel"),
        ("ipcontroller", "ipcontroller"),
        ("ipyparallel.controller", "ipcontroller"),
        ("ipyparallel.engine", "engine"),
        ("ipengine", "engine"),
        ("mpiexec", "mpiexec"),
        ("orted", "mpiexec"),
        ("prterun", "mpiexec"),
        ("prted", "mpiexec"),
        ("climnb demo", "papermill driver"),
        ("_watchdog", "watchdog"),
    ):
        if needle in cmd:
            return kind
    return proc.name()


def _tagged(tag: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("CLIMNB_BENCH_TAG") == tag:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def _sample(tag: str) -> tuple[int, Counter]:
    total, kinds = 0, Counter()
    for proc in _tagged(tag):
        try:
            pss = proc.memory_full_info().pss
            kinds[_kind(proc)] += pss
            total += pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return total, kinds


def measure(env_extra: dict, only: list[str], epochs: int, interval: float = 0.5) -> dict:
    """Run the workflow once; return its peak PSS, the breakdown at the peak and the time."""
    work = Path(tempfile.mkdtemp(prefix="climnb-bench-memory-"))
    nbs = work / "notebooks"
    shutil.copytree(ROOT / "notebooks", nbs, ignore=shutil.ignore_patterns("data", "runs"))
    tag = uuid.uuid4().hex
    env = dict(os.environ, CLIMNB_BENCH_TAG=tag, PYTHONPATH=str(ROOT), **env_extra)
    for name in ("MEM_LIMIT", "CPU_LIMIT"):
        if name not in env_extra:
            env.pop(name, None)
    cmd = [sys.executable, "-m", "climnb", "demo", "--notebooks", str(nbs)]
    cmd += ["--reports", str(work / "reports"), "--epochs", str(epochs)]
    if only:
        cmd += ["--only", *only]
    peak, at_peak, samples, stop = 0, Counter(), 0, threading.Event()

    def watch():
        nonlocal peak, at_peak, samples
        while not stop.is_set():
            total, kinds = _sample(tag)
            samples += 1
            if total > peak:
                peak, at_peak = total, kinds
            stop.wait(interval)

    start = time.perf_counter()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    run = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
    stop.set()
    watcher.join()
    seconds = time.perf_counter() - start
    shutil.rmtree(work, ignore_errors=True)
    if run.returncode:
        raise SystemExit(f"climnb demo failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return {"peak": peak, "kinds": at_peak, "seconds": seconds, "samples": samples}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], metavar="NN", help="notebooks to run")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of notebook 04")
    args = parser.parse_args(argv)
    results = {}
    for name, extra in (("default", {}), ("binder", BINDER)):
        r = results[name] = measure(extra, args.only, args.epochs)
        parts = ", ".join(f"{k} {v / MIB:.0f}" for k, v in r["kinds"].most_common())
        print(
            f"{name:8s} peak PSS {r['peak'] / MIB:7.0f} MiB over {r['samples']} samples "
            f"({r['seconds']:.0f} s); at the peak (MiB): {parts}",
            flush=True,
        )
    ratio = results["binder"]["peak"] / results["default"]["peak"]
    goal = 1.5e9
    print(
        f"binder / default: {ratio:.2f}; Binder-sized peak {results['binder']['peak'] / 1e9:.2f} "
        f"GB ({'within' if results['binder']['peak'] <= goal else 'over'} the 1.5 GB goal)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
