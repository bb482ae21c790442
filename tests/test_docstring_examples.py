"""The examples in the docstrings of the data modules run and hold (the models' and the
statistics' own are run by tests/test_models.py and tests/test_stats.py)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    ["climnb.pipeline", "climnb.labels.config", "climnb.io.netcdf", "climnb.io.stats"],
)
def test_docstring_examples_run(module, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
