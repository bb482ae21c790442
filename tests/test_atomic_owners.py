"""Temporaries carry their writer's process id: clean-up takes only dead runs' ones, and a
second run into an output that a live run is writing is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from climnb.io.atomic import OutputBusy, atomic_path, owner_alive, remove_leftovers, temp_path


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_temp_names_record_this_process(tmp_path):
    tmp = temp_path(tmp_path / "out.nc")
    assert tmp.name.startswith(f".out.nc.{os.getpid()}-") and tmp.suffix == ".tmp"
    with atomic_path(tmp_path / "out.nc") as t:
        assert str(os.getpid()) in t.name
        t.write_text("x")
    assert (tmp_path / "out.nc").read_text() == "x"


def test_dead_runs_temporaries_go_live_ones_stay_or_refuse(tmp_path):
    dead = tmp_path / f".out.nc.{_dead_pid()}-0badf00d.tmp"
    old_style = tmp_path / ".out.nc.12345678.tmp"
    live = tmp_path / ".other.nc.1-deadbeef.tmp"  # process 1 is always alive
    for p in (dead, old_style, live):
        p.write_text("half")
    assert not owner_alive(_dead_pid()) and owner_alive(1)
    assert sorted(remove_leftovers(tmp_path, "out.nc")) == sorted([dead, old_style])
    assert live.exists()
    assert remove_leftovers(tmp_path) == [] and live.exists()  # no name: live ones left alone
    with pytest.raises(OutputBusy, match=r"other.nc: another run \(process 1\) is writing it"):
        remove_leftovers(tmp_path, "other.nc")
    assert live.exists()


def test_a_failed_write_names_the_output(tmp_path):
    import errno

    with pytest.raises(OSError) as info, atomic_path(tmp_path / "out.bin"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.filename == str(tmp_path / "out.bin") and info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_a_bundle_on_a_full_disk_names_it_and_leaves_no_scratch(tmp_path):
    """Keras writes an ``assets`` scratch folder under the temporary directory; on a full disk
    it stayed in /tmp. It now goes with the bundle's own temporary folder."""
    import glob
    import shutil
    import tempfile

    keras = pytest.importorskip("keras")
    from climnb.bundle import save_bundle

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    full = tmp_path / "full"
    full.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)])
    if done.returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        inp = keras.Input((None, None, 2))
        model = keras.Model(inp, keras.layers.Conv2D(3, 1)(inp))
        before = set(glob.glob(os.path.join(tempfile.gettempdir(), "tmp*")))
        with pytest.raises(OSError) as info:
            for k in range(64):  # fill the disk: a bundle is ~20 kB
                save_bundle(model, full / f"b{k}", channels=("a", "b"), minval=[0, 0],
                            maxval=[1, 1], name="pointwise", preset="test", stride=1)  # fmt: skip
        assert str(full) in str(info.value.filename)
        after = set(glob.glob(os.path.join(tempfile.gettempdir(), "tmp*")))
        assert not [p for p in after - before if os.path.isdir(os.path.join(p, "assets"))]
        assert not list(full.glob(".*.tmp"))
    finally:
        subprocess.run(["umount", "-l", str(full)])
