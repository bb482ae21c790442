"""Progress that suits where it is shown, for every command and notebook call that counts work.

* In a terminal: a tqdm bar.
* In a notebook: tqdm's widget (``tqdm.auto``).
* Anywhere else (a batch job's stderr sent to a log file): a plain line through
  :mod:`logging` now and then, never a carriage return: at each tenth of the total, or after
  a minute without a line, whichever comes first, but none within 10 s of the line before
  (so a run of a few seconds logs only its last line); the last line gives the count, the
  time and the rate. ``climnb`` logs at INFO to stderr, so the lines land in the job's log.
* ``enabled=False`` (the commands' ``--no-progress``): nothing at all.

:func:`progress` counts things (steps, files) as the caller reports them; :func:`dask_progress`
is a dask callback that counts the tasks of a computation on this process's schedulers (all of
them, or those whose key a test accepts).

Examples
--------
A fake clock, one second a step, and a stream that is no terminal: a line at 10 s (none within
10 s of the start), then each tenth of the total, then the last line.

>>> import io, itertools, logging, sys
>>> show = logging.StreamHandler(sys.stdout)
>>> log.addHandler(show), log.setLevel(logging.INFO)
(None, None)
>>> clock = itertools.count().__next__
>>> with progress(50, desc="labelling", unit="step", stream=io.StringIO(), clock=clock) as bar:
...     for _ in range(50):
...         bar.update(1)
labelling: 10/50 steps (20 %), 00:10 elapsed, 1 step/s, about 00:40 left
labelling: 20/50 steps (40 %), 00:20 elapsed, 1 step/s, about 00:30 left
labelling: 30/50 steps (60 %), 00:30 elapsed, 1 step/s, about 00:20 left
labelling: 40/50 steps (80 %), 00:40 elapsed, 1 step/s, about 00:10 left
labelling: 50/50 steps in 00:50 (1 step/s)
>>> log.removeHandler(show), log.setLevel(logging.NOTSET)
(None, None)
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import IO, Protocol

__all__ = ["progress", "dask_progress", "shows_bar", "LogProgress", "NO_PROGRESS_HELP"]

log = logging.getLogger(__name__)

#: A line at each such share of the total ...
EVERY = 0.1
#: ... or after this many seconds without one, whichever comes first ...
SECONDS = 60.0
#: ... but never sooner than this many seconds after the line before.
QUIET = 10.0

Clock = Callable[[], float]

#: The help of the commands' ``--no-progress``.
NO_PROGRESS_HELP = (
    "hide the progress: a bar in a terminal; where stderr is a file or pipe (a batch job's "
    "log), a log line at each tenth of the work or after a minute without one (none within "
    "10 s of the last), and a last line with the count, time and rate"
)


class Bar(Protocol):
    """What :func:`progress` returns: a tqdm bar or a :class:`LogProgress` (or nothing shown)."""

    n: float

    def update(self, n: float = 1) -> object: ...

    def close(self) -> None: ...

    def __enter__(self) -> Bar: ...

    def __exit__(self, *exc) -> object: ...


def progress(
    total: float | None = None,
    *,
    desc: str,
    unit: str,
    enabled: bool = True,
    stream: IO | None = None,
    clock: Clock = time.monotonic,
) -> Bar:
    """A progress display of ``total`` ``unit``\\ s (``None``: unknown) for where it is shown.

    Parameters
    ----------
    total : how many there will be, or ``None`` (the lines then give the count and rate only).
    desc, unit : what is counted, as ``labelling``, ``step``.
    enabled : ``False`` shows nothing (``--no-progress``).
    stream : where a bar would be drawn (default ``sys.stderr``): a bar if it is a terminal,
        else log lines (a notebook shows tqdm's widget whatever the stream).
    clock : seconds, for the log lines' pace, elapsed time and rate.

    Use it as a context manager, or call ``close()``: the last line is written then (or, if
    the block raised, a line saying where it stopped).
    """
    if not enabled:
        return _Hidden()
    stream = sys.stderr if stream is None else stream
    notebook = _in_notebook()
    if notebook or _is_terminal(stream):
        from tqdm.auto import tqdm

        return tqdm(total=total, unit=unit, desc=desc, **({} if notebook else {"file": stream}))
    return LogProgress(total, desc=desc, unit=unit, clock=clock)


def shows_bar(enabled: bool = True, stream: IO | None = None) -> bool:
    """Whether :func:`progress` would draw a bar or widget here (not log lines, not nothing)."""
    return enabled and (_in_notebook() or _is_terminal(sys.stderr if stream is None else stream))


def dask_progress(
    *,
    desc: str,
    unit: str = "task",
    total: int | None = None,
    counts: Callable[[object], bool] | None = None,
    enabled: bool = True,
    stream: IO | None = None,
    clock: Clock = time.monotonic,
):
    """A dask callback (``with dask_progress(...): dask.compute(...)``) showing the progress of
    computations on this process's schedulers (not dask.distributed's) as :func:`progress` does.

    Parameters
    ----------
    total : how many to expect (default: the tasks of the first computation's graph).
    counts : which finished tasks count, by key (default: every task).

    The display opens when the first computation starts and closes when the block ends, so
    the computations of one block add up to one count.
    """
    from dask.callbacks import Callback

    class _DaskProgress(Callback):
        def __init__(self):
            super().__init__()
            self.bar = None

        def _start_state(self, dsk, state):
            if self.bar is None:
                n = total
                if n is None and counts is None:
                    n = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
                self.bar = progress(
                    n, desc=desc, unit=unit, enabled=enabled, stream=stream, clock=clock
                )

        def _posttask(self, key, result, dsk, state, worker_id):
            if self.bar is not None and (counts is None or counts(key)):
                self.bar.update(1)

        def __exit__(self, *exc):
            if self.bar is not None:
                self.bar.__exit__(*exc)
            return super().__exit__(*exc)

    return _DaskProgress()


class LogProgress:
    """Progress as log lines (:mod:`climnb.progress`'s pace), for a stream that is no terminal.

    ``update(n)`` adds ``n`` to the count; ``close()`` writes the last line.
    """

    def __init__(
        self,
        total: float | None,
        *,
        desc: str,
        unit: str,
        clock: Clock = time.monotonic,
        every: float = EVERY,
        seconds: float = SECONDS,
        quiet: float = QUIET,
    ):
        self.total = total if total and total > 0 else None
        self.desc, self.unit, self.clock = desc, unit, clock
        self.every, self.seconds, self.quiet = every, seconds, quiet
        self.n = 0
        self.closed = False
        self._lock = threading.Lock()
        self._start = self._last = clock()
        self._next = self._mark()

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(stopped=exc_type is not None)

    def update(self, n: float = 1) -> None:
        with self._lock:
            self.n += n
            if self.closed or (self.total is not None and self.n >= self.total):
                return  # the last line says it
            now = self.clock()
            since = now - self._last
            if since >= self.quiet and (since >= self.seconds or self.n >= self._next):
                self._last, self._next = now, self._mark()
                log.info("%s", self._line(now))

    def close(self, stopped: bool = False) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            elapsed = self.clock() - self._start
            rate = f" ({_rate(self.n, elapsed, self.unit)})" if elapsed > 0 else ""
            said = f"{self._count()} in {_interval(elapsed)}{rate}"
            log.info("%s: %s%s", self.desc, "stopped at " if stopped else "", said)

    def _mark(self) -> float:
        """The count at the next tenth (``every``) of the total above the count now."""
        if self.total is None:
            return math.inf
        step = self.total * self.every
        return (math.floor(self.n / step + 1e-9) + 1) * step

    def _count(self) -> str:
        n = f"{self.n:g}" + (f"/{self.total:g}" if self.total is not None else "")
        return f"{n} {self.unit}s"

    def _line(self, now: float) -> str:
        elapsed = now - self._start
        parts = [f"{self.desc}: {self._count()}"]
        if self.total is not None:
            parts[0] += f" ({100 * self.n / self.total:.0f} %)"
        parts.append(f"{_interval(elapsed)} elapsed")
        if elapsed > 0 and self.n > 0:
            parts.append(_rate(self.n, elapsed, self.unit))
            if self.total is not None:
                left = (self.total - self.n) * elapsed / self.n
                parts.append(f"about {_interval(left)} left")
        return ", ".join(parts)


class _Hidden:
    """Nothing shown (``--no-progress``), counting all the same."""

    def __init__(self):
        self.n = 0

    def __enter__(self) -> _Hidden:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: float = 1) -> None:
        self.n += n

    def close(self) -> None:
        return None


def _in_notebook() -> bool:
    """Whether tqdm.auto draws its widget here: tqdm's own test (an IPython kernel)."""
    if "IPython" not in sys.modules:  # no kernel without it; and importing tqdm costs time
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tqdm.autonotebook's note on notebook mode
        from tqdm import autonotebook, std

    return autonotebook.tqdm is not std.tqdm


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _interval(seconds: float) -> str:
    """``mm:ss`` or ``h:mm:ss``, as tqdm writes times."""
    minutes, s = divmod(int(round(seconds)), 60)
    h, m = divmod(minutes, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _rate(n: float, seconds: float, unit: str) -> str:
    return f"{n / seconds:.3g} {unit}/s"
