"""One run at a time into an output: the exclusive claim (:func:`climnb.io.atomic.claim`).

Deterministic first: the claim taken here, then the command run and refused with one line; a
claim left by a process that is gone taken over; then two real ``climnb label`` processes
started over a barrier into one ``--out``: one writes, the other is refused.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import xarray as xr
from _concurrent import start_together

from climnb.cli import main
from climnb.io.atomic import OutputBusy, claim, claim_path, claims


@pytest.fixture(scope="module")
def fields(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("claim") / "fields.nc"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["synth", "--out", str(path), "--n-time", "4", "--seed", "1"]) == 0
    return path


def _label(fields: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = main(["label", str(fields), "--out", str(out), "--no-progress"])
    return status, err.getvalue()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_held_claim_refuses_a_second_label_run(fields, tmp_path):
    out = tmp_path / "labels.nc"
    with claim(out):
        status, err = _label(fields, out)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2
    assert len(lines) == 1 and lines[0].startswith("climnb label: error: "), err
    assert str(out) in lines[0] and "another run" in lines[0] and f"process {os.getpid()}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, claim gone
    assert _label(fields, out)[0] == 0  # released: the next run writes
    assert not claim_path(out).exists()


def test_the_claim_of_a_killed_run_is_taken_over(fields, tmp_path):
    out = tmp_path / "labels.nc"
    record = {"pid": _dead_pid(), "host": socket.gethostname(), "token": "x"}
    claim_path(out).write_text(json.dumps(record))
    status, err = _label(fields, out)
    assert status == 0, err
    assert out.exists() and not claim_path(out).exists()


def test_a_claim_of_another_host_is_refused_saying_how_to_clear_it(tmp_path):
    out = tmp_path / "labels.nc"
    record = {"pid": 1, "host": "elsewhere.example", "token": "x"}
    claim_path(out).write_text(json.dumps(record))
    with pytest.raises(OutputBusy, match=r"process 1 on elsewhere.example.*remove .*claim"):
        with claim(out):
            pass
    assert claim_path(out).exists()  # left for its owner


def test_claims_are_exclusive_among_threads_started_together(tmp_path):
    """Of 8 threads claiming one output at a barrier, exactly one holds it."""
    out, barrier, got, lock = tmp_path / "x.nc", threading.Barrier(8), [], threading.Lock()
    release = threading.Event()

    def take():
        barrier.wait()
        try:
            with claim(out):
                with lock:
                    got.append(True)
                release.wait(5)
        except OutputBusy:
            with lock:
                got.append(False)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    # every thread answers before the holder lets go (it says so as soon as it holds): waiting
    # for only 7 answers let a thread that reached claim() after the release hold it too
    while len(got) < 8:
        threading.Event().wait(0.01)
    release.set()
    for t in threads:
        t.join()
    assert sorted(got) == [False] * 7 + [True]
    assert not claim_path(out).exists()


def test_claims_of_several_outputs_are_all_released_on_failure(tmp_path):
    a, b = tmp_path / "new" / "a.nc", tmp_path / "b.csv"
    with pytest.raises(RuntimeError), claims([a, b]):
        assert claim_path(a).exists() and claim_path(b).exists()
        raise RuntimeError
    assert list(tmp_path.iterdir()) == []  # the claims and the folder made for one gone


def test_two_label_runs_started_together_one_writes_the_other_is_refused(fields, tmp_path):
    out = tmp_path / "labels.nc"
    argv = ["label", str(fields), "--out", str(out), "--no-progress"]
    done = start_together([argv, argv], tmp_path)
    statuses = sorted(d.status for d in done)
    refused = [d.stderr for d in done if d.status == 2]
    assert statuses == [0, 2], [d.stderr[-500:] for d in done]
    assert "another run" in refused[0] and str(out) in refused[0], refused[0]
    with xr.open_dataset(out) as ds:
        assert ds.sizes["time"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.events.csv", "labels.nc"]
