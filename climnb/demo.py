"""The whole workflow on toy data: execute the numbered notebooks in order with papermill.

Each notebook ``notebooks/NN_*.ipynb`` is executed top to bottom (its ``parameters`` cell
overridden by ``parameters``) into ``reports/NN_*.ipynb`` and rendered to HTML beside it. The
notebooks run with the notebooks folder as working directory, as in JupyterLab, so the toy data
land in ``notebooks/data/toy`` whether a person or the demo runs them.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from climnb.atomic import atomic_path

log = logging.getLogger(__name__)

__all__ = ["DemoConfig", "NotebookRun", "find_notebooks", "run_notebook", "run_demo"]


@dataclass(frozen=True)
class DemoConfig:
    """Settings of ``climnb demo``.

    Attributes
    ----------
    notebooks : folder holding the numbered notebooks (also their working directory).
    reports : folder for the executed notebooks and their HTML.
    only : run only notebooks whose name starts with one of these prefixes (e.g. ``("00",)``).
    parameters : papermill parameters given to every notebook that declares them.
    kernel : Jupyter kernel name.
    timeout : seconds allowed per cell.
    """

    notebooks: Path = Path("notebooks")
    reports: Path = Path("reports")
    only: tuple[str, ...] = ()
    parameters: dict = field(default_factory=dict)
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
        raise FileNotFoundError(f"no numbered notebooks (NN_*.ipynb) in {folder}"
                                + (f" starting with {', '.join(only)}" if only else ""))
    return found


def run_notebook(notebook: Path, reports: Path, *, parameters: dict | None = None,
                 kernel: str = "python3", timeout: int = 1200) -> NotebookRun:
    """Execute one notebook with papermill into ``reports`` and render it to HTML."""
    import nbconvert
    import nbformat
    import papermill as pm

    os.environ.setdefault("IPP_NONINTERACTIVE", "1")
    notebook, reports = Path(notebook).resolve(), Path(reports).resolve()
    output = reports / notebook.name
    declared = _declared_parameters(notebook)
    given = {k: v for k, v in (parameters or {}).items() if k in declared}
    start = time.perf_counter()
    with atomic_path(output) as tmp, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The specified file", UserWarning)  # our .tmp name
        pm.execute_notebook(
            str(notebook), str(tmp), parameters=given, kernel_name=kernel,
            cwd=str(notebook.parent), execution_timeout=timeout, progress_bar=False,
            request_save_on_cell_execute=False,
        )
    seconds = time.perf_counter() - start
    html = output.with_suffix(".html")
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nbformat.read(output, as_version=4))
    with atomic_path(html) as tmp:
        tmp.write_text(body)
    log.info("%s ran in %.1f s -> %s", notebook.name, seconds, output)
    return NotebookRun(notebook, output, html, seconds)


def _declared_parameters(notebook: Path) -> set[str]:
    import papermill as pm

    return set(pm.inspect_notebook(str(notebook)))


def run_demo(config: DemoConfig = DemoConfig(), *, progress=None) -> list[NotebookRun]:
    """Run every numbered notebook in order; stop at the first one that fails.

    ``progress`` is called with a message before each notebook (the CLI prints it).
    """
    runs = []
    for nb in find_notebooks(config.notebooks, config.only):
        if progress:
            progress(f"running {nb.name} ...")
        runs.append(run_notebook(nb, config.reports, parameters=config.parameters,
                                 kernel=config.kernel, timeout=config.timeout))
    return runs


def toy_samples(folder: str | os.PathLike, *, n_time: int = 64, seed: int = 0,
                fields: str | os.PathLike | None = None) -> Path:
    """Sample files and ``stats.h5`` in ``folder`` for the training notebook, made if missing.

    Uses the fields and labels of ``fields`` (a NetCDF file with a ``labels`` or ``truth``
    variable) when given and present, else ``n_time`` synthetic steps with their truth.
    """
    from climnb.io.samples import write_samples
    from climnb.io.stats import compute_stats, write_stats

    folder = Path(folder)
    if (folder / "stats.h5").exists() and any(folder.glob("data-*.h5")):
        return folder
    if fields is not None and Path(fields).exists():
        import xarray as xr

        ds = xr.open_dataset(fields)
        labels = "labels" if "labels" in ds else "truth"
    else:
        from climnb.synthetic import make_dataset

        ds, _ = make_dataset(n_time=n_time, seed=seed)
        labels = "truth"
    files = write_samples(ds, labels, folder)
    write_stats(compute_stats(files), folder / "stats.h5")
    log.info("wrote %d toy sample files and stats.h5 to %s", len(files), folder)
    return folder
