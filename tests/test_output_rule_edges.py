"""The output rule (:func:`climnb.io.outputs.check_output`) on each side of every check: what is
refused and, just beside it, what is allowed (an existing file replaced, an empty folder, a
``*.zarr`` store, a folder next to an input, an output with exactly one link)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from climnb.io.outputs import OutputError, check_output, check_outputs, input_paths


@contextlib.contextmanager
def _as_nobody():
    """The block's permission checks (``os.access``, which asks for the real user) made for
    user ``nobody`` when the tests run as root, to whom every folder is writable."""
    if os.getuid() != 0:
        yield
        return
    nobody = pwd.getpwnam("nobody").pw_uid
    os.setreuid(nobody, 0)
    try:
        yield
    finally:
        os.setreuid(0, 0)


@pytest.fixture
def shared():
    """A folder every user may enter (pytest's own are private to their user)."""
    folder = Path(tempfile.mkdtemp(prefix="climnb-outputs-"))
    folder.chmod(0o755)
    yield folder
    for p in (folder, *folder.rglob("*")):
        p.chmod(0o755)
    shutil.rmtree(folder)


@pytest.fixture
def locked(shared):
    """A folder nobody may write, beside a file nobody may write in a folder all may write."""
    folder = shared / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    (shared / "old.nc").write_text("x")
    (shared / "old.nc").chmod(0o444)
    shared.chmod(0o777)
    return folder


def test_a_new_file_in_new_folders_and_an_existing_file_are_allowed(tmp_path):
    src = tmp_path / "in.nc"
    src.write_text("x")
    out = tmp_path / "a" / "b" / "out.nc"
    assert check_output(out, [src]) == out
    (tmp_path / "old.nc").write_text("to be replaced")
    assert check_output(tmp_path / "old.nc", [src]) == tmp_path / "old.nc"


def test_the_kind_must_be_file_or_folder(tmp_path):
    with pytest.raises(ValueError, match="kind must be 'file' or 'folder', got 'store'"):
        check_output(tmp_path / "x", kind="store")


def test_a_zarr_store_is_replaced_but_a_file_named_zarr_is_not(tmp_path):
    store = tmp_path / "labels.zarr"
    (store / "labels").mkdir(parents=True)  # a store: a non-empty directory
    assert check_output(store) == store
    (tmp_path / "flat.zarr").write_text("x")
    with pytest.raises(OutputError, match="flat.zarr exists and is not a Zarr store"):
        check_output(tmp_path / "flat.zarr")
    (tmp_path / "dir.nc").mkdir()
    with pytest.raises(OutputError, match="dir.nc is a directory; give a file name"):
        check_output(tmp_path / "dir.nc")
    assert check_output(tmp_path / "new.zarr") == tmp_path / "new.zarr"


def test_folders_empty_full_overwritten_and_holding_foreign_files(tmp_path):
    out = tmp_path / "set"
    out.mkdir()
    assert check_output(out, kind="folder") == out  # empty: no --overwrite needed
    (out / "train").mkdir()
    with pytest.raises(OutputError, match="set is not empty; use --overwrite to replace a set"):
        check_output(out, kind="folder", what="a set")
    assert check_output(out, kind="folder", overwrite=True) == out  # contents not told
    assert check_output(out, kind="folder", overwrite=True, contents={"train"}) == out
    (out / "fields.nc").write_text("x")
    with pytest.raises(OutputError, match=r"set holds fields.nc, not part of a set"):
        check_output(out, kind="folder", overwrite=True, contents={"train"}, what="a set")
    for k in range(4):
        (out / f"x{k}").write_text("x")
    with pytest.raises(OutputError, match=r"holds fields.nc, x0, x1 \.\.\., not part"):
        check_output(out, kind="folder", overwrite=True, contents={"train"})
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(OutputError, match="a-file exists and is not a directory"):
        check_output(tmp_path / "a-file", kind="folder")


def test_outputs_of_one_command_must_differ(tmp_path):
    a, b = tmp_path / "a.nc", tmp_path / "b.csv"
    checked = check_outputs({"--out": a, "--csv": b, "--events": None})
    assert checked == {"--out": a, "--csv": b}
    with pytest.raises(OutputError, match=r"--csv .*a.nc is the same file as --out"):
        check_outputs({"--out": a, "--csv": tmp_path / "." / "a.nc"})
    assert check_output(a, others={"--csv": b}) == a


def test_inputs_globs_and_patterns_matching_nothing(tmp_path):
    for name in ("b.nc", "a.nc"):
        (tmp_path / name).write_text("x")
    assert input_paths(str(tmp_path / "*.nc")) == [tmp_path / "a.nc", tmp_path / "b.nc"]
    assert input_paths([tmp_path / "none-*.nc"]) == [tmp_path / "none-*.nc"]
    with pytest.raises(OutputError, match=r"--out .*b.nc is an input \(.*b.nc\)"):
        check_output(tmp_path / "b.nc", str(tmp_path / "*.nc"))
    assert check_output(tmp_path / "c.nc", str(tmp_path / "*.nc")) == tmp_path / "c.nc"


def test_links_to_an_input_and_outputs_inside_or_around_one(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "fields.nc").write_text("x")
    (tmp_path / "alias.nc").symlink_to(inputs / "fields.nc")
    with pytest.raises(OutputError, match="alias.nc is an input"):
        check_output(tmp_path / "alias.nc", [inputs / "fields.nc"])
    os.link(inputs / "fields.nc", tmp_path / "hard.nc")  # two links: one in the input folder
    with pytest.raises(OutputError, match=r"hard.nc is a hard link to .*in/fields.nc, in the"):
        check_output(tmp_path / "hard.nc", [inputs])
    with pytest.raises(OutputError, match="hard.nc is an input"):  # the input file itself
        check_output(tmp_path / "hard.nc", [inputs / "fields.nc"])
    (inputs / "old.nc").write_text("x")  # one link, inside the input folder
    with pytest.raises(OutputError, match="old.nc is inside the input"):
        check_output(inputs / "old.nc", [inputs])
    (tmp_path / "out.nc").write_text("x")  # one link, beside the input folder
    assert check_output(tmp_path / "out.nc", [inputs, inputs / "fields.nc"]).name == "out.nc"
    (tmp_path / "three.nc").write_text("x")  # three links, none in the input folder
    os.link(tmp_path / "three.nc", tmp_path / "three-b.nc")
    os.link(tmp_path / "three.nc", tmp_path / "three-c.nc")
    assert check_output(tmp_path / "three.nc", [inputs]).name == "three.nc"
    assert check_output(tmp_path / "set", [inputs / "fields.nc"], kind="folder").name == "set"
    with pytest.raises(OutputError, match="holds the input"):
        check_output(tmp_path, [inputs / "fields.nc"], kind="folder", overwrite=True)
    assert check_output(tmp_path / "sibling", [inputs], kind="folder").name == "sibling"
    assert check_output(tmp_path / "x.nc", [inputs / "fields.nc"]).name == "x.nc"


def test_an_output_under_a_file_or_a_loop_of_links_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=r"out.nc: cannot write in .*file \(not a directory\)"):
        check_output(tmp_path / "file" / "deeper" / "out.nc")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(OutputError, match="a loop of symbolic links"):
        check_output(tmp_path / "loop" / "out.nc")


def test_a_folder_or_a_file_that_cannot_be_written_is_refused(locked):
    with _as_nobody():
        with pytest.raises(OutputError, match=r"new.nc: cannot write in .*locked \(permission"):
            check_output(locked / "new.nc")
        with pytest.raises(OutputError, match=r"old.nc: exists and is not writable"):
            check_output(locked.parent / "old.nc")


def test_an_existing_file_without_execute_permission_is_writable(shared):
    (shared / "out.csv").write_text("x")
    (shared / "out.csv").chmod(0o666)
    shared.chmod(0o777)
    with _as_nobody():
        assert check_output(shared / "out.csv").name == "out.csv"
