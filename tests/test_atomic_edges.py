"""Atomic writes and claims where their rules decide: which process counts as alive, what a
clean-up removes and what it leaves, errors that name the file, a claim's folders, a claim that
cannot be read, a file system without hard links, a write that hits the file-size limit."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from climnb.io.atomic import (
    OutputBusy,
    atomic_path,
    claim,
    claim_path,
    owner_alive,
    remove_leftovers,
    temp_path,
)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@contextlib.contextmanager
def _unprivileged():
    """The block runs as user ``nobody`` (real and effective ids; the saved ones stay root's
    to come back) when the tests run as root, who may write into any folder and signal any
    process; as another user it runs as it is."""
    if os.geteuid() != 0:
        yield
        return
    nobody = pwd.getpwnam("nobody")
    os.setresgid(nobody.pw_gid, nobody.pw_gid, 0)
    os.setresuid(nobody.pw_uid, nobody.pw_uid, 0)
    try:
        yield
    finally:
        os.setresuid(0, 0, 0)
        os.setresgid(0, 0, 0)


@pytest.fixture
def shared_dir():
    """A folder that user ``nobody`` may enter (pytest's own are private to their user)."""
    path = Path(tempfile.mkdtemp(prefix="climnb-atomic-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_no_process_zero_or_negative_and_a_live_child_is_alive_and_left_running():
    assert owner_alive(None) is False
    assert owner_alive(0) is False  # os.kill(0, ...) would signal this process group
    assert owner_alive(-1) is False  # and -1 every process
    assert owner_alive(_dead_pid()) is False
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert owner_alive(child.pid) is True
        assert child.poll() is None  # asked, not signalled
        assert owner_alive(1) is True
    finally:
        child.kill()
        child.wait()


def test_another_users_live_process_is_alive():
    if os.geteuid() != 0 and os.stat("/proc/1").st_uid == os.geteuid():
        pytest.skip("process 1 belongs to this user: no other user's process to ask about")
    with _unprivileged():
        alive = owner_alive(1)  # the kernel refuses to signal it: it exists
    assert alive is True


def test_an_error_that_names_its_file_keeps_it_and_one_without_errno_is_left_alone(tmp_path):
    with pytest.raises(FileNotFoundError) as info, atomic_path(tmp_path / "out.nc"):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/elsewhere/input.nc")
    assert info.value.filename == "/elsewhere/input.nc"
    with pytest.raises(OSError) as info, atomic_path(tmp_path / "out.nc"):
        raise OSError("no errno")
    assert info.value.args == ("no errno",) and info.value.filename is None
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_into_an_existing_folder_replaces_the_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and not tmp.exists()
        tmp.write_text("new")
        assert target.read_text() == "old"  # the old one until the block ends
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_clean_up_of_a_missing_folder_is_nothing(tmp_path):
    assert remove_leftovers(tmp_path / "never-made") == []
    assert remove_leftovers(tmp_path / "never-made", "out.nc") == []


def test_clean_up_removes_dead_files_and_folders_and_keeps_everything_else(tmp_path):
    dead = _dead_pid()
    files = [tmp_path / f".out.nc.{dead}-0badf00d.tmp", tmp_path / f".out.nc.{dead}-1badf00d.old"]
    folder = tmp_path / f".set.{dead}-2badf00d.tmp"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "a.h5").write_text("half")
    for p in files:
        p.write_text("half")
    (tmp_path / "out.nc").write_text("finished")  # the .old's output is there: not put back
    keep = [tmp_path / "out.nc", tmp_path / ".hidden.txt", tmp_path / f"out.nc.{dead}.tmp"]
    for p in keep[1:]:
        p.write_text("someone else's")
    link = tmp_path / f".lnk.{dead}-3badf00d.tmp"  # a dead run's link to a folder: the link goes
    link.symlink_to(folder / "train")
    removed = remove_leftovers(tmp_path)
    assert sorted(removed) == sorted([*files, folder, link])
    assert sorted(tmp_path.iterdir()) == sorted(keep)
    assert (tmp_path / "out.nc").read_text() == "finished"


def test_clean_up_by_name_leaves_this_process_own_temporary(tmp_path):
    mine = temp_path(tmp_path / "out.nc")
    mine.write_text("being written")
    assert remove_leftovers(tmp_path, "out.nc") == []
    assert mine.exists()


def test_a_leftover_that_cannot_be_removed_does_not_stop_the_clean_up(shared_dir):
    """A dead run's folder holding a file this user may not delete: the clean-up goes on."""
    folder = shared_dir / f".set.{_dead_pid()}-0badf00d.tmp"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "a.h5").write_text("half")
    (folder / "train").chmod(0o555)
    shared_dir.chmod(0o777)
    try:
        with _unprivileged():
            removed = remove_leftovers(shared_dir)
        assert removed == [folder]
        assert (folder / "train" / "a.h5").exists()  # what it could not remove stays
    finally:
        (folder / "train").chmod(0o755)


def test_claim_makes_the_missing_folders_and_removes_only_those_it_made(tmp_path):
    out = tmp_path / "a" / "b" / "labels.nc"
    with claim(out) as held:
        assert held == claim_path(out) and held.parent.is_dir()
        assert json.loads(held.read_text())["pid"] == os.getpid()
    assert list(tmp_path.iterdir()) == []  # a and b went, the test's folder stayed
    assert tmp_path.is_dir()
    (tmp_path / "a").mkdir()
    with claim(out):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["a"] and not (tmp_path / "a" / "b").exists()


def test_a_claim_that_cannot_be_read_is_refused_as_another_runs(tmp_path):
    out = tmp_path / "labels.nc"
    for text in ("not json", "[1, 2]"):
        claim_path(out).write_text(text)
        with pytest.raises(OutputBusy, match=r"\(another run\) is writing it now.*remove "):
            with claim(out):
                pass
        assert claim_path(out).read_text() == text  # left for whoever wrote it


def test_a_claim_where_the_folder_is_not_writable_names_the_claims_file(shared_dir):
    out = shared_dir / "labels.nc"
    with pytest.raises(PermissionError) as info, _unprivileged():
        with claim(out):
            pass
    assert Path(info.value.filename).parent == shared_dir
    assert ".labels.nc.claim." in Path(info.value.filename).name  # the claim's temporary
    assert list(shared_dir.iterdir()) == []


def test_a_claim_on_a_file_too_large_for_the_limit_names_the_output(tmp_path):
    """A write that names no file (a full disk, here the file-size limit) names the output,
    and the folders the claim made go."""
    out = tmp_path / "new" / "labels.nc"
    code = textwrap.dedent(
        """
        import resource, signal, sys
        from climnb.io.atomic import claim
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
        try:
            with claim(sys.argv[1]):
                pass
        except OSError as err:
            print(err.errno, err.filename)
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(errno.EFBIG), str(out)]
    assert list(tmp_path.iterdir()) == []


def test_a_claim_on_a_file_system_without_hard_links(tmp_path, monkeypatch):
    """Some network and FUSE file systems refuse hard links: the claim is made exclusively
    another way, complete, readable by all and executable by none."""

    def no_links(src, dst, *args, **kwargs):
        raise PermissionError(errno.EPERM, "Operation not permitted", str(src), None, str(dst))

    monkeypatch.setattr(os, "link", no_links)
    out = tmp_path / "labels.nc"
    with claim(out) as held:
        record = json.loads(held.read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        assert held.stat().st_mode & 0o777 == 0o644 & ~_umask()
        with pytest.raises(OutputBusy, match=f"process {os.getpid()}"), claim(out):
            pass
        assert held.exists()
    assert list(tmp_path.iterdir()) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_claim_says_where_its_holder_runs(tmp_path):
    out = tmp_path / "labels.nc"
    here = {"pid": 1, "host": socket.gethostname(), "token": "x"}  # alive, on this host
    elsewhere = {"pid": 1, "host": "elsewhere.example", "token": "x"}
    for record, where in ((here, "(remove "), (elsewhere, "(on another host: remove ")):
        claim_path(out).write_text(json.dumps(record))
        with pytest.raises(OutputBusy) as info, claim(out):
            pass
        assert f"process 1 on {record['host']}" in str(info.value)
        assert where + str(claim_path(out)) in str(info.value)
