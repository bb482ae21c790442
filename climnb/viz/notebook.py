"""Set a notebook up for climnb's views so that nothing loads from the network.

``hv.extension("bokeh", inline=True)`` puts BokehJS and Panel's JavaScript into the notebook,
but Panel's stylesheets (``loading.css``, ``listpanel.css``, the theme's ``default.css``...)
are still linked from ``cdn.holoviz.org``: a JupyterLab without internet (an HPC hub, a
firewalled laptop) logs ``net::ERR_NAME_NOT_RESOLVED`` for each. :func:`setup` also turns on
Panel's inline mode (``pn.config.inline``: Panel objects carry their CSS) and makes the outputs
HoloViews renders do the same, since HoloViews hands its models to Panel with ``resources='cdn'``
(holoviz/panel#7776 and #8750 describe the gap). The stylesheets are read from Panel's own
``dist`` folder, so the page and the HTML reports show the same thing offline.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

__all__ = ["setup", "inline_stylesheets", "is_interactive", "LIVE_ONLY", "MAX_WIDTH"]

#: The widest a view is drawn (pixels): a notebook cell's output in a 1280 x 800 JupyterLab
#: window with the file browser open is 833 px wide (tests/test_browser.py checks that every
#: output fits its cell there).
MAX_WIDTH = 800

#: What a report says in place of a view that needs a live kernel.
LIVE_ONLY = (
    "This view draws each frame on demand, so it is live only in a running kernel: open the "
    "notebook in JupyterLab and run it to use its controls."
)


def is_interactive() -> bool:
    """True in a Jupyter kernel that a person watches (not papermill, not a batch job).

    ``climnb demo`` and ``make`` set ``IPP_NONINTERACTIVE=1`` when they execute notebooks into
    reports; views then show what a static HTML page can (printed progress, embedded frames).
    """
    if os.environ.get("IPP_NONINTERACTIVE"):
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def inline_stylesheets(model) -> None:
    """Replace the stylesheets ``model`` and its children link (Panel's CDN) by their text."""
    from bokeh.models import UIElement
    from panel.io.notebook import patch_inline_stylesheets

    for element in model.select({"type": UIElement}):
        patch_inline_stylesheets(element)


def _inline_holoviews_outputs() -> None:
    """Make HoloViews' notebook outputs carry Panel's CSS (see the module docstring): the
    two Panel functions HoloViews renders with (static and live outputs) get the models'
    stylesheets inlined first."""
    import holoviews.plotting.renderer as renderer

    for name in ("render_model", "render_mimebundle"):
        render = getattr(renderer, name)
        if not getattr(render, "_climnb_inline", False):
            setattr(renderer, name, _inlining(render))


def _inlining(render):
    def render_inline(model, *args, **kwargs):
        inline_stylesheets(model)
        return render(model, *args, **kwargs)

    render_inline._climnb_inline = True
    return render_inline


def setup(backend: str = "bokeh") -> None:
    """Load HoloViews' ``backend`` and Panel with every resource inline (call once per
    notebook, in place of ``hv.extension(backend)``)."""
    import holoviews as hv
    import panel as pn

    pn.config.inline = True
    _inline_holoviews_outputs()
    hv.extension(backend, inline=True)
    # a HoloMap's slider under its plot, not beside it: the view is as wide as the plot
    hv.output(widget_location="bottom")
