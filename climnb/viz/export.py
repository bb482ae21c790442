"""Files for papers, talks and reports: a figure (PNG), an animation (GIF or MP4), HTML.

Interactive views live in :mod:`climnb.viz.explorer`; :func:`save_figure` and
:func:`save_animation` write files without a browser, with matplotlib (its ``Agg`` canvas),
drawing the same picture: a channel in its own colour map with units, the class masks as
translucent regions (cyclones red, rivers blue), optionally a prediction as outlines, and
coastlines (:mod:`climnb.viz.coastlines`, drawn offline). GIFs need only Pillow; MP4 uses the
ffmpeg binary that the ``imageio-ffmpeg`` wheel ships (no system ffmpeg needed).

:func:`save_html` writes a HoloViews view, and :func:`notebook_html` an executed notebook, as
self-contained HTML: BokehJS inlined, no require.js or MathJax fetched from a CDN, so a report
opens offline.

Examples
--------
>>> import tempfile
>>> from climnb.data.synthetic import make_dataset
>>> ds, _ = make_dataset(n_time=2, seed=0)
>>> out = tempfile.mkdtemp()
>>> save_figure(ds, ds.truth, out + "/tmq.png").suffix
'.png'
>>> save_animation(ds, ds.truth, out + "/tmq.gif", fps=2).stat().st_size > 0
True
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from climnb.io.atomic import atomic_path
from climnb.io.channels import CLASS_NAMES, channel
from climnb.viz.coastlines import draw_coastlines
from climnb.viz.fields import CLASS_COLORS

__all__ = [
    "save_figure",
    "save_animation",
    "save_html",
    "notebook_html",
    "static_widgets",
    "draw_step",
    "ffmpeg",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


def ffmpeg() -> str:
    """The ffmpeg executable that the ``imageio-ffmpeg`` wheel ships (or
    ``IMAGEIO_FFMPEG_EXE``)."""
    try:
        import imageio_ffmpeg
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("MP4 export needs imageio-ffmpeg: pip install imageio-ffmpeg") from err
    return imageio_ffmpeg.get_ffmpeg_exe()


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("exporting figures needs matplotlib: pip install matplotlib") from err
    return plt


def draw_step(
    ax,
    ds: xr.Dataset,
    mask: xr.DataArray | None,
    name: str,
    time: int,
    *,
    prediction: xr.DataArray | None = None,
    alpha: float = 0.45,
    clim=None,
    coastlines: bool = True,
):
    """Draw channel ``name`` at step ``time`` on a matplotlib axis, masks and coastlines on top.

    Returns the channel's image artist (for a colour bar or an animation).
    """
    from matplotlib.colors import ListedColormap

    ch = channel(name)
    field = ds[name].isel(time=time)
    lon, lat = ds.lon.values, ds.lat.values
    extent = (lon[0], lon[-1], lat[0], lat[-1])
    im = ax.imshow(
        field.values,
        origin="lower",
        extent=extent,
        cmap=ch.cmap,
        aspect="auto",
        interpolation="nearest",
        clim=clim,
    )
    if mask is not None:
        m = mask.isel(time=time).values.astype(np.float32)
        colors = ListedColormap([CLASS_COLORS[1], CLASS_COLORS[2]])
        ax.imshow(
            np.where(m > 0, m, np.nan),
            origin="lower",
            extent=extent,
            cmap=colors,
            vmin=0.5,
            vmax=2.5,
            alpha=alpha,
            aspect="auto",
            interpolation="nearest",
        )
    if prediction is not None:
        p = prediction.isel(time=time).values
        for k, color in CLASS_COLORS.items():
            if (p == k).any():
                ax.contour(
                    lon, lat, (p == k).astype(float), levels=[0.5], colors=[color], linewidths=1.2
                )
    if coastlines:
        draw_coastlines(ax, (lon.min(), lon.max()), (lat.min(), lat.max()))
    when = pd.Timestamp(ds.time.values[time])
    ax.set_title(f"{name} ({ch.units})  {when:%Y-%m-%d %H:%M}")
    ax.set_xlabel("longitude (°E)")
    ax.set_ylabel("latitude (°N)")
    return im


def _legend(ax, prediction: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color=c, alpha=0.6, label=CLASS_NAMES[k].replace("_", " "))
        for k, c in CLASS_COLORS.items()
    ]
    if prediction:
        handles += [Line2D([], [], color="k", lw=1.2, label="prediction (outline)")]
    ax.legend(handles=handles, loc="lower left", fontsize="small", framealpha=0.8)


def save_figure(
    ds: xr.Dataset,
    mask: xr.DataArray | None,
    path: PathLike,
    *,
    channel: str = "TMQ",
    time: int = 0,
    prediction: xr.DataArray | None = None,
    size: tuple[float, float] = (8.0, 4.2),
    dpi: int = 150,
) -> Path:
    """Write a PNG (or any matplotlib format, by suffix) of one step, atomically.

    Parameters
    ----------
    ds : fields (time, lat, lon).
    mask : class mask drawn as translucent regions (labels or truth), or ``None``.
    path : file to write.
    channel : the channel in the background.
    time : step index.
    prediction : a second mask drawn as outlines.
    size, dpi : figure size (inches) and resolution.
    """
    plt = _pyplot()
    path = Path(path)
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    try:
        im = draw_step(ax, ds, mask, channel, time, prediction=prediction)
        fig.colorbar(im, ax=ax, label=f"{channel} [{_units(channel)}]")
        _legend(ax, prediction is not None)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return path


def _units(name: str) -> str:
    return channel(name).units


def save_animation(
    ds: xr.Dataset,
    mask: xr.DataArray | None,
    path: PathLike,
    *,
    channel: str = "TMQ",
    times: Sequence[int] | None = None,
    prediction: xr.DataArray | None = None,
    fps: float = 4.0,
    size: tuple[float, float] = (8.0, 4.2),
    dpi: int = 100,
) -> Path:
    """Write an animation of ``channel`` over ``times`` (default all steps): GIF or MP4.

    The format follows the suffix: ``.gif`` (Pillow) or ``.mp4`` (H.264, with the ffmpeg of
    ``imageio-ffmpeg``). The colour range is fixed over the animation so that frames
    compare. Written atomically.
    """
    from matplotlib import animation

    plt = _pyplot()
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gif":
        writer = animation.PillowWriter(fps=fps)
    elif suffix == ".mp4":
        plt.rcParams["animation.ffmpeg_path"] = ffmpeg()
        writer = animation.FFMpegWriter(
            fps=fps, codec="libx264", extra_args=["-pix_fmt", "yuv420p"]
        )
    else:
        raise ValueError(f"animation format {suffix!r} not supported: use .gif or .mp4")
    steps = list(range(ds.sizes["time"])) if times is None else list(times)
    field = ds[channel].isel(time=steps)
    clim = (float(field.min()), float(field.max()))
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    try:
        im = draw_step(ax, ds, mask, channel, steps[0], prediction=prediction, clim=clim)
        fig.colorbar(im, ax=ax, label=f"{channel} [{_units(channel)}]")

        def frame(i):
            ax.clear()
            draw_step(ax, ds, mask, channel, i, prediction=prediction, clim=clim)
            _legend(ax, prediction is not None)

        anim = animation.FuncAnimation(fig, frame, frames=steps, blit=False)
        with atomic_path(path) as tmp:
            named = tmp.with_suffix(suffix)  # the writers pick the format from the suffix
            try:
                anim.save(named, writer=writer, dpi=dpi)
                named.rename(tmp)
            finally:
                named.unlink(missing_ok=True)
    finally:
        plt.close(fig)
    log.info("wrote %d frames to %s", len(steps), path)
    return path


def save_html(view, path: PathLike, *, title: str = "climnb") -> Path:
    """Write a HoloViews view (or layout) as one self-contained HTML file, atomically.

    BokehJS is inlined (no CDN), so the file opens without a network; the view is static
    (a DynamicMap shows its current frame; use a ``HoloMap`` to keep a slider).
    """
    import holoviews as hv

    path = Path(path)
    with atomic_path(path) as tmp:
        named = tmp.with_name(tmp.name + ".html")  # hv.save adds the suffix otherwise
        try:
            hv.save(view, named, fmt="html", backend="bokeh", resources="inline", title=title)
            named.rename(tmp)
        finally:
            named.unlink(missing_ok=True)
    return path


#: nbconvert's lab template without the scripts it loads from CDNs (require.js, MathJax,
#: mermaid, the Jupyter widgets manager): a report renders the same offline. The notebooks
#: inline BokehJS themselves (``hv.extension("bokeh", inline=True)``).
_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def notebook_html(notebook) -> str:
    """A self-contained HTML page of an executed notebook (an ``nbformat`` node).

    No script is loaded from elsewhere: the page renders offline (BokehJS is inlined by the
    notebooks, Panel's stylesheets here, from the installed Panel). What that costs: LaTeX
    math in Markdown shows as its TeX source (no MathJax; the notebooks have none), mermaid
    diagrams as their text, and widgets (tqdm's progress bars) as the text of their last
    state (see :func:`static_widgets`) instead of live widgets.
    """
    import jinja2
    import nbconvert

    logging.getLogger("traitlets").setLevel(logging.ERROR)  # "alternative text is missing"
    exporter = nbconvert.HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"climnb_offline.html.j2": _OFFLINE_TEMPLATE})],
        template_file="climnb_offline.html.j2",
        embed_images=True,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Your element with mimetype", UserWarning)
        body, _ = exporter.from_notebook_node(static_widgets(notebook))
    return _inline_panel_css(body)


_PANEL_CSS = re.compile(
    r'\{"type":"object","name":"ImportedStyleSheet","id":"([^"]+)",'
    r'"attributes":\{"url":"https://cdn\.holoviz\.org/panel/([^/"]+)/dist/([^"?]+)(\?[^"]*)?"\}\}'
)


def _inline_panel_css(body: str) -> str:
    """Panel's stylesheets, which the plots' documents import from cdn.holoviz.org, inlined
    from the installed Panel's own copies (only where its version is the page's)."""
    try:
        import panel
    except ImportError:
        return body
    dist = Path(panel.__file__).parent / "dist"

    def inline(m: re.Match) -> str:
        path = dist / m.group(3)
        if m.group(2) != panel.__version__ or not path.is_file():
            return m.group(0)
        css = json.dumps(path.read_text(encoding="utf-8")).replace("</", "<\\/")
        return (
            f'{{"type":"object","name":"InlineStyleSheet","id":"{m.group(1)}",'
            f'"attributes":{{"css":{css}}}}}'
        )

    return _PANEL_CSS.sub(inline, body)


def static_widgets(notebook):
    """A copy of ``notebook`` with each widget output replaced by plain text of the widget's
    last saved state (a tqdm bar: ``100%|##########| 3/3 [...]``), and no widget state."""
    import html
    import re

    nb = copy.deepcopy(notebook)
    state = nb.metadata.pop("widgets", {}).get(_WIDGET_STATE, {}).get("state", {})

    def text(model_id: str) -> str | None:
        model = state.get(model_id, {})
        kind, values = model.get("model_name", ""), model.get("state", {})
        if kind in ("HTMLModel", "LabelModel", "TextModel"):
            return html.unescape(re.sub(r"<[^>]*>", "", str(values.get("value", ""))))
        if kind in ("FloatProgressModel", "IntProgressModel"):
            done = float(values.get("value", 0)) / max(float(values.get("max", 1)), 1e-12)
            return "|" + "#" * round(10 * done) + " " * (10 - round(10 * done)) + "|"
        children = [str(c).removeprefix("IPY_MODEL_") for c in values.get("children", [])]
        parts = [text(c) for c in children]
        return "".join(p for p in parts if p) if children else None

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).pop(_WIDGET_VIEW, None)
            if view is not None:
                shown = text(view.get("model_id", ""))
                if shown is not None:
                    out["data"]["text/plain"] = shown
    return nb
