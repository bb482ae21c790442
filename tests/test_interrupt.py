"""Ctrl-C (SIGINT) in a command: one line on stderr, exit status 130, no temporary file left
(what a rerun resumes from is kept: the sample set's folder beside OUT)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
from _stopping import stopping_after

from climnb.data.synthetic import make_dataset


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_in_samples_is_one_line_and_leaves_no_temporary(tmp_path):
    ds, _ = make_dataset(n_time=40, seed=1)  # the fewest a split takes
    ds.to_netcdf(tmp_path / "f.nc")
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = ["samples", "--input", "f.nc", "--out", "s"]
    # as from a terminal: a parent that ignores SIGINT (a background job, nohup, a library
    # in this process) passes that on through exec, and the child would never see Ctrl-C
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            stopping_after(1, "wait", *args, "--no-progress"),
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, old)
    deadline = time.monotonic() + 120
    while not (tmp_path / "written").exists() and time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"finished before it could be interrupted: {proc.stderr.read()}")
        time.sleep(0.05)
    (tmp_path / "written").unlink()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip() and " INFO " not in ln]
    lines = [ln for ln in lines if " WARNING " not in ln]
    assert proc.returncode == 130, err
    assert len(lines) == 1 and lines[0].startswith("climnb samples: interrupted"), err
    assert not [p for p in tmp_path.rglob("*.tmp")], "temporary files left"
    assert not (tmp_path / "s").exists()
    argv = [sys.executable, "-m", "climnb", *args]
    rerun = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming" in rerun.stderr


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_that_lands_in_a_finalizer_is_not_lost():
    """Python prints a KeyboardInterrupt raised in a finalizer as "Exception ignored" and goes
    on; the CLI raises it again once the finalizer is left (once seen: a Ctrl-C during a weakref
    callback, and `climnb samples` wrote the whole set)."""
    from climnb.cli import _ctrl_c_not_lost

    class InterruptedInFinalizer:
        def __del__(self):
            raise KeyboardInterrupt

    # as in a terminal: Python's own SIGINT handler (a pytest-xdist worker ignores SIGINT,
    # and an interrupt simulated by _thread.interrupt_main is then dropped)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    with pytest.raises(KeyboardInterrupt), _restored(signal.SIGINT, old):
        with _ctrl_c_not_lost():
            InterruptedInFinalizer()  # collected at once: its __del__ raises, Python ignores
            deadline = time.monotonic() + 10  # it comes again 50 ms later
            while time.monotonic() < deadline:
                time.sleep(0.001)
    InterruptedInFinalizer()  # outside: ignored as before (the hook is restored)


@contextlib.contextmanager
def _restored(signum, handler):
    try:
        yield
    finally:
        signal.signal(signum, handler)
