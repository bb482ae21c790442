"""The notebooks as a person runs them: JupyterLab 4 on localhost, driven by headless Chromium.

One JupyterLab server (random free port and token, ``--allow-root`` as root) serves copies of
every numbered notebook in a temporary folder, and one Chromium (Debian's ``chromium`` through
``chromium-driver`` and Selenium) opens them in turn in one JupyterLab page, as a person opens
one notebook after another (each closed, its kernel shut down as the next opens). They are
chained as ``make demo`` chains them (:data:`climnb.demo.WORKFLOW`: 01 labels the fields 00
wrote, 02 stages 01's labels, 04 trains on 02's sample set, 05 and 06 use 04's model), each run
with "Run All" at toy size: a shorter run that still passes through every state (04 trains 2
short epochs, so a validation point arrives while training runs). This is the suite's one
end-to-end run of the notebooks: ``tests/test_notebooks.py`` executes with papermill only those
that no selected test here runs (``runs_notebook`` marks), e.g. where Chromium is missing. After
the kernel is idle and the outputs have stopped changing, for every notebook:

* no output holds a traceback (an error, or ``Traceback`` in stdout or stderr), an
  ``Error displaying widget``, or TensorFlow's C++ start-up messages;
* every progress bar (ipywidgets, as dask's and tqdm's are) is full;
* no request left the machine: Chromium's performance log names no host but localhost and
  127.0.0.1 (BokehJS and Panel's CSS are inline, nothing from ``cdn.holoviz.org``);
* the page logs no uncaught error (BokehJS, Panel).

And per notebook:

* 01: it labelled fields that hold the truth (00's, not new synthetic ones) and scored the
  labels against each labeller of a ClimateNet-layout folder, their consensus, and labeller
  against labeller;
* 02: the staging read each shared file at most once and filled both nodes' folders;
* 04: the dashboard's plots (training loss, validation IoU, throughput) show data *inside their
  visible ranges* while training runs (read from the Bokeh models through BokehJS), the status
  line changes, and at the end the stop button is disabled and the plots hold every step inside
  their ranges;
* 05: in both explorers, changing the channel changes the colour bar's title, and moving the
  time slider redraws the map (one move, with Panel's comm queue stalled first: climnb's
  ``unstall`` must send it).

Every output fits its cell at 1280 x 800 (:data:`WINDOW`, the file browser open): no output's
content is wider than its cell (no horizontal scroll bar), and no text of Bokeh's and Panel's
elements is cut by its box (scrollWidth against clientWidth, in their shadow roots too).

``CLIMNB_BROWSER_SHOTS=folder`` keeps screenshots there: the 04 dashboard mid-training, every
view and table of every notebook at the end, the 05 explorer after a channel change. Without
Chromium, chromedriver or Selenium the tests are skipped with the reason printed (``pytest
-ra`` lists it); ``make test`` installs them when running as root.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from _browser import (
    SHOTS,
    NotebookRun,
    chromium,
    jupyter_lab,
    lab_settings,
    poll,
    shots_folder,
    wait_notebook,
)
from _training import TINY
from conftest import browser_missing, check_expert_scores, write_chain_expert_folder

from climnb.demo import WORKFLOW, find_notebooks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

#: Shorter runs than the demo's (:data:`climnb.demo.WORKFLOW`, papermill-style injected).
SHORTER = {
    "00": {"n_time": 24},
    # one source labelled "as it comes" (tests/test_label_inputs.py labels ERA5 and MERRA-2
    # files, tests/test_real_inputs.py CAM5's); the heuristic labels scored against a
    # ClimateNet-layout folder of 00's first steps (conftest's write_chain_expert_folder)
    # and the real season of the tests' data verified against its best tracks (map and table)
    "01": {
        "own_sources": ["merra2"],
        "expert": "climatenet",
        "storm_season": str(ROOT / "tests/data/era5_msl_vo850_2025-12_2026-01_tropics_2.5x2.5.nc"),
        "best_track": str(ROOT / "tests/data/ibtracs_2025-12-01_2026-01-14.csv"),
    },
    # 4 files staged per rank of 2 x 2 (8 in the notebook): fewer batches to time
    "02": {"samples_per_rank": 4},
    # 4 steps per epoch on each of 2 ranks; the validations after steps 4 and 8 come mid-run
    # (with 2 epochs, on a loaded machine the one mid-run validation reached the page only
    # after the last step: the live check saw steps 1-6 and no validation point)
    # The smallest Tiramisu (tests/_training.py): tracing the toy preset's training step cost
    # each engine ~10 s more, and 05 and 06 trace its prediction again
    # The paper's draws (8 files per rank) where the demo deals its training files out: 24
    # steps would give each rank too few for 4 steps
    "04": {"epochs": 3, "samples_per_rank": 8, "draw": "replacement", "model_overrides": TINY},
    # 8 steps of the independent test series (64 in the notebook)
    "05": {"independent_steps": 8},
    # a smaller planted change (4 blocks of 16 steps) and fewer resamples: the same outputs
    "06": {"change_steps": 64, "n_resamples": 199},
}
PARAMETERS = {
    k: {**WORKFLOW.get(k, {}), **SHORTER.get(k, {})} for k in set(WORKFLOW) | set(SHORTER)
}
#: The browser window: a laptop's JupyterLab (the file browser open beside the notebook).
WINDOW = (1280, 800)
#: Seconds a notebook may take from "Run All" to an idle kernel.
TIMEOUT = {"04": 600, "01": 300, "06": 400}

LOCAL_HOSTS = {"127.0.0.1", "localhost", ""}
TF_NOISE = re.compile(
    r"^[IWEF]\d{4} |oneDNN custom operations|cpu_feature_guard|absl::InitializeLog|"
    r"This TensorFlow binary is optimized",
    re.M,
)

pytestmark = pytest.mark.browser


class Lab:
    """The running JupyterLab: where it is, its folder and its log."""

    def __init__(self, url: str, token: str, work: Path):
        self.url, self.token, self.work = url, token, work
        self._shutting: list[threading.Thread] = []
        self.ready = lambda: None  # the lab fixture: wait until the server answers

    def api(self, path: str, method: str = "GET"):
        auth = {"Authorization": f"token {self.token}"}
        req = urllib.request.Request(f"{self.url}/api/{path}", method=method, headers=auth)
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Shut down every session's kernel (as closing the notebook and its kernel would), in
        the background: the server waits for each kernel to exit (2-4 s), the next notebook
        need not; :meth:`join` waits for them."""
        for s in self.api("sessions"):
            t = threading.Thread(target=self.api, args=(f"sessions/{s['id']}", "DELETE"))
            t.start()
            self._shutting.append(t)

    def join(self) -> None:
        for t in self._shutting:
            t.join(timeout=60)

    def log(self, n: int = 3000) -> str:
        return (self.work / "lab.log").read_text()[-n:]


def _notebook_copies(work: Path) -> None:
    """Copies of the numbered notebooks with the toy parameters injected as papermill would."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    for path in find_notebooks(NOTEBOOKS):
        params = PARAMETERS.get(path.name[:2])
        nb = load_notebook_node(str(path))
        if params:
            nb = parameterize_notebook(nb, params)
        nbformat.write(nb, work / path.name)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 serving toy copies of the numbered notebooks."""
    reason = browser_missing()
    if reason:
        print(f"SKIPPED browser test: {reason}")
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("lab")
    _notebook_copies(work)
    write_chain_expert_folder(work)
    lab_settings(work / ".config", record_timing=True)
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # climnb must quieten TensorFlow itself
    with jupyter_lab(work, env) as (url, token, ready):
        running = Lab(url, token, work)
        # ready later: Chromium starts (the browser fixture) while the server starts
        running.ready = ready
        yield running
        running.join()


# CSS animations and transitions off in every page: a headless Chromium paints each frame of
# JupyterLab's spinners and transitions for nobody
_NO_ANIMATION = """
document.addEventListener('DOMContentLoaded', () => {
  const style = document.createElement('style');
  style.textContent = '*, *::before, *::after '
    + '{animation: none !important; transition: none !important;}';
  document.head.appendChild(style);
});
"""


@pytest.fixture(scope="module")
def browser(lab, tmp_path_factory):
    flags = ("--disable-quic", "--disable-component-update", "--disable-sync")
    profile = tmp_path_factory.mktemp("chromium-profile")
    driver = chromium(profile, WINDOW, logs=("browser", "performance"), flags=flags)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _NO_ANIMATION})
    lab.ready()
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path) -> Path:
    return shots_folder(tmp_path)


# ---------------------------------------------------------------------------------------------
# Running a notebook and reading what it shows
# ---------------------------------------------------------------------------------------------


_JS_RUN_ALL = """
const app = window.jupyterapp;
if (!app || !app.shell.currentWidget || !app.shell.currentWidget.sessionContext) return false;
if (app.shell.currentWidget.context.path !== arguments[0]) return false;
const ctx = app.shell.currentWidget.sessionContext;
if (!ctx.session || !ctx.session.kernel || ctx.session.kernel.status !== 'idle') return false;
app.commands.execute('notebook:run-all-cells');
return true;
"""

# Every output of every code cell (nbformat JSON), and the text the page shows for it.
_JS_OUTPUTS = """
const nb = window.jupyterapp.shell.currentWidget;
const out = [];
nb.content.widgets.forEach((cell, i) => {
  if (cell.model.type !== 'code') return;
  const shown = [...cell.node.querySelectorAll('.jp-OutputArea-output')].map(e => e.innerText);
  out.push({cell: i, outputs: cell.model.outputs.toJSON(), shown: shown.join('\\n')});
});
return out;
"""

# Seconds each code cell ran (JupyterLab's recordTiming metadata), by cell index.
_JS_TIMES = """
const nb = window.jupyterapp.shell.currentWidget;
const out = {};
nb.content.widgets.forEach((cell, i) => {
  const t = cell.model.type === 'code' && cell.model.getMetadata('execution');
  if (t && t['iopub.status.busy'] && t['shell.execute_reply'])
    out[i] = (Date.parse(t['shell.execute_reply']) - Date.parse(t['iopub.status.busy'])) / 1000;
});
return out;
"""


def _slowest_cells(driver, n: int = 4) -> str:
    times = driver.execute_script(_JS_TIMES) or {}
    top = sorted(times.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"cell {i} {s:.1f} s" for i, s in top)


_JS_BARS = """
return [...document.querySelectorAll('.widget-hprogress .progress-bar')]
  .map(e => e.style.width);
"""


# Close every document of the main area (the notebook before, its outputs unsaved: no "save?"
# dialog); its kernel is shut down through the server's API afterwards.
_JS_CLOSE_ALL = """
const app = window.jupyterapp;
if (!app) return 0;
let n = 0;
for (const w of [...app.shell.widgets('main')]) {
  if (w.context && w.context.model) w.context.model.dirty = false;
  w.close();
  n += 1;
}
return n;
"""

_JS_OPEN = """
window.jupyterapp.commands.execute('docmanager:open', {path: arguments[0], factory: 'Notebook'});
return true;
"""


def _open_and_run(driver, lab: Lab, name: str):
    """Open notebook ``name`` in JupyterLab and start "Run All"; return the start time.

    The first notebook loads JupyterLab's page; the next ones open in that page, as a person
    opens one notebook after another (JupyterLab's JavaScript is loaded and started once)."""
    if driver.execute_script("return !!(window.jupyterapp && window.jupyterapp.shell);"):
        driver.execute_script(_JS_OPEN, name)
    else:
        driver.get(f"{lab.url}/lab/tree/{name}?token={lab.token}&reset")
    poll(lambda: driver.execute_script(_JS_RUN_ALL, name), 120, f"{name} and an idle kernel")
    return time.monotonic()


# What late output would change: each cell's outputs, the progress bars, the Bokeh views.
_JS_SNAPSHOT = """
const nb = window.jupyterapp.shell.currentWidget;
const outs = nb.content.widgets.map(c => c.model.type !== 'code' ? 0 :
  JSON.stringify(c.model.outputs.toJSON()).length + c.node.querySelectorAll('*').length);
const bars = [...document.querySelectorAll('.widget-hprogress .progress-bar')]
  .map(e => e.style.width);
const views = window.Bokeh && Bokeh.index ? Object.keys(Bokeh.index).length : 0;
return JSON.stringify([outs, bars, views]);
"""


def _settle(driver, quiet: float = 1.5, most: float = 10.0) -> None:
    """Wait until the page's outputs stay the same for ``quiet`` seconds (at most ``most``):
    output that comes late (after the cell returned) comes now."""
    start = changed = time.monotonic()
    last = driver.execute_script(_JS_SNAPSHOT)
    while time.monotonic() - changed < quiet and time.monotonic() - start < most:
        time.sleep(0.25)
        now = driver.execute_script(_JS_SNAPSHOT)
        if now != last:
            last, changed = now, time.monotonic()


def _wait_done(driver, name: str, timeout: float) -> None:
    wait_notebook(driver, name, timeout)
    _settle(driver)


def _problems(cells) -> list[str]:
    """Tracebacks, widget errors and TensorFlow start-up noise in the notebook's outputs."""
    found = []
    for cell in cells:
        for o in cell["outputs"]:
            kind = o.get("output_type")
            text = "".join(o.get("text", "")) if kind == "stream" else ""
            if kind == "error":
                found.append(f"cell {cell['cell']}: {o.get('ename')}: {o.get('evalue')}")
            elif "Traceback" in text or re.search(r"^\w+Error: ", text, re.M):
                found.append(f"cell {cell['cell']} {o.get('name')}: {text[-600:]}")
            elif TF_NOISE.search(text):
                found.append(f"cell {cell['cell']} {o.get('name')}, TensorFlow noise: {text[:300]}")
        for needle in ("Error displaying widget", "Traceback (most recent call last)"):
            if needle in cell["shown"]:
                found.append(f"cell {cell['cell']} shows {needle!r}")
    return found


def _requests(driver) -> list[str]:
    """URLs the page requested since the last call (Chromium's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.webSocketCreated":
            urls.append(message["params"]["url"])
    return urls


def _remote(urls) -> list[str]:
    out = []
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme in ("data", "blob", "about", "chrome", "devtools"):
            continue
        if parts.hostname not in LOCAL_HOSTS:
            out.append(url)
    return sorted(set(out))


def _console(driver) -> list[dict]:
    try:
        return driver.get_log("browser")
    except Exception:  # noqa: BLE001 - diagnostics only
        return []


# What does not fit at this window's width: an output whose content is wider than its cell (a
# horizontal scroll bar), text of Bokeh and Panel cut by its box (more text than the box shows:
# a table cell "2000-01-0", a note cut mid-sentence), looked for in their shadow roots, and
# plot titles longer than their plots.
# (xarray's repr shortens its previews with an ellipsis on purpose: not looked at.)
_JS_FIT = """
const nb = window.jupyterapp.shell.currentWidget;
const wide = arguments[0];  // sources of cells whose pandas table may be wider than the cell
const found = [];
const ownText = el => [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
const label = el => (el.innerText || el.textContent || '').trim().slice(0, 60);
const holoviz = el => [...el.classList].some(c => c.startsWith('bk') || c.startsWith('pn'));
function visit(el, fn, inside) {
  inside = inside || holoviz(el);
  if (inside) fn(el);
  if (el.shadowRoot) for (const c of el.shadowRoot.children) visit(c, fn, true);
  for (const c of el.children) visit(c, fn, inside);
}
nb.content.widgets.forEach((cell, i) => {
  if (cell.model.type !== 'code') return;
  for (const out of cell.node.querySelectorAll('.jp-OutputArea-output')) {
    const table = out.querySelector(':scope > table, .dataframe');
    if (out.scrollWidth > out.clientWidth && !(table && wide.includes(
        cell.model.sharedModel.getSource().trim())))
      found.push(`cell ${i}: content ${out.scrollWidth} px wide in a cell of ${out.clientWidth}`);
    visit(out, el => {  // Bokeh's and Panel's elements
      if (!ownText(el) || el.clientWidth === 0) return;
      const style = getComputedStyle(el);
      if (style.visibility === 'hidden' || style.display === 'none') return;
      const cut = (el.scrollWidth > el.clientWidth + 1 && style.overflowX !== 'visible') ||
        (el.scrollHeight > el.clientHeight + 2 && style.overflowY === 'hidden');
      if (cut) found.push(`cell ${i}: text cut: "${label(el)}" (${el.scrollWidth}x` +
        `${el.scrollHeight} px in ${el.clientWidth}x${el.clientHeight})`);
    });
  }
});
// Bokeh draws titles on its canvas, where no box can say they were cut: measured instead,
// each line of a plot's title against the room from the plot area's left edge to the end
if (window.Bokeh && Bokeh.index) {
  const ctx = document.createElement('canvas').getContext('2d');
  const seen = new Set();
  const walk = v => {
    if (!v || seen.has(v)) return;
    seen.add(v);
    const title = v.model && v.model.title;
    if (title && title.text !== undefined && v.frame && v.bbox && v.el && v.el.isConnected) {
      ctx.font = `${title.text_font_style} ${title.text_font_size} ${title.text_font}`;
      const lines = String(title.text).split('\\n');
      const widest = Math.max(...lines.map(s => ctx.measureText(s).width));
      const room = v.bbox.width - v.frame.bbox.left;
      if (widest > room + 1)
        found.push(`title cut: "${title.text}" (${Math.round(widest)} px in ${Math.round(room)})`);
    }
    for (const c of (v.child_views || [])) walk(c);
  };
  for (const v of Object.values(Bokeh.index)) walk(v);
}
return found;
"""


_JS_VIEWS = """
const nb = window.jupyterapp.shell.currentWidget;
const out = [];
nb.content.widgets.forEach((cell, i) => {
  if (cell.model.type !== 'code') return;
  for (const o of cell.node.querySelectorAll('.jp-OutputArea-output')) {
    if (o.querySelector('.bk-root, [class^="bk"], table, .widget-hprogress') ||
        o.querySelector('*') && [...o.querySelectorAll('*')].some(e => e.shadowRoot))
      out.push([i, o]);
  }
});
return out;
"""


def _keep_views(driver, shots: Path, number: str) -> list[Path]:
    """A screenshot of every view and table of the notebook, as the window shows it, whole:
    the window grows taller for the shot of a view taller than it (its width, and so the
    layout, stays that of :data:`WINDOW`)."""
    kept = []
    for k, (cell, element) in enumerate(driver.execute_script(_JS_VIEWS)):
        height = driver.execute_script("return arguments[0].offsetHeight;", element)
        if height > WINDOW[1] - 250:
            driver.set_window_size(WINDOW[0], height + 300)
        driver.execute_script("arguments[0].scrollIntoView();", element)
        time.sleep(0.3)
        path = shots / f"{number}_cell{cell:02d}_{k}.png"
        element.screenshot(str(path))
        driver.set_window_size(*WINDOW)
        kept.append(path)
    return kept


#: Cells whose pandas table may scroll sideways where it is wider than the cell, by notebook:
#: none (every table goes through ``climnb.viz.tables.readable``).
WIDE_TABLES: dict[str, list[str]] = {}


def _check_fit(driver, name: str) -> None:
    """Every output fits its cell at :data:`WINDOW`'s width and shows its text whole."""
    found = driver.execute_script(_JS_FIT, WIDE_TABLES.get(name[:2], []))
    if os.environ.get("SURVEY"):
        print("SURVEY", name, *found, sep="\n  ")
        return
    assert not found, f"{name} at {WINDOW[0]} px:\n" + "\n".join(found[:20])


def _check_common(driver, lab: Lab, name: str) -> list[dict]:
    """The checks every notebook gets; returns the console entries read."""
    cells = driver.execute_script(_JS_OUTPUTS)
    problems = _problems(cells)
    assert not problems, f"{name}:\n" + "\n".join(problems)
    _check_fit(driver, name)
    bars = driver.execute_script(_JS_BARS)
    assert all(b == "100%" for b in bars), f"{name}: progress bars not full: {bars}"
    remote = _remote(_requests(driver))
    assert not remote, f"{name}: requests left the machine: {remote}"
    console = _console(driver)
    js_errors = [e["message"] for e in console if "Uncaught" in e["message"]]
    assert not js_errors, f"{name}: errors in the page (BokehJS, Panel): {js_errors[:5]}"
    return console


@pytest.fixture
def notebook_run(lab, browser):
    """Run a notebook by its number; shut its kernel down afterwards."""
    browser.get_log("performance")  # drop what earlier pages requested

    def run(number: str):
        name = next(p.name for p in lab.work.glob(f"{number}_*.ipynb"))
        return name, _open_and_run(browser, lab, name)

    yield run
    browser.execute_script(_JS_CLOSE_ALL)
    lab.shutdown_kernels()


def _clean_run(number: str, notebook_run, browser, lab) -> list[dict]:
    """Run a notebook to the end, check what every notebook gets; return its outputs."""
    name, started = notebook_run(number)
    _wait_done(browser, name, TIMEOUT.get(number, 240))
    _check_common(browser, lab, name)
    print(
        f"{name}: clean, {time.monotonic() - started:.0f} s in the browser; slowest: "
        f"{_slowest_cells(browser)}"
    )
    return browser.execute_script(_JS_OUTPUTS)


@pytest.mark.parametrize(
    "number",
    [pytest.param(n, marks=pytest.mark.runs_notebook(n)) for n in ("00", "01", "02", "03")],
)
def test_notebook_outputs_clean(number, notebook_run, browser, lab, shots):
    """Notebooks 00-03: every output right (no traceback, full progress, nothing remote)."""
    cells = _clean_run(number, notebook_run, browser, lab)
    if SHOTS:
        _keep_views(browser, shots, number)
    text = "".join("".join(o.get("text", "")) + c["shown"] for c in cells for o in c["outputs"])
    if number == "01":  # chained on 00's fields, which hold the truth
        assert "no truth in this data set" not in text
        check_expert_scores(text)
    if number == "02":  # staged from 01's labels onto two simulated nodes
        assert "each file read at most 1x" in text
        assert all((lab.work / "data/toy" / f"node{n}").is_dir() for n in (0, 1))


# ---------------------------------------------------------------------------------------------
# 04: the live training dashboard
# ---------------------------------------------------------------------------------------------

# Per plot of the page: its title and how many of its line/scatter points lie inside the
# ranges it shows (a plot whose axes stayed 0..1 while the data moved on shows none); for a
# plot with points out of view, the first few of them ([x, y]) and its x and y ranges.
_JS_PLOTS = """
const out = [];
if (!window.Bokeh || !Bokeh.index) return out;
const seen = new Set();
for (const view of Object.values(Bokeh.index)) {
  if (!view.el || !view.el.isConnected || !view.model.document) continue;  // gone
  for (const m of view.model.document.all_models) {
    if (seen.has(m.id) || !m.renderers || !m.x_range || !m.title) continue;
    seen.add(m.id);
    const [x0, x1] = [m.x_range.start, m.x_range.end].sort((a, b) => a - b);
    const [y0, y1] = [m.y_range.start, m.y_range.end].sort((a, b) => a - b);
    let points = 0, visible = 0;
    const outside = [];
    for (const r of m.renderers) {
      if (!r.glyph || !r.data_source || !r.glyph.x || !r.glyph.y) continue;
      const xs = r.data_source.data[r.glyph.x.field], ys = r.data_source.data[r.glyph.y.field];
      if (!xs || !ys) continue;
      for (let i = 0; i < xs.length; i++) {
        if (!Number.isFinite(xs[i]) || !Number.isFinite(ys[i])) continue;
        points += 1;
        if (xs[i] >= x0 && xs[i] <= x1 && ys[i] >= y0 && ys[i] <= y1) visible += 1;
        else if (outside.length < 5) outside.push([xs[i], ys[i]]);
      }
    }
    const title = typeof m.title === 'string' ? m.title : (m.title.text || '');
    const plot = {title, points, visible};
    if (outside.length) Object.assign(plot, {outside, x: [x0, x1], y: [y0, y1]});
    out.push(plot);
  }
}
return out;
"""

_JS_DASHBOARD = """
const texts = [...document.querySelectorAll('.widget-html-content')].map(e => e.innerText);
const stop = [...document.querySelectorAll('button.jupyter-button')]
  .filter(e => e.innerText.includes('stop')).map(e => e.disabled);
return {texts, stop};
"""

_JS_DASHBOARD_OUTPUT = """
for (const cell of window.jupyterapp.shell.currentWidget.content.widgets) {
  if (cell.node.querySelector('button.jupyter-button') &&
      cell.node.querySelector('.widget-hprogress')) {
    const area = cell.node.querySelector('.jp-Cell-outputArea');
    area.scrollIntoView();
    return area;
  }
}
return null;
"""

LIVE_PLOTS = ("training loss", "validation IoU", "throughput")


def _status(state) -> tuple[int, int] | None:
    for t in state["texts"]:
        m = re.match(r"step (\d+)/(\d+)", t)
        if m:
            return int(m[1]), int(m[2])
    return None


@pytest.mark.runs_notebook("04")
def test_training_dashboard_live(notebook_run, browser, lab, shots):
    """04 in JupyterLab: the plots draw data while the engines train; then stop is disabled."""
    name, started = notebook_run("04")
    statuses, live, shot = [], {}, None
    run = NotebookRun(browser, name, TIMEOUT["04"] - (time.monotonic() - started))

    def finished() -> bool:
        try:
            return run.finished()
        except AssertionError as err:  # with what the dashboard said while it ran
            raise AssertionError(f"{err}\n(dashboard statuses seen: {statuses})") from None

    while not finished():
        state = browser.execute_script(_JS_DASHBOARD)
        status = _status(state)
        if status and status[0] < status[1]:  # training runs
            if not statuses or statuses[-1] != status:
                statuses.append(status)
            for p in browser.execute_script(_JS_PLOTS):
                if p["title"] in LIVE_PLOTS and p["visible"]:
                    live[p["title"]] = max(live.get(p["title"], 0), p["visible"])
            if shot is None and len(live) == len(LIVE_PLOTS):
                area = browser.execute_script(_JS_DASHBOARD_OUTPUT)
                if area is not None:
                    time.sleep(0.5)
                    shot = shots / "04_dashboard_mid_training.png"
                    area.screenshot(str(shot))
        time.sleep(0.5)
    _settle(browser)
    console = _check_common(browser, lab, name)
    state = browser.execute_script(_JS_DASHBOARD)
    assert len(statuses) >= 2, f"the status line changed while training ran: {statuses}"
    # each plot drew data while the engines trained: a line of the loss, a point of the others
    # (a validation comes every few steps; the loss and throughput axes are fitted by BokehJS
    # when it next draws, and a fast run may end between two polls)
    missing = [t for t in LIVE_PLOTS if live.get(t, 0) < (2 if t == "training loss" else 1)]
    assert not missing, (
        f"plots without visible data while training ran: {missing} (seen {live}); "
        f"statuses {statuses}; console {[e['message'][:200] for e in console[-10:]]}"
    )
    assert state["stop"] and all(state["stop"]), f"stop button enabled after training: {state}"
    _keep_views(browser, shots, "04")
    final = _status(state)
    assert final and final[0] == final[1], f"the status ends at the last step: {state['texts']}"
    # at the end the live plots (and the report's) hold every step, all inside their ranges
    # (the step axis spans the run, the value axes are fitted in the browser); the last
    # frame's data reach the page in messages of their own: give them time to land
    settled = time.monotonic() + 30
    while True:
        end = [p for p in browser.execute_script(_JS_PLOTS) if p["title"] in LIVE_PLOTS]
        if all(p["visible"] == p["points"] > 0 for p in end) or time.monotonic() > settled:
            break
        time.sleep(0.5)
    assert all(p["visible"] == p["points"] > 0 for p in end), f"data out of view: {end}"
    assert max(p["points"] for p in end if p["title"] == "throughput") == final[1], end
    print(
        f"{name}: statuses {statuses}; live points {live}; {time.monotonic() - started:.0f} s; "
        f"slowest: {_slowest_cells(browser)}"
    )


# ---------------------------------------------------------------------------------------------
# 05: the explorers and the event view
# ---------------------------------------------------------------------------------------------

# Per Bokeh document of the page (each output is one): its selects, sliders, colour bar
# titles, image sums, plot titles and x ranges, and data tables.
_JS_DOCS = """
const docs = new Map();
if (!window.Bokeh || !Bokeh.index) return [];
for (const view of Object.values(Bokeh.index)) {
  if (!view.el || !view.el.isConnected || !view.model.document) continue;  // gone
  const doc = view.model.document;
  if (!doc || docs.has(doc)) continue;
  const d = {selects: [], sliders: [], colorbars: [], images: [], plots: [], tables: []};
  for (const m of doc.all_models) {
    const t = String(m.type);
    if (t.endsWith('Select')) d.selects.push({id: m.id, value: m.value,
        options: m.options.map(o => Array.isArray(o) ? o[0] : o)});
    if (t === 'Slider') d.sliders.push({id: m.id, value: m.value, end: m.end});
    if (t === 'ColorBar') d.colorbars.push(m.title || '');
    if (t === 'ColumnDataSource') {
      const key = m.data.image ? 'image' : null;
      if (key) {
        const img = m.data.image[0];
        const flat = img.flat ? img.flat(2) : img;
        let sum = 0;
        for (let i = 0; i < flat.length; i += 7) { if (Number.isFinite(flat[i])) sum += flat[i]; }
        d.images.push([m.id, flat.length, sum]);
      }
    }
    if (m.renderers && m.x_range && m.title) {
      const title = typeof m.title === 'string' ? m.title : (m.title.text || '');
      d.plots.push({id: m.id, title, x: [m.x_range.start, m.x_range.end]});
    }
    if (t === 'DataTable') d.tables.push(m.source.id);
  }
  docs.set(doc, d);
}
return [...docs.values()];
"""

_JS_SET = """
const [id, attr, value] = arguments;
for (const view of Object.values(Bokeh.index)) {
  if (!view.el || !view.el.isConnected || !view.model.document) continue;  // gone
  for (const m of view.model.document.all_models) {
    if (m.id !== id) continue;
    if (attr === 'selected') { m.selected.indices = value; return true; }
    m[attr] = value === '+1' ? m[attr] + 1 : value;
    return true;
  }
}
return false;
"""

# A lost acknowledgement, for certain: Panel's CommManagers blocked with their timeouts a
# minute away, so a change is queued (without climnb's unstall it would wait for the next one).
_JS_STALL_COMMS = """
let n = 0;
for (const view of Object.values(Bokeh.index)) {
  if (!view.el || !view.el.isConnected || !view.model.document) continue;  // gone
  for (const m of view.model.document.all_models) {
    if (String(m.type).endsWith('CommManager')) {
      m._blocked = true;
      m._timeout = Date.now() + 60000;
      n += 1;
    }
  }
}
return n;
"""


def _docs(driver):
    return driver.execute_script(_JS_DOCS)


def _explorers(driver):
    """Indices of the documents with a channel selector (the two explorers, in page order)."""
    return [
        i
        for i, d in enumerate(_docs(driver))
        if any("PSL" in s["options"] for s in d["selects"]) and d["sliders"]
    ]


def _change_channel(driver, index: int, channel: str) -> dict:
    doc = _docs(driver)[index]
    select = next(s for s in doc["selects"] if channel in s["options"])
    assert select["value"] != channel
    assert driver.execute_script(_JS_SET, select["id"], "value", channel)

    def relabelled():
        now = _docs(driver)[index]
        return any(channel in t for t in now["colorbars"]) and now

    return poll(relabelled, 30, f"the colour bar of explorer {index} to name {channel}")


def _move_time(driver, index: int) -> list:
    doc = _docs(driver)[index]
    before = {i[0]: i[1:] for i in doc["images"]}
    slider = doc["sliders"][0]
    assert driver.execute_script(_JS_SET, slider["id"], "value", "+1")

    def redrawn():
        now = {i[0]: i[1:] for i in _docs(driver)[index]["images"]}
        return [k for k in now if before.get(k) != now[k]]

    return poll(redrawn, 30, f"explorer {index} to draw the next time step")


def _output_of(driver, index: int):
    """The output area holding the ``index``-th Bokeh document (for a screenshot)."""
    return driver.execute_script(
        """
        const docs = [];
        for (const view of Object.values(Bokeh.index)) {
  if (!view.el || !view.el.isConnected || !view.model.document) continue;  // gone
          const doc = view.model.document;
          if (!docs.includes(doc)) { docs.push(doc); if (docs.length - 1 === arguments[0]) {
            const el = view.el.closest('.jp-OutputArea-output') || view.el;
            el.scrollIntoView(); return el; } }
        }
        return null;
        """,
        index,
    )


@pytest.mark.runs_notebook("05")
def test_explorer_channel_and_time(notebook_run, browser, lab, shots):
    """05 in JupyterLab: a channel change retitles the colour bar, a slider move redraws."""
    name, started = notebook_run("05")
    _wait_done(browser, name, TIMEOUT.get("05", 300))
    _check_common(browser, lab, name)
    shown = " ".join(c["shown"] for c in browser.execute_script(_JS_OUTPUTS))
    assert "network vs teacher" in shown, f"{name}: no scores on the independent series"
    assert "network + river rules" in shown, f"{name}: no river-rule rows in the independent table"
    _keep_views(browser, shots, "05")
    explorers = poll(lambda: len(e := _explorers(browser)) >= 2 and e, 60, "both explorers")
    fast, holo = explorers[:2]

    for index in (fast, holo):
        _change_channel(browser, index, "PSL")
    area = SHOTS and _output_of(browser, holo)
    if area:
        time.sleep(1.5)  # let the canvases repaint
        area.screenshot(str(shots / "05_explorer_after_channel_change.png"))

    moved = {holo: _move_time(browser, holo)}
    # last, as it leaves the page's comms stalled: the fast explorer with Panel's comm queue
    # stalled first, so that only climnb's unstall can send the move
    stalled = browser.execute_script(_JS_STALL_COMMS)
    assert stalled >= 1, "the notebook page has no Panel comm manager to stall"
    moved[fast] = _move_time(browser, fast)
    print(
        f"{name}: colour bars relabelled, { {k: len(v) for k, v in moved.items()} } image(s) "
        "redrawn; "
        f"{time.monotonic() - started:.0f} s; slowest: {_slowest_cells(browser)}"
    )


# ---------------------------------------------------------------------------------------------
# 06: event statistics (last: it reads what 01 and 04 wrote)
# ---------------------------------------------------------------------------------------------


@pytest.mark.runs_notebook("06")
def test_event_statistics_clean(notebook_run, browser, lab, shots):
    """06 on 01's labels and 04's model: every output right, as for 00-03."""
    _clean_run("06", notebook_run, browser, lab)
    _keep_views(browser, shots, "06")
