"""The benchmarks' argument checks: a setting too small to measure is refused while the
arguments are parsed, in one line that names the setting and the smallest value that works
(``bench_x.py: error: argument --rounds: must be at least 1, got 0``), not by a traceback or a
``nan`` at the end of the run."""

from __future__ import annotations

import argparse


def at_least(minimum: int | float, kind: type = int):
    """An argparse ``type``: a number of ``kind`` no smaller than ``minimum``."""

    def parse(text: str):
        value = kind(text)  # bad text: argparse says "invalid int value: 'x'"
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = kind.__name__
    return parse


def grid(text: str) -> tuple[int, int]:
    """An argparse ``type``: ``LATxLON`` (e.g. ``96x144``) as two whole numbers."""
    try:
        n_lat, n_lon = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"LATxLON, e.g. 96x144; got {text!r}") from None
    return n_lat, n_lon


def synthetic_grid(text: str) -> tuple[int, int]:
    """:func:`grid`, for a grid the synthetic generator can fill with its default storms and
    rivers (its own check: the grid's size and a storm's radius against its cells)."""
    from climnb.data.synthetic import make_dataset

    shape = grid(text)
    try:
        make_dataset(n_time=1, n_lat=shape[0], n_lon=shape[1], seed=0)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return shape


def fraction(text: str) -> float:
    """An argparse ``type``: a number in (0, 1]."""
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def fewest_split_steps(*, train: int = 1, validation: int = 1, test: int = 1, **split) -> int:
    """The fewest steps of a 3-hourly series (the synthetic generator's) that climnb's split
    (:func:`climnb.io.split.split_steps` with the options ``split``, as ``climnb samples``
    and :func:`climnb.io.sampleset.write_sample_set` call it) cuts into at least ``train``,
    ``validation`` and ``test`` steps."""
    import pandas as pd

    from climnb.io.split import split_steps

    for n in range(1, 1000):
        times = pd.date_range("2000-01-01", periods=n, freq="3h").values
        try:
            parts = split_steps(times, **split)
        except ValueError:  # too few for the block split's gaps
            continue
        if all(p.size >= k for p, k in zip(parts, (train, validation, test), strict=True)):
            return n
    raise RuntimeError(f"no series of under 1000 steps splits so: {split}")
