"""The ClimateNet layout's file names (``data-YYYY-MM-DD-HH-1_N.nc``), its missing labeller.

One NetCDF file per labelled step and labeller (``N``: the labeller); :data:`MISSING` is the
``LABELS`` value of a labeller who did not label a step."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

__all__ = ["MISSING", "NAME_PATTERN", "expert_name", "parse_name"]

#: Value of ``LABELS`` where a labeller did not label a step.
MISSING = -1

#: A ClimateNet file name: year, month, day, hour, the ``1`` and the labeller.
NAME_PATTERN = re.compile(r"data-(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d+)_(\d+)\.nc$")

PathLike = str | os.PathLike


def parse_name(path: PathLike) -> tuple[pd.Timestamp, int]:
    """The time step and the labeller of a ClimateNet file name ``data-YYYY-MM-DD-HH-1_N.nc``.

    >>> parse_name("x/data-2011-06-01-03-1_2.nc")
    (Timestamp('2011-06-01 03:00:00'), 2)
    """
    m = NAME_PATTERN.search(Path(path).name)
    if not m:
        raise ValueError(
            f"{path}: not a ClimateNet file name (data-YYYY-MM-DD-HH-1_N.nc, N the labeller)"
        )
    year, month, day, hour, _, labeller = (int(g) for g in m.groups())
    try:
        return pd.Timestamp(year, month, day, hour), labeller
    except ValueError as err:
        raise ValueError(f"{path}: no such date in the file name ({err})") from None


def expert_name(time, labeller: int) -> str:
    """The ClimateNet file name of ``time`` and ``labeller`` (the inverse of :func:`parse_name`).

    >>> expert_name("2011-06-01T03", 2)
    'data-2011-06-01-03-1_2.nc'
    """
    return f"data-{pd.Timestamp(time):%Y-%m-%d-%H}-1_{int(labeller)}.nc"
