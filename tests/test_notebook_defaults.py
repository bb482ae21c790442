"""What the notebooks say when run with their own defaults, as a person opens them."""

from __future__ import annotations

from pathlib import Path

import papermill

from climnb.stats.examples import labels_and_prediction

ROOT = Path(__file__).resolve().parents[1]


def _defaults(name: str) -> dict:
    [notebook] = (ROOT / "notebooks").glob(f"{name}_*.ipynb")
    return {k: v["default"] for k, v in papermill.inspect_notebook(str(notebook)).items()}


def test_06_by_default_labels_steps_of_its_own_without_naming_a_missing_file():
    """01 writes no labels by default (its out_path is None): 06 then says what it labelled,
    not that a file is missing."""
    assert _defaults("01")["out_path"] == "None"
    assert _defaults("06")["labels_path"] == "None"
    masks = labels_and_prediction(None, n_steps=4, model_path=None)
    assert masks.labels.sizes["time"] == 4
    first = str(masks).splitlines()[0]
    assert first.startswith("labels of 4 synthetic steps made here"), first
    assert "no " not in first.split("(")[0]
    missing = labels_and_prediction("no/such.nc", n_steps=4, model_path=None)
    assert str(missing).startswith("no no/such.nc: labelled 4 new synthetic steps")
