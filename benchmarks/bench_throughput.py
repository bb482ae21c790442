"""A month of full-size CAM5-like output at the speed of the disk: labelling and inference.

Writes, once, ``--days`` days (default 30: 240 steps, about 14 GB) of full-size (768 x 1152)
synthetic fields as CAM5 writes them: one uncompressed NetCDF-4 file per day of 8 3-hourly
steps, all 16 channels. Then measures, in the same run:

* **raw read**: plain netCDF4 reads of exactly the variables the labeller needs
  (:func:`climnb.labels.required_variables`), all steps in file and time order, one variable
  after the other as the labeller reads them; cold (each file's pages dropped from the page
  cache with ``posix_fadvise(POSIX_FADV_DONTNEED)`` after an ``fsync``, and
  ``/proc/sys/vm/drop_caches`` where permitted) and warm (read once just before);
* **climnb label** over the whole month, 1 and 2 workers, NetCDF and Zarr output, the storm
  tracker left to ``auto`` (off on this warm-core input) or on (``--label-workers``,
  ``--label-formats``, ``--label-storm-tracks``), from the same cache states: steps/s, MB/s of
  input (the bytes of those variables), the ratio to the raw read rate of the same cache state;
  from inside the command (a dask callback on the label tasks): the start-up (seconds to the
  first labelled step), the steady rate after it, as a worker's seconds a step against
  :func:`climnb.labels.label_step` alone (the core, timed in this process just before and
  just after each run, the mean of the two) and as
  the process tree's CPU seconds a step against the core's (what other load on the machine
  changes least), and the seconds after the last step; the peak of the whole process tree's
  resident memory (sampled every 0.2 s; PSS where /proc allows it, so shared pages count
  once); memory flat in the number of steps is checked by labelling half the month the same
  way. The commands run with compiled bytecode kept under ``--dir`` (as an installed package
  has it), also where ``PYTHONDONTWRITEBYTECODE`` is set;
* **where one worker's time goes**, on ``--breakdown-steps`` steps, warm, in seconds and CPU
  seconds: reading (netCDF4, raw bytes), decoding (what the label task's own reader adds on
  top: names, units, the canonical grid, lazy arrays to numpy), labelling
  (:func:`climnb.labels.label_step`) and writing (uint8 steps, compressed, a chunk a step, as
  the label writer does, through xarray in this process; the file's own cost left out);
* **inference** (``--only predict``): the real ``climnb predict --batch-size 1 --workers W``
  (lazy, to Zarr; W from ``--predict-workers``, default 1 and 2) of an untrained paper-size
  Tiramisu bundle (the cost does not depend on the weights; ``--predict-preset toy`` for a
  quick check) over the first ``--predict-steps`` steps and half of them (under a day: a file
  of that many steps), in float32, and in mixed_bfloat16 where the CPU has native bfloat16.
  The forward pass alone (the network's graph function on an array in memory) against the
  GEMM reference of its precision: the fastest of the forms TensorFlow offers for a 4096^3
  product (:func:`bench_models.gemm_rate`), timed in turn with it in one process
  (``--predict-rounds`` rounds, best of each), in FLOP/s (analytic count,
  :func:`climnb.models.flops`). Inside each command (a dask callback on every task, a wrapper
  around every call of the network): the start-up (from the process's creation to the first
  network call, and that call, which traces the graph and creates the kernels), a step's
  network, the work around it in the predict task, the reading and the writing; the share of
  the time in which the network ran no pass, in the steady state (after the first calls) and
  over the whole command, and projected to a month of 240 steps (this start-up, then the
  steady rate: a projection, not a run); the peak memory of a worker (the process's VmHWM
  over W) in both runs.

    .venv/bin/python benchmarks/bench_throughput.py [--dir /var/tmp/climnb-month] [--days 30]
        [--only write,raw,label,breakdown,predict] [--label-workers 1,2]
        [--label-formats nc,zarr] [--label-storm-tracks auto,on] [--breakdown-steps 16]
        [--predict-steps 16] [--predict-workers 1,2] [--predict-rounds 3]
    .venv/bin/python benchmarks/bench_throughput.py --only predict --predict-steps 4 --days 1

How the figures could mislead: the data are synthetic (smooth fields compress and decode
unlike real ones, though nothing here is compressed on input); the page cache is dropped per
file, not for the device (a disk cache below the kernel may still hold them: "cold" is the
kernel's cold, and on a fast local SSD cold and warm differ little, where a parallel file
system would differ much); the machine has 2 cores that other work may share (the load is
printed: wall-clock figures at a load above the cores are figures of the load, the CPU
ratios much less so); the label runs include the command's start-up (imports, opening the
input, the worker processes), which a month amortises but a short run does not: the
start-up and the steady rate are printed apart; inference uses an untrained network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np
import pandas as pd
import psutil
from _args import at_least

from climnb.labels import required_variables

SHAPE = (768, 1152)
STEPS_PER_DAY = 8
MB = 1e6
#: peak memory goals of a predict worker (GB; the process tree's peak over its workers)
MEMORY_GOALS = {"float32": 4.0, "mixed_bfloat16": 3.0}


# --- the month on disk -----------------------------------------------------------------------


def write_month(folder: Path, days: int) -> list[Path]:
    """One uncompressed NetCDF-4 file per day of 8 steps, all 16 channels; files already
    written by an earlier run are kept (each is written to a temporary name, then renamed)."""
    from climnb.data.synthetic import make_dataset

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    t0 = time.perf_counter()
    for day in range(days):
        path = folder / f"cam5.h2.2000-01-{day + 1:02d}-00000.nc"
        paths.append(path)
        if path.exists():
            continue
        ds, _ = make_dataset(
            n_time=STEPS_PER_DAY,
            n_lat=SHAPE[0],
            n_lon=SHAPE[1],
            seed=1000 + day,
            start=str(pd.Timestamp("2000-01-01") + pd.Timedelta(days=day)),
        )
        tmp = path.with_name(f".{path.name}.tmp")
        ds.drop_vars("truth").to_netcdf(tmp, format="NETCDF4")
        os.replace(tmp, path)
        print(f"  wrote {path.name} ({path.stat().st_size / MB:.0f} MB)", flush=True)
    size = sum(p.stat().st_size for p in paths)
    print(
        f"month: {len(paths)} files, {days * STEPS_PER_DAY} steps, {size / 1e9:.1f} GB in {folder}"
        f" ({time.perf_counter() - t0:.0f} s to write what was missing)"
    )
    return paths


def drop_cache(paths: list[Path]) -> str:
    """Drop the files' pages from the page cache; returns how it was done."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return "posix_fadvise(DONTNEED) per file + drop_caches"
    except OSError:
        return "posix_fadvise(DONTNEED) per file"


def needed_bytes(paths: list[Path], names) -> int:
    import netCDF4

    total = 0
    for path in paths:
        with netCDF4.Dataset(path) as nc:
            total += sum(nc[v].size * nc[v].dtype.itemsize for v in names)
    return total


def raw_read(paths: list[Path], names) -> tuple[float, int]:
    """Seconds and bytes to read ``names`` at every step, in the labeller's order."""
    import netCDF4

    t0, total = time.perf_counter(), 0
    for path in paths:
        with netCDF4.Dataset(path) as nc:
            nc.set_auto_maskandscale(False)
            for t in range(nc.dimensions["time"].size):
                for v in names:
                    total += nc[v][t].nbytes
    return time.perf_counter() - t0, total


# --- running commands and watching their memory --------------------------------------------


def _tree_memory(proc: psutil.Process) -> float:
    """Resident memory of a process and its descendants: PSS where readable, else RSS."""
    total = 0.0
    try:
        tree = [proc, *proc.children(recursive=True)]
    except psutil.Error:  # a process of the tree ended while it was listed
        return 0.0
    for p in tree:
        try:
            info = p.memory_full_info()
            total += getattr(info, "pss", info.rss)
        except psutil.Error:
            continue
    return total


def child_env(folder: Path) -> dict:
    """The environment of the timed commands: compiled bytecode kept (in ``folder``), as an
    installed package has it. Where ``PYTHONDONTWRITEBYTECODE`` is set, every process (each
    worker too) would otherwise compile climnb's source again at start-up."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def run_watched(argv: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """Run a command; returns (seconds, peak memory of its process tree in MiB, stdout)."""
    peak = [0.0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    watched = psutil.Process(proc.pid)
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_memory(watched))
            stop.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    stop.set()
    thread.join()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed:\n{err[-3000:]}")
    return seconds, peak[0] / 2**20, out


#: ``climnb label`` itself, with the end of every label task timed (a dask callback in the
#: command's process, where the write's threads run them): start-up, steady rate and close,
#: in seconds and in CPU seconds of the process tree (the command and its workers). With the
#: storm tracker, whose pass over every step's centres comes before the first label task,
#: the steady part starts at the first step's centres: both passes are the steps' work
LABEL_CHILD = r"""
import json, sys, time
import psutil
from dask.callbacks import Callback
from climnb.cli import main
me = psutil.Process()
born, done = me.create_time(), []
def cpu():
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total
centres = []
class Steps(Callback):
    def _posttask(self, key, result, dsk, state, worker_id):
        name = str(key[0] if isinstance(key, tuple) else key)
        if name.startswith("label-step"):
            done.append((time.time() - born, cpu()))
        elif name.startswith("storm-centres") and not centres:
            centres.append((time.time() - born, cpu()))
with Steps():
    status = main(["label", *sys.argv[1:]])
end = time.time() - born
first = (centres or done)[0]
print(json.dumps({"first": first, "last": done[-1], "end": end, "tasks": len(done)}))
sys.exit(status)
"""


def label_run(paths, out: Path, workers: int, env: dict, tracks: str = "auto") -> dict:
    """One ``climnb label`` run: seconds, peak MiB, and (from inside it) the seconds to the
    first labelled step, the steady rate after it, the process tree's CPU seconds a step
    over the same steps and the seconds after the last."""
    argv = [sys.executable, "-c", LABEL_CHILD, *map(str, paths), "--out", str(out)]
    argv += ["--workers", str(workers), "--no-progress", "--storm-tracks", tracks]
    seconds, peak, text = run_watched(argv, env)
    r = json.loads(text.strip().splitlines()[-1])
    (t0, cpu0), (t1, cpu1), n = r["first"], r["last"], r["tasks"] - 1
    return {"s": seconds, "peak": peak, "start": t0, "steady": n / max(t1 - t0, 1e-9),
            "cpu": (cpu1 - cpu0) / max(n, 1), "close": r["end"] - t1}  # fmt: skip


def core_cost(paths: list[Path], names, n: int = 4) -> tuple[float, float]:
    """Seconds and CPU seconds a step of :func:`climnb.labels.label_step` alone takes here
    (one process, the fields in memory, after a step of warm-up)."""
    import netCDF4

    from climnb.labels import label_step

    with netCDF4.Dataset(paths[0]) as nc:
        nc.set_auto_maskandscale(False)
        lat, lon = nc["lat"][:].astype(float), nc["lon"][:].astype(float)
        steps = [{v: np.asarray(nc[v][k]) for v in names} for k in range(n + 1)]
    label_step(steps[0], lat, lon)
    t0, c0 = time.perf_counter(), time.process_time()
    for fields in steps[1:]:
        label_step(fields, lat, lon)
    return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


class _Core:
    """The core's cost as the label runs meet it: measured again after each run (the load
    of a shared machine moves from minute to minute), each run compared with the mean of
    the measurements just before and just after it."""

    def __init__(self, paths, names):
        self.paths, self.names = paths, names
        self.last = core_cost(paths, names)

    def around(self) -> tuple[float, float]:
        before, self.last = self.last, core_cost(self.paths, self.names)
        return (before[0] + self.last[0]) / 2, (before[1] + self.last[1]) / 2


def label_part(
    folder: Path,
    paths: list[Path],
    names,
    workers=(1, 2),
    formats=("nc", "zarr"),
    tracks=("auto",),
):
    steps = len(paths) * STEPS_PER_DAY
    need = needed_bytes(paths, names)
    env = child_env(folder)
    subprocess.run(  # compiled once, as an installed package is, before anything is timed
        [sys.executable, "-c", "import climnb.cli, climnb.labels.files, climnb.labels.writer"],
        env=env,
        check=True,
    )
    print(
        f"\nlabelling {steps} steps; the labeller reads {', '.join(names)}: "
        f"{need / 1e9:.2f} GB of the files' {sum(p.stat().st_size for p in paths) / 1e9:.1f}"
    )
    core = _Core(paths, names)
    print(
        f"  the core: label_step alone, fields in memory, one process: {core.last[0] * 1e3:.1f} "
        f"ms a step, {core.last[1] * 1e3:.1f} ms of CPU (measured again after each run below, "
        "each run compared with the mean of the two measurements around it)"
    )
    rows, raw_rates = [], {}
    with tempfile.TemporaryDirectory(prefix="labels-", dir=folder) as tmp:
        for state in ("cold", "warm"):
            how = drop_cache(paths) if state == "cold" else "read just before"
            if state == "warm":
                raw_read(paths, names)
            seconds, nbytes = raw_read(paths, names)
            raw = nbytes / seconds
            raw_rates[state] = steps / seconds
            print(
                f"  raw netCDF4 read, {state} ({how}): {seconds:.1f} s, {raw / MB:.0f} MB/s, "
                f"{steps / seconds:.1f} steps/s (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            for track, n, fmt in [(t, n, f) for t in tracks for n in workers for f in formats]:
                if state == "cold":
                    drop_cache(paths)
                load = os.getloadavg()[0]
                r = label_run(paths, Path(tmp) / f"labels-{n}.{fmt}", n, env, track)
                wall, cpu = core.around()
                rate = need / r["s"]
                per_step = n / r["steady"]  # a worker's seconds a step, steady
                rows.append(
                    (state, track, n, fmt, r["s"], steps / r["s"], rate / raw, r["start"],
                     r["steady"], per_step * 1e3, per_step / wall, r["cpu"] / cpu, r["close"],
                     r["peak"], load)
                )  # fmt: skip
                print(
                    f"  climnb label --workers {n} --storm-tracks {track} -> .{fmt}, {state} "
                    f"(load {load:.1f}): {r['s']:.1f} s, {steps / r['s']:.2f} steps/s = "
                    f"{rate / raw:.2f} of the raw read (goal >= 0.80); start-up "
                    f"{r['start']:.1f} s to the first step, then {r['steady']:.1f} steps/s "
                    f"({per_step * 1e3:.0f} ms a step a worker = {per_step / wall:.2f}x the "
                    f"core's {wall * 1e3:.0f} ms; CPU {r['cpu'] * 1e3:.0f} ms a step = "
                    f"{r['cpu'] / cpu:.2f}x the core's {cpu * 1e3:.0f} ms; goal <= 1.5x warm), "
                    f"{r['close']:.1f} s after the last; peak {r['peak']:.0f} MiB",
                    flush=True,
                )
        if 2 in workers and "nc" in formats:
            half = paths[: max(1, len(paths) // 2)]
            raw_read(half, names)
            peak_half = label_run(half, Path(tmp) / "half.nc", 2, env, tracks[0])["peak"]
            full = [r[-2] for r in rows if r[:4] == ("warm", tracks[0], 2, "nc")][0]
            print(
                f"  memory: --workers 2 -> .nc, warm, {len(half) * STEPS_PER_DAY} steps peak "
                f"{peak_half:.0f} MiB vs {steps} steps {full:.0f} MiB: {full / peak_half:.2f}x "
                f"for {len(paths) / len(half):.0f}x the steps"
            )
    columns = ["cache", "tracks", "workers", "out", "s", "steps/s", "of raw", "start s",
               "steady/s", "ms/step/worker", "x core", "cpu x core", "close s", "peak MiB",
               "load"]  # fmt: skip
    table = pd.DataFrame(rows, columns=columns)
    print(table.round(2).to_string(index=False))
    two = table[table.workers == max(workers)]
    for _, r in two.iterrows():  # start-up once, then the steady rate: a month of 240 steps
        if steps >= 240:
            break  # measured on a month or more: nothing to project
        month = 240 / (r["start s"] + 240 / r["steady/s"] + r["close s"])
        raws = raw_rates[r["cache"]]
        print(
            f"  {r['cache']}, --workers {r['workers']} --storm-tracks {r['tracks']} -> "
            f".{r['out']}: a 240-step month at this start-up and steady rate would run at "
            f"{month:.1f} steps/s = {month / raws:.2f} of this run's {r['cache']} raw read "
            f"(goal >= 0.80 cold; projected from {steps} steps, not measured)"
        )
    for track in tracks:
        mine = two[two.tracks == track]
        cold = mine[mine.cache == "cold"]["of raw"].min()
        warm = mine[mine.cache == "warm"]["x core"].max()
        warm_cpu = mine[mine.cache == "warm"]["cpu x core"].max()
        print(
            f"goal, --storm-tracks {track}: --workers {max(workers)} cold >= 0.80 of the cold "
            f"raw read: lowest {cold:.2f} over {steps} steps, start-up included "
            f"({'met' if cold >= 0.8 else 'NOT met'}); warm, a worker's steady step <= 1.5x "
            f"the core's: highest {warm:.2f}x ({'met' if warm <= 1.5 else 'NOT met'}), in CPU "
            f"(what other load on the machine changes least) {warm_cpu:.2f}x "
            f"({'met' if warm_cpu <= 1.5 else 'NOT met'})"
        )


def breakdown(paths: list[Path], names, n_steps: int) -> None:
    """Seconds (and CPU seconds) per step one worker spends reading, decoding, labelling and
    writing (warm, one process): plain netCDF4 reads of the bytes the labeller needs; what the
    label task's own reader (:class:`climnb.labels.dataset.StepInputs`: the opener's lazy
    arrays, put on the canonical grid, its files kept open) adds on top; label_step; and one
    uint8 step written and compressed as the label writer does (one HDF5 chunk a step)."""
    import dask.array
    import netCDF4
    import xarray as xr

    from climnb.io.files import open_fields
    from climnb.io.netcdf import normalize
    from climnb.labels import label_step
    from climnb.labels.dataset import StepInputs, label_dataset, plan_labels

    files = paths[: -(-(n_steps + 1) // STEPS_PER_DAY)]
    ds = open_fields([str(p) for p in files], canonical=False)
    graph = dict(label_dataset(ds)[0].data.__dask_graph__())
    used = plan_labels(normalize(ds).data_vars).variables  # the order the tasks read them in
    tasks = sorted(
        (int(str(k).rsplit("-", 1)[1]), a)
        for k, t in graph.items()
        if str(k).startswith("label-step")
        for a in getattr(t, "args", ())
        if isinstance(a, StepInputs)
    )
    steps = range(1, min(n_steps + 1, len(tasks)))  # step 0 warms up (imports, caches)
    raw_read(files, names)  # warm page cache
    lat, lon = ds.lat.values.astype(float), ds.lon.values.astype(float)
    clocks = (time.perf_counter, time.process_time)
    spent = {k: np.zeros(2) for k in ("read", "task read", "label", "write")}
    labelled = []
    for t in [0, *steps]:
        path, k = paths[t // STEPS_PER_DAY], t % STEPS_PER_DAY
        c0 = np.array([c() for c in clocks])
        with netCDF4.Dataset(path) as nc:
            nc.set_auto_maskandscale(False)
            for v in names:
                nc[v][k]
        c1 = np.array([c() for c in clocks])
        arrays = tasks[t][1].read()
        c2 = np.array([c() for c in clocks])
        mask, _ = label_step({v: a[0] for v, a in zip(used, arrays, strict=True)}, lat, lon)
        c3 = np.array([c() for c in clocks])
        if t:
            for key, a, b in (("read", c0, c1), ("task read", c1, c2), ("label", c2, c3)):
                spent[key] += b - a
            labelled.append(mask)
    with tempfile.TemporaryDirectory() as tmp:  # a step a task, as the label writer's
        lazy = dask.array.from_array(np.stack(labelled), chunks=(1, *labelled[0].shape))
        out = xr.DataArray(lazy, dims=("time", "lat", "lon"), name="labels")
        encoding = {"dtype": "u1", "zlib": True, "chunksizes": (1, *out.shape[1:])}
        write = out.to_netcdf(Path(tmp) / "x.nc", encoding={"labels": encoding}, compute=False)
        c0 = np.array([c() for c in clocks])  # the writes and the file's close, not its graph
        write.compute(scheduler="sync")
        spent["write"] += np.array([c() for c in clocks]) - c0
    n = len(steps)
    spent["decode"] = np.maximum(spent.pop("task read") - spent["read"], 0.0)
    rows = [(k, spent[k]) for k in ("read", "decode", "label", "write")]
    total = sum(v for _, v in rows)
    print(f"\nwhere one worker's time goes ({n} full-size steps, warm cache, one process):")
    names_ = {
        "read": "read (netCDF4)",
        "decode": "decode (the task's reader on top)",
        "label": "label (label_step)",
        "write": "write (uint8, zlib, a chunk a step)",
    }
    for key, (wall, cpu) in rows:
        print(
            f"  {names_[key]:<36} {wall / n * 1000:7.1f} ms/step  {wall / total[0]:5.1%}  "
            f"(CPU {cpu / n * 1000:.1f} ms)"
        )
    print(
        f"  one worker's ceiling: {n / total[0]:.1f} steps/s; all but the labelling: "
        f"{(total[0] - spent['label'][0]) / spent['label'][0]:.0%} on top of it"
    )


# --- inference ----------------------------------------------------------------------------


def first_steps(paths: list[Path], k: int, folder) -> list[Path]:
    """The month's first ``k`` steps: whole day files, or (under a day) a file of them."""
    if k % STEPS_PER_DAY == 0:
        return paths[: k // STEPS_PER_DAY]
    import xarray as xr

    out = Path(folder) / f"first-{k}.nc"
    if not out.exists():
        with xr.open_dataset(paths[0]) as ds:
            ds.isel(time=slice(0, k)).to_netcdf(out)
    return [out]


def predict_part(
    folder: Path,
    paths: list[Path],
    n_steps: int,
    workers: tuple[int, ...] = (1, 2),
    preset: str = "paper",
    precisions: tuple[str, ...] = ("float32", "mixed_bfloat16"),
    rounds: int = 3,
) -> None:
    from climnb.bundle import save_bundle
    from climnb.io.channels import CHANNEL_NAMES
    from climnb.models import build_model
    from climnb.models.flops import count_flops
    from climnb.models.precision import BF16_FLAGS, cpu_bf16_flags

    if n_steps > STEPS_PER_DAY and n_steps % STEPS_PER_DAY:
        n_steps = n_steps // STEPS_PER_DAY * STEPS_PER_DAY  # whole days past the first
    half = max(1, n_steps // 2)
    print(
        f"\ninference: `climnb predict --batch-size 1 --workers W` (W = "
        f"{', '.join(map(str, workers))}) of an untrained {preset} Tiramisu over {half} and "
        f"{n_steps} full-size steps to Zarr; the month projected to {MONTH_STEPS} steps"
    )
    if not cpu_bf16_flags() and "mixed_bfloat16" in precisions:
        precisions = [p for p in precisions if p != "mixed_bfloat16"]
        print(
            "  mixed_bfloat16 not timed: this CPU has none of "
            f"{'/'.join(BF16_FLAGS)} (TensorFlow would emulate bfloat16, which times nothing)"
        )
    with tempfile.TemporaryDirectory(prefix="predict-", dir=folder) as tmp:
        parts = {k: first_steps(paths, k, tmp) for k in (half, n_steps)}
        for precision in precisions:
            mp = precision if precision != "float32" else False
            model = build_model("tiramisu", (*SHAPE, 16), preset=preset, mixed_precision=mp)
            flop = count_flops(model).forward
            bundle = save_bundle(
                model,
                Path(tmp) / f"model-{precision}",
                channels=CHANNEL_NAMES,
                minval=np.full(16, -1e6),  # wide: an untrained network, no range refused
                maxval=np.full(16, 1e6),
                name="tiramisu",
                preset=preset,
            )
            del model
            print(f"  {precision}:", flush=True)
            forward_share(bundle, precision, flop, rounds)
            runs = {}
            for w in workers:
                for k, part in parts.items():
                    out = f"{tmp}/p-{w}-{k}.zarr"
                    argv = [sys.executable, "-c", PREDICT_CHILD, str(bundle), out, str(w)]
                    _, _, text = run_watched([*argv, *map(str, part)])
                    runs[w, k] = phases(json.loads(text.strip().splitlines()[-1]), w)
                    shutil.rmtree(out, ignore_errors=True)
                print_runs(runs, w, half, n_steps, precision)


#: a month of 3-hourly steps: what the idle share is projected to
MONTH_STEPS = 240

#: the GEMM reference and the network's forward pass, timed in turn in one process (so both
#: see the same load): a 4096^3 product in each form TensorFlow offers
#: (:func:`bench_models.gemm_rate`), then one forward pass of the network alone (the graph
#: function that predict runs, on a normalised array in memory), ``rounds`` times
REFERENCE_CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from bench_models import gemm_rate
import climnb.inference.predict as P
from climnb.bundle import load_bundle
bundle_path, dtype, rounds, h, w = sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])
bundle = load_bundle(bundle_path)
x = np.random.default_rng(0).random((1, h, w, 16), dtype=np.float32) * 1e4
x, _ = P.pad_fields(x, bundle.stride)
network = P._forward_function(bundle.model(*x.shape[1:3]), *bundle.normalisation())
t = time.perf_counter()
network(x).numpy()  # traces the graph, creates oneDNN's kernels
first = time.perf_counter() - t
gemm, forward, cpu = [], [], []
for _ in range(rounds):
    rates = {}
    gemm_rate(dtype, form="fastest", repeats=1, rates=rates)
    gemm.append(rates)
    t, c = time.perf_counter(), time.process_time()
    network(x).numpy()
    forward.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"first": first, "gemm": gemm, "forward": forward, "cpu": cpu}))
"""


def forward_share(bundle: Path, precision: str, flop: float, rounds: int) -> None:
    """Print the network's forward pass against the fastest GEMM of its precision."""
    dtype = "float32" if precision == "float32" else "bfloat16"
    argv = [sys.executable, "-c", REFERENCE_CHILD, str(Path(__file__).parent), str(bundle)]
    _, _, text = run_watched([*argv, dtype, str(rounds), *map(str, SHAPE)])
    r = json.loads(text.strip().splitlines()[-1])
    forms = {f: max(g[f] for g in r["gemm"]) for f in r["gemm"][0]}
    form = max(forms, key=forms.get)
    best = min(r["forward"])
    rate = flop / best
    # each round's forward against the same round's reference: what a load change between
    # rounds moves least
    shares = sorted(
        flop / t / max(g.values()) for t, g in zip(r["forward"], r["gemm"], strict=True)
    )
    print(
        f"    {dtype} GEMM reference (4096^3, the fastest of {len(forms)} forms, best of "
        f"{rounds} rounds): {form} {forms[form] / 1e9:.0f} GFLOP/s ("
        + ", ".join(f"{f} {v / 1e9:.0f}" for f, v in forms.items())
        + ")\n"
        f"    forward alone {best:.2f} s/step (CPU {np.median(r['cpu']):.1f} s; the first call, "
        f"tracing the graph and creating the kernels, {r['first']:.1f} s) = "
        f"{rate / 1e9:.0f} GFLOP/s = {rate / forms[form]:.0%} of the reference, per round "
        f"{shares[0]:.0%}..{shares[-1]:.0%} (goal >= 70 %; load {os.getloadavg()[0]:.1f})",
        flush=True,
    )


#: ``climnb predict`` itself, its phases timed inside the command's process: every dask task
#: (reads, the predict task of each batch, writes) by a callback, and each call of the
#: network by a wrapper around the graph function predict runs; times from the process's
#: start (its creation time, so the interpreter's and the imports' time count); the peak is
#: the process's VmHWM (exact; workers are its threads)
PREDICT_CHILD = r"""
import contextlib, json, resource, sys, threading, time
import psutil
from dask.callbacks import Callback
born = psutil.Process().create_time()
bundle_path, out, workers, *files = sys.argv[1:]
tasks, calls, batches, waits, lock = [], [], [], [], threading.Lock()

class Tasks(Callback):
    def __init__(self):
        super().__init__()
        self.started = {}
    def _pretask(self, key, dsk, state):
        self.started[key] = time.time()
    def _posttask(self, key, result, dsk, state, worker_id):
        name = key[0] if isinstance(key, tuple) else key
        tasks.append((str(name), self.started.pop(key), time.time()))

def timed(record, f):  # f's calls as (thread, start, end)
    def call(*args, **kwargs):
        t = time.time()
        try:
            return f(*args, **kwargs)
        finally:
            with lock:
                record.append((threading.get_ident(), t, time.time()))
    return call

class Slots:  # network_slots' semaphore, its waits timed
    def __init__(self, n):
        self.semaphore = threading.BoundedSemaphore(n)
    def __enter__(self):
        timed(waits, self.semaphore.acquire)()
    def __exit__(self, *exc):
        self.semaphore.release()

Tasks().register()
import climnb.inference.predict as P
from climnb.cli import main
real_forward = P._forward_function
P._forward_function = lambda *args: timed(calls, real_forward(*args))
P.predict_batch = timed(batches, P.predict_batch)
if hasattr(P, "network_slots"):
    real_slots = P.network_slots
    @contextlib.contextmanager
    def timed_slots(n):
        with real_slots(n):
            P._SLOTS = Slots(n)
            yield
    P.network_slots = timed_slots
status = main(["predict", "--model", bundle_path, "--out", out, "--batch-size", "1",
               "--workers", workers, "--no-progress", *files])
if status:
    sys.exit(status)
end = time.time()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"born": born, "end": end, "tasks": tasks, "calls": calls, "peak": peak,
                  "batches": batches, "waits": waits}))
"""


def _union(spans, lo: float = -np.inf, hi: float = np.inf) -> float:
    """Seconds of [lo, hi] covered by at least one of ``spans``."""
    busy, reached = 0.0, lo
    for a, b in sorted(spans):
        a, b = max(a, reached), min(b, hi)
        if b > a:
            busy += b - a
            reached = b
    return busy


def phases(r: dict, workers: int) -> dict:
    """Start-up, steady state and idle shares of one command's timeline (seconds from the
    process's creation). The steady state runs from the end of the ``workers``-th network call
    (the first calls trace the graph and create the kernels) to the end of the last."""
    born = r["born"]
    calls = sorted((a - born, b - born) for _, a, b in r["calls"])
    tasks = [(n, a - born, b - born) for n, a, b in r["tasks"]]
    total, n = r["end"] - born, len(calls)
    last = max(b for _, b in calls)
    settled = sorted(b for _, b in calls)[min(workers, n) - 1]
    steady = n - min(workers, n)
    window = last - settled
    idle_steady = window - _union(calls, settled, last)

    def spent(kind) -> float:
        return sum(b - a for name, a, b in tasks if kind(name) and a < last)

    def inside(records, thread, a, b) -> float:
        return sum(d - c for t, c, d in records if t == thread and a <= c and d <= b)

    # a batch's own work around the network: the range check and the padding before it, the
    # classes after it (not the wait for the network: the batch is ready then); the median
    # of the batches begun after the first network call (those before it wait for the load)
    later = [e for e in r["batches"] if e[1] - born >= calls[0][1]]
    around = [
        b - a - inside(r["calls"], t, a, b) - inside(r["waits"], t, a, b) for t, a, b in later
    ]
    networks = [b - a for a, b in calls[min(workers, n) :]]
    out = {
        "steps": n,
        "seconds": total,
        "first": calls[0][0],  # start-up: to the first network call
        "first_call": calls[0][1] - calls[0][0],
        "idle": 1 - _union(calls) / total,
        "steady_steps": steady,
        # None: a phase the run never reached (too few steps for it)
        "per_step": window / steady if steady else None,
        "idle_steady": idle_steady / window if steady else None,
        "network": float(np.median(networks)) if networks else None,
        "around": float(np.median(around)) if around else None,
        "read": spent(lambda s: not s.startswith(("predict-", "store", "_finalize"))) / n,
        "write": spent(lambda s: s.startswith(("store", "_finalize"))) / n,
        "peak": r["peak"],
    }
    if steady:  # a month: the start-up and the first calls once, then the steady rate
        before = settled - _union(calls, 0, settled)
        rest = MONTH_STEPS - min(workers, n)
        month = settled + rest * out["per_step"] + (total - last)
        out["month"] = (before + rest * idle_steady / steady + total - last) / month
        out["month_seconds"] = month
    return out


def print_runs(runs: dict, w: int, half: int, n: int, precision: str) -> None:
    """One line per --workers: the phases of the longer run, the peaks of both."""
    r = runs[w, n]
    per_worker = max(runs[w, half]["peak"], r["peak"]) / w / 1e9
    flat = (
        f"{n} steps / {half}: {r['peak'] / runs[w, half]['peak']:.2f} (flat: <= 1.05)"
        if half < n
        else "its growth with the steps not measured (one length: more --predict-steps)"
    )
    goal = MEMORY_GOALS[precision]
    steady = (
        f"steady (steps {w + 1}..{n}): {r['per_step']:.2f} s a step, the network idle "
        f"{r['idle_steady']:.1%} of it (goal <= 5 %)"
        if r["steady_steps"]
        else "no steady steps (more --predict-steps)"
    )
    month = (
        f"; projected to a month ({MONTH_STEPS} steps: this start-up, then the steady rate): "
        f"idle {r['month']:.1%} of {r['month_seconds'] / 3600:.1f} h (goal <= 5 %)"
        if "month" in r
        else ""
    )
    network = (
        f"a step's network {r['network']:.2f} s (median after the first calls)"
        if r["network"] is not None
        else f"a step's network: no call after the first {w} (more --predict-steps)"
    )
    around = (
        f"its batch's own work around it {r['around']:.2f} s (median)"
        if r["around"] is not None
        else "its batch's own work around it: no batch began after the first call"
    )
    print(
        f"    --workers {w}: {r['steps'] / r['seconds']:.3f} steps/s ({r['seconds']:.0f} s for "
        f"{r['steps']} steps); start-up {r['first']:.1f} s to the first network call, which "
        f"took {r['first_call']:.1f} s; {network}, {around}, read "
        f"{r['read']:.2f} s, write "
        f"{r['write']:.3f} s (a worker's seconds); {steady}; the network idle "
        f"{r['idle']:.1%} of the whole command (start-up included){month}; peak "
        f"{per_worker:.2f} GB a worker (goal <= {goal} GB), {flat} "
        f"(load {os.getloadavg()[0]:.1f})",
        flush=True,
    )


#: the parts of the benchmark (``--only``)
PARTS = ("write", "raw", "label", "breakdown", "predict")


def _listed(kind, choices=None, least: int | None = None):
    """An argparse ``type``: comma-separated values of ``kind``, each in ``choices`` or at
    least ``least``."""

    def parse(text: str) -> tuple:
        values = tuple(kind(v) for v in text.split(",") if v.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"give at least one value, got {text!r}")
        for v in values:
            if choices is not None and v not in choices:
                raise argparse.ArgumentTypeError(f"values are {','.join(choices)}; got {v!r}")
            if least is not None and v < least:
                raise argparse.ArgumentTypeError(f"each must be at least {least}, got {v}")
        return values

    parse.__name__ = kind.__name__
    return parse


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/climnb-month"))
    parser.add_argument("--days", type=at_least(1), default=30)
    parser.add_argument(
        "--only", type=_listed(str, PARTS), default=("write", "raw", "label", "breakdown")
    )
    parser.add_argument("--breakdown-steps", type=at_least(1), default=16)
    parser.add_argument(
        "--label-workers",
        type=_listed(int, least=1),
        default=(1, 2),
        help="the --workers of the label runs",
    )
    parser.add_argument(
        "--label-formats",
        type=_listed(str, ("nc", "zarr")),
        default=("nc", "zarr"),
        help="the label runs' outputs",
    )
    parser.add_argument(
        "--label-storm-tracks",
        type=_listed(str, ("auto", "on", "off")),
        default=("auto",),
        help="the label runs' --storm-tracks, comma-separated (on: the storm tracker's pass "
        "over the month first; auto leaves it off on this warm-core input)",
    )
    parser.add_argument("--predict-steps", type=at_least(1), default=16)
    parser.add_argument(
        "--predict-workers",
        type=_listed(int, least=1),
        default=(1, 2),
        help="the --workers of the predict runs",
    )
    parser.add_argument(
        "--predict-rounds",
        type=at_least(1),
        default=3,
        help="GEMM and forward pass timings, in turn",
    )
    parser.add_argument(
        "--predict-precisions",
        type=_listed(str, ("float32", "mixed_bfloat16")),
        default=("float32", "mixed_bfloat16"),
    )
    parser.add_argument(
        "--predict-preset", default="paper", help="the Tiramisu preset (toy: a quick check)"
    )
    args = parser.parse_args(argv)
    steps = args.days * STEPS_PER_DAY
    if "predict" in args.only and args.predict_steps > steps:
        parser.error(
            f"argument --predict-steps: must be at most {steps} (--days {args.days} x "
            f"{STEPS_PER_DAY}), got {args.predict_steps}"
        )
    if "breakdown" in args.only and args.breakdown_steps > steps - 1:
        # step 0 warms up: the steps timed come after it
        parser.error(
            f"argument --breakdown-steps: must be at most {steps - 1} (--days {args.days} x "
            f"{STEPS_PER_DAY}, less the warm-up step), got {args.breakdown_steps}"
        )
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    parts = set(args.only)
    print(
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    paths = write_month(args.dir, args.days)
    names = required_variables()
    if "label" in parts or "raw" in parts:
        label_part(
            args.dir,
            paths,
            names,
            args.label_workers,
            args.label_formats,
            args.label_storm_tracks,
        )
    if "breakdown" in parts:
        breakdown(paths, names, args.breakdown_steps)
    if "predict" in parts:
        predict_part(
            args.dir,
            paths,
            args.predict_steps,
            args.predict_workers,
            args.predict_preset,
            args.predict_precisions,
            args.predict_rounds,
        )
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
