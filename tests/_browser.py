"""What the browser tests share: a JupyterLab server on localhost, a headless Chromium driven by
Selenium, a folder for screenshots, and polling a page until it shows something.

Used by ``test_browser.py`` (the numbered notebooks) and ``test_browser_annotate.py`` (the
labelling widget).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from _benchmarks import load_benchmark

CHROMIUM_FLAGS = load_benchmark("_chromium").FLAGS  # the explorer benchmark's too
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SHOTS = os.environ.get("CLIMNB_BROWSER_SHOTS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_settings(config_dir: Path, *, record_timing: bool = False) -> None:
    """Render every cell (no windowing), so that all outputs are in the page; no news;
    ``record_timing``: record each cell's execution times."""
    tracker = {"windowingMode": "none", **({"recordTiming": True} if record_timing else {})}
    settings = config_dir / "lab" / "user-settings" / "@jupyterlab"
    for extension, name, values in (
        ("notebook-extension", "tracker", tracker),
        ("apputils-extension", "notification", {"fetchNews": "false", "checkForUpdates": False}),
    ):
        (settings / extension).mkdir(parents=True, exist_ok=True)
        (settings / extension / f"{name}.jupyterlab-settings").write_text(json.dumps(values))


@contextlib.contextmanager
def jupyter_lab(work: Path, env: dict | None = None):
    """JupyterLab serving ``work`` on 127.0.0.1 (its config and runtime folders inside it):
    yields ``(url, token, ready)``; ``ready()`` waits until the server answers, so that
    Chromium may start meanwhile. The server is stopped on leaving."""
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        env if env is not None else os.environ,
        JUPYTER_RUNTIME_DIR=str(work / ".runtime"),
        JUPYTER_CONFIG_DIR=str(work / ".config"),
        IPP_NONINTERACTIVE="",  # a person is watching: widgets, not printed progress
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={work}",
        "--LabApp.expose_app_in_browser=True",
        "--ServerApp.port_retries=0",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    log_path = work / "lab.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        yield url, token, lambda: _wait_for_server(url, token, server, log_path)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _wait_for_server(url, token, server, log_path, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"JupyterLab exited: {log_path.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            return
        except OSError:
            time.sleep(0.25)
    raise TimeoutError(f"JupyterLab did not start in {timeout} s: {log_path.read_text()[-2000:]}")


def chromium(profile: Path, window: tuple[int, int], *, logs=("browser",), flags=()):
    """A headless Chromium under chromedriver, with its own ``profile`` folder, a window of
    ``window`` pixels, the console (and ``logs``) kept, and ``flags`` added."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", dict.fromkeys(logs, "ALL"))
    for flag in (
        *CHROMIUM_FLAGS,
        *flags,
        f"--window-size={window[0]},{window[1]}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    return driver


def shots_folder(tmp_path: Path) -> Path:
    """Where screenshots go: ``CLIMNB_BROWSER_SHOTS`` if set, else the test's temporary folder."""
    folder = Path(SHOTS) if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def poll(fn, timeout, what, interval=0.25):
    """``fn()`` once it is true, asked every ``interval`` seconds for at most ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


# The open notebook's run: the kernel's status, whether every code cell has run, the errors its
# cells show, and the tail of what the cells that ran last show (for a failure's message).
_JS_NOTEBOOK = """
const nb = window.jupyterapp.shell.currentWidget;
const kernel = nb.sessionContext.session && nb.sessionContext.session.kernel;
const status = kernel ? kernel.status : 'no kernel';
const id = kernel ? kernel.id : '';
const code = nb.content.widgets.map((c, i) => [c, i]).filter(([c]) => c.model.type === 'code');
const errors = [];
for (const [c, i] of code) {
  for (const o of c.model.outputs.toJSON()) {
    if (o.output_type !== 'error') continue;
    const last = (o.traceback || []).slice(-4).join('\\n');
    errors.push(`cell ${i}: ${o.ename}: ${o.evalue}\\n${last}`);
  }
}
const ran = code.filter(([c]) => c.model.executionCount !== null);
const tail = ran.slice(-2).map(([c, i]) => `cell ${i}: ` +
  [...c.node.querySelectorAll('.jp-OutputArea-output')].map(e => e.innerText).join('\\n'));
const done = status === 'idle' && ran.length === code.length;
// cells sent to the kernel and not answered yet (queued by "Run All", or running)
const pending = code.filter(([c]) => c.model.executionState === 'running').length;
return {status, kernel: id, done, errors, ran: ran.length, pending, cells: code.length,
        tail: tail.join('\\n').slice(-1500)};
"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class NotebookRun:
    """The open notebook ``name``, run with "Run All": :meth:`finished` says whether every cell
    has run (and the kernel is idle), and fails at once, saying where the run stands, when it
    cannot finish: a cell failed ("Run All" runs nothing after it), the kernel died or restarted,
    or the kernel has stayed idle with cells neither run nor pending for ``stuck`` seconds (where
    nothing ran at all, "Run All" is asked once more first); and at the time limit. (The
    kernel's status alone says little: it turns idle after each widget message it answers while
    a cell still awaits.)"""

    def __init__(self, driver, name: str, timeout: float, stuck: float = 30.0):
        self.driver, self.name, self.stuck = driver, name, stuck
        self.deadline = time.monotonic() + timeout
        self.statuses: list[str] = []  # the kernel's statuses, each change once
        self.kernels: set[str] = set()
        self.idle_since: float | None = None
        self.rerun = False

    def finished(self) -> bool:
        state = self.driver.execute_script(_JS_NOTEBOOK)
        if not self.statuses or self.statuses[-1] != state["status"]:
            self.statuses.append(state["status"])
        self.kernels.add(state["kernel"])
        where = (
            f"kernel {state['status']} (seen: {' > '.join(self.statuses[-12:])}), "
            f"{state['ran']} of {state['cells']} code cells run, {state['pending']} pending; "
            f"the last shown: {_ANSI.sub('', state['tail'])}"
        )
        if state["errors"] and not state["pending"]:
            errors = _ANSI.sub("", "\n".join(state["errors"]))
            raise AssertionError(f"{self.name} stopped at an error:\n{errors}\n({where})")
        if state["done"]:
            return True
        if state["status"] in ("dead", "restarting", "autorestarting") or len(self.kernels) > 1:
            raise AssertionError(f"{self.name}: the kernel died or was restarted ({where})")
        now = time.monotonic()
        if state["status"] == "idle" and not state["pending"]:
            self.idle_since = self.idle_since or now
            if now - self.idle_since > self.stuck and not state["ran"] and not self.rerun:
                # nothing ran and nothing is queued: the page lost "Run All" (a click of the
                # test's, not the notebook's doing); ask once more
                print(f"{self.name}: nothing ran in {self.stuck:.0f} s; Run All again")
                self.driver.execute_script(
                    "window.jupyterapp.commands.execute('notebook:run-all-cells');"
                )
                self.rerun, self.idle_since = True, None
            elif now - self.idle_since > self.stuck:
                raise AssertionError(
                    f"{self.name}: the kernel idle for {self.stuck:.0f} s with cells not run "
                    f"and no error ({where})"
                )
        else:
            self.idle_since = None
        if now > self.deadline:
            raise AssertionError(f"{self.name} did not finish in time ({where})")
        return False


def wait_notebook(driver, name: str, timeout: float) -> None:
    """Wait until the open notebook ``name`` has run every cell; fail early where it cannot
    (:class:`NotebookRun`)."""
    # every 0.5 s: each poll is a round trip through chromedriver into the page, for the
    # whole of a notebook's run
    run = NotebookRun(driver, name, timeout)
    while not run.finished():
        time.sleep(0.5)
