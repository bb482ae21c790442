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
``mpiexec`` included, so processes of other work on the machine are not counted. A sample
belongs to the notebook running then (the first whose report is not written yet). Printed: the
peak of each run and of each notebook, what made them up (by kind of process), and the ratio
Binder / default. ``--without-driver`` leaves the papermill driver out of the sums (in
JupyterLab the server stands in its place, which this does not measure).

    nice .venv/bin/python benchmarks/bench_memory.py [--only 00 01 02 03 04 05] [--epochs 2]
        [--modes binder]

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

from climnb.demo import find_notebooks

ROOT = Path(__file__).resolve().parents[1]
BINDER = {"MEM_LIMIT": str(2 * 2**30)}
MODES = {"default": {}, "binder": BINDER}
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


def _sample(tag: str, exclude: tuple[str, ...] = ()) -> tuple[int, Counter]:
    total, kinds = 0, Counter()
    for proc in _tagged(tag):
        try:
            kind = _kind(proc)
            if kind in exclude:
                continue
            pss = proc.memory_full_info().pss
            kinds[kind] += pss
            total += pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return total, kinds


def _running(reports: Path, names: list[str]) -> str:
    """The notebook running now: the one after the last whose report papermill has written
    (it writes a report when its notebook ends; they run in order); "end" after the last."""
    done = {p.name[:2] for p in reports.glob("[0-9][0-9]_*.ipynb")}
    return next((n for n in names if n not in done), "end")


def measure(
    env_extra: dict, only: list[str], epochs: int, interval: float = 0.5, exclude=()
) -> dict:
    """Run the workflow once; return its peak PSS, the breakdown at the peak, the peak of each
    notebook (``{"04": (pss, kinds)}``) and the time."""
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
    names = [p.name[:2] for p in find_notebooks(nbs, only)]
    peak, at_peak, samples, stop = 0, Counter(), 0, threading.Event()
    per_notebook: dict[str, tuple[int, Counter]] = {}

    def watch():
        nonlocal peak, at_peak, samples
        while not stop.is_set():
            total, kinds = _sample(tag, exclude)
            samples += 1
            if total > peak:
                peak, at_peak = total, kinds
            name = _running(work / "reports", names)
            if total > per_notebook.get(name, (0,))[0]:
                per_notebook[name] = (total, kinds)
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
    return {
        "peak": peak,
        "kinds": at_peak,
        "seconds": seconds,
        "samples": samples,
        "notebooks": dict(sorted(per_notebook.items())),
    }


def _parts(kinds: Counter) -> str:
    return ", ".join(f"{k} {v / MIB:.0f}" for k, v in kinds.most_common())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], metavar="NN", help="notebooks to run")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of notebook 04")
    parser.add_argument(
        "--modes", nargs="+", choices=MODES, default=list(MODES), help="runs to measure"
    )
    parser.add_argument(
        "--without-driver", action="store_true", help="leave the papermill driver out"
    )
    args = parser.parse_args(argv)
    results = {}
    for name in args.modes:
        exclude = ("papermill driver",) if args.without_driver else ()
        r = results[name] = measure(MODES[name], args.only, args.epochs, exclude=exclude)
        print(
            f"{name:8s} peak PSS {r['peak'] / MIB:7.0f} MiB over {r['samples']} samples "
            f"({r['seconds']:.0f} s); at the peak (MiB): {_parts(r['kinds'])}",
            flush=True,
        )
        for nb, (pss, kinds) in r["notebooks"].items():
            print(f"  {nb}: {pss / MIB:6.0f} MiB ({_parts(kinds)})", flush=True)
    goal = 1.5e9
    if "binder" in results:
        peak = results["binder"]["peak"]
        print(
            f"Binder-sized peak {peak / 1e9:.2f} GB "
            f"({'within' if peak <= goal else 'over'} the 1.5 GB goal)"
        )
    if len(results) == 2:
        print(f"binder / default: {results['binder']['peak'] / results['default']['peak']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
