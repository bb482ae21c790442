"""The examples in climnb's docstrings run and hold, as ``--doctest-modules`` would run them.

Every module whose source holds an example (``>>>``) is found by reading the source, not by
importing it, so that collecting this module stays cheap; a module whose examples another test
module runs (the models', the optimiser's and the statistics' own, beside the TensorFlow they
need) is listed in :data:`RUN_ELSEWHERE`.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "climnb"

#: Modules whose examples run in another test module (named here).
RUN_ELSEWHERE = {
    "climnb.models.presets": "test_models.py",
    "climnb.models.flops": "test_models.py",
    "climnb.models.losses": "test_models.py",
    "climnb.models.metrics": "test_models.py",
    "climnb.train.keras_optim": "test_optim.py",
    **{
        f"climnb.stats.{m}": "test_stats.py"
        for m in (
            "masks",
            "groups",
            "frequency",
            "regions",
            "events",
            "precip",
            "change",
            "change_tables",
            "examples",
            "workflow",
        )
    },
}


def modules_with_examples() -> list[str]:
    """Dotted names of climnb's modules whose source holds an example that is not skipped."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        run = [x for x in lines if ">>> " in x and "doctest: +SKIP" not in x]
        if not run or path.name == "__main__.py":
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


#: Modules whose examples fail now, with what fails: each stays a strict expected failure
#: until its example or its code is fixed.
FAILING: dict[str, str] = {}

MODULES = [
    pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=FAILING[m])) if m in FAILING else m
    for m in modules_with_examples()
    if m not in RUN_ELSEWHERE
]


def test_the_examples_are_found_and_the_lists_are_current():
    found = modules_with_examples()
    assert {"climnb.labels.scores", "climnb.io.split", "climnb.labels.ar"} <= set(found)
    assert set(FAILING) <= set(found) and set(RUN_ELSEWHERE) <= set(found)  # none stale


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run(module, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
