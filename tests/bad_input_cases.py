"""The bad-input table: every ``climnb`` subcommand given inputs a user could give it by mistake.

Each :class:`Case` builds its inputs in a folder of its own and returns the command line; the
command is then run in-process through :func:`climnb.cli.main` (the folder as working
directory, stdout/stderr captured) and :func:`judge` checks what a careful tool does:

* exit status 2;
* exactly one error line on stderr, ``climnb COMMAND: error: ...``, naming the file (or the
  option) and the problem (a case's ``names`` must all appear, its ``keyword`` must match);
* no file changed: every file under the folder hashed before and after, nothing added (no
  output, no temporary file, no new folder), nothing removed.

Used by ``tests/test_bad_input.py`` (one test per case) and ``benchmarks/bench_reliability.py``
(tried / handled, and the list of the unhandled ones).

Some cases need root (a small or read-only tmpfs mounted over a folder: as root, file
permissions do not stop reads or writes); they raise :class:`Unavailable` elsewhere.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = ["CASES", "Case", "Golden", "Outcome", "Unavailable", "judge", "make_golden", "run_case"]

N_TIME = 40  # 5 days of toy steps: enough for a split by time blocks with 24 h gaps
# the smallest Tiramisu (tests/_training.py's TINY: one layer per dense block), so that a case
# found only by a training step (a NaN, flipped bytes) traces and runs that step in seconds:
# tracing grows with the layers (the toy preset's depth made such a case take ~10 s)
TRAIN_CONFIG = {
    "model_overrides": {"growth_rate": 4, "initial_filters": 8, "blocks": [1, 1]},
    "threads": 1,
}
TRAIN_FLAGS = ["--epochs", "1", "--max-steps", "1", "--batch-size", "2", "--threads", "1"]


class Unavailable(Exception):
    """The case cannot be set up on this machine (for example: no permission to mount)."""


@dataclass(frozen=True)
class Golden:
    """Correct inputs, made once and copied into each case's folder.

    fields : toy NetCDF fields with ``truth`` (``climnb synth``, 40 steps, 96 x 144).
    samples : ``climnb samples`` of them: train/, validation/, test/, stats.h5.
    bundle : a model bundle (one 1x1 convolution: predicts in milliseconds).
    """

    fields: Path
    samples: Path
    bundle: Path


def make_golden(root: str | os.PathLike) -> Golden:
    """Make the golden inputs in ``root`` with climnb's own commands."""
    from climnb.cli import main

    root = Path(root)
    fields, samples = root / "fields.nc", root / "samples"
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["synth", "--out", str(fields), "--n-time", str(N_TIME), "--seed", "3"])
        assert rc == 0, "climnb synth failed"
        rc = main(["samples", "--input", str(fields), "--out", str(samples), "--seed", "0"])
        assert rc == 0, "climnb samples failed"
    return Golden(fields, samples, _pointwise_bundle(root / "bundle", samples))


def _pointwise_bundle(path: Path, samples: Path) -> Path:
    import keras
    import numpy as np

    from climnb.bundle import save_bundle
    from climnb.io.stats import read_stats

    stats = read_stats(samples / "stats.h5")
    inp = keras.Input((None, None, len(stats.channels)))
    model = keras.Model(inp, keras.layers.Conv2D(3, 1)(inp))
    return save_bundle(
        model,
        path,
        channels=stats.channels,
        minval=stats.minval,
        maxval=stats.maxval,
        name="pointwise",
        preset="test",
        stride=16,
        extra={"note": np.float64(0).item()},
    )


#: Steps of the golden Zarr stores (the first ones): the chunks the cases take away or damage
#: lie in steps 0-7, and label and predict need no more; a fifth of the 40 steps' chunk files
#: to write, copy per case, hash before and after, and label. samples takes all 40 (its split).
ZARR_STEPS = 8


def golden_zarr(golden: Golden, zarr_format: int = 3, keep=None, steps: int = ZARR_STEPS) -> Path:
    """The golden fields' first ``steps`` steps written as a Zarr store (one chunk per step and
    quarter of the globe, ``keep`` of their variables), made on first use beside the golden
    fields and kept there: writing the chunk files takes seconds; cases copy it
    (:meth:`Ctx.zarr`)."""
    import xarray as xr

    what = "-".join(keep) if keep else "all"
    store = golden.fields.parent / "zarr" / f"v{zarr_format}-{what}-{steps}.zarr"
    if store.exists():
        return store
    partial = store.with_name(f".{store.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    with xr.open_dataset(golden.fields) as ds:
        ds = (ds[keep] if keep else ds).isel(time=slice(0, steps)).load()
        half = {"time": 1, "lat": ds.sizes["lat"] // 2, "lon": ds.sizes["lon"] // 2}
        # the chunks as encoding, not dask's: the same bytes in every file (compared), 4x faster
        chunks = {
            name: {"chunks": tuple(half.get(d, var.sizes[d]) for d in var.dims)}
            for name, var in ds.data_vars.items()
        }
        ds.to_zarr(partial, zarr_format=zarr_format, consolidated=False, encoding=chunks)
    try:
        partial.rename(store)  # whole or not there, should two runs make it at once
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if not store.exists():
            raise
    return store


# ---------------------------------------------------------------------------------------------
# Building a case's inputs
# ---------------------------------------------------------------------------------------------


class Ctx:
    """A case's folder, the golden inputs, and helpers that make bad copies of them."""

    def __init__(self, folder: Path, golden: Golden, stack: contextlib.ExitStack):
        self.d, self.g, self.stack = folder, golden, stack

    def p(self, name: str) -> str:
        return str(self.d / name)

    # --- NetCDF fields ---
    def fields(self, name: str = "fields.nc", change: Callable | None = None) -> str:
        """The golden fields copied to ``name``, or rewritten after ``change(ds) -> ds``."""
        target = self.d / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if change is None:
            shutil.copyfile(self.g.fields, target)
        else:
            import xarray as xr

            with xr.open_dataset(self.g.fields) as ds:
                out = change(ds.load())
            for v in out.variables.values():
                v.encoding = {}  # the golden file's (uint8 truth, ...) would undo the change
            out.to_netcdf(target)
        return str(target)

    # --- sample sets ---
    def samples(self, name: str = "samples") -> Path:
        target = self.d / name
        shutil.copytree(self.g.samples, target)
        return target

    def first(self, folder: Path, part: str = "train") -> Path:
        return sorted((folder / part).glob("data-*.h5"))[0]

    def text(self, name: str, content: str | bytes) -> str:
        target = self.d / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.write_bytes if isinstance(content, bytes) else target.write_text)(content)
        return str(target)

    def truncate(self, path: str | Path, keep: float = 0.5) -> str:
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: int(len(data) * keep)])
        return str(path)

    def zarr(
        self, name: str = "fields.zarr", zarr_format: int = 3, keep=None, steps: int = ZARR_STEPS
    ) -> Path:
        """The golden fields' first ``steps`` steps as a Zarr store (one chunk per step and
        quarter of the globe), ``keep`` of their variables (all by default): a copy of the store
        written once per golden set (:func:`golden_zarr`), which the case may then damage: its
        files are hard links to the golden ones (half the time of copies), so a case changes a
        file only by writing a new one in its place (:func:`_rewrite`), never in place."""
        target = self.d / name
        shutil.copytree(
            golden_zarr(self.g, zarr_format, keep, steps), target, copy_function=os.link
        )
        return target

    def link(self, name: str, to: str) -> str:
        (self.d / name).symlink_to(to)
        return str(self.d / name)

    def loop(self, name: str = "loop") -> str:
        """Two symbolic links pointing at each other; ``name`` is one of them."""
        self.link(name, f"{name}.other")
        return self.link(f"{name}.other", name)[: -len(".other")]

    def dir(self, name: str) -> str:
        (self.d / name).mkdir(parents=True, exist_ok=True)
        return str(self.d / name)

    def config(self, name: str = "config.json", **extra) -> str:
        return self.text(name, json.dumps({**TRAIN_CONFIG, **extra}))

    # --- file systems that refuse writes (root is not stopped by chmod) ---
    def _mount(self, folder: Path, options: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0 or shutil.which("mount") is None:
            raise Unavailable("mounting a tmpfs needs root")
        cmd = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise Unavailable(f"cannot mount a tmpfs: {done.stderr.strip()}")
        self.stack.callback(subprocess.run, ["umount", "-l", str(folder)], capture_output=True)

    def full_disk(self, name: str = "fulldisk") -> Path:
        """A 64 KiB tmpfs filled to the last byte by a file ``filler``."""
        folder = self.d / name
        self._mount(folder, "size=64k,mode=0755")
        f = open(folder / "filler", "wb", buffering=0)
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError:  # ENOSPC: full
            pass
        finally:
            with contextlib.suppress(OSError):
                f.close()
        return folder

    def read_only(self, name: str = "rofs", files: dict[str, Path] | None = None) -> Path:
        """A read-only tmpfs holding copies of ``files`` (name -> source)."""
        folder = self.d / name
        self._mount(folder, "size=128m,mode=0755")
        for target, source in (files or {}).items():
            copy = shutil.copytree if Path(source).is_dir() else shutil.copyfile
            copy(source, folder / target)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        return folder


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One bad input.

    id : readable test id, ``command-what``.
    build : ``build(ctx) -> argv`` makes the inputs in ``ctx.d`` and returns the command line.
    names : strings the error line must contain (file names, options); ``a|b``: either.
    keyword : regular expression (case-insensitive) the error line must match: the problem.
    """

    id: str
    build: Callable[[Ctx], list[str]]
    names: tuple[str, ...]
    keyword: str

    @property
    def command(self) -> str:
        return self.id.split("-", 1)[0]


CASES: list[Case] = []


def case(id: str, names: tuple[str, ...] | str, keyword: str):
    names = (names,) if isinstance(names, str) else names

    def register(build):
        CASES.append(Case(id, build, names, keyword))
        return build

    return register


def _label(c: Ctx, *argv: str) -> list[str]:
    return ["label", *argv, "--no-progress"]


def _drop(*names):
    return lambda ds: ds.drop_vars(list(names))


def _set(var, value, where=(0, 0, 0)):
    def change(ds):
        ds[var] = ds[var].astype("float32" if var != "truth" else "float64")
        ds[var][where] = value
        return ds

    return change


NO_FILE = r"no such|not found|does not exist|missing|cannot find"
NOT_NETCDF = r"netcdf|not a|unreadable|cannot read|cannot open|format|corrupt|truncat|hdf"
NOT_DIR = r"director|folder"
NO_WRITE = r"writ|read-only|read only|permission|not a directory"
NO_SPACE = r"space|full|disk|quota|writ"
SAME = r"input|same|overwrit"

# --- label ------------------------------------------------------------------------------------


@case("label-out-equals-input", "fields.nc", SAME)
def _(c):
    f = c.fields()
    return _label(c, f, "--out", f)


@case("label-events-equals-input", "fields.nc", SAME)
def _(c):
    f = c.fields()
    return _label(c, f, "--out", c.p("labels.nc"), "--events", f)


@case("label-events-equals-out", "labels.nc", r"same|events|overwrit|both")
def _(c):
    return _label(c, c.fields(), "--out", c.p("labels.nc"), "--events", c.p("labels.nc"))


@case("label-out-is-directory", "outdir", NOT_DIR)
def _(c):
    return _label(c, c.fields(), "--out", c.dir("outdir"))


@case("label-out-under-a-file", "plainfile", NO_WRITE + "|" + NOT_DIR)
def _(c):
    c.text("plainfile", "a regular file\n")
    return _label(c, c.fields(), "--out", c.p("plainfile/labels.nc"))


@case("label-out-read-only", "rofs", NO_WRITE)
def _(c):
    ro = c.read_only("rofs", {"fields.nc": c.g.fields})
    return _label(c, str(ro / "fields.nc"), "--out", str(ro / "labels.nc"))


@case("label-disk-full", "labels.nc", NO_SPACE)
def _(c):
    return _label(c, c.fields(), "--out", str(c.full_disk() / "labels.nc"))


@case("label-input-missing", "nothere.nc", NO_FILE)
def _(c):
    return _label(c, c.p("nothere.nc"), "--out", c.p("labels.nc"))


@case("label-input-empty-file", "empty.nc", NOT_NETCDF + "|empty")
def _(c):
    return _label(c, c.text("empty.nc", b""), "--out", c.p("labels.nc"))


@case("label-input-not-netcdf", "notes.nc", NOT_NETCDF)
def _(c):
    return _label(c, c.text("notes.nc", "time,TMQ\n0,1\n"), "--out", c.p("labels.nc"))


@case("label-input-truncated", "fields.nc", NOT_NETCDF)
def _(c):
    return _label(c, c.truncate(c.fields(), 0.4), "--out", c.p("labels.nc"))


@case("label-input-is-directory", "indir", NOT_DIR + "|" + NOT_NETCDF)
def _(c):
    return _label(c, c.dir("indir"), "--out", c.p("labels.nc"))


@case("label-no-fields", "fields.nc", r"missing|lacks|no variable|need|none of")
def _(c):
    from climnb.io.channels import CHANNEL_NAMES

    return _label(c, c.fields(change=_drop(*CHANNEL_NAMES)), "--out", c.p("labels.nc"))


@case("label-variable-wrong-dims", ("fields.nc", "PSL"), r"dimension|shape")
def _(c):
    def change(ds):
        ds["PSL"] = ds.PSL.expand_dims(level=[850.0, 500.0]).transpose("time", "level", ...)
        return ds

    return _label(c, c.fields(change=change), "--out", c.p("labels.nc"))


@case("label-variable-text-dtype", ("fields.nc", "TMQ"), r"dtype|type|numeric|number")
def _(c):
    def change(ds):
        ds["TMQ"] = ds.TMQ.astype(int).astype(str)
        return ds

    return _label(c, c.fields(change=change), "--out", c.p("labels.nc"))


@case("label-empty-time-axis", "fields.nc", r"time|empty|no step")
def _(c):
    return _label(c, c.fields(change=lambda ds: ds.isel(time=slice(0, 0))), "--out", c.p("l.nc"))


@case("label-workers-zero", "--workers", r"at least|positive")
def _(c):
    return _label(c, c.fields(), "--out", c.p("labels.nc"), "--workers", "0")


@case("label-percentile-over-100", "percentile", r"0|100|range|between")
def _(c):
    return _label(c, c.fields(), "--out", c.p("labels.nc"), "--ar-percentile", "150")


# --- samples ----------------------------------------------------------------------------------


def _samples(c: Ctx, inputs, out, *argv) -> list[str]:
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    return ["samples", "--input", *inputs, "--out", out, *argv]


@case("samples-out-equals-input", "fields.nc", SAME + "|" + NOT_DIR)
def _(c):
    f = c.fields()
    return _samples(c, f, f)


@case("samples-out-is-a-file", "plainfile", NOT_DIR)
def _(c):
    return _samples(c, c.fields(), c.text("plainfile", "not a folder\n"))


@case("samples-out-not-empty", "samples", r"overwrite|not empty|exist|already")
def _(c):
    return _samples(c, c.fields(), str(c.samples()), "--seed", "1")


@case("samples-out-under-a-file", "plainfile", NO_WRITE + "|" + NOT_DIR)
def _(c):
    c.text("plainfile", "a regular file\n")
    return _samples(c, c.fields(), c.p("plainfile/samples"))


@case("samples-out-read-only", "rofs", NO_WRITE)
def _(c):
    return _samples(c, c.fields(), str(c.read_only() / "samples"))


@case("samples-disk-full", "fulldisk", NO_SPACE)
def _(c):
    return _samples(c, c.fields(), str(c.full_disk() / "samples"))


@case("samples-input-missing", "nothere.nc", NO_FILE)
def _(c):
    return _samples(c, c.p("nothere.nc"), c.p("samples"))


@case("samples-input-truncated", "fields.nc", NOT_NETCDF)
def _(c):
    return _samples(c, c.truncate(c.fields(), 0.4), c.p("samples"))


@case("samples-no-label-variable", ("fields.nc", "truth"), r"label")
def _(c):
    return _samples(c, c.fields(change=_drop("truth")), c.p("samples"))


@case("samples-missing-channel", ("fields.nc", "PSL"), r"lack|missing|no variable")
def _(c):
    return _samples(c, c.fields(change=_drop("PSL")), c.p("samples"))


@case("samples-label-value-7", "fields.nc", r"label|class")
def _(c):
    return _samples(c, c.fields(change=_set("truth", 7)), c.p("samples"))


@case("samples-label-value-negative", "fields.nc", r"label|class")
def _(c):
    return _samples(c, c.fields(change=_set("truth", -1)), c.p("samples"))


@case("samples-label-value-fraction", "fields.nc", r"label|class|integer")
def _(c):
    return _samples(c, c.fields(change=_set("truth", 1.5)), c.p("samples"))


@case("samples-nan-in-field", ("fields.nc", "TMQ"), r"nan|finite")
def _(c):
    return _samples(c, c.fields(change=_set("TMQ", float("nan"))), c.p("samples"))


@case("samples-inf-in-field", ("fields.nc", "PSL"), r"inf|finite")
def _(c):
    return _samples(c, c.fields(change=_set("PSL", float("inf"))), c.p("samples"))


@case("samples-gap-too-long", "gap", r"too few|too short|gap")
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--gap-hours", "1000")


@case("samples-same-input-twice", "fields.nc", r"time|same|duplicate|twice")
def _(c):
    f = c.fields()
    return _samples(c, [f, f], c.p("samples"))


@case("samples-run-negative", "run", r"negative|at least|positive|>= ?0")
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--run", "-1")


# --- stage ------------------------------------------------------------------------------------


def _stage(c: Ctx, source, dest, *argv) -> list[str]:
    base = ["--ranks-per-node", "1", "--samples-per-rank", "4", "--no-mpi"]
    return ["stage", "--source", str(source), "--dest", str(dest), *base, *argv]


@case("stage-source-missing", "nothere", NO_FILE + "|" + NOT_DIR)
def _(c):
    return _stage(c, c.p("nothere"), c.p("node{node}"))


@case("stage-source-empty", "emptydir", r"no sample|empty|nothing")
def _(c):
    return _stage(c, c.dir("emptydir"), c.p("node{node}"))


@case("stage-source-is-a-file", "plainfile", NOT_DIR)
def _(c):
    return _stage(c, c.text("plainfile", "x\n"), c.p("node{node}"))


@case("stage-dest-equals-source", "train", SAME + "|source")
def _(c):
    train = c.samples() / "train"
    return _stage(c, train, train)


@case("stage-dest-under-a-file", "plainfile", NO_WRITE + "|" + NOT_DIR)
def _(c):
    c.text("plainfile", "x\n")
    return _stage(c, c.samples() / "train", c.p("plainfile/node{node}"))


@case("stage-dest-read-only", "rofs", NO_WRITE)
def _(c):
    return _stage(c, c.samples() / "train", str(c.read_only() / "node{node}"))


@case("stage-disk-full", "fulldisk", NO_SPACE)
def _(c):
    return _stage(c, c.samples() / "train", str(c.full_disk() / "node{node}"))


@case("stage-truncated-source-file", "data-", r"truncat|corrupt|digest|checksum|size")
def _(c):
    s = c.samples()
    c.truncate(c.first(s))
    return _stage(c, s / "train", c.p("node{node}"))


@case("stage-stats-missing", "nostats.h5", NO_FILE)
def _(c):
    return _stage(c, c.samples() / "train", c.p("node{node}"), "--stats", c.p("nostats.h5"))


@case("stage-stats-not-hdf5", "bad.h5", r"stat|hdf|readable|corrupt")
def _(c):
    bad = c.text("bad.h5", "not statistics\n")
    return _stage(c, c.samples() / "train", c.p("node{node}"), "--stats", bad)


@case("stage-samples-per-rank-zero", "per-rank|per_rank", r"at least|positive")
def _(c):
    argv = _stage(c, c.samples() / "train", c.p("node{node}"))
    argv[argv.index("--samples-per-rank") + 1] = "0"
    return argv


@case("stage-ranks-per-node-zero", "ranks-per-node|ranks_per_node", r"at least|positive")
def _(c):
    argv = _stage(c, c.samples() / "train", c.p("node{node}"))
    argv[argv.index("--ranks-per-node") + 1] = "0"
    return argv


@case("stage-nodes-zero", "nodes", r"at least|positive")
def _(c):
    return _stage(c, c.samples() / "train", c.p("node{node}"), "--nodes", "0")


@case("stage-two-nodes-without-placeholder", "{node}", r"dest|contain")
def _(c):
    return _stage(c, c.samples() / "train", c.p("local"), "--nodes", "2")


# --- train ------------------------------------------------------------------------------------


def _train(c: Ctx, data, *argv, out: str = "run") -> list[str]:
    flags = list(TRAIN_FLAGS)
    for i in range(0, len(argv) - 1):  # a case's value for a flag replaces the default
        if argv[i] in flags and argv[i].startswith("--"):
            j = flags.index(argv[i])
            del flags[j : j + 2]
    cfg = [] if "--config" in argv else ["--config", c.config()]
    return ["train", "--data", str(data), "--out", c.p(out), *cfg, *flags, *argv]


def _h5(path: Path, edit: Callable) -> None:
    import h5py

    with h5py.File(path, "r+") as f:
        edit(f)


@case("train-batch-size-zero", "batch", r"at least|positive")
def _(c):
    return _train(c, c.samples(), "--batch-size", "0")


@case("train-batch-size-negative", "batch", r"at least|positive")
def _(c):
    return _train(c, c.samples(), "--batch-size", "-2")


@case("train-epochs-zero", "epochs", r"at least|positive")
def _(c):
    return _train(c, c.samples(), "--epochs", "0")


@case("train-batch-larger-than-data", "batch", r"files|too few|smaller")
def _(c):
    return _train(c, c.samples(), "--batch-size", "64")


@case("train-data-missing", "nothere", NO_FILE + "|no sample|not a director")
def _(c):
    return _train(c, c.p("nothere"))


@case("train-data-empty", "emptydir", r"no sample|empty")
def _(c):
    return _train(c, c.dir("emptydir"))


@case("train-stats-missing", "stats.h5", NO_FILE)
def _(c):
    s = c.samples()
    (s / "stats.h5").unlink()
    return _train(c, s)


@case("train-stats-not-hdf5", "stats.h5", r"readable|hdf|corrupt|statistic")
def _(c):
    s = c.samples()
    (s / "stats.h5").write_text("not statistics\n")
    return _train(c, s)


@case("train-stats-channel-order", "stats.h5", r"channel|order")
def _(c):
    s = c.samples()

    def reverse(f):
        g = f["climate"]
        g.attrs["channels"] = g.attrs["channels"][::-1]
        for name in ("minval", "maxval", "mean", "sqmean"):
            g[name][...] = g[name][...][::-1]

    _h5(s / "stats.h5", reverse)
    return _train(c, s)


@case("train-stats-nan", "stats.h5", r"nan|finite")
def _(c):
    s = c.samples()

    def nan(f):
        f["climate/maxval"][3] = float("nan")

    _h5(s / "stats.h5", nan)
    return _train(c, s)


@case("train-stats-wrong-length", "stats.h5", r"values|channel|length|shape")
def _(c):
    s = c.samples()

    def shorten(f):
        g = f["climate"]
        for name in ("minval", "maxval", "mean", "sqmean"):
            values = g[name][...][:15]
            del g[name]
            g.create_dataset(name, data=values)

    _h5(s / "stats.h5", shorten)
    return _train(c, s)


@case("train-sample-nan", "data-", r"nan|finite|digest|checksum|manifest|changed")
def _(c):
    s = c.samples()

    def nan(f):
        f["climate/data"][5, 5, 0] = float("nan")

    for path in (s / "train").glob("data-*.h5"):  # every one: a step reads only a batch
        _h5(path, nan)
    return _train(c, s)


@case("train-sample-flipped-bytes", "data-", r"digest|checksum|manifest|corrupt|not finite")
def _(c):
    from climnb.io.samples import inspect_sample

    s = c.samples()
    for path in (s / "train").glob("data-*.h5"):
        offset = inspect_sample(path).data_offset
        with open(path, "r+b") as f:  # the exponent bytes of 64 values: magnitudes up to 1e38
            for k in range(64):
                f.seek(offset + 4 * k * 97 + 3)
                f.write(b"\x7e")
    return _train(c, s)


@case("train-sample-label-value-7", "data-", r"label|class|digest|checksum|manifest")
def _(c):
    s = c.samples()

    def seven(f):
        f["climate/labels_0"][10, 10] = 7

    for path in (s / "train").glob("data-*.h5"):
        _h5(path, seven)
    return _train(c, s)


@case("train-sample-float64-data", "data-", r"float32|dtype|digest|checksum|manifest")
def _(c):
    s = c.samples()

    def widen(f):
        data = f["climate/data"][...].astype("float64")
        del f["climate/data"]
        f["climate"].create_dataset("data", data=data)

    _h5(c.first(s), widen)
    return _train(c, s)


@case("train-sample-wrong-grid", "data-", r"grid|shape|digest|checksum|manifest")
def _(c):
    s = c.samples()

    def shrink(f):
        data, labels = f["climate/data"][::2, ::2], f["climate/labels_0"][::2, ::2]
        del f["climate/data"], f["climate/labels_0"]
        f["climate"].create_dataset("data", data=data)
        f["climate"].create_dataset("labels_0", data=labels)

    _h5(sorted((s / "train").glob("data-*.h5"))[-1], shrink)
    return _train(c, s)


@case("train-sample-truncated", "data-", r"truncat|corrupt|digest|checksum|size")
def _(c):
    s = c.samples()
    c.truncate(sorted((s / "train").glob("data-*.h5"))[-1], 0.6)
    return _train(c, s)


@case("train-sample-empty-file", "data-", r"truncat|corrupt|empty|readable|digest")
def _(c):
    s = c.samples()
    c.first(s).write_bytes(b"")
    return _train(c, s)


@case("train-config-missing", "nothere.json", NO_FILE)
def _(c):
    return _train(c, c.samples(), "--config", c.p("nothere.json"))


@case("train-config-not-json", "bad.json", r"json|parse|decode|invalid")
def _(c):
    return _train(c, c.samples(), "--config", c.text("bad.json", "epochs: 3\n"))


@case("train-config-unknown-key", ("cfg.json", "epoch"), r"unknown")
def _(c):
    return _train(c, c.samples(), "--config", c.config("cfg.json", epoch=3))


@case("train-out-is-a-file", "plainfile", NOT_DIR)
def _(c):
    c.text("plainfile", "a regular file\n")
    return _train(c, c.samples(), out="plainfile")


@case("train-out-equals-data", "samples", SAME + "|data")
def _(c):
    return _train(c, c.samples(), out="samples")


@case("train-learning-rate-negative", "learning|lr", r"positive|negative|> ?0")
def _(c):
    return _train(c, c.samples(), "--lr", "-0.1")


# --- predict ----------------------------------------------------------------------------------


def _predict(c: Ctx, *inputs, out: str | None = None, model: str | None = None, extra=()):
    model = model or str(c.g.bundle)
    out = out or c.p("pred.nc")
    return ["predict", "--model", model, *map(str, inputs), "--out", out, "--no-progress", *extra]


@case("predict-out-equals-input", "fields.nc", SAME)
def _(c):
    f = c.fields()
    return _predict(c, f, out=f)


@case("predict-out-is-directory", "outdir", NOT_DIR)
def _(c):
    return _predict(c, c.fields(), out=c.dir("outdir"))


@case("predict-out-under-a-file", "plainfile", NO_WRITE + "|" + NOT_DIR)
def _(c):
    c.text("plainfile", "x\n")
    return _predict(c, c.fields(), out=c.p("plainfile/pred.nc"))


@case("predict-disk-full", "pred.nc", NO_SPACE)
def _(c):
    return _predict(c, c.fields(), out=str(c.full_disk() / "pred.nc"))


@case("predict-model-missing", "nomodel", NO_FILE + "|bundle")
def _(c):
    return _predict(c, c.fields(), model=c.p("nomodel"))


@case("predict-model-bad-metadata", "badbundle", r"metadata|bundle|json")
def _(c):
    b = c.d / "badbundle"
    shutil.copytree(c.g.bundle, b)
    from climnb.bundle import META_FILE

    (b / META_FILE).write_text("{ not json")
    return _predict(c, c.fields(), model=str(b))


@case("predict-input-missing", "nothere.nc", NO_FILE)
def _(c):
    return _predict(c, c.p("nothere.nc"))


@case("predict-input-not-netcdf", "notes.nc", NOT_NETCDF)
def _(c):
    return _predict(c, c.text("notes.nc", "hello\n"))


@case("predict-input-lacks-channel", ("fields.nc", "PSL"), r"lack|missing")
def _(c):
    return _predict(c, c.fields(change=_drop("PSL")))


@case("predict-sample-truncated", "data-", r"truncat|corrupt|readable")
def _(c):
    s = c.samples()
    return _predict(c, c.truncate(c.first(s, "test"), 0.5))


@case("predict-sample-set-flipped-bytes", "data-", r"content changed|corrupt")
def _(c):
    s = c.samples()
    victim = c.first(s, "test")
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the manifest's SHA-256 sees it
    victim.write_bytes(bytes(data))
    return _predict(c, s / "test")


@case("predict-sample-set-stray-file", "data-2100", r"not listed|manifest")
def _(c):
    s = c.samples()
    shutil.copyfile(c.first(s, "test"), s / "test" / "data-2100-01-01-00-1.h5")
    return _predict(c, s)


@case("predict-batch-size-zero", "batch", r"at least|positive")
def _(c):
    return _predict(c, c.fields(), extra=("--batch-size", "0"))


@case("predict-input-empty-folder", "emptydir", r"no sample|no .*files?|empty|netcdf")
def _(c):
    return _predict(c, c.dir("emptydir"))


# --- tracks -----------------------------------------------------------------------------------


def _tracks(*argv) -> list[str]:
    return ["tracks", *map(str, argv)]


@case("tracks-input-missing", "nothere.nc", NO_FILE)
def _(c):
    return _tracks(c.p("nothere.nc"), "--out", c.p("tracks.nc"))


@case("tracks-input-not-netcdf", "notes.nc", NOT_NETCDF)
def _(c):
    return _tracks(c.text("notes.nc", "hello\n"), "--out", c.p("tracks.nc"))


@case("tracks-out-equals-input", "fields.nc", SAME)
def _(c):
    f = c.fields()
    return _tracks(f, "--out", f)


@case("tracks-out-is-directory", "outdir", NOT_DIR)
def _(c):
    return _tracks(c.fields(), "--out", c.dir("outdir"))


@case("tracks-no-class-mask", ("fields.nc", "truth"), r"no class mask|mask")
def _(c):
    return _tracks(c.fields(change=_drop("truth")), "--out", c.p("tracks.nc"))


@case("tracks-csv-equals-out", "tracks.nc", SAME + "|csv")
def _(c):
    return _tracks(c.fields(), "--out", c.p("tracks.nc"), "--csv", c.p("tracks.nc"))


# --- synth and demo ---------------------------------------------------------------------------


@case("synth-out-is-directory", "outdir", NOT_DIR)
def _(c):
    return ["synth", "--out", c.dir("outdir"), "--n-time", "2"]


@case("synth-out-under-a-file", "plainfile", NO_WRITE + "|" + NOT_DIR)
def _(c):
    c.text("plainfile", "x\n")
    return ["synth", "--out", c.p("plainfile/f.nc"), "--n-time", "2"]


@case("synth-negative-storms", "n_tc", r"negative|at least|>= ?0")
def _(c):
    return ["synth", "--out", c.p("f.nc"), "--n-time", "2", "--n-tc", "-1"]


@case("synth-disk-full", "f.nc", NO_SPACE)
def _(c):
    return ["synth", "--out", str(c.full_disk() / "f.nc"), "--n-time", "2"]


@case("demo-notebooks-missing", "nonotebooks", NO_FILE + "|no (numbered )?notebook")
def _(c):
    return ["demo", "--notebooks", c.p("nonotebooks"), "--reports", c.p("reports")]


@case("demo-only-unknown-prefix", "99", r"no (numbered )?notebook|match|unknown")
def _(c):
    nb = c.dir("notebooks")
    Path(nb, "00_quickstart.ipynb").write_text('{"cells": [], "nbformat": 4}')
    return ["demo", "--notebooks", nb, "--reports", c.p("reports"), "--only", "99"]


# --- leakage, calendars, repeated times, promises of manifests, units,
# types, busy outputs; each class across the commands it concerns --------------------------------

LIVE_PID = 1  # init: always alive, never this process; stands for another live run


def _live_temp(c: Ctx, name: str, suffix: str = ".tmp") -> str:
    """The temporary a live run writing ``name`` would hold beside it."""
    return c.text(f".{name}.{LIVE_PID}-deadbeef{suffix}", "")


def _times(times):
    def change(ds):
        ds["time"] = times(ds.time.values.copy())
        return ds

    return change


def _repeat(t):
    t[5:9] = t[1:5]
    return t


def _backwards(t):
    t[[3, 4]] = t[[4, 3]]
    return t


def _overlapping(c: Ctx) -> list[str]:
    first = c.fields("a.nc", change=lambda ds: ds.isel(time=slice(0, 20)))
    second = c.fields("b.nc", change=lambda ds: ds.isel(time=slice(15, None)))
    return [first, second]


def _labels_file(c: Ctx, name: str = "labels.nc", change: Callable | None = None) -> str:
    def only_labels(ds):
        out = ds[["truth"]].rename(truth="labels")
        return change(out) if change else out

    return c.fields(name, change=only_labels)


def _fields_only(c: Ctx) -> str:
    return c.fields("fields.nc", change=_drop("truth"))


def _leak(c: Ctx, s: Path, *, by_time: bool = False) -> None:
    """Make a sample set's validation split share a step with train (by name or by time)."""
    from climnb.io.manifest import Manifest

    if by_time:
        t_train = next(iter(Manifest.read(s / "train").files.values())).time
        path = s / "validation" / "manifest.json"
        data = json.loads(path.read_text())
        first = sorted(data["files"])[0]
        data["files"][first]["time"] = t_train
        path.write_text(json.dumps(data))
        return
    leaked = c.first(s)
    shutil.copyfile(leaked, s / "validation" / leaked.name)
    entry = Manifest.read(s / "train").files[leaked.name]
    Manifest.read(s / "validation").with_files({leaked.name: entry}).write(s / "validation")


def _delete_listed(c: Ctx, s: Path) -> str:
    victim = sorted((s / "train").glob("data-*.h5"))[2]
    victim.unlink()
    return victim.name


@case("samples-gap-negative", "--gap-hours", r">= ?0|negative")
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--gap-hours", "-24")


@case("samples-gap-nan", "--gap-hours", r"finite")
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--gap-hours", "nan")


@case("samples-gap-infinite", "--gap-hours", r"finite")
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--gap-hours", "inf")


@case("samples-random-gap-negative", "--gap-hours", r">= ?0|negative")
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--split", "random", "--gap-hours", "-1")


@case("samples-times-repeated", ("fields.nc", "2000-01-01T03"), r"same time|repeat")
def _(c):
    return _samples(c, c.fields(change=_times(_repeat)), c.p("samples"))


@case("samples-inputs-overlap", ("a.nc", "b.nc"), r"overlap")
def _(c):
    return _samples(c, _overlapping(c), c.p("samples"))


@case("samples-finer-than-hourly", "fields.nc", r"same hour|finer")
def _(c):
    def halves(t):
        return t[0] + (t - t[0]) // 6  # 30-minute steps: two per file name

    return _samples(c, c.fields(change=_times(halves)), c.p("samples"))


@case("samples-label-file-other-times", ("labels.nc", "fields.nc"), r"same times")
def _(c):
    labels = _labels_file(c, change=lambda ds: ds.isel(time=slice(0, 30)))
    return _samples(c, [_fields_only(c), labels], c.p("samples"))


@case("samples-label-file-other-grid", ("labels.nc", "fields.nc"), r"same grid")
def _(c):
    labels = _labels_file(c, change=lambda ds: ds.assign_coords(lon=ds.lon + 1.25))
    return _samples(c, [_fields_only(c), labels], c.p("samples"))


@case("samples-label-file-alone", "labels.nc", r"channels|fields")
def _(c):
    return _samples(c, _labels_file(c), c.p("samples"))


@case("samples-input-neither-fields-nor-labels", "other.nc", r"neither")
def _(c):
    def foo(ds):  # no CF attributes either: TMQ's standard_name would make it TMQ again
        out = ds[["TMQ"]].rename(TMQ="foo")
        out["foo"].attrs = {}
        return out

    other = c.fields("other.nc", change=foo)
    return _samples(c, [c.fields(), other], c.p("samples"))


@case("samples-labels-option-not-there", ("fields.nc", "nothere"), r"label")
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--labels", "nothere")


@case("samples-out-busy", ("samples", "process 1"), r"another run")
def _(c):
    _live_temp(c, "samples")
    return _samples(c, c.fields(), c.p("samples"))


@case("samples-out-busy-partial", ("samples", "process 1"), r"another run")
def _(c):
    partial = Path(c.dir(".samples.0123456789abcdef.partial"))
    (partial / ".run.json").write_text(json.dumps({"key": "x", "pid": LIVE_PID}))
    return _samples(c, c.fields(), c.p("samples"))


@case("stage-manifest-lists-deleted-file", "train", r"missing")
def _(c):
    s = c.samples()
    _delete_listed(c, s)
    return _stage(c, s, c.p("node{node}"))


@case("stage-splits-share-a-file", ("train", "validation"), r"both|share")
def _(c):
    s = c.samples()
    _leak(c, s)
    return _stage(c, s, c.p("node{node}"))


@case("stage-splits-share-a-time", ("train", "validation"), r"both|share")
def _(c):
    s = c.samples()
    _leak(c, s, by_time=True)
    return _stage(c, s, c.p("node{node}"))


@case("stage-samples-per-rank-absurd", "--samples-per-rank", r"at most")
def _(c):
    argv = _stage(c, c.samples(), c.p("node{node}"))
    argv[argv.index("--samples-per-rank") + 1] = "10000000"
    return argv


@case("stage-samples-per-rank-negative", "per-rank|per_rank", r"at least")
def _(c):
    argv = _stage(c, c.samples() / "train", c.p("node{node}"))
    argv[argv.index("--samples-per-rank") + 1] = "-5"
    return argv


def _train_cfg(c: Ctx, **settings) -> list[str]:
    cfg = {**TRAIN_CONFIG, **settings}
    return _train(c, c.samples(), "--config", c.text("cfg.json", json.dumps(cfg)))


@case("train-config-growth-rate-text", ("cfg.json", "growth_rate"), r"whole number")
def _(c):
    return _train_cfg(c, model_overrides={"growth_rate": "6", "initial_filters": 8})


@case("train-config-dropout-text", ("cfg.json", "dropout"), r"number")
def _(c):
    return _train_cfg(c, model_overrides={**TRAIN_CONFIG["model_overrides"], "dropout": "0.1"})


@case("train-config-blocks-a-number", ("cfg.json", "blocks"), r"list")
def _(c):
    return _train_cfg(c, model_overrides={**TRAIN_CONFIG["model_overrides"], "blocks": 3})


@case("train-config-override-unknown", ("cfg.json", "growth"), r"no field|unknown")
def _(c):
    return _train_cfg(c, model_overrides={"growth": 6})


@case("train-config-learning-rate-text", ("cfg.json", "learning_rate"), r"number")
def _(c):
    return _train_cfg(c, optimizer={"learning_rate": "1e-3"})


@case("train-config-scale-lr-text", ("cfg.json", "scale_lr"), r"true or false")
def _(c):
    return _train_cfg(c, scale_lr="yes")


@case("train-config-epochs-fraction", ("cfg.json", "epochs"), r"whole number")
def _(c):
    return _train_cfg(c, epochs=1.5)


@case("train-config-split-seed-fraction", ("cfg.json", "split_seed"), r"whole number")
def _(c):
    return _train_cfg(c, split_seed=0.5)


@case("train-config-channels-a-number", ("cfg.json", "channels"), r"list")
def _(c):
    return _train_cfg(c, channels=5)


@case("train-learning-rate-nan", "--lr", r"finite")
def _(c):
    return _train(c, c.samples(), "--lr", "nan")


@case("train-learning-rate-infinite", "--lr", r"finite")
def _(c):
    return _train(c, c.samples(), "--lr", "inf")


@case("train-warmup-negative", "warmup", r">= ?0")
def _(c):
    return _train(c, c.samples(), "--warmup-steps", "-1")


@case("train-out-read-only", "rofs", NO_WRITE)
def _(c):
    ro = c.read_only("rofs")
    return _train(c, c.samples(), out=str(ro / "run"))


@case("train-out-under-a-file", "plainfile", NOT_DIR)
def _(c):
    c.text("plainfile", "x\n")
    return _train(c, c.samples(), out="plainfile/run")


@case("train-out-busy", ("run", "process 1"), r"another run")
def _(c):
    _live_temp(c, "run")
    return _train(c, c.samples())


@case("train-data-manifest-lists-deleted-file", "train", r"missing")
def _(c):
    s = c.samples()
    _delete_listed(c, s)
    return _train(c, s)


@case("train-data-splits-share-a-file", ("train", "validation"), r"both|share")
def _(c):
    s = c.samples()
    _leak(c, s)
    return _train(c, s)


def _scaled(var: str, factor: float = 1.0, offset: float = 0.0, drop_units: bool = True):
    def change(ds):
        ds[var] = (ds[var] * factor + offset).astype("float32")
        if drop_units:
            ds[var].attrs.pop("units", None)
        return ds

    return change


@case("predict-psl-in-hpa", ("fields.nc", "PSL"), r"training range|units")
def _(c):
    return _predict(c, c.fields(change=_scaled("PSL", 0.01)))


@case("predict-t500-in-celsius", ("fields.nc", "T500"), r"training range|units")
def _(c):
    return _predict(c, c.fields(change=_scaled("T500", offset=-273.15)))


@case("predict-tmq-in-grams", ("fields.nc", "TMQ"), r"training range|units")
def _(c):
    return _predict(c, c.fields(change=_scaled("TMQ", 1000.0)))


@case("predict-sample-set-deleted-file", "train", r"missing")
def _(c):
    s = c.samples()
    _delete_listed(c, s)
    return _predict(c, s)


@case("predict-out-busy", ("pred.nc", "process 1"), r"another run")
def _(c):
    _live_temp(c, "pred.nc")
    return _predict(c, c.fields())


@case("tracks-variable-is-a-field", ("fields.nc", "TMQ"), r"not a class mask")
def _(c):
    return _tracks(c.fields(), "--variable", "TMQ", "--out", c.p("tracks.nc"))


@case("tracks-mask-value-7", ("fields.nc", "truth"), r"class mask|0\.\.2")
def _(c):
    return _tracks(c.fields(change=_set("truth", 7)), "--out", c.p("tracks.nc"))


@case("tracks-mask-negative", ("fields.nc", "truth"), r"class mask|0\.\.2")
def _(c):
    return _tracks(c.fields(change=_set("truth", -1)), "--out", c.p("tracks.nc"))


@case("tracks-mask-fraction", ("fields.nc", "truth"), r"class mask")
def _(c):
    return _tracks(c.fields(change=_set("truth", 0.5)), "--out", c.p("tracks.nc"))


@case("tracks-variable-not-there", ("fields.nc", "nothere"), r"no class mask")
def _(c):
    return _tracks(c.fields(), "--variable", "nothere", "--out", c.p("tracks.nc"))


@case("tracks-times-repeated", ("fields.nc", "2000-01-01T03:00"), r"repeated")
def _(c):
    return _tracks(c.fields(change=_times(_repeat)), "--out", c.p("tracks.nc"))


@case("tracks-inputs-overlap", ("a.nc", "b.nc"), r"repeated|overlap")
def _(c):
    return _tracks(*_overlapping(c), "--out", c.p("tracks.nc"))


@case("tracks-times-backwards", "fields.nc", r"backwards|order")
def _(c):
    return _tracks(c.fields(change=_times(_backwards)), "--out", c.p("tracks.nc"))


@case("tracks-out-busy", ("tracks.nc", "process 1"), r"another run")
def _(c):
    _live_temp(c, "tracks.nc")
    return _tracks(c.fields(), "--out", c.p("tracks.nc"))


@case("tracks-csv-busy", ("tracks.csv", "process 1"), r"another run")
def _(c):
    _live_temp(c, "tracks.csv")
    return _tracks(c.fields(), "--out", c.p("tracks.nc"), "--csv", c.p("tracks.csv"))


@case("label-out-busy", ("labels.nc", "process 1"), r"another run")
def _(c):
    _live_temp(c, "labels.nc")
    return _label(c, c.fields(), "--out", c.p("labels.nc"))


@case("train-config-overrides-a-number", ("cfg.json", "model_overrides"), r"object")
def _(c):
    return _train_cfg(c, model_overrides=5)


@case("train-config-optimizer-text", ("cfg.json", "optimizer"), r"object")
def _(c):
    return _train_cfg(c, optimizer="adam")


@case("train-config-threads-text", ("cfg.json", "threads"), r"whole number")
def _(c):
    return _train_cfg(c, threads="2")


@case("train-config-keep-checkpoints-text", ("cfg.json", "keep_checkpoints"), "whole")
def _(c):
    return _train_cfg(c, keep_checkpoints="2")


@case("train-config-learning-rate-nan", ("cfg.json", "learning_rate"), r"finite")
def _(c):
    return _train_cfg(c, optimizer={"learning_rate": float("nan")})


@case("train-config-class-weighting-number", ("cfg.json", "class_weighting"), "text|one of")
def _(c):
    return _train_cfg(c, class_weighting=3)


@case("train-config-split-a-number", ("cfg.json", "split"), r"list")
def _(c):
    return _train_cfg(c, split=0.8)


@case("predict-last-file-in-hpa", ("b.nc", "PSL"), r"training range|units")
def _(c):
    first = c.fields("a.nc", change=lambda ds: ds.isel(time=slice(0, 20)))
    change = _scaled("PSL", 0.01)
    second = c.fields("b.nc", change=lambda ds: change(ds.isel(time=slice(20, None))))
    return _predict(c, first, second)


@case("samples-label-file-times-repeated", "labels.nc", r"same time|repeated")
def _(c):
    labels = _labels_file(c, change=_times(_repeat))
    return _samples(c, [_fields_only(c), labels], c.p("samples"))


@case("samples-labels-given-twice", "labels.nc", r"overlap|twice")
def _(c):
    first = _labels_file(c)
    second = _labels_file(c, "labels2.nc")
    return _samples(c, [_fields_only(c), first, second], c.p("samples"))


# --- missing parts, links that go nowhere, two writers ----------------------------------------

MISSING_CHUNK = r"lacks chunk"
LOOP = r"loop of symbolic links"


@case("label-zarr-missing-chunk", ("fields.zarr", "TMQ", "c/3/1/0"), MISSING_CHUNK)
def _(c):
    store = c.zarr()
    (store / "TMQ" / "c" / "3" / "1" / "0").unlink()  # a quarter of the globe at step 3
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("label-zarr2-missing-chunk", ("fields.zarr", "PRECT", "5.0.1"), MISSING_CHUNK)
def _(c):
    store = c.zarr(zarr_format=2)
    (store / "PRECT" / "5.0.1").unlink()
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("label-zarr-variable-without-metadata", ("fields.zarr", "U850"), r"zarr.json")
def _(c):
    store = c.zarr()
    (store / "U850" / "zarr.json").unlink()  # storms need U850: that class would vanish
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("label-zarr2-variable-without-zarray", ("fields.zarr", "TMQ"), r"\.zarray")
def _(c):
    store = c.zarr(zarr_format=2)
    (store / "TMQ" / ".zarray").unlink()
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("label-zarr2-variable-without-zattrs", ("fields.zarr", "PSL"), r"\.zattrs")
def _(c):
    store = c.zarr(zarr_format=2)
    (store / "PSL" / ".zattrs").unlink()
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("label-zarr-empty-chunk-file", ("fields.zarr", "PSL", "c/1/0/0"), r"empty chunk")
def _(c):
    store = c.zarr()
    _rewrite(store / "PSL" / "c" / "1" / "0" / "0", b"")  # a copy cut short
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("label-zarr-store-empty", "fields.zarr", r"no Zarr metadata")
def _(c):
    return _label(c, c.dir("fields.zarr"), "--out", c.p("labels.nc"))


@case("predict-zarr-missing-chunk", ("fields.zarr", "TMQ", "c/0/0/0"), MISSING_CHUNK)
def _(c):
    store = c.zarr()
    (store / "TMQ" / "c" / "0" / "0" / "0").unlink()
    return _predict(c, store)


@case("predict-zarr-coordinate-missing-chunk", ("fields.zarr", "lat"), MISSING_CHUNK)
def _(c):
    store = c.zarr()
    (store / "lat" / "c" / "0").unlink()  # latitudes read as NaN
    return _predict(c, store)


@case("samples-zarr-missing-chunk", ("fields.zarr", "PRECT", "c/7/0/1"), MISSING_CHUNK)
def _(c):
    store = c.zarr()  # refused before the split (which 8 steps are too few for)
    (store / "PRECT" / "c" / "7" / "0" / "1").unlink()
    return _samples(c, [str(store)], c.p("samples"))


@case("tracks-zarr-mask-missing-time-chunk", ("mask.zarr", "time", "c/0"), MISSING_CHUNK)
def _(c):
    store = c.zarr("mask.zarr", keep=["truth"])
    (store / "time" / "c" / "0").unlink()  # every time read as the fill value
    return _tracks(store, "--out", c.p("tracks.nc"))


@case("stats-zarr-mask-without-metadata", ("mask.zarr", "truth"), r"zarr.json")
def _(c):
    store = c.zarr("mask.zarr", keep=["truth"])
    (store / "truth" / "zarr.json").unlink()
    return ["stats", str(store), "--variable", "truth", "--out", c.p("stats.nc")]


DAMAGED = r"cannot be read.*damaged"


def _damage(chunk: Path) -> None:
    """Overwrite the first bytes of a chunk file (the codec's frame header): the file is
    there, of the right size, and cannot be decoded."""
    data = bytearray(chunk.read_bytes())
    data[:8] = b"\x00garbage"
    _rewrite(chunk, bytes(data))


def _rewrite(path: Path, data: bytes) -> None:
    """A new file ``path`` holding ``data``: not written into the old one, which may be a hard
    link to a golden file (:meth:`Ctx.zarr`)."""
    path.unlink()
    path.write_bytes(data)


@case("label-zarr-chunk-bytes-damaged", ("fields.zarr", "TMQ", "c/3/1/0"), DAMAGED)
def _(c):
    store = c.zarr()
    _damage(store / "TMQ" / "c" / "3" / "1" / "0")
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("label-zarr2-chunk-bytes-damaged", ("fields.zarr", "PRECT", "5.0.1"), DAMAGED)
def _(c):
    store = c.zarr(zarr_format=2)
    _damage(store / "PRECT" / "5.0.1")
    return _label(c, str(store), "--out", c.p("labels.nc"))


@case("samples-zarr-chunk-bytes-damaged", ("fields.zarr", "U850", "c/7/0/1"), DAMAGED)
def _(c):
    store = c.zarr(steps=N_TIME)  # read when split: the 40 steps a split needs
    _damage(store / "U850" / "c" / "7" / "0" / "1")
    return _samples(c, str(store), c.p("samples"))


@case("predict-zarr-chunk-bytes-damaged", ("fields.zarr", "PSL", "c/0/1/1"), DAMAGED)
def _(c):
    store = c.zarr()
    _damage(store / "PSL" / "c" / "0" / "1" / "1")
    return _predict(c, store)


@case("tracks-zarr-mask-chunk-bytes-damaged", ("mask.zarr", "truth", "c/2/0/0"), DAMAGED)
def _(c):
    store = c.zarr("mask.zarr", keep=["truth"])
    _damage(store / "truth" / "c" / "2" / "0" / "0")
    return _tracks(store, "--out", c.p("tracks.nc"))


@case("score-zarr-mask-chunk-bytes-damaged", ("mask.zarr", "truth", "c/0/0/1"), DAMAGED)
def _(c):
    store = c.zarr("mask.zarr", keep=["truth"])
    _damage(store / "truth" / "c" / "0" / "0" / "1")
    expert = _expert(c, "data-2000-01-01-00-1_1.nc")
    return ["score", str(store), "--expert", expert, "--variable", "truth"]


@case("score-zarr-mask-without-metadata", ("mask.zarr", "truth"), r"zarr.json")
def _(c):
    store = c.zarr("mask.zarr", keep=["truth"])
    (store / "truth" / "zarr.json").unlink()  # xr.open_zarr skipped the variable
    expert = _expert(c, "data-2000-01-01-00-1_1.nc")
    return ["score", str(store), "--expert", expert, "--variable", "truth"]


@case("score-zarr-mask-missing-time-chunk", ("mask.zarr", "time", "c/0"), MISSING_CHUNK)
def _(c):
    store = c.zarr("mask.zarr", keep=["truth"])
    (store / "time" / "c" / "0").unlink()  # every time read as the fill value
    expert = _expert(c, "data-2000-01-01-00-1_1.nc")
    return ["score", str(store), "--expert", expert, "--variable", "truth"]


def _halves(c: Ctx, second: Callable | None = None) -> list[str]:
    """The golden fields in two files, a.nc (steps 0-19) and b.nc (20-39, then ``second``)."""
    first = c.fields("a.nc", change=lambda ds: ds.isel(time=slice(0, 20)))
    rest = c.fields(
        "b.nc", change=lambda ds: (second or (lambda d: d))(ds.isel(time=slice(20, None)))
    )
    return [first, rest]


@case("label-times-repeated", ("fields.nc", "2000-01-01T03:00"), r"repeated")
def _(c):
    return _label(c, c.fields(change=_times(_repeat)), "--out", c.p("labels.nc"))


@case("label-inputs-overlap", ("a.nc", "b.nc"), r"also in|overlap")
def _(c):
    return _label(c, *_overlapping(c), "--out", c.p("labels.nc"))


@case("label-inputs-longitudes-shifted", ("b.nc", "a.nc", "longitude"), r"grid differs")
def _(c):
    shifted = _halves(c, lambda ds: ds.assign_coords(lon=ds.lon + 1.25))
    return _label(c, *shifted, "--out", c.p("labels.nc"))


@case("samples-inputs-latitudes-differ", ("b.nc", "a.nc", "latitude"), r"grid differs")
def _(c):
    moved = _halves(c, lambda ds: ds.assign_coords(lat=ds.lat * 0.99))
    return _samples(c, moved, c.p("samples"))


@case("label-input-symlink-loop", "loop", LOOP)
def _(c):
    return _label(c, c.loop(), "--out", c.p("labels.nc"))


@case("label-out-symlink-loop", ("--out", "loop"), LOOP)
def _(c):
    return _label(c, c.fields(), "--out", c.loop() + "/labels.nc")


@case("predict-input-broken-link", ("gone.nc", "nothere.nc"), r"broken symbolic link")
def _(c):
    return _predict(c, c.link("gone.nc", "nothere.nc"))


@case("tracks-input-symlink-loop", "loop", LOOP)
def _(c):
    return _tracks(c.loop(), "--out", c.p("tracks.nc"))


@case("samples-input-symlink-loop", "loop", LOOP)
def _(c):
    return _samples(c, [c.loop()], c.p("samples"))


@case("label-zarr-out-being-written", "labels.zarr", r"another run \(process 1\)")
def _(c):
    (c.d / ".labels.zarr.1-deadbeef.tmp").mkdir()  # process 1 is alive: a live writer's store
    return _label(c, c.fields(), "--out", c.p("labels.zarr"))


@case("predict-zarr-out-being-written", "pred.zarr", r"another run \(process 1\)")
def _(c):
    (c.d / ".pred.zarr.1-deadbeef.tmp").mkdir()
    return _predict(c, c.fields(), out=c.p("pred.zarr"))


# --- options checked alike by every command: seeds, argparse's own errors ---------------------

SEED = r"whole number >= 0"


@case("synth-seed-negative", "--seed", SEED)
def _(c):
    return ["synth", "--out", c.p("f.nc"), "--n-time", "2", "--seed", "-1"]


@case("samples-seed-negative", "--seed", SEED)
def _(c):
    return _samples(c, c.fields(), c.p("samples"), "--seed", "-3")


@case("stage-seed-negative", "--seed", SEED)
def _(c):
    return _stage(c, c.samples() / "train", c.p("node{node}"), "--seed", "-1")


@case("train-seed-negative", "--seed", SEED)
def _(c):
    return _train(c, c.samples(), "--seed", "-1")


@case("stats-compare-seed-text", "--seed", SEED)
def _(c):
    return ["stats", "compare", c.fields(), c.fields("b.nc"), "--seed", "one"]


@case("label-workers-not-a-number", "--workers", r"invalid int")
def _(c):
    return _label(c, c.fields(), "--out", c.p("labels.nc"), "--workers", "two")


@case("label-step-all-nan", ("fields.nc", "TMQ", "2000-01-01T15:00"), r"no valid")
def _(c):
    """A field missing at one whole step: named with its file and time (the message named the
    variable only, found while writing)."""

    def gone(ds):
        ds["TMQ"] = ds.TMQ.astype("float32")
        ds["TMQ"][5] = float("nan")
        return ds

    return _label(c, c.fields(change=gone), "--out", c.p("labels.nc"))


@case("train-out-disk-full", "fulldisk", NO_SPACE)
def _(c):
    c.full_disk()  # a 64 KiB file system, full
    return _train(c, c.samples(), out="fulldisk/run")


@case("predict-bundle-overrides-not-recorded", "oldbundle", r"weights|overrides")
def _(c):
    """A bundle of a network trained with ``model_overrides`` that does not record them (as
    bundles did before): predict on another grid rebuilt the preset's network and failed in
    Keras' set_weights ("length 130 ... expecting 157")."""
    from climnb.bundle import META_FILE
    from climnb.io.stats import read_stats
    from climnb.models import build_model

    stats = read_stats(c.g.samples / "stats.h5")
    model = build_model("tiramisu", (96, 144, len(stats.channels)), 3, "toy", **_SMALL)
    bundle = _save(model, c.d / "oldbundle", stats, preset="toy")
    meta = json.loads((bundle / META_FILE).read_text())
    meta["model"]["overrides"] = {}  # what a bundle of a run with overrides held before
    (bundle / META_FILE).write_text(json.dumps(meta))
    other_grid = c.fields("region.nc", lambda ds: ds.isel(lat=slice(16, 80), lon=slice(0, 96)))
    return _predict(c, other_grid, model=str(bundle))


_SMALL = TRAIN_CONFIG["model_overrides"]


def _save(model, path: Path, stats, preset: str) -> Path:
    from climnb.bundle import save_bundle

    return save_bundle(
        model,
        path,
        channels=stats.channels,
        minval=stats.minval,
        maxval=stats.maxval,
        name="tiramisu",
        preset=preset,
        overrides=dict(_SMALL),
    )


# --- score, notebooks, kernel -----------------------------------------------------------------


def _expert(c: Ctx, name: str, change: Callable | None = None) -> str:
    """One ClimateNet-layout expert file (``LABELS`` from the golden truth, first step)."""

    def to_expert(ds):
        one = ds.isel(time=[0])
        one["LABELS"] = one["truth"].astype("int64")
        one = one.drop_vars("truth")
        return change(one) if change else one

    return c.fields(name, to_expert)


@case("score-expert-without-labels", "data-2000-01-01-00-1_1.nc", r"LABELS")
def _(c):
    expert = _expert(c, "data-2000-01-01-00-1_1.nc", lambda ds: ds.drop_vars("LABELS"))
    return ["score", c.fields(), "--expert", expert, "--variable", "truth"]


@case("score-expert-value-7", "data-2000-01-01-00-1_1.nc", r"0, 1|0/1/2|values?")
def _(c):
    def seven(ds):
        ds["LABELS"][0, 0, 0] = 7
        return ds

    expert = _expert(c, "data-2000-01-01-00-1_1.nc", seven)
    return ["score", c.fields(), "--expert", expert, "--variable", "truth"]


@case("score-expert-badly-named", "labels_expert.nc", r"data-YYYY|layout|name")
def _(c):
    return ["score", c.fields(), "--expert", _expert(c, "labels_expert.nc")]


@case("score-no-time-in-common", "fields.nc", r"time|common|share")
def _(c):
    def later(ds):
        return ds.assign_coords(time=ds.time + pd.Timedelta(days=3653))  # 2010-01-01, as named

    expert = _expert(c, "data-2010-01-01-00-1_1.nc", later)
    return ["score", c.fields(), "--expert", expert, "--variable", "truth"]


@case("score-mask-missing", "nothere.nc", NO_FILE)
def _(c):
    return ["score", c.p("nothere.nc"), "--expert", _expert(c, "data-2000-01-01-00-1_1.nc")]


@case("notebooks-into-a-file", "afile", NOT_DIR + "|file")
def _(c):
    return ["notebooks", c.text("afile", "a regular file\n")]


@case("kernel-bad-name", "--name|bad name", r"name|letters|character")
def _(c):
    return ["kernel", "install", "--prefix", c.p("prefix"), "--name", "bad name/../x"]


# --- outputs, claims, units and names: every output against every input, one run an output ---


@case("score-csv-is-an-expert-file", ("--csv", "data-2000-01-01-00-1_1.nc"), SAME)
def _(c):
    expert = _expert(c, "expert/data-2000-01-01-00-1_1.nc")
    return ["score", c.fields(), "--expert", str(c.d / "expert"), "--csv", expert]


@case("score-csv-is-a-member-of-the-expert-glob", ("--csv", "data-2000"), SAME)
def _(c):
    expert = _expert(c, "data-2000-01-01-00-1_1.nc")
    pattern = c.p("data-*.nc")
    return ["score", c.fields(), "--expert", pattern, "--variable", "truth", "--csv", expert]


_GRIB = Path(__file__).parent / "data" / "nam_florence_subset.grib2"


@case("label-grib-missing-its-last-100-bytes", "nam.grib2", r"truncated")
def _(c):
    return _label(c, c.text("nam.grib2", _GRIB.read_bytes()[:-100]), "--out", c.p("l.nc"))


@case("label-grib-damaged-header", "nam.grib2", r"damaged|not a GRIB")
def _(c):
    data = bytearray(_GRIB.read_bytes())
    data[7] = 107  # the edition byte of the first message
    return _label(c, c.text("nam.grib2", bytes(data)), "--out", c.p("l.nc"))


@case("score-expert-file-named-for-another-step", "1_1.nc", r"its name says")
def _(c):
    expert = _expert(c, "data-2000-01-01-06-1_1.nc")  # holds the step of 2000-01-01 00:00
    return ["score", c.fields(), "--expert", expert, "--variable", "truth"]


@case("predict-out-is-a-file-of-the-model", ("--out", "model"), SAME)
def _(c):
    model = c.d / "model"
    shutil.copytree(c.g.bundle, model)
    target = sorted(p for p in model.rglob("*") if p.is_file())[0]
    return ["predict", "--model", str(model), c.fields(), "--out", str(target)]


@case("synth-events-is-out", ("--events", "f.nc"), SAME)
def _(c):
    return ["synth", "--n-time", "2", "--out", c.p("f.nc"), "--events", c.p("f.nc")]


@case("label-out-claimed-by-a-live-run", ("labels.nc",), r"another run.*writing it")
def _(c):
    from climnb.io.atomic import claim_path

    out = c.d / "labels.nc"
    record = {"pid": os.getpid(), "host": __import__("socket").gethostname(), "token": "t"}
    claim_path(out).write_text(json.dumps(record))  # this process: alive
    return _label(c, c.fields(), "--out", str(out))


@case("label-units-psl-hpa-on-pa", ("fields.nc", "PSL", "--units PSL="), r"plausible")
def _(c):
    return _label(c, c.fields(), "--out", c.p("l.nc"), "--units", "PSL=hPa")


@case("label-units-tmq-in-metres", ("fields.nc", "TMQ", "--units TMQ="), r"plausible")
def _(c):
    return _label(c, c.fields(), "--out", c.p("l.nc"), "--units", "TMQ=m")


@case("label-rename-onto-a-variable-it-has", ("--rename TMQ=PSL",), r"already")
def _(c):
    return _label(c, c.fields(), "--out", c.p("l.nc"), "--rename", "TMQ=PSL")


@case("label-rename-then-units-as-advised", ("fields.nc", "PSL"), r"plausible")
def _(c):  # TMQ's values as PSL under units Pa: the plausibility check, not 0 storms
    def psl_from_tmq(ds):
        ds["PSL"] = ds["TMQ"].assign_attrs(units="kg m-2")
        return ds

    f = c.fields("fields.nc", psl_from_tmq)
    return _label(c, f, "--out", c.p("l.nc"), "--units", "PSL=Pa")


@case("label-regrid-100", "--regrid", r"degrees")
def _(c):
    return _label(c, c.fields(), "--out", c.p("l.nc"), "--regrid", "100")


@case("label-regrid-inf", "--regrid", r"degrees")
def _(c):
    return _label(c, c.fields(), "--out", c.p("l.nc"), "--regrid", "inf")


@case("label-regrid-zero", "--regrid", r"degrees")
def _(c):
    return _label(c, c.fields(), "--out", c.p("l.nc"), "--regrid", "0")


@case("verify-csv-is-the-best-track-file", ("--csv", "ibtracs.csv"), SAME)
def _(c):
    best = c.text("ibtracs.csv", "SID,ISO_TIME,LAT,LON,USA_WIND\n")
    return ["verify", c.fields("tracks.nc"), "--best-track", best, "--csv", best]


@case("verify-csv-and-tracks-csv-are-one-file", ("--tracks-csv", "v.csv"), r"same file")
def _(c):
    best = c.text("ibtracs.csv", "SID,ISO_TIME,LAT,LON,USA_WIND\n")
    argv = ["verify", c.fields("tracks.nc"), "--best-track", best, "--csv", c.p("v.csv")]
    return [*argv, "--tracks-csv", c.p("v.csv")]


@case("kernel-empty-name", "--name", r"empty")
def _(c):
    return ["kernel", "install", "--prefix", c.p("prefix"), "--name", ""]


@case("kernel-name-python3", "--name", r"standard Python kernel")
def _(c):
    return ["kernel", "install", "--prefix", c.p("prefix"), "--name", "python3"]


# --- a Latin-1 name, a stray sample, a damaged bundle, a resumed run of another model,
# all-background labels, a variable one file lacks (a float16 store: tests/test_float16_inputs.py)


@case("label-latin1-file-name", "caf\\xe9.nc", r"not UTF-8.*rename")
def _(c):
    name = os.fsdecode(b"caf\xe9.nc")
    shutil.copyfile(c.g.fields, c.d / name)
    return _label(c, str(c.d / name), "--out", c.p("l.nc"))


@case("train-sample-set-stray-file", "data-1999", r"not listed")
def _(c):
    s = c.samples()
    stray = s / "train" / "data-1999-12-31-00-1.h5"
    shutil.copyfile(c.first(s), stray)

    def other_grid(f):  # a sample of a grid of half the resolution, named to be read first
        for name in ("data", "labels_0", "lat", "lon"):
            half = f[f"climate/{name}"][::2, ::2] if f[f"climate/{name}"].ndim > 1 else None
            half = f[f"climate/{name}"][::2] if half is None else half
            del f[f"climate/{name}"]
            f[f"climate/{name}"] = half

    _h5(stray, other_grid)
    return _train(c, s)


@case("predict-model-keras-truncated", ("model.keras",), r"damaged")
def _(c):
    model = c.d / "model"
    shutil.copytree(c.g.bundle, model)
    c.truncate(model / "model.keras", 0.5)
    return _predict(c, c.fields(), model=str(model))


@case("train-resume-another-model", ("run", "--no-resume"), r"another model")
def _(c):
    from climnb.cli import main

    s = c.samples()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(_train(c, s)) == 0, "the first run failed"
    other = {
        **TRAIN_CONFIG,
        "model_overrides": {**TRAIN_CONFIG["model_overrides"], "growth_rate": 6},
    }
    cfg = c.text("other.json", json.dumps(other))
    return _train(c, s, "--config", cfg)


@case("train-labels-all-background", ("samples", "--data|label"), r"all background")
def _(c):
    from climnb.cli import main

    def background(ds):
        ds["truth"] = ds.truth * 0
        return ds

    s = c.p("samples")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(_samples(c, c.fields(change=background), s, "--seed", "0")) == 0
    return _train(c, s)


@case("label-second-file-lacks-psl", ("b.nc", "PSL"), r"lacks variable")
def _(c):
    a = c.fields("a.nc", lambda ds: ds.isel(time=slice(0, 20)))
    b = c.fields("b.nc", lambda ds: ds.isel(time=slice(20, 40)).drop_vars("PSL"))
    return _label(c, a, b, "--out", c.p("l.nc"))


@case("predict-bundle-one-channel-short", ("climnb.json", "15 channels"), r"16 minval")
def _(c):
    model = c.d / "model"
    shutil.copytree(c.g.bundle, model)
    meta = json.loads((model / "climnb.json").read_text())
    meta["channels"] = meta["channels"][:-1]  # ZBOT's line lost in an edit: 15 names
    (model / "climnb.json").write_text(json.dumps(meta))
    return _predict(c, c.fields(), model=str(model))


# --- stats: the cases live in tests/bad_input_stats.py ----------------------------------------
from bad_input_stats import STATS_CASES  # noqa: E402

CASES += STATS_CASES


# ---------------------------------------------------------------------------------------------
# Running and judging
# ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a command did: exit status (``None`` if it raised), output, files changed."""

    argv: list[str]
    status: int | None
    stdout: str
    stderr: str
    raised: str = ""
    changed: list[str] = field(default_factory=list)


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \S+ (DEBUG|INFO|WARNING) ")


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` (hidden ones too): for files their inode, size and
    modification time in nanoseconds (any write changes one: a rewrite in place the time, a
    replacement the inode), ``dir`` for folders. Cheaper than hashing the contents, which cost
    a third of the table's time (two SHA-256 passes over each case's 35 MB of copies)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder)] = "dir"
        for f in files:
            path = os.path.join(root, f)
            try:  # a link's target (a golden file it points to, changed, is found too)
                st = os.stat(path)
                out[os.path.relpath(path, folder)] = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
            except OSError:  # a link whose target is missing
                out[os.path.relpath(path, folder)] = "missing target"
    return out


def _diff(before: dict, after: dict) -> list[str]:
    added = [f"+{p}" for p in sorted(set(after) - set(before))]
    removed = [f"-{p}" for p in sorted(set(before) - set(after))]
    modified = [f"~{p}" for p in sorted(set(before) & set(after)) if before[p] != after[p]]
    return added + removed + modified


def run_case(case: Case, folder: str | os.PathLike, golden: Golden) -> Outcome:
    """Build ``case`` in ``folder`` (made empty), run it in-process there, return the outcome.

    Raises :class:`Unavailable` when the case cannot be set up here.
    """
    from climnb.cli import main

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    with contextlib.ExitStack() as stack:
        argv = case.build(Ctx(folder, golden, stack))
        before = snapshot(folder)
        out, err, raised, status = io.StringIO(), io.StringIO(), "", None
        os.chdir(folder)
        try:
            with (
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(err),
                warnings.catch_warnings(record=True),
            ):
                status = main(argv)
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - an escaped exception is the finding
            if isinstance(exc, KeyboardInterrupt):
                raise
            raised = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        finally:
            os.chdir(cwd)
        changed = _diff(before, snapshot(folder))
    return Outcome(argv, status, out.getvalue(), err.getvalue(), raised, changed)


def error_lines(outcome: Outcome) -> list[str]:
    """stderr's lines that are not log records of level WARNING or below."""
    return [ln for ln in outcome.stderr.splitlines() if ln.strip() and not _LOG_LINE.match(ln)]


def judge(case: Case, outcome: Outcome) -> list[str]:
    """What is wrong with how the command handled the case (empty: handled)."""
    problems = []
    if outcome.raised:
        problems.append(f"raised {outcome.raised.splitlines()[-1][:200]}")
    elif outcome.status != 2:
        problems.append(f"exit status {outcome.status}, expected 2")
    lines = error_lines(outcome)
    if not outcome.raised:
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr, expected one: {lines[:3]}")
        text = lines[0] if lines else ""
        if lines and not text.startswith(f"climnb {case.command}: error: "):
            problems.append(f"error line does not start 'climnb {case.command}: error:'")
        missing = [
            n for n in case.names if not any(a in text.lower() for a in n.lower().split("|"))
        ]
        if lines and missing:
            problems.append(f"error line does not name {missing}: {text[:300]}")
        if lines and not re.search(case.keyword, text, re.IGNORECASE):
            problems.append(f"error line does not say /{case.keyword}/: {text[:300]}")
    if outcome.changed:
        problems.append(f"files changed: {outcome.changed[:6]}")
    return problems
