"""Every numbered notebook: committed clean, papermill-ready, and executes at toy size.

The notebooks run in order in one working directory (as ``make demo`` runs them), so a later
notebook may use what an earlier one wrote, exactly as a person working through them would.
tests/test_browser.py runs the same chain in JupyterLab with more checks; a notebook that a
selected browser test runs (its ``runs_notebook`` mark) is not executed here a second time, so
this module executes the chain only where Chromium is missing or the browser tests are not
selected (``-m "not browser"``, ``tests/test_notebooks.py`` alone).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import RUN_IN_BROWSER, check_expert_scores, write_chain_expert_folder

from climnb.demo import WORKFLOW, find_notebooks, run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = find_notebooks(ROOT / "notebooks")
IDS = [nb.stem for nb in NOTEBOOKS]
# The demo's chain of notebooks (each uses what the one before wrote), with shorter runs.
SHORTER = {
    "00": {"n_time": 24},
    # scored against the labellers of write_chain_expert_folder; the real season of the tests'
    # data against its best tracks
    "01": {
        "expert": "climatenet",
        "storm_season": str(ROOT / "tests/data/era5_msl_vo850_2025-12_2026-01_tropics_2.5x2.5.nc"),
        "best_track": str(ROOT / "tests/data/ibtracs_2025-12-01_2026-01-14.csv"),
    },
    "04": {"epochs": 1, "max_steps": 4},
    "05": {"independent_steps": 8},  # the independent series' 64 steps prove nothing more
    "06": {"change_steps": 96, "n_resamples": 999},
    # a toy network of a few steps where 04's is missing (run alone); a short fine-tuning
    "07": {"pretrain_steps": 6, "heldout_steps": 8, "tune_steps": 8, "epochs": 2},
}
TEST_PARAMETERS = {
    k: {**WORKFLOW.get(k, {}), **SHORTER.get(k, {})} for k in set(WORKFLOW) | set(SHORTER)
}


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """A copy of the notebooks folder to execute in, so the checkout stays clean."""
    work = tmp_path_factory.mktemp("notebooks")
    for nb in NOTEBOOKS:
        shutil.copy(nb, work / nb.name)
    write_chain_expert_folder(work)
    return work


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_committed_without_outputs_and_with_parameters(notebook):
    nb = nbformat.read(notebook, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "strip outputs"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters' (papermill)"
    assert code.index(tagged[0]) == 0, "parameters come before any other code"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_papermill_lists_every_parameter_with_its_type(notebook):
    """`papermill --help-notebook` shows every name the parameters cell sets, typed."""
    import ast

    import papermill

    nb = nbformat.read(notebook, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [
        t.id
        for node in ast.parse(cell.source).body
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    ]
    listed = papermill.inspect_notebook(str(notebook))
    assert assigned == list(listed), "one parameter per line, each a plain name"
    untyped = [k for k, v in listed.items() if v["inferred_type_name"] in ("None", "Unknown")]
    assert not untyped, f"give these a type (annotation or '# type: ...'): {untyped}"


@pytest.mark.notebook
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_notebook_executes(notebook, workdir, tmp_path, request):
    if notebook.name[:2] in request.config.stash.get(RUN_IN_BROWSER, set()):
        pytest.skip("run end to end in JupyterLab by tests/test_browser.py in this session")
    run = run_notebook(
        workdir / notebook.name,
        tmp_path,
        timeout=900,
        parameters=TEST_PARAMETERS.get(notebook.name[:2]),
    )
    executed = json.loads(run.output.read_text())
    errors = [
        o
        for c in executed["cells"]
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    assert run.html.stat().st_size > 10_000
    text = "".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for c in executed["cells"]
        for o in c.get("outputs", [])
    )
    if notebook.name.startswith("01"):  # chained on 00's fields, which hold the truth
        assert "no truth in this data set" not in text
        html = "".join(  # the tables shown as Stylers: their text is in their HTML
            "".join(o.get("data", {}).get("text/html", ""))
            for c in executed["cells"]
            for o in c.get("outputs", [])
        )
        assert "GRANT" in html and "no season given" not in text  # the verification table
        check_expert_scores(text)
    if notebook.name.startswith("07"):  # a correction saved, the scores before and after
        assert "data-2000-01-01-00-1_0.nc" in text and "network after (fine-tuned)" in text
        assert "labeller 0" in text and "labeller 1" in text  # the agreement of two labellers
    if notebook.name.startswith("02"):  # staged from 01's labels onto two simulated nodes
        assert "each file read at most 1x" in text
        assert all((workdir / "data/toy" / f"node{n}").is_dir() for n in (0, 1))
