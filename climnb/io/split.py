"""Train / validation / test splits of sample files or time steps (80/10/10 by default).

Two methods:

* ``"blocks"`` (the default for time steps, :func:`split_steps`): contiguous blocks in time,
  train first, then validation, then test, with at least ``gap_hours`` (24 h) between any two
  steps of different sets; the steps inside a gap are left out. Neighbouring 3-hourly steps
  are strongly correlated, so a random split would put near-copies of training steps into the
  validation set and flatter its scores.
* ``"random"`` (on request, and :func:`split_files` for plain file lists): a seeded shuffle.
  Files are sorted by name before shuffling, so the split depends only on the names and the
  seed, not on the order a directory listing returns them in.

Examples
--------
>>> split = split_files([f"data-{i:02d}.h5" for i in range(20)], seed=0)
>>> len(split.train), len(split.validation), len(split.test)
(16, 2, 2)
>>> split == split_files(reversed([f"data-{i:02d}.h5" for i in range(20)]), seed=0)
True
>>> import numpy as np
>>> times = np.arange("2000-01-01", "2000-01-21", np.timedelta64(3, "h"), "datetime64[h]")
>>> parts = split_steps(times)
>>> [len(p) for p in parts], len(times)
([114, 16, 16], 160)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "METHODS",
    "SPLITS",
    "Split",
    "as_datetime64",
    "check_disjoint_steps",
    "split_counts",
    "split_files",
    "split_steps",
]

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
METHODS = ("blocks", "random")


@dataclass(frozen=True)
class Split:
    """Three disjoint tuples of files."""

    train: tuple[Path, ...]
    validation: tuple[Path, ...]
    test: tuple[Path, ...]

    def items(self):
        """``(name, files)`` pairs in the order train, validation, test."""
        return [(name, getattr(self, name)) for name in SPLITS]


def split_counts(n: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> list[int]:
    """How many of ``n`` items go to each part: validation and test rounded, train the rest.

    >>> split_counts(16), split_counts(3)
    ([12, 2, 2], [3, 0, 0])
    """
    f = np.asarray(fractions, float)
    if f.shape != (3,) or (f < 0).any() or not np.isclose(f.sum(), 1.0):
        raise ValueError(
            f"fractions must be three non-negative numbers summing to 1, got {fractions}"
        )
    val, test = (int(round(n * x)) for x in f[1:])
    return [n - val - test, val, test]


def split_files(
    files: Iterable[str | os.PathLike],
    *,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> Split:
    """Shuffle ``files`` with ``seed`` and cut them into train, validation and test."""
    files = sorted(Path(f) for f in files)
    order = np.random.default_rng(seed).permutation(len(files))
    n_train, n_val, _ = split_counts(len(files), fractions)
    shuffled = [files[i] for i in order]
    return Split(
        tuple(sorted(shuffled[:n_train])),
        tuple(sorted(shuffled[n_train : n_train + n_val])),
        tuple(sorted(shuffled[n_train + n_val :])),
    )


def split_steps(
    times: Sequence | None,
    *,
    n: int | None = None,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    method: str = "blocks",
    gap_hours: float = 24.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of the train, validation and test steps (each sorted).

    A time that repeats (several samples of one step: one per labeller of expert labels) is
    one step: the split, its fractions and its gap work on the distinct times, and every
    sample of a step goes to the same set.

    Parameters
    ----------
    times : the steps' times (datetime64-like), or ``None`` for data without a time axis
        (then ``n`` steps, cut into contiguous blocks by position with no gap).
    fractions : shares of validation and test (rounded); train gets the rest less the gaps.
    method : ``"blocks"`` (contiguous in time with gaps) or ``"random"`` (seeded shuffle).
    gap_hours : least time between steps of different sets (``"blocks"`` only).
    seed : seed of the ``"random"`` split (a block split does not depend on it).
    """
    _check_options(method, gap_hours)
    if times is not None:
        t = as_datetime64(times)
        steps, step_of = np.unique(t, return_inverse=True)
        if steps.size < t.size:  # samples sharing a step: split the steps, then expand
            parts = split_steps(
                steps, fractions=fractions, method=method, gap_hours=gap_hours, seed=seed
            )
            parts = tuple(np.flatnonzero(np.isin(step_of, p)) for p in parts)
            check_disjoint_steps(t, parts)
            return parts
        n = t.size
    elif n is None:
        raise ValueError("give the steps' times or their number n")
    n_train, n_val, n_test = split_counts(n, fractions)
    if method == "random":
        return _random_split(None if times is None else t, (n_train, n_val, n_test), seed)
    if times is None:
        log.warning("no time axis: contiguous blocks by position, without a gap between sets")
        return np.arange(n_train), np.arange(n_train, n - n_test), np.arange(n - n_test, n)
    return _block_split(t, (n_train, n_val, n_test), gap_hours)


def _check_options(method: str, gap_hours: float) -> None:
    """Refuse a split method not in :data:`METHODS` and a gap that is not a finite number of
    hours >= 0."""
    if method not in METHODS:
        raise ValueError(f"split method must be one of {', '.join(METHODS)}, got {method!r}")
    if not np.isfinite(gap_hours) or gap_hours < 0:
        raise ValueError(
            f"gap_hours (--gap-hours) must be a finite number of hours >= 0, got {gap_hours}: "
            "a negative gap would put the same steps in two sets"
        )


def _random_split(t: np.ndarray | None, counts, seed: int) -> tuple:
    """A seeded shuffle of the steps cut into sets of ``counts`` (train, validation, test)."""
    n_train, n_val, _ = counts
    order = np.random.default_rng(seed).permutation(sum(counts))
    parts = (
        np.sort(order[:n_train]),
        np.sort(order[n_train : n_train + n_val]),
        np.sort(order[n_train + n_val :]),
    )
    check_disjoint_steps(t, parts)
    return parts


def _block_split(t: np.ndarray, counts, gap_hours: float) -> tuple:
    """Contiguous blocks of the steps at times ``t``: train, validation, test in time order
    (``counts`` each at most), with at least ``gap_hours`` between steps of different sets."""
    n_train, n_val, n_test = counts
    n = t.size
    order = np.argsort(t, kind="stable")
    ts = t[order]
    gap = np.timedelta64(int(round(gap_hours * 3600)), "s")
    test = np.arange(n - n_test, n)
    end = n - n_test  # steps before this may go to validation, if far enough from test
    # at least the gap before the next set's first step, and never that step itself (gap 0)
    if n_test:
        end = min(int(np.searchsorted(ts, ts[n - n_test] - gap, side="right")), n - n_test)
    val = np.arange(max(end - n_val, 0), end)
    if n_val and val.size:
        end = min(int(np.searchsorted(ts, ts[val[0]] - gap, side="right")), int(val[0]))
    train = np.arange(0, end)
    if train.size == 0 or (n_val and val.size < n_val):
        span = (ts[-1] - ts[0]).astype("timedelta64[h]") if n else 0
        raise ValueError(
            f"{n} time steps over {span} are too few for a block split with a gap of "
            f"{gap_hours:g} h between sets (train {train.size}, validation {val.size}, test "
            f"{test.size}): give more steps, a smaller gap, or method='random'"
        )
    parts = tuple(np.sort(order[idx]) for idx in (train, val, test))
    check_disjoint_steps(t, parts)
    dropped = n - train.size - val.size - test.size
    if dropped:
        log.info("block split: %d step(s) in the %g h gaps left out", dropped, gap_hours)
    return parts


def as_datetime64(times: Sequence) -> np.ndarray:
    """Times as ``datetime64[s]``; dates of a model calendar (cftime: ``noleap``,
    ``360_day``, ...) become the same offsets from their first date, so that differences and
    order are the calendar's own (2000-02-30 of ``360_day`` is one day before 2000-03-01).

    >>> import cftime
    >>> day = cftime.Datetime360Day
    >>> t = [day(2000, 2, 29), day(2000, 2, 30), day(2000, 3, 1)]
    >>> np.diff(as_datetime64(t)).astype(int).tolist()
    [86400, 86400]
    """
    arr = np.asarray(times)
    if arr.dtype != object:
        return arr.astype("datetime64[s]")
    if arr.size == 0:
        return np.array([], "datetime64[s]")
    first = min(arr.ravel())
    seconds = [round((t - first).total_seconds()) for t in arr.ravel()]
    start = np.datetime64(f"{first.year:04d}-01-01", "s")
    return (start + np.array(seconds, "timedelta64[s]")).reshape(arr.shape)


def check_disjoint_steps(times: np.ndarray | None, parts: Sequence[Sequence[int]]) -> None:
    """Refuse a split whose sets share a step (an index, or a time): leakage between sets."""
    seen: dict = {}
    for name, idx in zip(SPLITS, parts, strict=False):
        for i in np.asarray(idx, int).tolist():
            key = ("step", i)
            keys = [key] + ([("time", str(times[i]))] if times is not None else [])
            for k in keys:
                if k in seen and seen[k] != name:
                    raise ValueError(
                        f"{k[0]} {k[1]} is in both the {seen[k]} and the {name} set: "
                        "the sets must not share steps"
                    )
                seen[k] = name
