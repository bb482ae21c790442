"""What a notebook shows around the views: nothing linked from a CDN, no TensorFlow start-up
noise, and report views in place of live controls where there is no kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import holoviews as hv
import numpy as np
import pytest

from climnb.viz import notebook


def _stylesheet_urls(model) -> list[str]:
    from bokeh.models import ImportedStyleSheet, UIElement

    return [
        s.url
        for el in model.select({"type": UIElement})
        for s in el.stylesheets
        if isinstance(s, ImportedStyleSheet)
    ]


def test_inline_stylesheets_replace_the_cdn_links():
    import panel as pn

    root = pn.Column(pn.widgets.Select(options=["TMQ", "PSL"]), pn.pane.Markdown("x")).get_root()
    assert any("cdn.holoviz.org" in url for url in _stylesheet_urls(root)), "Panel links its CSS"
    notebook.inline_stylesheets(root)
    assert not _stylesheet_urls(root)


def test_holoviews_outputs_carry_their_css(monkeypatch):
    """A view rendered for a notebook after setup() names no CDN anywhere."""
    import panel as pn

    monkeypatch.setattr(pn.config, "inline", True)
    notebook._inline_holoviews_outputs()
    notebook._inline_holoviews_outputs()  # idempotent
    dmap = hv.DynamicMap(lambda t: hv.Curve([t, t + 1]), kdims=hv.Dimension("t", values=[0, 1]))
    for view in (dmap, hv.Curve([1, 2])):  # live (comms) and static (embedded)
        data, _ = hv.renderer("bokeh").components(view)
        html = json.dumps(data)
        assert "cdn.holoviz.org" not in html and "InlineStyleSheet" in html


@pytest.mark.parametrize("preset", [{}, {"TF_CPP_MIN_LOG_LEVEL": "0"}], ids=["unset", "user-set"])
def test_tensorflow_imports_quietly_unless_the_user_says(preset):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP", "ABSL"))}
    code = "from climnb.models.backend import import_tf; import_tf(); import os; "
    code += "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"
    run = subprocess.run(
        [sys.executable, "-c", code], env={**env, **preset}, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == preset.get("TF_CPP_MIN_LOG_LEVEL", "2")
    if not preset:
        noise = [
            line for line in run.stderr.splitlines() if "tensorflow" in line or "oneDNN" in line
        ]
        assert not noise, noise


def test_interactive_only_in_a_watched_kernel(monkeypatch):
    monkeypatch.delenv("IPP_NONINTERACTIVE", raising=False)
    assert not notebook.is_interactive()  # no kernel here
    monkeypatch.setenv("IPP_NONINTERACTIVE", "1")
    assert not notebook.is_interactive()


def test_report_views_embed_the_steps_or_say_they_need_a_kernel():
    import panel as pn

    from climnb.data.synthetic import make_dataset
    from climnb.viz.explorer import explorer_panel, segmentation_explorer
    from climnb.viz.fastexplorer import explorer_app

    ds, _ = make_dataset(n_time=10, n_lat=48, n_lon=144, seed=0)
    app = explorer_app(ds, ds.truth, ds.truth, prefetch=False)
    assert app.view(live=True) is app.layout
    report = app.view(live=False, max_steps=4)
    div, maps = report
    # the slider of the embedded steps works: the note says what a kernel adds, not "live only"
    assert isinstance(div, hv.Div) and "4 of the 10 steps, embedded" in div.data
    assert "live only" not in div.data
    assert isinstance(maps, hv.HoloMap) and len(maps) == 4
    first = maps.last.data
    assert first.shape[2] == 4 and first[..., 3].max() == 255, "RGBA frames, drawn"
    start, end = (maps[k].data for k in (maps.keys()[0], maps.keys()[-1]))
    assert not np.array_equal(start, end), "each step its own frame"
    note = explorer_panel(segmentation_explorer(ds, ds.truth, ds.truth), live=False)
    assert isinstance(note, pn.pane.Markdown) and "live only" in note.object
