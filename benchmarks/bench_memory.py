"""Peak memory of the toy workflow, summed over all its processes, default vs Binder-sized.

mybinder.org gives a session at most 2 GB. This runs the notebooks the way ``make demo`` does
(``climnb demo`` on a copy of ``notebooks/``: papermill, one kernel per notebook) twice:

* ``default``: as on a workstation;
* ``binder``: with ``MEM_LIMIT=2147483648`` in the environment, as JupyterHub and Binder set it
  (climnb then starts one engine, :class:`climnb.runtime.cluster.SessionLimits`).

``--lab`` runs the chain as a Binder user does instead: one JupyterLab server (``jupyter
lab``, Binder-sized) serves a copy of ``notebooks/``; each notebook, on its own defaults (nothing
injected), gets a session of the server and its code cells are sent one by one through the
server's kernel websocket, as a browser's "Run All" sends them, so that every output passes
through the server; its kernel is shut down when it ends. The client that sends the cells is
not counted; the server is.

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
    nice .venv/bin/python benchmarks/bench_memory.py --lab

Needs root (or the same user) to read other processes' PSS and environment.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
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
        ("jupyter lab", "jupyterlab server"),
        ("jupyter-lab", "jupyterlab server"),
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


class _Watch:
    """Samples the tagged processes every ``interval`` s in a thread, keeping the peak and the
    peak of each notebook (``current()`` names the one running)."""

    def __init__(self, tag: str, current, interval: float = 0.5, exclude=()):
        self.tag, self.current, self.interval, self.exclude = tag, current, interval, exclude
        self.peak, self.at_peak, self.samples = 0, Counter(), 0
        self.notebooks: dict[str, tuple[int, Counter]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            total, kinds = _sample(self.tag, self.exclude)
            self.samples += 1
            if total > self.peak:
                self.peak, self.at_peak = total, kinds
            name = self.current()
            if total > self.notebooks.get(name, (0,))[0]:
                self.notebooks[name] = (total, kinds)
            self._stop.wait(self.interval)

    def __enter__(self):
        self.start = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.seconds = time.perf_counter() - self.start

    def result(self) -> dict:
        return {
            "peak": self.peak,
            "kinds": self.at_peak,
            "seconds": self.seconds,
            "samples": self.samples,
            "notebooks": dict(sorted(self.notebooks.items())),
        }


def _copy_notebooks(work: Path) -> Path:
    nbs = work / "notebooks"
    shutil.copytree(ROOT / "notebooks", nbs, ignore=shutil.ignore_patterns("data", "runs"))
    return nbs


def _environment(tag: str, env_extra: dict) -> dict:
    env = dict(os.environ, CLIMNB_BENCH_TAG=tag, PYTHONPATH=str(ROOT), **env_extra)
    for name in ("MEM_LIMIT", "CPU_LIMIT"):
        if name not in env_extra:
            env.pop(name, None)
    return env


def measure(
    env_extra: dict, only: list[str], epochs: int, interval: float = 0.5, exclude=()
) -> dict:
    """Run the workflow once; return its peak PSS, the breakdown at the peak, the peak of each
    notebook (``{"04": (pss, kinds)}``) and the time."""
    work = Path(tempfile.mkdtemp(prefix="climnb-bench-memory-"))
    nbs = _copy_notebooks(work)
    tag = uuid.uuid4().hex
    env = _environment(tag, env_extra)
    cmd = [sys.executable, "-m", "climnb", "demo", "--notebooks", str(nbs)]
    cmd += ["--reports", str(work / "reports"), "--epochs", str(epochs)]
    if only:
        cmd += ["--only", *only]
    names = [p.name[:2] for p in find_notebooks(nbs, only)]
    with _Watch(tag, lambda: _running(work / "reports", names), interval, exclude) as watch:
        run = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
    shutil.rmtree(work, ignore_errors=True)
    if run.returncode:
        raise SystemExit(f"climnb demo failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return watch.result()


# --- the chain in JupyterLab --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Lab:
    """A JupyterLab server on 127.0.0.1 serving ``root``, with the environment ``env``."""

    def __init__(self, root: Path, env: dict):
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1"]
        cmd += [f"--port={self.port}", f"--IdentityProvider.token={self.token}"]
        cmd += [f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0"]
        env = dict(env, JUPYTER_RUNTIME_DIR=str(root / ".runtime"))
        if os.geteuid() == 0:
            cmd.append("--allow-root")
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.log = root / "lab.log"
        with open(self.log, "w") as log:
            self.server = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 120
        while True:
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"JupyterLab did not start:\n{self.log.read_text()[-2000:]}")
            try:
                self.api("status")
                break
            except OSError:
                time.sleep(0.5)

    def api(self, path: str, method: str = "GET", body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"token {self.token}", "Content-Type": "application/json"}
        req = urllib.request.Request(f"{self.url}/api/{path}", data, headers, method=method)
        with urllib.request.urlopen(req, timeout=120) as r:
            out = r.read()
        return json.loads(out) if out else None

    def close(self) -> None:
        self.server.terminate()
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()


def _execute_request(code: str, session: str) -> dict:
    return {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "username": "bench",
            "session": session,
            "msg_type": "execute_request",
            "version": "5.3",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        },
        "parent_header": {},
        "metadata": {},
        "content": {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
        "channel": "shell",
        "buffers": [],
    }


async def _run_cells(lab: _Lab, kernel: str, cells: list[str], name: str, timeout: float):
    """Send the cells to the kernel through the server's websocket, one after the other, as
    "Run All" does; stop at the first error, naming it."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    session = uuid.uuid4().hex
    url = f"ws://127.0.0.1:{lab.port}/api/kernels/{kernel}/channels?session_id={session}"
    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {lab.token}"}))
    try:
        for i, code in enumerate(cells):
            msg = _execute_request(code, session)
            await ws.write_message(json.dumps(msg))
            while True:
                raw = await asyncio.wait_for(ws.read_message(), timeout)
                if raw is None:
                    raise SystemExit(f"{name}: the kernel's websocket closed in cell {i}")
                if isinstance(raw, bytes):  # a message with binary buffers (widgets)
                    continue
                reply = json.loads(raw)
                if reply.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]:
                    continue
                if reply["msg_type"] == "execute_reply":
                    content = reply["content"]
                    if content["status"] != "ok":
                        what = f"{content.get('ename')}: {content.get('evalue')}"
                        raise SystemExit(f"{name}: cell {i} failed: {what}")
                    break
    finally:
        ws.close()


def measure_lab(only: list[str], interval: float = 0.5, exclude=(), timeout=1800) -> dict:
    """The chain in a Binder-sized JupyterLab, each notebook on its own defaults; the same
    figures as :func:`measure`."""
    import nbformat

    work = Path(tempfile.mkdtemp(prefix="climnb-bench-memory-lab-"))
    nbs = _copy_notebooks(work)
    tag = uuid.uuid4().hex
    env = _environment(tag, BINDER)
    env.pop("IPP_NONINTERACTIVE", None)  # a person is watching: widgets, as on Binder
    state = {"current": "start"}
    lab = _Lab(nbs, env)
    try:
        with _Watch(tag, lambda: state["current"], interval, exclude) as watch:
            for path in find_notebooks(nbs, only):
                state["current"] = path.name[:2]
                nb = nbformat.read(path, as_version=4)
                cells = [c.source for c in nb.cells if c.cell_type == "code"]
                body = {"path": path.name, "type": "notebook", "name": path.name}
                session = lab.api("sessions", "POST", {**body, "kernel": {"name": "python3"}})
                try:
                    asyncio.run(_run_cells(lab, session["kernel"]["id"], cells, path.name, timeout))
                finally:
                    lab.api(f"sessions/{session['id']}", "DELETE")
            state["current"] = "end"
            time.sleep(2 * interval)
    finally:
        lab.close()
        shutil.rmtree(work, ignore_errors=True)
    return watch.result()


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
    parser.add_argument(
        "--lab",
        action="store_true",
        help="run the chain in a Binder-sized JupyterLab server instead, on the notebooks' "
        "own defaults (the server counted, not the client)",
    )
    args = parser.parse_args(argv)
    exclude = ("papermill driver",) if args.without_driver else ()
    runs = (
        {"lab": lambda: measure_lab(args.only, exclude=exclude)}
        if args.lab
        else {
            name: (lambda m=MODES[name]: measure(m, args.only, args.epochs, exclude=exclude))
            for name in args.modes
        }
    )
    results = {}
    for name, run in runs.items():
        r = results[name] = run()
        print(
            f"{name:8s} peak PSS {r['peak'] / MIB:7.0f} MiB over {r['samples']} samples "
            f"({r['seconds']:.0f} s); at the peak (MiB): {_parts(r['kinds'])}",
            flush=True,
        )
        for nb, (pss, kinds) in r["notebooks"].items():
            print(f"  {nb}: {pss / MIB:6.0f} MiB ({_parts(kinds)})", flush=True)
    goal = 1.5e9
    binder = results.get("lab") or results.get("binder")
    if binder:
        peak = binder["peak"]
        print(
            f"Binder-sized peak {peak / 1e9:.2f} GB "
            f"({'within' if peak <= goal else 'over'} the 1.5 GB goal)"
        )
    if "binder" in results and "default" in results:
        print(f"binder / default: {results['binder']['peak'] / results['default']['peak']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
