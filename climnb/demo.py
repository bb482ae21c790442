"""The whole workflow on toy data: execute the numbered notebooks in order with papermill.

Each notebook ``notebooks/NN_*.ipynb`` is executed top to bottom (its ``parameters`` cell
overridden by :data:`WORKFLOW`) into ``reports/NN_*.ipynb`` and rendered to HTML beside it. The
notebooks run with the notebooks folder as working directory, as in JupyterLab, so the toy data
land in ``notebooks/data/toy`` whether a person or the demo runs them.

:data:`WORKFLOW` chains them into the paper's workflow: synthetic fields (00) -> heuristic
labels (01) -> sample files, stats and staging onto two simulated nodes (02) -> the networks
(03) -> Horovod training on two MPI engines (04) -> inference on held-out data and the views
(05) -> event statistics, landfalls and a planted change (06). Each notebook also runs alone
with its own defaults.

The notebooks travel with the package (``climnb/notebooks`` in the wheel and the sdist; the
top-level ``notebooks/`` folder of a clone): :func:`packaged_notebooks` finds them,
:func:`copy_notebooks` copies them into a folder of the user's (``climnb notebooks DIR``), and
``climnb demo`` outside a clone runs them with the current folder as working directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import logging
import os
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import climnb.labels
from climnb.bundle import META_FILE, load_bundle
from climnb.io.atomic import atomic_path
from climnb.labels import LabelConfig
from climnb.versions import __version__, written_by

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

# numpy, xarray and climnb's labels, samples and synthetic fields load in the functions that
# score or write data: finding, copying and running notebooks (`climnb notebooks`, the start of
# `climnb demo`) needs none of them (1.4 s of imports saved in `climnb notebooks`).

log = logging.getLogger(__name__)

__all__ = [
    "DemoConfig",
    "NotebookCopy",
    "NotebookRun",
    "copy_notebooks",
    "demo_folders",
    "find_notebooks",
    "packaged_notebooks",
    "run_demo",
    "run_notebook",
]

#: The numbered notebooks: what the wheel carries and what the demo runs.
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
#: What :func:`copy_notebooks` wrote into a folder (name -> SHA-256), to tell a user's edits
#: from its own copies.
COPIES_FILE = ".climnb-notebooks.json"


#: Parameters that chain the notebooks into the whole workflow on toy data.
WORKFLOW: dict[str, dict] = {
    "00": {"n_time": 480, "out_path": "data/toy/fields.nc"},
    "01": {"input_path": "data/toy/fields.nc", "out_path": "data/toy/labelled.nc"},
    "02": {"input_path": "data/toy/labelled.nc", "workdir": "data/toy"},
    "04": {
        "data_dir": "data/toy/shared",
        "out_dir": "runs/toy",
        "draw": "shard",  # the 370 training files dealt out, 185 to each rank
        "samples_per_rank": 250,  # the most a rank gets
        "epochs": 12,  # of 92 steps of 2 ranks x 2 samples: 1104 steps
        # two transport inputs computed in the network: TMQ x V850 x sign(latitude), the
        # quantity of the teacher's poleward rule, and TMQ x |wind850|, the one it thresholds
        # (3 seeds, held-out block AR vs teacher worst 0.737 -> 0.840; docs/network_quality.md)
        "model_overrides": {"poleward_channel": True, "ivt_channel": True},
        "heldout_from": "data/toy/labelled.nc",  # the test block for notebook 05
    },
    "05": {"model_path": "runs/toy/model", "data_path": "data/toy/heldout.nc"},
    "06": {"labels_path": "data/toy/labelled.nc", "model_path": "runs/toy/model"},
}
#: Numbered notebooks the demo leaves out unless named with ``only``: 07 (expert labelling and
#: fine-tuning) adds about 100 s of fine-tuning and scoring to a workflow whose budget is 360 s.
OUTSIDE_DEMO = ("07",)
#: What the workflow writes (relative to the notebooks folder); removed before a clean run.
OUTPUTS = ("data/toy", "runs/toy")


@dataclass(frozen=True)
class DemoConfig:
    """Settings of ``climnb demo``.

    Attributes
    ----------
    notebooks : folder holding the numbered notebooks.
    reports : folder for the executed notebooks and their HTML.
    workdir : working directory of the notebooks, where their data go (``data/toy``,
        ``runs/toy``); ``None``: the notebooks folder, as in JupyterLab.
    only : run only notebooks whose name starts with one of these prefixes (e.g. ``("00",)``).
    parameters : papermill parameters per notebook, keyed by the notebook's number
        (``{"04": {"epochs": 2}}``); a notebook gets the ones it declares.
    kernel : Jupyter kernel name.
    timeout : seconds allowed per cell.
    """

    notebooks: Path = Path("notebooks")
    reports: Path = Path("reports")
    workdir: Path | None = None
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
    found = sorted(p for p in Path(folder).glob(NOTEBOOK_GLOB))
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
    cwd: str | os.PathLike | None = None,
) -> NotebookRun:
    """Execute one notebook with papermill into ``reports`` and render it to HTML.

    It runs in ``cwd`` (default: the notebook's folder). The executed notebook records the
    climnb version in its metadata (``climnb.version``), the HTML page in a ``generator`` tag.
    """
    import nbformat
    import papermill as pm

    from climnb.viz.export import notebook_html

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
            cwd=str(Path(cwd or notebook.parent).resolve()),
            execution_timeout=timeout,
            progress_bar=False,
            request_save_on_cell_execute=False,
            config=_kernel_config(),
        )
        executed = nbformat.read(tmp, as_version=4)
        executed.metadata["climnb"] = {"version": __version__}
        nbformat.write(executed, tmp)
    seconds = time.perf_counter() - start
    html = output.with_suffix(".html")
    logging.getLogger("traitlets").setLevel(logging.ERROR)  # "alternative text is missing"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Your element with mimetype", UserWarning)
        body = notebook_html(executed)  # renders offline
    body = body.replace("<head>", f'<head>\n<meta name="generator" content="{written_by()}">', 1)
    with atomic_path(html) as tmp:
        tmp.write_text(body)
    log.info("%s ran in %.1f s -> %s", notebook.name, seconds, output)
    return NotebookRun(notebook, output, html, seconds)


def _kernel_config():
    """The kernel talks over Unix sockets beside its connection file (``transport = "ipc"``):
    the demo's kernel runs on this machine, and over TCP without CurveZMQ keys ipykernel
    (>= 7) prints a warning about eavesdropping at every start, which the demo printed once a
    notebook. Over TCP still where the sockets' path would be too long for a Unix socket (a
    ``TMPDIR`` of more than ~80 characters)."""
    import tempfile

    from traitlets.config import Config

    socket = os.path.join(tempfile.gettempdir(), "tmpxxxxxxxx-ipc-99")  # mkstemp's name + port
    return Config({"KernelManager": {"transport": "ipc"}}) if len(socket) < 100 else Config()


def _declared_parameters(notebook: Path) -> set[str]:
    import papermill as pm

    return set(pm.inspect_notebook(str(notebook)))


def run_demo(config: DemoConfig = DemoConfig(), *, progress=None) -> list[NotebookRun]:
    """Run every numbered notebook in order (but :data:`OUTSIDE_DEMO`'s, unless ``only`` names
    them); stop at the first one that fails.

    ``progress`` is called with a message before each notebook (the CLI prints it).
    """
    notebooks = find_notebooks(config.notebooks, config.only)
    if not config.only:
        notebooks = [nb for nb in notebooks if not nb.name.startswith(OUTSIDE_DEMO)]
    workdir = Path(config.workdir or config.notebooks)
    if config.clean and not config.only:
        import shutil

        for out in OUTPUTS:
            shutil.rmtree(workdir / out, ignore_errors=True)
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
                cwd=workdir,
            )
        )
    return runs


def packaged_notebooks() -> Path:
    """The folder of the numbered notebooks that came with climnb.

    ``climnb/notebooks`` of an installed wheel or sdist; in a clone (or an editable install of
    one), the repository's ``notebooks/`` folder.
    """
    installed = Path(str(importlib.resources.files("climnb") / "notebooks"))
    clone = Path(__file__).resolve().parents[1] / "notebooks"
    for folder in (installed, clone):
        if any(folder.glob(NOTEBOOK_GLOB)):
            return folder
    raise FileNotFoundError(
        f"no numbered notebooks ({NOTEBOOK_GLOB}) came with climnb: looked in {installed} "
        f"and {clone}; reinstall climnb from its wheel or sdist"
    )


def demo_folders(notebooks: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """``(notebooks folder, working directory)`` of ``climnb demo``.

    A given folder runs in place. ``None``: ``./notebooks`` where it holds numbered notebooks
    (the root of a clone), else the notebooks that came with climnb, run with the current
    folder as working directory, so their data land in ``./data`` and ``./runs``.
    """
    if notebooks is not None:
        return Path(notebooks), Path(notebooks)
    local = Path("notebooks")
    if any(local.glob(NOTEBOOK_GLOB)):
        return local, local
    return packaged_notebooks(), Path.cwd()


@dataclass(frozen=True)
class NotebookCopy:
    """What :func:`copy_notebooks` did with one notebook.

    ``action`` is ``"copied"`` (new), ``"updated"`` (the folder held climnb's earlier copy,
    unchanged by the user), ``"up to date"`` (already identical) or ``"kept"`` (changed by the
    user, or not climnb's: left as it is).
    """

    name: str
    path: Path
    action: Literal["copied", "updated", "up to date", "kept"]


def copy_notebooks(
    dest: str | os.PathLike,
    *,
    source: str | os.PathLike | None = None,
    kernelspec: dict[str, str] | None = None,
) -> list[NotebookCopy]:
    """Copy the numbered notebooks, without outputs, into ``dest``; never overwrite an edit.

    A notebook already in ``dest`` is replaced only when it is byte for byte what an earlier
    call wrote there (recorded in ``dest/.climnb-notebooks.json``); one the user changed, ran
    and saved, or made is kept.

    Parameters
    ----------
    dest : the folder (made if missing).
    source : folder of ``NN_*.ipynb`` notebooks; default :func:`packaged_notebooks`.
    kernelspec : the copies' ``kernelspec`` metadata (the kernel they open on), e.g.
        :func:`climnb.runtime.kernel.notebook_kernelspec`; ``None``: as in ``source``.
    """
    dest = Path(dest).expanduser()
    dest.mkdir(parents=True, exist_ok=True)
    record_path = dest / COPIES_FILE
    record = _read_copies(record_path)
    done = []
    for notebook in find_notebooks(Path(source) if source else packaged_notebooks()):
        text = _without_outputs(notebook, kernelspec)
        target, digest = dest / notebook.name, _sha256(text.encode())
        action = _copy_action(target, digest, record.get(notebook.name))
        if action in ("copied", "updated"):
            with atomic_path(target) as tmp:
                tmp.write_text(text, encoding="utf-8")
        if action != "kept":
            record[notebook.name] = digest
        log.debug("%s %s", action, target)  # the caller says what was done
        done.append(NotebookCopy(notebook.name, target, action))
    with atomic_path(record_path) as tmp:
        tmp.write_text(json.dumps({"climnb": __version__, "sha256": record}, indent=1) + "\n")
    return done


def _copy_action(target: Path, digest: str, copied: str | None) -> str:
    if not target.exists():
        return "copied"
    current = _sha256(target.read_bytes())
    if current == digest:
        return "up to date"
    return "updated" if current == copied else "kept"


def _without_outputs(notebook: Path, kernelspec: dict[str, str] | None = None) -> str:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    if kernelspec:
        nb.metadata["kernelspec"] = dict(kernelspec)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nbformat.writes(nb) + "\n"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_copies(path: Path) -> dict[str, str]:
    try:
        return dict(json.loads(path.read_text()).get("sha256", {}))
    except (FileNotFoundError, ValueError, AttributeError, TypeError):  # none, or not ours
        return {}


#: Where notebook 05 keeps the held-out fields (with ``truth``), the network's prediction of
#: them (``prediction``) and, optionally, the teacher's labels of them (``labels``), relative
#: to the notebooks folder; :func:`headlines` scores the prediction from these files.
HELDOUT_FIELDS = "data/toy/heldout.nc"
HELDOUT_PREDICTION = "runs/toy/heldout_prediction.nc"
HELDOUT_TEACHER = "data/toy/heldout_labels.nc"
#: notebook 05's scores on an independent series (:func:`climnb.viz.heldout.independent_scores`)
INDEPENDENT_SCORES = "runs/toy/independent_scores.json"


def headlines(notebooks: str | os.PathLike = "notebooks") -> dict[str, float]:
    """The workflow's headline figures, read from what the notebooks wrote.

    Label IoU per class against the synthetic truth (notebook 01's labels), the trained
    model's validation IoU and training throughput (notebook 04), and the network's IoU on
    held-out steps against its teacher (the heuristic labels it learnt from) and against the
    truth, beside the teacher's own IoU against the truth, and the same for the network with the
    teacher's river rules on its rivers (``model + river rules ...``), on the held-out block and
    on notebook 05's independent series (:data:`INDEPENDENT_SCORES`; notebook 05's files
    :data:`HELDOUT_PREDICTION` and :data:`HELDOUT_FIELDS`; the teacher's labels are
    :data:`HELDOUT_TEACHER`, or made here with the default :class:`LabelConfig` when that file
    is missing), where those files exist. IoU follows :func:`climnb.labels.scores.class_iou`
    (a class absent from both masks is NaN).
    """
    import pandas as pd
    import xarray as xr

    from climnb.labels.scores import class_iou

    root, out = Path(notebooks), {}
    fields, labelled = root / "data/toy/fields.nc", root / "data/toy/labelled.nc"
    if fields.exists() and labelled.exists():
        with xr.open_dataset(fields) as f, xr.open_dataset(labelled) as lab:
            per_class, _ = class_iou(lab.labels.values, f.truth.values)
        out["label IoU TC vs truth"] = float(per_class[1])
        out["label IoU AR vs truth"] = float(per_class[2])
    run = root / "runs/toy"
    if (run / "validation.csv").exists():
        val = pd.read_csv(run / "validation.csv")
        best = val[val.best.astype(bool)] if "best" in val else val.iloc[:0]
        val = best.iloc[-1] if len(best) else val.iloc[-1]  # the bundle's weights
        out["model validation mean IoU"] = float(val.mean_iou)
        out["model validation IoU TC"] = float(val.iou_1)
        out["model validation IoU AR"] = float(val.iou_2)
        out["model validation epoch (the bundle's)"] = int(val.epoch) + 1
    if (run / "history.csv").exists():
        hist = pd.read_csv(run / "history.csv")
        steady = hist.iloc[3:] if len(hist) > 6 else hist
        out["training samples/s (median, all ranks)"] = float(steady.samples_per_s.median())
        out["training GFLOP/s (median)"] = float(steady.gflops.median())
        out["training steps"] = int(hist.step.max())
    out.update(heldout_scores(root))
    out.update(independent_figures(root / INDEPENDENT_SCORES))
    return out


#: headline names of :func:`climnb.labels.scores.network_teacher_truth`'s rows ({where}, {class})
_FIGURE_NAMES = {
    "network vs teacher": "model {} IoU {} vs teacher",
    "network vs truth": "model {} IoU {} vs truth",
    "teacher vs truth": "teacher {} IoU {} vs truth",
    "network + river rules vs teacher": "model + river rules {} IoU {} vs teacher",
    "network + river rules vs truth": "model + river rules {} IoU {} vs truth",
}


def headline_figures(rows: dict[str, dict[str, float]], where: str) -> dict[str, float]:
    """:func:`climnb.labels.scores.network_teacher_truth`'s rows as headline figures, e.g.
    ``model held-out IoU TC vs teacher`` for ``where="held-out"``."""
    return {
        _FIGURE_NAMES[row].format(where, c): float(v)
        for row, per_class in rows.items()
        for c, v in per_class.items()
    }


def independent_figures(path: str | os.PathLike) -> dict[str, float]:
    """The independent series' IoU per class as headline figures, from the JSON file that
    :func:`climnb.viz.heldout.independent_scores` wrote (empty when there is none)."""
    path = Path(path)
    if not path.exists():
        return {}
    return headline_figures(json.loads(path.read_text())["iou"], "independent")


def heldout_scores(notebooks: str | os.PathLike = "notebooks") -> dict[str, float]:
    """The network's held-out IoU per class against its teacher and against the truth, the
    teacher's against the truth, and the network's with the teacher's river rules on its
    rivers (:func:`climnb.inference.postprocess.apply_river_rules` with the teacher's settings the
    model bundle records, else :class:`LabelConfig`'s) against both (see :func:`headlines`);
    empty without notebook 05's files.
    """
    import numpy as np
    import xarray as xr

    from climnb.inference.postprocess import apply_river_rules
    from climnb.labels.scores import network_teacher_truth

    root = Path(notebooks)
    fields, predicted = root / HELDOUT_FIELDS, root / HELDOUT_PREDICTION
    if not (fields.exists() and predicted.exists()):
        return {}
    with xr.open_dataset(fields) as ds, xr.open_dataset(predicted) as pred:
        common = np.intersect1d(ds.time.values, pred.time.values)
        if common.size == 0:
            log.warning("%s and %s share no time step: no held-out scores", fields, predicted)
            return {}
        ds, prediction = ds.sel(time=common).load(), pred.prediction.sel(time=common).load()
    config = _teacher_config(root / WORKFLOW["05"]["model_path"])
    teacher = _teacher(root / HELDOUT_TEACHER, ds, config)
    ruled = apply_river_rules(prediction, ds, config.ar).values
    rows = network_teacher_truth(prediction.values, teacher, ds.truth.values, ruled)
    return headline_figures(rows, "held-out")


def _teacher_config(model: Path):
    """The teacher's settings the model bundle records, else the labeller's defaults."""
    from climnb.inference.postprocess import teacher_config

    recorded = teacher_config(load_bundle(model)) if (model / META_FILE).exists() else None
    return recorded or LabelConfig()


def _teacher(path: Path, ds: xr.Dataset, config) -> np.ndarray:
    import xarray as xr

    if path.exists():
        with xr.open_dataset(path) as lab:
            return lab.labels.sel(time=ds.time.values).values
    labels, _ = climnb.labels.compute(*climnb.labels.label_dataset(ds, config))
    return labels.values


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
    import xarray as xr

    from climnb.data.synthetic import make_dataset
    from climnb.io.samples import SampleError
    from climnb.io.sampleset import SampleSet, write_sample_set

    folder = Path(folder)
    with contextlib.suppress(SampleError):
        ss = SampleSet.open(folder)
        if ss.files("train") and ss.stats_path.is_file():
            return folder
    if fields is not None and Path(fields).exists():
        with xr.open_dataset(fields) as ds:
            label = "labels" if "labels" in ds else "truth"
            write_sample_set(ds, label, folder, seed=seed, overwrite=True)
    else:
        ds, _ = make_dataset(n_time=n_time, seed=seed)
        write_sample_set(ds, "truth", folder, seed=seed, overwrite=True)
    log.info("wrote toy sample files and stats.h5 to %s", folder)
    return folder
