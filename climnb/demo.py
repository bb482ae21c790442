"""The whole workflow on toy data: execute the numbered notebooks in order with papermill.

Each notebook ``notebooks/NN_*.ipynb`` is executed top to bottom (its ``parameters`` cell
overridden by :data:`WORKFLOW`) into ``reports/NN_*.ipynb`` and rendered to HTML beside it. The
notebooks run with the notebooks folder as working directory, as in JupyterLab, so the toy data
land in ``notebooks/data/toy`` whether a person or the demo runs them.

:data:`WORKFLOW` chains them into the paper's workflow: synthetic fields (00) -> heuristic
labels (01) -> sample files, stats and staging onto two simulated nodes (02) -> the networks
(03) -> Horovod training on two MPI engines (04) -> inference on held-out data and the views
(05). Each notebook also runs alone with its own defaults.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from climnb.atomic import atomic_path
from climnb.io.samples import SampleError
from climnb.io.sampleset import SampleSet, write_sample_set
from climnb.synthetic import make_dataset

log = logging.getLogger(__name__)

__all__ = [
    "DemoConfig",
    "NotebookRun",
    "find_notebooks",
    "render_html",
    "run_demo",
    "run_notebook",
    "static_widgets",
]


#: Parameters that chain the notebooks into the whole workflow on toy data.
WORKFLOW: dict[str, dict] = {
    "00": {"n_time": 160, "out_path": "data/toy/fields.nc"},
    "01": {"input_path": "data/toy/fields.nc", "out_path": "data/toy/labelled.nc"},
    "02": {"input_path": "data/toy/labelled.nc", "workdir": "data/toy"},
    "04": {"data_dir": "data/toy/shared", "out_dir": "runs/toy", "epochs": 16},
    "05": {"model_path": "runs/toy/model", "data_path": "data/toy/heldout.nc"},
}
#: What the workflow writes (relative to the notebooks folder); removed before a clean run.
OUTPUTS = ("data/toy", "runs/toy")


@dataclass(frozen=True)
class DemoConfig:
    """Settings of ``climnb demo``.

    Attributes
    ----------
    notebooks : folder holding the numbered notebooks (also their working directory).
    reports : folder for the executed notebooks and their HTML.
    only : run only notebooks whose name starts with one of these prefixes (e.g. ``("00",)``).
    parameters : papermill parameters per notebook, keyed by the notebook's number
        (``{"04": {"epochs": 2}}``); a notebook gets the ones it declares.
    kernel : Jupyter kernel name.
    timeout : seconds allowed per cell.
    """

    notebooks: Path = Path("notebooks")
    reports: Path = Path("reports")
    only: tuple[str, ...] = ()
    parameters: dict = field(default_factory=lambda: {k: dict(v) for k, v in WORKFLOW.items()})
    clean: bool = True
    kernel: str = "python3"
    timeout: int = 1200


@dataclass(frozen=True)
class NotebookRun:
    notebook: Path
    output: Path
    html: Path
    seconds: float


def find_notebooks(folder: Path, only: Iterable[str] = ()) -> list[Path]:
    """The numbered notebooks (``NN_*.ipynb``) of ``folder`` in order."""
    found = sorted(p for p in Path(folder).glob("[0-9][0-9]_*.ipynb"))
    only = tuple(only)
    if only:
        found = [p for p in found if p.name.startswith(only)]
    if not found:
        raise FileNotFoundError(
            f"no numbered notebooks (NN_*.ipynb) in {folder}"
            + (f" starting with {', '.join(only)}" if only else "")
        )
    return found


def run_notebook(
    notebook: Path,
    reports: Path,
    *,
    parameters: dict | None = None,
    kernel: str = "python3",
    timeout: int = 1200,
) -> NotebookRun:
    """Execute one notebook with papermill into ``reports`` and render it to HTML."""
    import nbformat
    import papermill as pm

    os.environ.setdefault("IPP_NONINTERACTIVE", "1")
    logging.getLogger("papermill").setLevel(logging.WARNING)
    notebook, reports = Path(notebook).resolve(), Path(reports).resolve()
    output = reports / notebook.name
    declared = _declared_parameters(notebook)
    given = {k: v for k, v in (parameters or {}).items() if k in declared}
    start = time.perf_counter()
    with atomic_path(output) as tmp, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The specified file", UserWarning)  # our .tmp name
        pm.execute_notebook(
            str(notebook),
            str(tmp),
            parameters=given,
            kernel_name=kernel,
            cwd=str(notebook.parent),
            execution_timeout=timeout,
            progress_bar=False,
            request_save_on_cell_execute=False,
        )
    seconds = time.perf_counter() - start
    html = output.with_suffix(".html")
    body = render_html(nbformat.read(output, as_version=4))
    with atomic_path(html) as tmp:
        tmp.write_text(body)
    log.info("%s ran in %.1f s -> %s", notebook.name, seconds, output)
    return NotebookRun(notebook, output, html, seconds)


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


def render_html(notebook) -> str:
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
    import copy
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


def _declared_parameters(notebook: Path) -> set[str]:
    import papermill as pm

    return set(pm.inspect_notebook(str(notebook)))


def run_demo(config: DemoConfig = DemoConfig(), *, progress=None) -> list[NotebookRun]:
    """Run every numbered notebook in order; stop at the first one that fails.

    ``progress`` is called with a message before each notebook (the CLI prints it).
    """
    notebooks = find_notebooks(config.notebooks, config.only)
    if config.clean and not config.only:
        import shutil

        for out in OUTPUTS:
            shutil.rmtree(Path(config.notebooks) / out, ignore_errors=True)
    runs = []
    for nb in notebooks:
        if progress:
            progress(f"running {nb.name} ...")
        runs.append(
            run_notebook(
                nb,
                config.reports,
                parameters=config.parameters.get(nb.name[:2]),
                kernel=config.kernel,
                timeout=config.timeout,
            )
        )
    return runs


def headlines(notebooks: str | os.PathLike = "notebooks") -> dict[str, float]:
    """The workflow's headline figures, read from what the notebooks wrote.

    Label IoU per class against the synthetic truth (notebook 01's labels), the trained
    model's validation IoU and training throughput (notebook 04), where those files exist.
    """
    import pandas as pd

    root, out = Path(notebooks), {}
    fields, labelled = root / "data/toy/fields.nc", root / "data/toy/labelled.nc"
    if fields.exists() and labelled.exists():
        import xarray as xr

        from climnb.models.metrics import confusion_matrix_np, iou_from_confusion

        with xr.open_dataset(fields) as f, xr.open_dataset(labelled) as lab:
            truth, labels = f.truth.values, lab.labels.values
        per_class, _ = iou_from_confusion(confusion_matrix_np(truth, labels, 3))
        out["label IoU TC vs truth"] = float(per_class[1])
        out["label IoU AR vs truth"] = float(per_class[2])
    run = root / "runs/toy"
    if (run / "validation.csv").exists():
        val = pd.read_csv(run / "validation.csv").iloc[-1]
        out["model validation mean IoU"] = float(val.mean_iou)
        out["model validation IoU TC"] = float(val.iou_1)
        out["model validation IoU AR"] = float(val.iou_2)
    if (run / "history.csv").exists():
        hist = pd.read_csv(run / "history.csv")
        steady = hist.iloc[3:] if len(hist) > 6 else hist
        out["training samples/s (median, all ranks)"] = float(steady.samples_per_s.median())
        out["training GFLOP/s (median)"] = float(steady.gflops.median())
        out["training steps"] = int(hist.step.max())
    return out


def toy_samples(
    folder: str | os.PathLike,
    *,
    n_time: int = 64,
    seed: int = 0,
    fields: str | os.PathLike | None = None,
) -> Path:
    """A split sample set in ``folder`` for training (:func:`climnb.io.sampleset.write_sample_set`),
    made if missing.

    Uses the fields and labels of ``fields`` (a NetCDF file with a ``labels`` or ``truth``
    variable) when given and present, else ``n_time`` synthetic steps with their truth.
    """
    folder = Path(folder)
    with contextlib.suppress(SampleError):
        ss = SampleSet.open(folder)
        if ss.files("train") and ss.stats_path.is_file():
            return folder
    if fields is not None and Path(fields).exists():
        import xarray as xr

        with xr.open_dataset(fields) as ds:
            label = "labels" if "labels" in ds else "truth"
            write_sample_set(ds, label, folder, seed=seed, overwrite=True)
    else:
        ds, _ = make_dataset(n_time=n_time, seed=seed)
        write_sample_set(ds, "truth", folder, seed=seed, overwrite=True)
    log.info("wrote toy sample files and stats.h5 to %s", folder)
    return folder
