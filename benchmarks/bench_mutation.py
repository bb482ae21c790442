"""Mutation testing of the core science and data modules: how many small wrong changes
(mutants) the tests that cover each module catch.

For each module of :data:`MODULES`, every site where a one-token change alters behaviour is a
mutant (a hand-written mutator over :mod:`ast`):

* comparisons ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <-> ``not in``,
  ``is`` <-> ``is not``;
* arithmetic ``+`` <-> ``-``, ``*`` <-> ``/`` (also in ``+=`` and the like);
* numeric constants ``n`` -> ``n + 1`` (integers) or ``2 x`` (floats; ``0.0`` -> ``1.0``),
  ``True`` <-> ``False``;
* ``and`` <-> ``or``; ``not x`` -> ``x``;
* ``return x`` -> ``return None``.

Docstrings, ``__all__`` and the arguments of logging calls are not mutated. The mutated
module is written, by ``ast.unparse``, into a scratch copy of the repository (the module
unmutated but unparsed the same way is the baseline, which must pass), and only the test
modules that cover it (the mapping below) run against it, without the slow, browser, Slurm,
notebook, Horovod and MPI tests, stopping at the first failure, with a time limit per mutant.
A mutant is *killed* when a test fails (or the test run dies of a signal, as when a mutant
signals its own process), *survived* when all pass, *timed out* past the limit (counted as
killed: the tests noticed). Mutants known to be equivalent (no behaviour changes;
:data:`EQUIVALENT`, with the reason) are listed apart and left out of the ratio.

Run (a seeded sample per module, so that it ends in minutes on two cores)::

    .venv/bin/python benchmarks/bench_mutation.py --max-per-module 12 --seed 0
    .venv/bin/python benchmarks/bench_mutation.py --module climnb/labels/scores.py --list
    .venv/bin/python benchmarks/bench_mutation.py --module climnb/io/atomic.py --mutant 12  # one
    .venv/bin/python benchmarks/bench_mutation.py --tests /tmp/old/tests ...  # other tests

It prints one row per module (mutants sampled of all, killed, survived, timed out,
equivalent, killed share of the non-equivalent) and every survivor, to be killed by a test.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Each module and the tests that cover it (paths or node ids, relative to the repository).
MODULES: dict[str, list[str]] = {
    "climnb/labels/scores.py": [
        "tests/test_decision_edges.py",
        "tests/test_scores_edges.py",
        "tests/test_score.py",
        "tests/test_labels_reference.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.labels.scores]",
    ],
    "climnb/io/split.py": [
        "tests/test_split_edges.py",
        "tests/test_mutation_survivors.py",
        "tests/test_sampleset.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.io.split]",
    ],
    "climnb/io/reader.py": [
        "tests/test_pipeline.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.io.reader]",
    ],
    "climnb/io/levels.py": [
        "tests/test_decision_edges.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.io.levels]",
    ],
    "climnb/io/variables.py": [
        "tests/test_decision_edges.py",
        "tests/test_variables_edges.py",
        "tests/test_mutation_survivors.py",
        "tests/test_real_inputs.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.io.variables]",
    ],
    "climnb/labels/ar.py": [
        "tests/test_ar_half_max_edges.py",
        "tests/test_ar_edges.py",
        "tests/test_rule_edges.py",
        "tests/test_river_rules.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.labels.ar]",
        "tests/test_river_separation.py",
        "tests/test_labels.py",
    ],
    "climnb/labels/tc.py": [
        "tests/test_tc_edges.py",
        "tests/test_rule_edges.py",
        "tests/test_labels.py",
    ],
    "climnb/models/losses.py": [
        "tests/test_decision_edges.py",
        "tests/test_losses_edges.py",
        "tests/test_models_loss_metric.py",
    ],
    "climnb/io/atomic.py": [
        "tests/test_atomic_edges.py",
        "tests/test_atomic_owners.py",
        "tests/test_output_claim.py",
        *(
            f"tests/test_mutation_survivors.py::{t}"
            for t in (
                "test_atomic_write_makes_missing_folders_and_writes_again",
                "test_a_displaced_output_is_put_back_not_counted_as_removed",
            )
        ),
        "tests/test_kill_midwrite.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.io.atomic]",
    ],
    "climnb/io/outputs.py": [
        "tests/test_output_rule_edges.py",
        "tests/test_store.py::test_check_output",
        "tests/test_mutation_survivors.py::test_folder_outputs_at_the_rule_edges",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.io.outputs]",
        "tests/test_output_claim.py",
        "tests/test_output_guard.py",
    ],
    "climnb/data/stagerun.py": [
        "tests/test_staging_edges.py",
        "tests/test_staging.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.data.staging]",
    ],
    "climnb/data/stagesource.py": [
        "tests/test_staging_edges.py",
        "tests/test_staging.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.data.staging]",
    ],
    "climnb/data/stagedest.py": [
        "tests/test_staging_edges.py",
        "tests/test_staging.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.data.staging]",
    ],
    "climnb/data/stagemanifest.py": [
        "tests/test_staging_edges.py",
        "tests/test_staging.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.data.staging]",
    ],
    "climnb/data/stageengines.py": [
        "tests/test_staging_edges.py",
        "tests/test_staging.py",
        "tests/test_mutation_survivors.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.data.staging]",
    ],
    "climnb/data/stageplan.py": [
        "tests/test_staging_edges.py",
        "tests/test_staging.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.data.stageplan]",
    ],
    "climnb/tracks.py": [
        "tests/test_tracks_edges.py",
        "tests/test_tracks.py",
        "tests/test_event_schema.py",
        "tests/test_docstring_examples.py::test_docstring_examples_run[climnb.tracks]",
    ],
    "climnb/stats/events.py": [
        "tests/test_events_coast_edges.py",
        "tests/test_events_edges.py",
        *(
            f"tests/test_stats.py::{t}"
            for t in (
                "test_event_counts_and_lifetimes_are_the_generators",
                "test_stronger_storms_have_stronger_winds_and_lower_pressure",
                "test_events_without_fields_are_unknown",
                "test_events_from_a_trajectory_file_match_those_tracked_here",
                "test_saffir_simpson_bounds",
                "test_ralph_categories",
                "test_landfall_counts_events_and_steps_over_land_in_the_region",
                "test_a_storm_from_the_sea_onto_land_makes_one_landfall_where_it_crosses",
                "test_a_low_born_over_land_never_makes_landfall",
                "test_a_river_lands_where_it_crosses_the_coast_not_inland",
                "test_events_landfall_and_precipitation_on_a_noleap_calendar",
                "test_docstring_examples_run[events]",
            )
        ),
        "tests/test_stats_calendars.py",
    ],
    "climnb/stats/frequency.py": [
        "tests/test_decision_edges.py",
        "tests/test_frequency_edges.py",
        "tests/test_stats.py",
        "tests/test_mutation_survivors.py",
    ],
    "climnb/stats/change.py": [
        "tests/test_change_edges.py",
        "tests/test_stats_change.py",
        "tests/test_mutation_survivors.py",
        *(
            f"tests/test_stats.py::{t}"
            for t in (
                "test_fdr_benjamini_hochberg",
                "test_same_climate_flags_few_points",
                "test_compare_refuses_what_cannot_be_compared",
                "test_compare_is_deterministic_for_a_seed",
            )
        ),
    ],
}

#: Modules whose slow tests run too (the kill-and-rerun tests of atomic writes).
WITH_SLOW = {"climnb/io/atomic.py"}

#: Mutants that change no behaviour, by module and :attr:`Mutant.key`, with the reason.
EQUIVALENT: dict[str, dict[str, str]] = {
    "climnb/stats/frequency.py": {
        "frequency_from_counts: `steps = valid.where(valid > 0)`: valid > 0 -> valid >= 0": (
            "a point with no valid step has no count either: 0 / 0 and 0 / NaN are both NaN"
        ),
    },
    "climnb/io/split.py": {
        "_block_split: `val = np.arange(max(end - n_val, 0), end)`: 0 -> 1": (
            "differs only when end <= n_val, where the block split is refused either way "
            "(validation would start at step 0, leaving no training step before it)"
        ),
        **{
            f"_block_split: `dropped = n - train.size - val.size - test.size`: {m}": (
                "the count of steps left out in the gaps goes only to a log line"
            )
            for m in (
                "n - train.size - val.size - test.size -> n - train.size - val.size + test.size",
                "n - train.size - val.size -> n - train.size + val.size",
                "n - train.size -> n + train.size",
            )
        },
    },
    "climnb/io/reader.py": {
        "BatchLoader.__init__: `def __init__(self, reader: SampleReader, batch_size: int, *, "
        "workers: int = 2, ahead: int = 2):`: 2 -> 3": (
            "the number of reading processes: the batches are the same (test_pipeline checks "
            "them against the plain reader)"
        ),
        "BatchLoader.__init__: `def __init__(self, reader: SampleReader, batch_size: int, *, "
        "workers: int = 2, ahead: int = 2):`: 2 -> 3 #2": "how many batches are read ahead",
        "_shutdown: `p.join(timeout=5)`: 5 -> 6": "how long a reading process is waited for",
    },
    "climnb/labels/scores.py": {
        "_read_mask: `da = da.rename({v: k for k, v in coord_names(da).items() if v in da.dims "
        "or v in da.coords})`: v in da.dims or v in da.coords -> v in da.dims and v in "
        "da.coords": (
            "differs for a dimension without coordinate values, which the opener refuses first"
        ),
        "_read_mask: `da = da.rename({v: k for k, v in coord_names(da).items() if v in da.dims "
        "or v in da.coords})`: v in da.coords -> v not in da.coords": (
            "differs for a latitude or longitude that is a coordinate but no dimension: the "
            "dimension check after it refuses such a mask either way"
        ),
    },
    "climnb/data/stagerun.py": {
        "stage: `validation=[r[0:3:2] for r in source.validation],`: 3 -> 4": (
            "r[0:4:2] takes the same items 0 and 2 as r[0:3:2]"
        ),
    },
    "climnb/data/stagedest.py": {
        "claim_stores: `token = comm.bcast(uuid.uuid4().hex[:12] if comm.rank == 0 else None,"
        " root=0)`: 12 -> 13": "a random claim token one character longer: as unique",
    },
    "climnb/data/stagesource.py": {
        "Source: `@dataclass(frozen=True)`: True -> False": (
            "frozen only refuses assignment to a field, which nothing does"
        ),
    },
    "climnb/data/stageengines.py": {
        "_engines_per_node: `if world.size <= n_nodes:  # an engine per node, or one standing "
        "for several nodes`: world.size <= n_nodes -> world.size < n_nodes": (
            "one engine a node: the loop after it finds one engine a node too and returns (1, "
            "n_nodes) all the same"
        ),
    },
    "climnb/labels/ar.py": {
        "_parted: `cut = np.bincount(parent[1:], minlength=n_whole + 1) >= 2  # the objects cut"
        " in pieces`: n_whole + 1 -> n_whole - 1": (
            "every whole object holds a part, so the count's length is n_whole + 1 whatever "
            "the minimum length asked"
        ),
        "storm_surroundings: `slice(max(int(i.min()) - steps, 0), int(i.max()) + steps + 1) "
        "for i in (s.rows, s.cols)`: 1 -> 2": (
            "a box one row or column larger: growing within any box that holds the storm's "
            "reach gives what growing the whole grid gives"
        ),
    },
    "climnb/labels/tc.py": {
        "_Grid.rays: `steps = np.linspace(deg / n_steps, deg, n_steps)`: deg / n_steps -> "
        "deg * n_steps": ("the rays' one caller reads only their last point, at `deg` either way"),
        "_vorticity_maxima: `for k, (i, j) in enumerate(zip(rows, cols, strict=True)):  # and "
        "of their window`: True -> False": "the zipped rows and columns have the same length",
        "_Grid.rays: `n_steps = max(int(np.ceil(deg / self.dlat)), 1)`: 1 -> 2": (
            "the rays' one caller reads only their last point, at `deg` whatever the steps"
        ),
        "_Grid.rays: `c = np.rint(col + steps * np.cos(theta) / (self.dlon * coslat))`: col + "
        "steps * np.cos(theta) / (self.dlon * coslat) -> col - steps * np.cos(theta) / (self.dlon "
        "* coslat)": (
            "the 16 directions, every 22.5 degrees from due east, are the same set mirrored east "
            "to west; only their mean is read"
        ),
        "_vorticity_maxima: `for dr in (-1, 0, 1):  # the largest of their 3 x 3 neighbours`: "
        "0 -> 1": (
            "the 3 x 3 pre-filter is a shortcut: the window check after it (at least 3 x 3) "
            "drops what it lets through"
        ),
        "_vorticity_maxima: `for dc in (-1, 0, 1):`: 0 -> 1": (
            "the 3 x 3 pre-filter is a shortcut: the window check after it (at least 3 x 3) "
            "drops what it lets through"
        ),
        "_vorticity_maxima: `r = np.clip(rows + dr, 0, n_row - 1)`: rows + dr -> rows - dr": (
            "the offsets run over -1, 0, 1: subtracted they give the same neighbours"
        ),
        "_vorticity_maxima: `c = (cols + dc) % n_col if grid.periodic else np.clip(cols + dc, 0,"
        " n_col - 1)`: cols + dc -> cols - dc": (
            "the offsets run over -1, 0, 1: subtracted they give the same neighbours"
        ),
        "Storm: `@dataclass(frozen=True)`: True -> False": (
            "frozen only refuses assignment to a field, which nothing does"
        ),
        "_piece: `return mask`: return mask -> return None": (
            "a mask with no piece: the threshold always keeps the box's maximum, so every mask "
            "field holds one"
        ),
    },
    "climnb/models/losses.py": {
        "WeightedCrossEntropy: `@dataclass(frozen=True)`: True -> False": (
            "frozen only refuses assignment to a field, which nothing does"
        ),
    },
    "climnb/io/atomic.py": {
        "_restore: `return False`: return False -> return None": (
            "its one caller asks only whether it is true (`if _restore(p)`)"
        ),
        "_link: `return False`: return False -> return None": (
            "its one caller asks only whether it is true (`if _link(...)`)"
        ),
        "claim: `for _ in range(100):  # each round either takes the claim or takes over a "
        "dead one`: 100 -> 101": (
            "the bound of the retry loop: each round takes the claim or removes a dead one, "
            "so only a claim made again by other runs a hundred times in a row reaches it"
        ),
    },
    "climnb/tracks.py": {
        (
            "TrackConfig: `max_speed_kmh: tuple[tuple[int, float], ...] = ((1, 80.0), (2, "
            "150.0))`: 2 -> 3"
        ): ("class 3 is no class; class 2 then takes the largest limit, 150 km/h, the same"),
        "TrackConfig: `@dataclass(frozen=True)`: True -> False": (
            "frozen only refuses assignment to a field, which nothing does"
        ),
        "_regions: `bounds = np.searchsorted(flat[order], np.arange(n + 2))`: 2 -> 3": (
            "one more bound past the last label, never read"
        ),
        "_regions: `for row in table.itertuples(index=False):`: False -> True": (
            "the row's extra Index field is never read"
        ),
        "_pairs: `if not prev or not cur:`: not prev or not cur -> not prev and (not cur)": (
            "an early return: with either side empty the loop finds no pair either"
        ),
        (
            "_pairs: `owner = np.full(1 + max(int(r.pixels.max()) for r in (*prev, *cur)), -1, "
            "np.intp)`: 1 -> 2"
        ): ("one more slot in the owner array, past every pixel, never read"),
        (
            "_pairs: `owner = np.full(1 + max(int(r.pixels.max()) for r in (*prev, *cur)), -1, "
            "np.intp)`: 1 -> 2 #2"
        ): ("the owner array's fill: any negative means no region (`hit >= 0`)"),
        (
            "_pairs: `pairs += [((-1, float(dist[j])), i, int(j)) for j in np.flatnonzero(same & "
            "kin)]`: 1 -> 2"
        ): ("the stitched pairs' first key stays below the others' (0 and 1)"),
        (
            "_pairs: `pairs += [((0, -float(overlap[j])), i, int(j)) for j in "
            "np.flatnonzero(linked)]`: 0 -> 1"
        ): (
            "overlap pairs' second key is negative, distances' non-negative: the order is the same"
        ),
        (
            "_pairs: `pairs += [((1, float(dist[j])), i, int(j)) for j in np.flatnonzero(near)]`:"
            " 1 -> 2"
        ): ("distance pairs stay after the overlap pairs (first key 2 > 0)"),
        (
            'track_events: `r["speed_kmh"] = dist / hours[i] if hours[i] > 0 else np.nan`: '
            "hours[i] > 0 -> hours[i] >= 0"
        ): ("hours since a track was seen are never 0: repeated times are refused"),
        (
            "_storm_centres: `dlon = np.abs((np.asarray(on.lon, float)[:, None] - lon[None, :] + "
            "180.0) % 360.0 - 180.0)`: np.asarray(on.lon, float)[:, None] - lon[None, :] + 180.0 "
            "-> np.asarray(on.lon, float)[:, None] - lon[None, :] - 180.0"
        ): ("the same angle modulo 360"),
        (
            "_storm_centres: `for time, f, k in zip(on.time, flat, on.storm_track, "
            "strict=True):`: True -> False"
        ): ("the zipped columns have the same length"),
        (
            "_tag: `region.tags = frozenset(k for (_, k), h in zip(centres, held, strict=True) if"
            " h)`: True -> False"
        ): ("the zipped lists have the same length"),
        "check_times: `if i and t < times[i - 1]:`: t < times[i - 1] -> t <= times[i - 1]": (
            "equal times are refused as repeated before this check"
        ),
        (
            "_hours: `[(b - a).total_seconds() / 3600.0 for a, b in zip(first, last, "
            "strict=True)],`: True -> False"
        ): ("the zipped columns have the same length"),
        (
            'track_summary: `g = obs.sort_values(["track_id", "time"]).groupby("track_id", '
            "sort=True)`: True -> False"
        ): ("the rows are sorted by track already"),
        (
            'track_summary: `"mean_speed_kmh": np.where(hours > 0, distance / hours.where(hours >'
            " 0), np.nan),`: hours > 0 -> hours >= 0"
        ): ("where the hours are 0 the quotient is NaN (hours.where) either way"),
        (
            'track_summary: `"mean_speed_kmh": np.where(hours > 0, distance / hours.where(hours >'
            " 0), np.nan),`: hours > 0 -> hours >= 0 #2"
        ): ("where the hours are 0 np.where takes NaN either way"),
        "_path_km: `if len(lat) > 1`: len(lat) > 1 -> len(lat) >= 1": (
            "one point: the sum over no segment is 0.0 either way"
        ),
        (
            'tracks_to_dataset: `obs = obs.sort_values(["track_id", "time"], '
            'kind="stable").reset_index(drop=True)`: True -> False'
        ): ("the extra index column is never read"),
    },
    "climnb/stats/events.py": {
        "_one_class: `bounds = np.searchsorted(idx[order], np.arange(n + 2))`: 2 -> 3": (
            "one more bound past the last label, never read"
        ),
        "_Coast._beside: `ok = (rr >= 0) & (rr < nrow)`: rr < nrow -> rr <= nrow": (
            "a row past the last one is clipped back onto it: the cell itself or one of its "
            "real neighbours"
        ),
        "_one_class: `d = d + 1e3 * (np.abs(t_area - area) > 1e-4 * area)  # the same region "
        "first`: 1000.0 -> 2000.0": (
            "a penalty beyond any distance in degrees (at most 255): regions of another area "
            "come after those of the same area either way"
        ),
        **{
            f"_Coast._beside: `rr, cc = r + dr, c + dc`: {m}": (
                "the offsets run over -1, 0, 1: subtracted they give the same neighbours"
            )
            for m in ("r + dr -> r - dr", "c + dc -> c - dc")
        },
        **{
            f"_Coast.storm_landfalls: `cells = self._cells(lat[:1], lon[:1])`: 1 -> 2{n}": (
                "only the first cell, that of the first centre, is read"
            )
            for n in ("", " #2")
        },
        (
            "saffir_simpson: `idx = np.searchsorted(_SS_KNOTS, np.nan_to_num(w, nan=0.0), "
            'side="right")`: 0.0 -> 1.0'
        ): ("a missing wind is named 'unknown' after the lookup, whatever class the filler gives"),
        (
            "_same_times: `return pd.Series(np.array([], dtype=object), index=times.index, "
            'name="time")`: return pd.Series(np.array([], dtype=object), index=times.index, '
            "nam... -> return None"
        ): ("no track step: None assigned to an empty frame gives the same empty column"),
        ("_Coast._beside: `ok &= (cc >= 0) & (cc < ncol)`: cc < ncol -> cc <= ncol"): (
            "on a regional grid the column past the edge is clipped to the cell itself, which"
            " is land, never one of the ocean cells looked for"
        ),
        (
            '_Coast.storm_landfalls: `for track, t in storms.groupby("track_id", sort=True):`: '
            "True -> False"
        ): ("the storms are sorted by track already"),
        ("_step_hours: `return 0.0`: 0.0 -> 1.0"): (
            "a one-time series: 0 h and 1 h are both under the 24 h of Ralph's step down, the"
            " only use of the duration"
        ),
    },
    "climnb/io/levels.py": {
        "ivt_from_levels: `inside = np.flatnonzero((p <= bottom_hpa * 100.0 + 1) & (p >= "
        "top_hpa * 100.0 - 1))`: 1 -> 2": (
            "the bounds' allowance for rounding: pressure levels lie whole hPa apart, so 1 Pa "
            "and 2 Pa select the same levels"
        ),
    },
    "climnb/stats/change.py": {
        "_resample: `step = max(64, min(config.chunk_points, int(2e6 // n)))`: 64 -> 65": (
            "the points resampled at a time: the same draws and results in chunks of any size"
        ),
        '_table: `xa = ca["count"].values[:, j].reshape(ca.steps.size, -1) @ w.T  # (blocks, '
        "region)`: 1 -> 2": "numpy's reshape takes any negative size as the one to infer",
        '_table: `xb = cb["count"].values[:, j].reshape(cb.steps.size, -1) @ w.T`: 1 -> 2': (
            "numpy's reshape takes any negative size as the one to infer"
        ),
        '_table: `w = area_weights(masks).values.reshape(masks.sizes["region"], -1)  # (region, '
        "points)`: 1 -> 2": "numpy's reshape takes any negative size as the one to infer",
        "_stacked: `return x.reshape(x.shape[0], -1), np.asarray(counts.steps.values, "
        "np.float64)`: 1 -> 2": "numpy's reshape takes any negative size as the one to infer",
        "_resample: `p[cols] = (1 + (null >= np.abs(change[cols]) - tol).sum(0)) / (n + 1)`: "
        "null >= np.abs(change[cols]) - tol -> null > np.abs(change[cols]) - tol": (
            "with the tolerance subtracted, a null value equals |change| - tol only by a "
            "coincidence of rounding; ties are counted by the tolerance either way"
        ),
    },
}

QUICK = "not slow and not browser and not slurm and not notebook and not horovod and not mpi"

_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.And: ast.Or,
    ast.Or: ast.And,
}


@dataclass(frozen=True)
class Mutant:
    module: str
    index: int  # the site's place in the module's walk
    line: int
    where: str  # the enclosing function or class
    before: str
    after: str
    text: str = ""  # the source line
    nth: int = 1  # the same change's occurrence on that line

    @property
    def key(self) -> str:
        """What changes, where: stable while the code around it moves."""
        nth = f" #{self.nth}" if self.nth > 1 else ""
        return f"{self.where}: `{self.text}`: {self.before} -> {self.after}{nth}"


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    body = getattr(parent, "body", None)
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and isinstance(body, list)
        and body
        and body[0] is node
    )


def _skipped(node: ast.AST) -> bool:
    """Statements whose mutants say nothing: ``__all__``, logging calls."""
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
    ):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        return (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id
            in (
                "log",
                "logger",
                "warnings",
            )
        )
    return False


def _sites(tree: ast.AST):
    """Yield ``(node, where)`` for every mutable node, in a fixed order."""

    def walk(node, parent, where):
        if _is_docstring(node, parent) or _skipped(node):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            where = f"{where}.{node.name}" if where else node.name
        if isinstance(node, ast.JoinedStr):
            return  # f-strings: messages
        if _mutation(node) is not None:
            yield node, where or "<module>"
        for child in ast.iter_child_nodes(node):
            yield from walk(child, node, where)

    yield from walk(tree, None, "")


def _mutation(node: ast.AST):
    """The mutated copy of ``node``, or None when it is not a site."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SWAP:
        new = copy.copy(node)
        new.ops = [_SWAP[type(node.ops[0])]()]
        return new
    if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _SWAP:
        if isinstance(node, ast.BinOp) and _is_str_op(node):
            return None
        new = copy.copy(node)
        new.op = _SWAP[type(node.op)]()
        return new
    if isinstance(node, ast.BoolOp):
        new = copy.copy(node)
        new.op = _SWAP[type(node.op)]()
        return new
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
        v = node.value
        if isinstance(v, bool):
            return ast.Constant(not v)
        if isinstance(v, int):
            return ast.Constant(v + 1)
        return ast.Constant(v * 2 if v else 1.0)
    if isinstance(node, ast.Return) and node.value is not None:
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            return None
        return ast.Return(ast.Constant(None))
    return None


def _is_str_op(node: ast.BinOp) -> bool:
    """``"a" + "b"``, ``"%s" % x``: text, not arithmetic."""
    sides = (node.left, node.right)
    return any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides) or any(
        isinstance(s, ast.JoinedStr) for s in sides
    )


def mutants(module: str) -> list[Mutant]:
    """Every mutant of ``module`` (a path relative to the repository)."""
    source = (ROOT / module).read_text()
    lines, tree = source.splitlines(), ast.parse(source)
    out, seen = [], Counter()
    for i, (node, where) in enumerate(_sites(tree)):
        before, after = _show(node), _show(_mutation(node))
        seen[node.lineno, before, after] += 1
        text = lines[node.lineno - 1].strip()
        nth = seen[node.lineno, before, after]
        out.append(Mutant(module, i, node.lineno, where, before, after, text, nth))
    return out


def _show(node: ast.AST) -> str:
    text = ast.unparse(node).splitlines()[0]
    return text if len(text) <= 70 else text[:67] + "..."


def mutated_source(module: str, index: int | None) -> str:
    """The module unparsed, with site ``index`` mutated (None: unmutated)."""
    tree = ast.parse((ROOT / module).read_text())
    if index is not None:
        for i, (node, _) in enumerate(list(_sites(tree))):
            if i == index:
                _replace(tree, node, _mutation(node))
                break
    return ast.unparse(tree) + "\n"


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for k, item in enumerate(value):
                    if item is old:
                        value[k] = new
                        return
    raise AssertionError("site not found")


class Scratch:
    """A copy of the package, tests and settings, where one module at a time is replaced."""

    def __init__(self, tests: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="climnb-mutation-"))
        shutil.copytree(
            ROOT / "climnb", self.dir / "climnb", ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copytree(tests, self.dir / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("pyproject.toml", "setup.py"):
            shutil.copy2(ROOT / name, self.dir / name)
        self.env = {
            **os.environ,
            "PYTHONPATH": str(self.dir),  # before the editable install of the checkout
            "PYTHONDONTWRITEBYTECODE": "1",  # a mutant never runs from a stale .pyc
        }

    def run(
        self, module: str, source: str, tests: list[str], timeout: float, slow=False, markers=None
    ):
        """Outcome (``killed``, ``survived``, ``timed out``) and seconds of the tests
        against ``source`` as ``module`` (``markers``: a ``-m`` expression instead of the
        quick tests')."""
        path = self.dir / module
        original = path.read_text()
        path.write_text(source)
        start = time.perf_counter()
        try:
            cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider"]
            p = subprocess.run(
                [*cmd, "-m", markers or (QUICK.removeprefix("not slow and ") if slow else QUICK)]
                + tests,
                cwd=self.dir,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
                start_new_session=True,
            )
            outcome = "survived" if p.returncode in (0, 5) else "killed"
            if p.returncode not in (0, 1, 5):  # 2: interrupted; < 0: the run died of a signal
                ok = p.returncode == 2 or p.returncode < 0
                outcome = "killed" if ok else f"error {p.returncode}"
            tail = p.stdout.strip().splitlines()[-1:] if p.stdout.strip() else []
        except subprocess.TimeoutExpired:
            outcome, tail = "timed out", []
        finally:
            path.write_text(original)
        return outcome, time.perf_counter() - start, tail

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def present(tests: list[str], scratch: Scratch) -> list[str]:
    """The tests of ``tests`` that the tests folder holds (an older one may lack some)."""
    kept = []
    for t in tests:
        if not (scratch.dir / t.split("::")[0]).is_file():
            continue
        if "::" in t:  # a node id: collected?
            cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
            p = subprocess.run([*cmd, t], cwd=scratch.dir, env=scratch.env, capture_output=True)
            if p.returncode != 0:
                continue
        kept.append(t)
    return kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", help="only these modules (default: all)")
    ap.add_argument("--max-per-module", type=int, default=12, help="mutants sampled per module")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample")
    ap.add_argument("--tests", type=Path, default=ROOT / "tests", help="the tests folder to run")
    ap.add_argument("--timeout-factor", type=float, default=3.0, help="x the baseline's time")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument(
        "--only-tests",
        action="append",
        metavar="TEST",
        help="run these tests (paths or node ids) instead of the module's MODULES entry, "
        "without its slow ones: a fast whole pass; repeatable",
    )
    ap.add_argument(
        "--markers",
        metavar="EXPR",
        help="run the tests pytest's -m EXPR selects (e.g. 'not browser' for the MPI tests) "
        "instead of the quick ones",
    )
    ap.add_argument(
        "--mutant",
        type=int,
        action="append",
        metavar="N",
        help="only mutant #N (as --list numbers them) of each module; repeatable",
    )
    args = ap.parse_args(argv)
    modules = args.module or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        ap.error(f"--module {unknown[0]}: not one of {', '.join(MODULES)}")
    if args.list:
        for m in modules:
            for mu in mutants(m):
                print(f"{m}:{mu.line} #{mu.index} {mu.key}")
        return 0
    scratch = Scratch(args.tests)
    rows, survivors = [], []
    try:
        for module in modules:
            rows.append(_one_module(scratch, module, args, survivors))
    finally:
        scratch.close()
    _print_table(rows)
    if survivors:
        print("\nsurvivors:")
        for mu in survivors:
            print(f"  {mu.module}:{mu.line} #{mu.index} {mu.key}")
    return 0


def _one_module(scratch: Scratch, module: str, args, survivors: list) -> dict:
    tests = present(args.only_tests or MODULES[module], scratch)
    everything = mutants(module)
    rng = random.Random(f"{args.seed}:{module}")
    sample = sorted(
        rng.sample(everything, min(args.max_per_module, len(everything))), key=lambda m: m.index
    )
    if args.mutant:
        sample = [m for m in everything if m.index in args.mutant]
    row = {"module": module, "all": len(everything), "sampled": len(sample), "tests": len(tests)}
    row.update({"killed": 0, "survived": 0, "timed out": 0, "equivalent": 0, "error": 0})
    if not tests:  # nothing covers the module: every mutant survives
        row.update(survived=len(sample), baseline_s=0.0)
        survivors.extend(sample)
        return row
    slow = module in WITH_SLOW and not args.only_tests
    marks = args.markers
    outcome, base_s, tail = scratch.run(
        module, mutated_source(module, None), tests, 900, slow, marks
    )
    row["baseline_s"] = base_s
    if outcome != "survived":  # the unmutated module must pass its tests
        print(f"{module}: baseline {outcome} {tail}", flush=True)
        row["error"] = len(sample)
        return row
    timeout = max(args.timeout_factor * base_s, base_s + 30.0)
    known = EQUIVALENT.get(module, {})
    for mu in sample:
        if mu.key in known:
            row["equivalent"] += 1
            continue
        source = mutated_source(module, mu.index)
        outcome, seconds, _ = scratch.run(module, source, tests, timeout, slow, marks)
        key = outcome if outcome in row else "error"
        row[key] += 1
        if outcome == "survived":
            survivors.append(mu)
        print(f"  {module}:{mu.line} {mu.key}: {outcome} ({seconds:.1f} s)", flush=True)
    return row


def _print_table(rows: list[dict]) -> None:
    head = f"{'module':28s} {'mutants':>9s} {'killed':>7s} {'survived':>8s} {'timeout':>7s}"
    print(f"\n{head} {'equiv':>5s} {'killed %':>8s} {'base s':>6s}")
    for r in rows:
        counted = r["killed"] + r["survived"] + r["timed out"]
        share = 100.0 * (r["killed"] + r["timed out"]) / counted if counted else float("nan")
        name = r["module"].removeprefix("climnb/")
        print(
            f"{name:28s} {r['sampled']:>4d}/{r['all']:<4d} {r['killed']:>7d} {r['survived']:>8d} "
            f"{r['timed out']:>7d} {r['equivalent']:>5d} {share:>7.0f}% {r['baseline_s']:>6.1f}"
            + (f"  ({r['error']} errors)" if r["error"] else "")
        )


if __name__ == "__main__":
    sys.exit(main())
