"""The old import paths of moved modules still import, warn, and give the new module's names."""

from __future__ import annotations

import ast
import importlib
import pickle
import sys
from pathlib import Path

import pytest

import climnb

#: old path -> new path
MOVED = {
    "climnb.store": "climnb.io.files",
    "climnb.outputs": "climnb.io.outputs",
    "climnb.atomic": "climnb.io.atomic",
    "climnb.steps": "climnb.io.steps",
    "climnb.grid": "climnb.io.grid",
    "climnb.channels": "climnb.io.channels",
    "climnb.staging": "climnb.data.staging",
    "climnb.pipeline": "climnb.train.pipeline",
    "climnb.synthetic": "climnb.data.synthetic",
    "climnb.lookalike": "climnb.data.lookalike",
    "climnb.cluster": "climnb.runtime.cluster",
    "climnb.scheduler": "climnb.runtime.scheduler",
    "climnb.kernel": "climnb.runtime.kernel",
    "climnb._watchdog": "climnb.runtime.watchdog",
    "climnb.predict": "climnb.inference.predict",
    "climnb.postprocess": "climnb.inference.postprocess",
}


@pytest.mark.parametrize("old", MOVED)
def test_old_path_imports_and_warns(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {MOVED[old]}"):
        shim = importlib.import_module(old)
    for name in getattr(new, "__all__", ()) if old != "climnb.store" else ():
        assert getattr(shim, name) is getattr(new, name), name


def test_old_store_names_keep_their_meaning(tmp_path):
    from climnb.data.synthetic import make_dataset, save_dataset
    from climnb.io.files import read_grid

    sys.modules.pop("climnb.store", None)
    with pytest.warns(DeprecationWarning):
        store = importlib.import_module("climnb.store")
    path = tmp_path / "f.nc"
    save_dataset(*make_dataset(n_time=1, seed=0, n_lat=96, n_lon=144), path)
    assert store.expand(str(tmp_path / "*.nc")) == [path]
    assert store.input_grid(path).identical(read_grid(path))


@pytest.mark.parametrize("old_path", ["climnb.staging", "climnb.data.staging"])
def test_objects_pickled_at_an_old_path_load_from_the_new_module(old_path):
    from climnb.data.staging import StagingConfig

    config = StagingConfig(source="in", dest="out")
    pickled = pickle.dumps(config, protocol=0)
    old = pickled.replace(StagingConfig.__module__.encode(), old_path.encode())
    assert old != pickled and pickle.loads(old) == config


def test_no_climnb_module_imports_an_old_path():
    root = Path(climnb.__file__).parent
    shims = {root.joinpath(*old.split(".")[1:]).with_suffix(".py") for old in MOVED}
    found = []
    for path in sorted(set(root.rglob("*.py")) - shims):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found += [f"{path.relative_to(root)}: {n}" for n in names if n in MOVED]
    assert found == []
