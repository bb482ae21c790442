"""Cost of a slider move of the segmentation explorer at full size (768 x 1152), old vs new path.

Measured in the same run, on the same data (``--steps`` full-size steps, a prediction with a
false-positive box):

* the HoloViews explorer (:func:`climnb.viz.explorer.segmentation_explorer`, the old path):
  five DynamicMaps of overlaid Images, Contours and coastline Paths; a move is
  ``plot.update(key)`` (callbacks run, elements are built, ranges computed, data sources
  refilled);
* the fast explorer (:func:`climnb.viz.fastexplorer.explorer_app`, the new path): one pre-rendered
  uint32 RGBA image per map at the map's screen size, in bokeh figures that stay in place; a
  move is the widget change (``app.time_widget.value = step``), first visit of a step
  (computed; background prefetch off) and second visit (cached) reported apart.

Server side: CPU seconds of the move in this thread (``time.thread_time``, so other processes
on a loaded machine do not count) and wall seconds, and the bytes of array data a move sends.

``--browser`` also serves each explorer with ``panel serve`` machinery (bokeh server, on
127.0.0.1) to headless Chromium (Selenium, chromedriver) and times, in the page, a slider move
to new pixels (the fast explorer as shipped: prefetch of the next step on): from setting the
slider's value (as a drag does) until an image data source holds
a new array and two animation frames have passed (the canvas is repainted in the first).

    nice .venv/bin/python benchmarks/bench_explorer.py [--steps 6] [--repeat 2] [--browser]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import tempfile
import time

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import holoviews as hv
import numpy as np
from _chromium import FLAGS as CHROMIUM_FLAGS

from climnb.data.synthetic import FULL_SHAPE, make_dataset
from climnb.viz.explorer import segmentation_explorer
from climnb.viz.fastexplorer import explorer_app


def _bytes_sent(plot) -> int:
    """Bytes of array data in the plot's data sources (what a slider move sends)."""
    from bokeh.models import ColumnDataSource

    total = 0
    for source in plot.state.select({"type": ColumnDataSource}):
        for values in source.data.values():
            for v in values if isinstance(values, list) else [values]:
                total += getattr(v, "nbytes", 0)
    return total


def old_path(layout: hv.Layout, keys, repeat: int) -> dict:
    """First render, then per move: CPU s, wall s (medians), bytes of arrays per frame."""
    start = time.perf_counter()
    plot = hv.renderer("bokeh").get_plot(layout)
    first = time.perf_counter() - start
    cpu, wall = [], []
    for _ in range(repeat):
        for key in keys[1:] + keys[:1]:
            c, w = time.thread_time(), time.perf_counter()
            plot.update(key)
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - w)
    return {
        "first": first,
        "cpu": statistics.median(cpu),
        "wall": statistics.median(wall),
        "bytes": _bytes_sent(plot),
    }


def new_path(ds, labels, pred, steps: int) -> dict:
    """Per move of the fast explorer: CPU s and wall s of first visits and of cached ones."""
    start = time.perf_counter()
    app = explorer_app(ds, labels, pred, prefetch=False)
    first = time.perf_counter() - start
    out = {"first": first}
    for visit in ("computed", "cached"):
        cpu, wall = [], []
        for step in list(range(1, steps)) + [0]:
            c, w = time.thread_time(), time.perf_counter()
            app.time_widget.value = step
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - w)
        out[visit] = (statistics.median(cpu), statistics.median(wall))
    sources = (app.map_source, app.dis_source, app.lab_source, app.pred_source)
    out["bytes"] = sum(s.data["image"][0].nbytes for s in sources)
    return out


# ---------------------------------------------------------------------------------------------
# In the browser
# ---------------------------------------------------------------------------------------------

_JS_MOVE = """
const [n, done] = [arguments[0], arguments[arguments.length - 1]];
let slider = null;
const sources = [];
for (const view of Object.values(Bokeh.index)) {
  for (const m of view.model.document.all_models) {
    if (m.type === "Slider" && slider === null) slider = m;
    if (m.type === "ColumnDataSource" && m.data.image) sources.push(m);
  }
}
if (slider === null || !sources.length) { done(-1); return; }
const before = sources.map((s) => s.data.image[0]);
const t0 = performance.now();
slider.value = (slider.value + 1) % n;
const check = () => {
  if (sources.some((s, i) => s.data.image[0] !== before[i])) {
    requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
  } else if (performance.now() - t0 > 60000) {
    done(-2);
  } else {
    requestAnimationFrame(check);
  }
};
requestAnimationFrame(check);
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _driver(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in (
        *CHROMIUM_FLAGS,
        "--window-size=1400,1400",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_script_timeout(90)
    return driver


def browser_moves(make_view, n_steps: int, moves: int) -> list[float]:
    """Seconds from a slider move to repainted new pixels, per move, in headless Chromium."""
    import panel as pn

    port = _free_port()
    server = pn.serve({"/": make_view}, port=port, address="127.0.0.1", show=False,
                      threaded=True, start=True)  # fmt: skip
    times = []
    with tempfile.TemporaryDirectory() as profile:
        driver = _driver(profile)
        try:
            driver.get(f"http://127.0.0.1:{port}/")
            deadline = time.monotonic() + 120
            ready = "return !!(window.Bokeh && Object.keys(Bokeh.index).length)"
            while not driver.execute_script(ready):
                if time.monotonic() > deadline:
                    raise RuntimeError("the explorer did not render in 120 s")
                time.sleep(0.5)
            time.sleep(2.0)  # let the first paint and the initial range messages settle
            for _ in range(moves):
                ms = driver.execute_async_script(_JS_MOVE, n_steps)
                if ms < 0:
                    raise RuntimeError(f"slider move not drawn (code {ms})")
                times.append(ms / 1000)
        finally:
            driver.quit()
            server.stop()
    return times


def _spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):5.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--browser", action="store_true", help="also time moves in Chromium")
    args = parser.parse_args(argv)
    ds, _ = make_dataset(n_time=args.steps, n_lat=FULL_SHAPE[0], n_lon=FULL_SHAPE[1], seed=0)
    pred = ds.truth.copy()
    pred[:, 300:340, 100:200] = 1  # some disagreement to draw
    ds, pred = ds.load(), pred.load()
    keys = [("TMQ", np.datetime64(t, "ns")) for t in ds.time.values]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (pre-run)")

    new = new_path(ds, ds.truth, pred, args.steps)
    old = old_path(segmentation_explorer(ds, ds.truth, pred), keys, args.repeat)
    (c_cpu, c_wall), (k_cpu, k_wall) = new["computed"], new["cached"]
    print(f"full-size explorer ({FULL_SHAPE[0]} x {FULL_SHAPE[1]}), server side, per slider move:")
    print(
        f"  old HoloViews explorer:  CPU {old['cpu']:6.3f} s, wall {old['wall']:6.3f} s, "
        f"{old['bytes'] / 1e6:5.2f} MB of arrays; first render {old['first']:5.2f} s"
    )
    print(
        f"  fast explorer, new step: CPU {c_cpu:6.3f} s, wall {c_wall:6.3f} s, "
        f"{new['bytes'] / 1e6:5.2f} MB of arrays; first render {new['first']:5.2f} s"
    )
    print(f"  fast explorer, cached:   CPU {k_cpu:6.3f} s, wall {k_wall:6.3f} s")
    print(
        f"  ratio old / new (new step): CPU {old['cpu'] / c_cpu:.1f}x, "
        f"wall {old['wall'] / c_wall:.1f}x, bytes {old['bytes'] / new['bytes']:.1f}x"
    )
    if not args.browser:
        return

    import panel as pn

    apps = []

    def fast_view():
        apps.append(explorer_app(ds, ds.truth, pred))
        return apps[-1].layout

    def old_view():
        return pn.panel(segmentation_explorer(ds, ds.truth, pred))

    moves = 2 * args.steps
    t_new = browser_moves(fast_view, args.steps, moves)
    cpu_new = apps[-1].move_cpu_seconds
    t_old = browser_moves(old_view, args.steps, max(3, args.steps // 2))
    print("in headless Chromium (bokeh server on 127.0.0.1), slider move to new pixels:")
    print(f"  fast explorer, {moves} moves (first {args.steps} compute their step):")
    print(f"    all    {_spread(t_new)}")
    print(f"    new    {_spread(t_new[: args.steps])}")
    print(f"    cached {_spread(t_new[args.steps :])}")
    print(f"    server CPU per move in the app: {_spread(cpu_new)}")
    print(f"  old HoloViews explorer, {len(t_old)} moves: {_spread(t_old)}")
    print(
        f"  ratio old / new (medians): {statistics.median(t_old) / statistics.median(t_new):.1f}x"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (post-run)")


if __name__ == "__main__":
    main()
