"""The labelling widget as a person uses it: JupyterLab 4 on localhost, driven by headless Chromium.

A notebook opens two toy steps with the truth proposed as outlines
(:class:`climnb.viz.annotate.Annotator`); then, with real mouse actions on the Bokeh canvas
(Selenium's pointer actions at the screen positions BokehJS gives for map coordinates):

* an outline is clicked and deleted (the **delete** button);
* a polygon is drawn with the polygon tool (press and hold, clicks, press and hold);
* one of its vertices is dragged with the vertex tool (press the outline, drag);
* its class is changed (the class selector, a click on the outline, **set class**);
* the step is saved (**save**).

The saved file must hold ``LABELS`` equal to the outlines rasterised (the proposals left, the
polygon as drawn and moved, of its new class), the deleted event must be gone, and the file
must reopen as the labeller's (:func:`climnb.labels.expert.open_expert`).

Before that, on the same page: the step slider dragged to step 2 shows its own proposals;
**carry** replaces them with step 1's outlines, **undo** brings them back, and the slider
dragged back shows step 1 as it was left.

``CLIMNB_BROWSER_SHOTS=folder`` keeps screenshots there (before and after the edits, step 2
before and after the carry); else the test's temporary folder. Without Chromium, chromedriver
or Selenium the test is skipped with the reason printed.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from _browser import chromium, jupyter_lab, lab_settings, poll, shots_folder, wait_notebook
from conftest import browser_missing

WINDOW = (1280, 900)
NAME = "annotate.ipynb"
LABELLER, WHO = 4, "browser"

pytestmark = pytest.mark.browser

# the notebook a person would write: two toy steps, the truth proposed as outlines
NOTEBOOK_CELLS = [
    "from climnb.data.synthetic import make_dataset\n"
    "from climnb.viz.annotate import Annotator\n"
    "from climnb.viz.notebook import setup\n"
    "setup()\n"
    "ds, _ = make_dataset(n_time=2, seed=11)\n"
    f"ann = Annotator(ds, {{'truth': ds.truth}}, 'expert', labeller={LABELLER}, name='{WHO}')",
    "ann.view(live=True)",
]


def _write_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in NOTEBOOK_CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 serving the labelling notebook: ``(url, token, folder)``."""
    reason = browser_missing()
    if reason:
        print(f"SKIPPED browser test: {reason}")
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("annotate-lab")
    _write_notebook(work / NAME)
    lab_settings(work / ".config")
    with jupyter_lab(work) as (url, token, ready):
        ready()
        yield url, token, work


@pytest.fixture(scope="module")
def browser(lab, tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"), WINDOW)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path) -> Path:
    return shots_folder(tmp_path)


@pytest.fixture(scope="module")
def page(lab, browser):
    """The labelling notebook opened and run; the map drawn: ``(browser, work folder)``."""
    url, token, work = lab
    browser.get(f"{url}/lab/tree/{NAME}?token={token}&reset")
    poll(lambda: browser.execute_script(_JS_RUN_ALL), 120, "an idle kernel")
    wait_notebook(browser, NAME, 180)
    poll(lambda: _map(browser), 60, "the map")
    return browser, work


_JS_RUN_ALL = """
const app = window.jupyterapp;
if (!app || !app.shell.currentWidget || !app.shell.currentWidget.sessionContext) return false;
const ctx = app.shell.currentWidget.sessionContext;
if (!ctx.session || !ctx.session.kernel || ctx.session.kernel.status !== 'idle') return false;
app.commands.execute('notebook:run-all-cells');
return true;
"""

# The map: the Bokeh plot holding the outlines (a Patches glyph). Returns the screen position
# (viewport pixels) of each [lon, lat] in arguments[0], the outlines' data and the tools.
_JS_MAP = """
const found = [];
const walk = (v, seen) => {
  if (!v || seen.has(v)) return;
  seen.add(v);
  if (v.frame && v.model && v.model.renderers && v.el && v.el.isConnected &&
      v.model.renderers.some(r => r.glyph && r.glyph.type === 'Patches')) found.push(v);
  for (const c of (v.child_views || [])) walk(c, seen);
};
const seen = new Set();
for (const v of Object.values(window.Bokeh && Bokeh.index || {})) walk(v, seen);
if (!found.length) return null;
const view = found[found.length - 1];
view.canvas_view.el.scrollIntoView({block: 'center'});
const rect = view.canvas_view.el.getBoundingClientRect();
const points = (arguments[0] || []).map(([x, y]) => [
  rect.left + view.frame.x_scale.compute(x), rect.top + view.frame.y_scale.compute(y)]);
const patches = view.model.renderers.find(r => r.glyph && r.glyph.type === 'Patches');
const data = patches.data_source.data;
const tools = view.model.toolbar.tools.map(t => [t.type, t.active]);
return {points, xs: (data.xs || []).map(a => Array.from(a)),
        ys: (data.ys || []).map(a => Array.from(a)), cls: Array.from(data['class'] || []),
        selected: Array.from(patches.data_source.selected.indices), tools};
"""

_JS_TOOL = """
const want = arguments[0];
const walk = (v, seen, out) => {
  if (!v || seen.has(v)) return;
  seen.add(v);
  if (v.model && v.model.toolbar && v.el && v.el.isConnected) out.push(v);
  for (const c of (v.child_views || [])) walk(c, seen, out);
};
const out = [];
const seen = new Set();
for (const v of Object.values(window.Bokeh && Bokeh.index || {})) walk(v, seen, out);
for (const view of out.reverse()) {
  const tool = view.model.toolbar.tools.find(t => t.type === want);
  if (tool) { tool.active = true; return true; }
}
return false;
"""

# A Panel widget's screen centre, by its CSS class or its label (shadow roots searched).
_JS_WIDGET = """
const [cls, text] = arguments;
const hits = [];
const visit = (el) => {
  if (el.classList && cls && el.classList.contains(cls)) hits.push(el);
  if (text && el.tagName === 'SELECT') hits.push(el);
  if (el.shadowRoot) for (const c of el.shadowRoot.children) visit(c);
  for (const c of el.children || []) visit(c);
};
visit(document.body);
for (const el of hits) {
  const target = (el.shadowRoot && el.shadowRoot.querySelector(text ? 'select' : 'button')) || el;
  target.scrollIntoView({block: 'center'});
  const r = target.getBoundingClientRect();
  if (r.width > 0) return [r.left + r.width / 2, r.top + r.height / 2];
}
return null;
"""

# The step slider's track (noUiSlider's base, in Panel's shadow roots): its screen rectangle.
_JS_SLIDER = """
const visit = (el) => {
  if (el.classList && el.classList.contains('noUi-base')) return el;
  const kids = [...(el.shadowRoot ? el.shadowRoot.children : []), ...(el.children || [])];
  for (const c of kids) { const f = visit(c); if (f) return f; }
  return null;
};
const base = visit(document.body);
if (!base) return null;
base.scrollIntoView({block: 'center'});
const r = base.getBoundingClientRect();
const h = base.querySelector('.noUi-handle').getBoundingClientRect();
return r.width > 0 ? [r.left, r.right, r.top + r.height / 2, h.left + h.width / 2] : null;
"""

# The Bokeh slider models of the page: (type, id, value, start, end).
_JS_SLIDERS = """
const out = [];
for (const view of Object.values(Bokeh.index)) {
  if (!view.el || !view.el.isConnected || !view.model.document) continue;
  for (const m of view.model.document.all_models) {
    if (String(m.type).includes('Slider')) out.push([m.type, m.id, m.value, m.start, m.end]);
  }
}
return out;
"""

_JS_SELECT = """
const value = arguments[0];
const visit = (el) => {
  if (el.tagName === 'SELECT' && [...el.options].some(o => o.text === value)) return el;
  const kids = [...(el.shadowRoot ? el.shadowRoot.children : []), ...(el.children || [])];
  for (const c of kids) { const f = visit(c); if (f) return f; }
  return null;
};
return visit(document.body);
"""


def _pointer(driver, steps):
    """Real pointer input at viewport positions: ``steps`` of ("move", x, y), ("down",),
    ("up",), ("pause", s)."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.common.actions.mouse_button import MouseButton

    actions = ActionBuilder(driver, duration=50)
    p = actions.pointer_action
    for step in steps:
        if step[0] == "move":
            p.move_to_location(int(round(step[1])), int(round(step[2])))
        elif step[0] == "down":
            p.pointer_down(MouseButton.LEFT)
        elif step[0] == "up":
            p.pointer_up(MouseButton.LEFT)
        elif step[0] == "pause":
            p.pause(step[1])
    actions.perform()


def _click(driver, x, y):
    _pointer(driver, [("move", x, y), ("down",), ("up",), ("pause", 0.3)])


def _press(driver, x, y):
    """Press and hold (Bokeh's "press": longer than 300 ms, without moving)."""
    _pointer(driver, [("move", x, y), ("down",), ("pause", 0.7), ("up",), ("pause", 0.3)])


def _map(driver, points=()):
    return driver.execute_script(_JS_MAP, [list(p) for p in points])


def _button(driver, label):
    at = poll(lambda: driver.execute_script(_JS_WIDGET, f"annotate-{label}", None), 10, label)
    _click(driver, *at)


def _empty_box(ds, lat_band, width=25.0):
    """A box of ``width`` degrees of longitude in ``lat_band`` where the truth of step 0 has
    no event (with a margin), as [lon, lat] vertices."""
    truth = ds.truth.isel(time=0)
    lat0, lat1 = lat_band
    band = truth.sel(lat=slice(lat0 - 8, lat1 + 8))
    for lon0 in np.arange(20.0, 300.0, 5.0):
        if int(band.sel(lon=slice(lon0 - 8, lon0 + width + 8)).max()) == 0:
            return [[lon0, lat0], [lon0 + width, lat0], [lon0 + width, lat1], [lon0, lat1]]
    raise AssertionError("no empty box on the toy map")


def _outlines(state) -> list:
    return sorted(zip(map(tuple, state["xs"]), map(tuple, state["ys"]), state["cls"], strict=True))


def _wait(fn, timeout) -> bool:
    """Whether ``fn()`` became true within ``timeout`` seconds."""
    try:
        poll(fn, timeout, "")
    except AssertionError:
        return False
    return True


def _slide(driver, end: str, shown, what: str) -> None:
    """Drag the step slider's handle to the ``end`` ("left" or "right") of its track until
    ``shown()`` (a drag while the view is still being redrawn can be lost: dragged again)."""

    def dragged():
        if shown():
            return True
        left, right, y, at = poll(lambda: driver.execute_script(_JS_SLIDER), 10, "the slider")
        to = left + 1 if end == "left" else right - 1
        path = [("move", at + (to - at) * k / 6, y) for k in range(1, 7)]
        _pointer(driver, [("move", at, y), ("down",), *path, ("up",), ("pause", 0.3)])
        return _wait(shown, 5)

    try:
        poll(dragged, 30, what, interval=0)
    except AssertionError as err:  # where the slider stands in the page
        said = driver.execute_script(_JS_SLIDERS)
        raise AssertionError(f"{err}; sliders (type, id, value, start, end): {said}") from None


def _select(driver, where, what: str) -> None:
    """Click the outline at ``where`` (lon, lat) until it is selected (a click while the view is
    being redrawn is lost; clicks seconds apart, never a double tap)."""

    def selected():
        if not _map(driver)["selected"]:
            _click(driver, *_map(driver, [where])["points"][0])
            _wait(lambda: _map(driver)["selected"], 2)
        return _map(driver)["selected"]

    poll(selected, 20, what, interval=0)


def test_time_slider_carry_and_undo(page, shots):
    """Step 2 by the slider: its own proposals; **carry** brings step 1's outlines (as edited),
    **undo** takes them back; the slider back at step 1 shows its outlines as left."""
    from climnb.data.synthetic import make_dataset
    from climnb.viz.annotate import outlines_from_mask

    browser, _ = page
    ds, _ = make_dataset(n_time=2, seed=11)
    second = outlines_from_mask(ds.truth.values[1], ds.lat.values, ds.lon.values)
    first = _outlines(_map(browser))  # step 1 as the person left it
    _slide(browser, "right", lambda: _outlines(_map(browser)) != first, "step 2 shown")
    proposed = _outlines(_map(browser))
    assert len(proposed) == len(second)  # its own proposals
    browser.save_screenshot(str(shots / "annotate-step2-before-carry.png"))

    _button(browser, "carry")
    poll(lambda: _outlines(_map(browser)) == first, 20, "step 1's outlines carried")
    browser.save_screenshot(str(shots / "annotate-step2-carried.png"))

    _button(browser, "undo")
    poll(lambda: _outlines(_map(browser)) == proposed, 20, "the carry undone")

    _slide(browser, "left", lambda: _outlines(_map(browser)) == first, "step 1 as it was left")


def test_draw_move_delete_reclass_save(page, shots):
    from climnb.data.synthetic import make_dataset
    from climnb.labels.expert import open_expert
    from climnb.viz.annotate import AR, TC, Outline, outlines_from_mask, rasterise

    browser, work = page
    state = _map(browser)
    ds, _ = make_dataset(n_time=2, seed=11)
    proposals = outlines_from_mask(ds.truth.values[0], ds.lat.values, ds.lon.values)
    assert len(state["xs"]) == len(proposals)
    _map(browser)  # the map in view
    browser.save_screenshot(str(shots / "annotate-before.png"))

    # delete: click inside the smallest storm (the polygon tool selects on a click), delete
    storm = min((o for o in proposals if o.cls == TC), key=lambda o: o.area)
    centre = [float(np.mean(storm.lon)), float(np.mean(storm.lat))]
    browser.execute_script(_JS_TOOL, "PolyDrawTool")
    _select(browser, centre, "the storm selected")
    _button(browser, "delete")
    poll(lambda: len(_map(browser)["xs"]) == len(proposals) - 1, 20, "the storm deleted")

    # draw: a box in an empty place, vertex by vertex
    box = _empty_box(ds, (-60.0, -45.0))
    at = _map(browser, box)["points"]
    browser.execute_script(_JS_TOOL, "PolyDrawTool")
    _press(browser, *at[0])
    for p in at[1:-1]:
        _click(browser, *p)
    _press(browser, *at[-1])
    poll(lambda: len(_map(browser)["xs"]) == len(proposals), 20, "the polygon drawn")

    # move a vertex: the vertex tool, a press on the outline, a drag of its corner
    moved = [box[2][0] + 10.0, box[2][1] + 5.0]
    browser.execute_script(_JS_TOOL, "PolyEditTool")
    inside = [box[0][0] + 5.0, box[0][1] + 5.0]
    _press(browser, *_map(browser, [inside])["points"][0])
    start, end = _map(browser, [box[2], moved])["points"]
    # no pause after the button goes down: held 300 ms in place, it would be a press
    path = [
        (start[0] + (end[0] - start[0]) * k / 8, start[1] + (end[1] - start[1]) * k / 8)
        for k in range(1, 9)
    ]
    steps = [("move", *start), ("down",), *(("move", x, y) for x, y in path)]
    _pointer(browser, [*steps, ("up",), ("pause", 0.5)])

    # change its class: storms chosen, the outline clicked, set class
    select = browser.execute_script(_JS_SELECT, "storm")
    from selenium.webdriver.support.ui import Select

    Select(select).select_by_visible_text("storm")
    time.sleep(1.5)  # the view redraws with the drawing pulled
    browser.execute_script(_JS_TOOL, "PolyDrawTool")
    _select(browser, inside, "the drawn outline selected")
    _button(browser, "set-class")
    time.sleep(1.0)
    _map(browser)  # the map in view
    browser.save_screenshot(str(shots / "annotate-after.png"))
    _button(browser, "save")

    path = work / "expert" / f"data-2000-01-01-00-1_{LABELLER}.nc"
    poll(path.exists, 30, f"{path.name} saved")
    time.sleep(0.5)
    expert = open_expert(work / "expert")
    assert list(expert.labeller.values) == [LABELLER]
    saved = expert.LABELS.values[0, 0]
    drawn = Outline.make(
        [box[0][0], box[1][0], moved[0], box[3][0]], [box[0][1], box[1][1], moved[1], box[3][1]], TC
    )
    kept = [o for o in proposals if o != storm]
    expected = rasterise([*kept, drawn], ds.lat.values, ds.lon.values)
    lat, lon = ds.lat.values, ds.lon.values
    mine = rasterise([drawn], lat, lon) == TC
    agree = (saved[mine] == TC).mean()
    assert agree > 0.85, f"the drawn storm: {agree:.2f} of its points saved as a storm"
    assert (saved == expected).mean() > 0.99
    gone = rasterise([storm], lat, lon) == TC
    assert (saved[gone] == 0).all(), "the deleted storm is still there"
    assert (saved == AR).sum() == (expected == AR).sum()
