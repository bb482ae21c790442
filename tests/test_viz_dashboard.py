"""The live training dashboard: plots with one structure from the first update to the last,
a step axis spanning the run and value axes computed in the browser (no update carries a
range), updates drawn on the kernel's event loop while training runs in a thread, and an end
that disables the stop button (tests/test_browser.py checks the page)."""

from __future__ import annotations

import asyncio
import threading
import time

import holoviews as hv
import numpy as np
import pandas as pd
import pytest
from bokeh.models import DataRange1d, Range1d

from climnb.train.config import TrainConfig
from climnb.viz.dashboard import TrainingDashboard, live_figures, merge_published


def _published(n_steps: int, ranks=(0, 1), validate_every: int = 4) -> dict:
    steps = [
        {"rank": r, "step": s, "loss": 1.0 / s + r, "loss_avg": 1.0 / s + 0.5, "samples_per_s": 8.0}
        for s in range(1, n_steps + 1)
        for r in ranks
    ]
    vals = [
        {"rank": 0, "step": s, "mean_iou": s / 20, "iou_0": 0.9, "iou_1": 0.1, "iou_2": 0.2}
        for s in range(validate_every, n_steps + 1, validate_every)
    ]
    sample = None
    if vals:
        sample = {"label": np.zeros((6, 9), np.uint8), "prediction": np.ones((6, 9), np.uint8)}
    return {0: {"steps": steps, "validations": vals, "sample": sample}}


def _structure(obj) -> list:
    """Types and labels of what a DynamicMap returned (what HoloViews requires to stay fixed)."""
    if isinstance(obj, hv.Overlay):
        return [(type(el).__name__, el.label) for el in obj]
    return [(type(obj).__name__, obj.label)]


def _render(layout):
    from bokeh.models import Plot

    plot = hv.renderer("bokeh").get_plot(layout)
    figures = {p.title.text: p for p in plot.state.select({"type": Plot})}
    return plot, figures


@pytest.fixture
def config(tmp_path):
    return TrainConfig(data_dir=str(tmp_path), out_dir=str(tmp_path / "run"))


def test_live_plots_keep_their_structure_and_follow_the_data():
    pipes = {
        "curves": hv.streams.Pipe(data=(pd.DataFrame(), pd.DataFrame())),
        "sample": hv.streams.Pipe(data=None),
    }
    layout = live_figures(pipes)
    assert len(layout) == 5
    first = [_structure(dm[()]) for dm in layout]
    plot, figures = _render(layout)
    assert set(figures) >= {"training loss", "validation IoU", "throughput"}

    steps, vals, sample = merge_published(_published(12))
    pipes["curves"].send((steps, vals))  # 3 panels of curves: no validation sample yet
    pipes["sample"].send(sample)
    assert [_structure(dm[()]) for dm in layout] == first, "same elements, labels and count"
    for title in ("training loss", "throughput"):  # without the run's length: the browser's
        x, y = figures[title].x_range, figures[title].y_range
        assert isinstance(x, DataRange1d) and isinstance(y, DataRange1d), (title, x, y)
    iou = [dm[()] for dm in layout][1]
    assert iou.get(0).dimension_values("IoU").tolist() == [0.2, 0.4, 0.6]
    assert len(iou) == 5 and iou.get(2).label == "background"
    assert layout[4][()].dimension_values("class").min() == 1


LIVE = ("training loss", "validation IoU", "throughput")


def test_live_plots_span_the_run_and_leave_the_value_axes_to_the_browser():
    """The kernel sends no range while training runs: a range sent can be missed by the page
    (its own copy goes back to the kernel late and Bokeh sends only what differs from the
    kernel's copy), so the step axis is the run's from the start and the loss and throughput
    axes are fitted by BokehJS to the data the page holds."""
    pipes = {
        "curves": hv.streams.Pipe(data=(pd.DataFrame(), pd.DataFrame())),
        "sample": hv.streams.Pipe(data=None),
    }
    plot, figures = _render(live_figures(pipes, total_steps=12))
    changes = []
    for title in LIVE:
        for axis in ("x_range", "y_range"):
            rng = getattr(figures[title], axis)
            for attr in ("start", "end"):
                rng.on_change(attr, lambda a, old, new, t=title, ax=axis: changes.append((t, ax)))
    for n in (1, 5, 12):
        pipes["curves"].send(merge_published(_published(n))[:2])
    assert not changes, f"ranges set while training ran: {sorted(set(changes))}"
    x = {title: figures[title].x_range for title in LIVE}
    assert len({id(r) for r in x.values()}) == 1, "one step axis for the three plots"
    step = x["throughput"]
    assert isinstance(step, Range1d) and step.start == 0 and 12 <= step.end <= 13, step
    for title in ("training loss", "throughput"):
        y = figures[title].y_range
        assert isinstance(y, DataRange1d) and not y.renderers, (title, y)  # all of the plot
    iou = figures["validation IoU"].y_range
    assert (iou.start, iou.end) == (0, 1)


def test_run_draws_on_the_event_loop_while_training_runs_in_a_thread(config, capsys):
    dash = TrainingDashboard(config, 12, interactive=True)
    loop_thread, seen = threading.get_ident(), []
    update = dash.update

    def recording(data):
        seen.append((threading.get_ident(), len(data[0]["steps"])))
        update(data)

    dash.update = recording

    def train(on_update, n_steps):
        for s in range(1, n_steps + 1):
            on_update(_published(s))
            time.sleep(0.01)
        return "results"

    async def main():
        return await dash.run(train, n_steps=12)

    assert asyncio.run(main()) == "results"
    assert seen and all(tid == loop_thread for tid, _ in seen), "updates on the loop's thread"
    assert seen[-1][1] == 24, "the last update is drawn before run returns"
    w = dash._widgets
    assert w["stop"].disabled and w["bar"].value == 12 and w["bar"].bar_style == "success"
    assert w["label"].value.startswith("step 12/12") and "finished" in w["label"].value
    assert dash.eta() is None


def test_the_end_draws_the_whole_run_once_more(config):
    dash = TrainingDashboard(config, 12, interactive=True)
    dash.show()
    frames = []
    dash._pipes["curves"].add_subscriber(lambda data: frames.append(int(data[0].step.max())))
    dash.update(_published(12))
    dash.finish()
    assert frames == [12, 12], frames


def test_run_reports_a_failure_and_disables_stop(config):
    dash = TrainingDashboard(config, 12, interactive=True)

    def train(on_update):
        on_update(_published(3))
        raise RuntimeError("engine 1 died")

    with pytest.raises(RuntimeError, match="engine 1 died"):
        asyncio.run(dash.run(train))
    w = dash._widgets
    assert w["stop"].disabled and w["bar"].bar_style == "danger"
    assert "failed: RuntimeError" in w["label"].value


def test_printed_progress_ends_with_how_the_run_ended(config, capsys):
    with TrainingDashboard(config, 12, interactive=False, print_every=0) as dash:
        for s in (4, 8):
            dash.update(_published(s))
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("step 4/12") and "val mean IoU" in out[0]
    assert out[-1].startswith("step 8/12") and "ended early (finished)" in out[-1]
