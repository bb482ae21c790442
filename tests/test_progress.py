"""Progress that suits where it is shown (:mod:`climnb.progress`): a bar in a terminal, log lines
in a batch job's log (never a carriage return), nothing with ``--no-progress``.

The helper is driven by a fake clock; the commands by their real runs at toy size (``climnb
label`` in a subprocess whose stderr is a file, as in a batch job) or with their work replaced
by a stand-in that reports a few files done.
"""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import types
from pathlib import Path

import dask
import pytest

from climnb import progress as progress_module
from climnb.cli import main
from climnb.commands import samples as samples_command
from climnb.io.files import write
from climnb.labels import label_dataset
from climnb.labels import writer as label_writer
from climnb.progress import LogProgress, dask_progress, progress, shows_bar

LOGGER = "climnb.progress"


class Clock:
    """A clock that moves only when told."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.fixture
def caplog(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


def run_steps(bar, clock, seconds: list[float]) -> None:
    """One update per entry, the clock moved on by that many seconds before it."""
    with bar:
        for s in seconds:
            clock.now += s
            bar.update(1)


# --- the pace of the log lines -------------------------------------------------------------


def test_a_line_at_each_tenth_then_the_last_with_count_time_and_rate(caplog):
    clock = Clock()
    bar = progress(100, desc="labelling", unit="step", stream=io.StringIO(), clock=clock)
    assert isinstance(bar, LogProgress)
    run_steps(bar, clock, [2.0] * 100)  # 2 s a step: a tenth every 20 s
    got = lines(caplog)
    assert got[0] == "labelling: 10/100 steps (10 %), 00:20 elapsed, 0.5 step/s, about 03:00 left"
    assert [g.split(" ")[1] for g in got[:-1]] == [f"{k}/100" for k in range(10, 100, 10)]
    assert got[-1] == "labelling: 100/100 steps in 03:20 (0.5 step/s)"


def test_a_fast_run_logs_its_last_line_only(caplog):
    clock = Clock()
    bar = progress(50, desc="labelling", unit="step", stream=io.StringIO(), clock=clock)
    run_steps(bar, clock, [0.1] * 50)  # every tenth passes within 10 s of the start
    assert lines(caplog) == ["labelling: 50/50 steps in 00:05 (10 step/s)"]


def test_a_slow_run_logs_a_line_a_minute_between_tenths(caplog):
    clock = Clock()
    bar = progress(10, desc="labelling", unit="step", stream=io.StringIO(), clock=clock)
    with bar:
        for _ in range(5):  # within the first step (a tenth): five 30 s waits, a line each 60 s
            clock.now += 30
            bar.update(0)
        clock.now += 10
        bar.update(1)
    got = lines(caplog)
    assert got[:2] == [
        "labelling: 0/10 steps (0 %), 01:00 elapsed",
        "labelling: 0/10 steps (0 %), 02:00 elapsed",
    ]
    assert got[2].startswith("labelling: 1/10 steps (10 %), 02:40 elapsed")
    assert got[-1] == "labelling: 1/10 steps in 02:40 (0.00625 step/s)"


def test_an_unknown_total_logs_a_line_a_minute(caplog):
    clock = Clock()
    bar = progress(desc="write + summarise", unit="file", stream=io.StringIO(), clock=clock)
    run_steps(bar, clock, [7.0] * 30)  # 210 s: lines at 63, 126, 189 s
    got = lines(caplog)
    assert got == [
        "write + summarise: 9 files, 01:03 elapsed, 0.143 file/s",
        "write + summarise: 18 files, 02:06 elapsed, 0.143 file/s",
        "write + summarise: 27 files, 03:09 elapsed, 0.143 file/s",
        "write + summarise: 30 files in 03:30 (0.143 file/s)",
    ]


def test_an_error_says_where_it_stopped(caplog):
    clock = Clock()
    with pytest.raises(RuntimeError):
        with progress(8, desc="labelling", unit="step", stream=io.StringIO(), clock=clock) as bar:
            clock.now += 4
            bar.update(3)
            raise RuntimeError("disk full")
    assert lines(caplog) == ["labelling: stopped at 3/8 steps in 00:04 (0.75 step/s)"]


# --- where it is shown ----------------------------------------------------------------------


def test_a_terminal_gets_the_tqdm_bar_and_no_log_lines(caplog):
    tty = Terminal()
    with progress(4, desc="labelling", unit="step", stream=tty) as bar:
        for _ in range(4):
            bar.update(1)
    assert not isinstance(bar, LogProgress)
    assert "\r" in tty.getvalue() and "labelling: 100%" in tty.getvalue()
    assert "4/4" in tty.getvalue()
    assert lines(caplog) == []
    assert shows_bar(True, tty) and not shows_bar(True, io.StringIO())


def test_a_log_stream_gets_nothing_drawn(caplog):
    log_file = io.StringIO()
    with progress(4, desc="labelling", unit="step", stream=log_file) as bar:
        bar.update(4)
    assert log_file.getvalue() == ""
    assert lines(caplog) and "\r" not in "".join(lines(caplog))


@pytest.mark.parametrize("stream", [Terminal(), io.StringIO()], ids=["terminal", "log"])
def test_disabled_shows_nothing(caplog, stream):
    with progress(4, desc="labelling", unit="step", stream=stream, enabled=False) as bar:
        bar.update(4)
    assert stream.getvalue() == "" and lines(caplog) == []
    assert not shows_bar(False, Terminal())


def test_a_notebook_keeps_the_tqdm_auto_widget(monkeypatch, caplog):
    from tqdm.auto import tqdm

    monkeypatch.setattr(progress_module, "_in_notebook", lambda: True)
    bar = progress(4, desc="labelling", unit="step", stream=io.StringIO())
    bar.close()
    assert isinstance(bar, tqdm) and lines(caplog) == []


# --- dask computations and io.files.write ---------------------------------------------------


def test_dask_progress_counts_the_tasks_its_key_test_accepts(caplog):
    parts = [dask.delayed(abs)(i, dask_key_name=f"label-step-{i}") for i in range(6)]
    total = dask.delayed(sum)(parts, dask_key_name="total")
    with dask_progress(desc="labelling", unit="step", total=6, counts=_is_step, stream=None):
        assert dask.compute(total, scheduler="sync")[0] == 15
    assert lines(caplog)[-1].startswith("labelling: 6/6 steps in ")


def _is_step(key) -> bool:
    return str(key).startswith("label-step")


def test_write_logs_the_tasks_done_where_stderr_is_no_terminal(toy, tmp_path, caplog):
    write(toy[0][["TMQ"]].chunk({"time": 2}), tmp_path / "f.nc", progress=True, desc="predict")
    line = lines(caplog)[-1]  # the last (a slow machine may log one before it)
    done, total = line.split(" ")[1].split("/")
    assert line.startswith("predict: ") and done == total and int(total) >= 4


# --- the commands ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fields(toy, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fields") / "fields.nc"
    toy[0].to_netcdf(path)
    return path


def test_label_in_a_batch_log_writes_progress_lines_and_no_carriage_return(fields, tmp_path):
    """``climnb label`` with stderr sent to a file, as a batch job's."""
    log_file = tmp_path / "job.err"
    with log_file.open("wb") as err:
        subprocess.run(
            [sys.executable, "-m", "climnb", "label", str(fields), "--out", str(tmp_path / "l.nc")],
            stdout=subprocess.DEVNULL,
            stderr=err,
            check=True,
        )
    text = log_file.read_bytes().decode()
    assert "\r" not in text
    last = [x for x in text.splitlines() if " climnb.progress INFO " in x][-1]
    assert "labelling: 8/8 steps in " in last and "step/s)" in last


def test_label_no_progress_writes_no_progress_lines(fields, tmp_path, caplog, capfd):
    assert main(["label", str(fields), "--out", str(tmp_path / "l.nc"), "--no-progress"]) == 0
    assert lines(caplog) == []
    assert "labelling:" not in capfd.readouterr().err


def test_label_no_terminal_logs_in_process(fields, tmp_path, caplog, capfd):
    assert main(["label", str(fields), "--out", str(tmp_path / "l.nc")]) == 0
    assert lines(caplog)[-1].partition(" in ")[0] == "labelling: 8/8 steps"
    assert "\r" not in capfd.readouterr().err


def test_label_zarr_counts_time_steps_not_tasks(fields, tmp_path, caplog):
    assert main(["label", str(fields), "--out", str(tmp_path / "l.zarr")]) == 0
    assert lines(caplog)[-1].partition(" in ")[0] == "labelling: 8/8 steps"


def test_label_in_a_terminal_draws_the_bar(fields, tmp_path, caplog, monkeypatch):
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["label", str(fields), "--out", str(tmp_path / "l.nc")]) == 0
    assert "\r" in tty.getvalue() and "8/8" in tty.getvalue()
    assert lines(caplog) == []


@pytest.mark.parametrize("terminal", [False, True], ids=["log", "terminal"])
def test_label_on_dask_distributed_logs_a_last_line_or_leaves_the_bar_to_it(
    toy, tmp_path, caplog, monkeypatch, terminal
):
    """With a client, distributed draws its bar where a bar shows (its text bar would write
    carriage returns into a log); elsewhere the last line is logged. The client's compute is
    stood in for by this process's."""
    asked = []

    def compute_on(client, *collections, progress, notebook):
        asked.append(progress)
        return dask.compute(*collections, scheduler="sync")

    monkeypatch.setattr(label_writer, "compute_on", compute_on)
    monkeypatch.setattr(sys, "stderr", Terminal() if terminal else io.StringIO())
    labels, events = label_dataset(toy[0])
    label_writer.write_labels(labels, events, tmp_path / "l.nc", client=object())
    assert asked == [terminal]
    last = lines(caplog)[-1:]
    assert [x.partition(" in ")[0] for x in last] == ([] if terminal else ["labelling: 8/8 steps"])


def _files_written(*inputs, progress, **options):
    for _ in range(3):
        progress(1)
    return "done"


@pytest.mark.parametrize("hidden", [False, True], ids=["shown", "no-progress"])
def test_samples_logs_files_written(caplog, hidden):
    args = types.SimpleNamespace(no_progress=hidden)
    assert samples_command._write(args, _files_written) == "done"
    got = [x.partition(" in ")[0] for x in lines(caplog)][-1:]
    assert got == ([] if hidden else ["write + summarise: 3 files"])


@pytest.mark.parametrize("hidden", [False, True], ids=["shown", "no-progress"])
def test_stage_logs_files_staged(caplog, capsys, monkeypatch, tmp_path, hidden):
    def stage(config, comm, progress):
        _files_written(progress=progress)
        return types.SimpleNamespace(summary="staged", to_dict=dict)

    monkeypatch.setattr("climnb.data.staging.stage", stage)
    argv = ["stage", "--no-mpi", "--source", str(tmp_path), "--dest", str(tmp_path / "n{node}")]
    assert main(argv + ["--no-progress"] * hidden) == 0
    got = [x.partition(" in ")[0] for x in lines(caplog)][-1:]
    assert got == ([] if hidden else ["staging (rank 0): 3 files"])
    assert capsys.readouterr().out.strip() == "staged"


@pytest.mark.parametrize("command", ["label", "samples", "stage", "predict"])
def test_help_says_what_no_progress_hides(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--no-progress hide the progress: a bar in a terminal;" in text
    assert "a last line with the count, time and rate" in text
