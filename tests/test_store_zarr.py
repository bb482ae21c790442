"""Zarr stores that lost a part, symbolic links that go nowhere, temporaries of two writers,
and the output rule on the ground floor."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import climnb
from climnb.cli import main
from climnb.io import files as store
from climnb.io import outputs
from climnb.io.atomic import OutputBusy, remove_leftovers, temp_path
from climnb.io.files import expand_paths, open_fields, write
from climnb.io.zarrstore import ZarrStoreError, check_store


@pytest.fixture(scope="module")
def fields(toy):
    return toy[0].isel(time=slice(0, 4))[["TMQ", "U850", "V850", "PSL"]]


def _store(ds, path: Path, zarr_format: int = 3) -> Path:
    chunked = ds.chunk({"time": 1, "lat": ds.sizes["lat"] // 2, "lon": ds.sizes["lon"] // 2})
    chunked.to_zarr(path, zarr_format=zarr_format, consolidated=False)
    return path


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    return int(done.stdout)


# --- missing parts are errors, not zeros -----------------------------------------------------


@pytest.mark.parametrize("zarr_format,chunk", [(3, "c/2/1/0"), (2, "2.1.0")])
def test_a_missing_chunk_is_named(fields, tmp_path, zarr_format, chunk):
    path = _store(fields, tmp_path / "f.zarr", zarr_format)
    open_fields(path, required=["TMQ"])  # whole: opens
    (path / "TMQ" / chunk).unlink()
    with pytest.raises(ValueError, match=rf"f.zarr: variable TMQ lacks chunk {chunk} \(1 of 16"):
        open_fields(path, required=["TMQ"])


@pytest.mark.parametrize(
    "zarr_format,metadata",
    [(3, "zarr.json"), (2, ".zarray"), (2, ".zattrs")],
)
def test_a_variable_without_metadata_is_named_not_skipped(fields, tmp_path, zarr_format, metadata):
    path = _store(fields, tmp_path / "f.zarr", zarr_format)
    (path / "U850" / metadata).unlink()
    with pytest.raises(ValueError, match=rf"f.zarr: variable U850 has no {metadata} "):
        open_fields(path, required=["TMQ"])  # not even asked for: a class would vanish


def test_an_empty_chunk_file_or_an_empty_store_is_named(fields, tmp_path):
    path = _store(fields, tmp_path / "f.zarr")
    (path / "PSL" / "c" / "1" / "0" / "0").write_bytes(b"")  # a copy cut short
    with pytest.raises(ValueError, match=r"f.zarr: variable PSL has an empty chunk file c/1/0/0"):
        open_fields(path)
    (tmp_path / "e.zarr").mkdir()
    with pytest.raises(ValueError, match=r"e.zarr: holds no Zarr metadata"):
        open_fields(tmp_path / "e.zarr")


def test_label_refuses_a_store_missing_a_chunk(fields, tmp_path, capsys):
    path = _store(fields, tmp_path / "f.zarr")
    (path / "TMQ" / "c" / "3" / "0" / "1").unlink()
    out = tmp_path / "labels.nc"
    assert main(["label", str(path), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "f.zarr: variable TMQ lacks chunk c/3/0/1" in err[0], err
    assert not out.exists()


def test_a_masks_absent_chunks_are_background_with_a_warning(fields, tmp_path, caplog):
    """xarray and Zarr leave out a mask's chunks of background by default: such a store is
    read (absent chunks as 0), with a warning naming the chunk; a field's is refused."""
    labels = xr.zeros_like(fields.TMQ, dtype=np.uint8)  # all background
    mask = labels.drop_attrs().to_dataset(name="labels")
    path = _store(mask, tmp_path / "m.zarr")
    assert not (path / "labels" / "c").exists()  # written sparse
    with caplog.at_level("WARNING", logger="climnb.io.zarrstore"):
        back = open_fields(path, required=["labels"])
    assert int(back.labels.sum()) == 0 and back.sizes["time"] == 4
    assert "m.zarr: variable labels lacks chunk c/0/0/0 (16 of 16 missing" in caplog.text
    assert "read as the fill value 0" in caplog.text


def test_climnbs_own_stores_keep_chunks_of_fill_values(fields, tmp_path):
    """Zarr skips chunks holding only the fill value unless told: a background-only mask
    would then read as damaged. The writer writes every chunk."""
    mask = xr.zeros_like(fields.TMQ, dtype=np.uint8).drop_attrs().to_dataset(name="labels")
    mask["gap"] = fields.TMQ.where(fields.TMQ < -1)  # all NaN, the fill value of floats
    path = write(mask.chunk({"time": 1}), tmp_path / "m.zarr")
    check_store(path)
    assert len(list((path / "labels" / "c").rglob("*"))) > 4
    back = open_fields(path, required=["labels"])
    assert int(back.labels.sum()) == 0 and int(back.labels.count()) == mask.labels.size


def test_check_store_leaves_non_stores_alone(tmp_path):
    check_store(tmp_path / "absent.zarr")  # the opener says it is missing
    (tmp_path / "s.zarr" / "TMQ" / "c").mkdir(parents=True)
    (tmp_path / "s.zarr" / ".hidden").mkdir()  # not a variable
    (tmp_path / "s.zarr" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    with pytest.raises(ZarrStoreError, match=r"s.zarr: variable TMQ has no zarr.json"):
        check_store(tmp_path / "s.zarr")


# --- links that go nowhere ---------------------------------------------------------------------


def test_a_symlink_loop_and_a_broken_link_are_named(tmp_path, capsys):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone.nc").symlink_to(tmp_path / "nothere.nc")
    with pytest.raises(FileNotFoundError, match=r"a: a loop of symbolic links"):
        expand_paths(tmp_path / "a")
    with pytest.raises(FileNotFoundError, match=r"gone.nc: a broken symbolic link \(to \S*noth"):
        expand_paths(tmp_path / "gone.nc")
    with pytest.raises(outputs.OutputError, match=r"--out \S*a/x.nc: a loop of symbolic links"):
        store.check_output(tmp_path / "a" / "x.nc")
    assert main(["label", str(tmp_path / "a"), "--out", str(tmp_path / "x.nc")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a loop of symbolic links" in err[0], err


# --- two writers, and what a killed one left ----------------------------------------------------


def test_zarr_temporaries_carry_the_writers_pid(fields, tmp_path, monkeypatch):
    seen = []
    real = store._swap
    monkeypatch.setattr(store, "_swap", lambda tmp, path: (seen.append(tmp.name), real(tmp, path)))
    write(fields.chunk({"time": 1}), tmp_path / "x.zarr")
    assert seen and seen[0].startswith(f".x.zarr.{os.getpid()}-") and seen[0].endswith(".tmp")
    assert [p.name for p in tmp_path.iterdir()] == ["x.zarr"]


def test_a_live_writers_store_is_left_and_refused_a_dead_ones_removed(fields, tmp_path):
    out = tmp_path / "x.zarr"
    live = tmp_path / ".x.zarr.1-deadbeef.tmp"  # process 1 is always alive
    live.mkdir()
    with pytest.raises(OutputBusy, match=r"x.zarr: another run \(process 1\) is writing it"):
        write(fields.chunk({"time": 1}), out)
    assert live.is_dir() and not out.exists()
    live.rename(tmp_path / f".x.zarr.{_dead_pid()}-deadbeef.tmp")
    write(fields.chunk({"time": 1}), out)
    assert [p.name for p in tmp_path.iterdir()] == ["x.zarr"]


def test_a_store_moved_aside_by_a_killed_swap_is_put_back(fields, tmp_path):
    """Killed between the two renames of a swap: the finished store is under ``.old``."""
    out = _store(fields, tmp_path / "x.zarr")
    aside = temp_path(out, ".old").with_name(f".x.zarr.{_dead_pid()}-0badf00d.old")
    out.rename(aside)
    (tmp_path / f".x.zarr.{_dead_pid()}-0badf00d.tmp").mkdir()  # the half-swapped new one
    removed = remove_leftovers(tmp_path, "x.zarr")
    assert [p.suffix for p in removed] == [".tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["x.zarr"]
    xr.testing.assert_allclose(open_fields(out).TMQ.load(), fields.TMQ)


# --- the output rule is on the ground floor ---------------------------------------------------


def _climnb_imports(module) -> set[str]:
    tree = ast.parse(Path(module.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n == "climnb" or n.startswith("climnb.")}


def test_the_output_rule_imports_nothing_of_climnb():
    assert _climnb_imports(outputs) == set()
    assert store.check_output is outputs.check_output  # one rule, re-exported
    assert store.OutputError is outputs.OutputError


@pytest.mark.parametrize("module", ["climnb.io.sampleset", "climnb.data.stagedest"])
def test_lower_layers_take_the_rule_without_the_store(module):
    imported = _climnb_imports(__import__(module, fromlist=["_"]))
    assert "climnb.io.files" not in imported and imported & {"climnb", "climnb.io.outputs"}
    assert Path(climnb.__file__).parent in Path(sys.modules[module].__file__).parents
