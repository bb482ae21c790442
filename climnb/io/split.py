"""A seeded train / validation / test split of sample files (80/10/10 by default).

The files are sorted by name before shuffling, so the split depends only on the names and the
seed, not on the order a directory listing returns them in.

Examples
--------
>>> split = split_files([f"data-{i:02d}.h5" for i in range(20)], seed=0)
>>> len(split.train), len(split.validation), len(split.test)
(16, 2, 2)
>>> split == split_files(reversed([f"data-{i:02d}.h5" for i in range(20)]), seed=0)
True
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from climnb.channels import CHANNEL_NAMES

__all__ = ["SPLITS", "Split", "split_counts", "split_files", "write_split_samples"]

SPLITS = ("train", "validation", "test")


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


def write_split_samples(
    ds,
    labels,
    out_dir: str | os.PathLike,
    *,
    seed: int = 0,
    run: int = 1,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    channels=CHANNEL_NAMES,
) -> Split:
    """Write the sample files of ``ds`` split into ``out_dir/{train,validation,test}``, and
    ``out_dir/stats.h5`` with the statistics of the training files (the DeepCAM layout).

    ``labels`` is a (time, lat, lon) DataArray or the name of a variable of ``ds``; the split
    is made on the file names with :func:`split_files`.
    """
    from climnb.io.samples import sample_name, write_samples
    from climnb.io.stats import STATS_NAME, compute_stats, write_stats

    out = Path(out_dir)
    names = [sample_name(t, run) for t in ds.time.values]
    split = split_files(names, fractions=fractions, seed=seed)
    written = {}
    for part, members in split.items():
        keep = {m.name for m in members}
        idx = [i for i, n in enumerate(names) if n in keep]
        labels_part = labels if isinstance(labels, str) else labels.isel(time=idx)
        written[part] = (
            tuple(
                write_samples(
                    ds.isel(time=idx), labels_part, out / part, run=run, channels=channels
                )
            )
            if idx
            else ()
        )
    write_stats(compute_stats(written["train"]), out / STATS_NAME)
    return Split(**written)
