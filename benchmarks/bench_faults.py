"""Fault injection: ``kill -9`` at seeded random moments inside ``climnb samples``,
``climnb stage`` (2 MPI ranks) and ``climnb train``, rerun, and compare with a clean run.

For each command:

1. two uninterrupted runs into fresh folders; the SHA-256 of every output of the first is the
   reference, and the files where the two clean runs already differ are reported (those are
   not expected to be bit-identical, and are left out of the comparison);
2. until ``--kills`` kills have landed (a run that ends before its kill is counted as missed
   and another is tried, up to 3 x ``--kills`` tries): start the command into a fresh folder,
   wait until it has begun writing (the first path appears in its folder), sleep a seeded
   random fraction of the clean run's working time, send SIGKILL to the whole process tree
   (mpirun and its ranks), then run the same command again to completion; a rerun refused
   because the folder is not empty is repeated once with ``--overwrite`` (counted). ``train``
   (``--chain``: its runs take minutes on a loaded 2-core machine) is killed again and again in
   one folder, each restart resuming from what the last one left, at moments drawn over a clean
   run's working phase (counted from the process start, after the clean run's start-up time);
   when a restart ends before its kill, that chain is complete (rerun once more to read its
   result) and the next kills start a new chain, until ``--kills`` kills have landed.
   ``--after-checkpoint --chain`` (train in fresh folders, one comparison per kill): each kill
   comes a seeded random time after the run's own first checkpoint appears, drawn over the
   time between the clean run's first and last checkpoints, so it lands mid-training and the
   rerun resumes from a checkpoint and trains on (a kill after the last checkpoint would only
   test the rewriting of the bundle);
3. compare every output's SHA-256 with the reference, and count what was left behind after
   the rerun (``*.tmp`` files and ``*.partial`` folders anywhere in the trial's folder).

What is compared:

* ``samples``: every file under OUT (sample files, stats.h5, manifests): all are functions of
  the input and the seed, so they should be bit-identical.
* ``stage``: every file under each node's folder (the staged copies, per-rank lists,
  manifest), from ``mpirun -np 2 climnb stage`` onto two simulated nodes; the optional timing
  report is not written. All should be bit-identical.
* ``train`` (``--train-ranks`` ranks over MPI if Horovod is installed, else one process;
  ``TF_DETERMINISTIC_OPS=1``, one thread per rank): the final weights checksum that rank 0
  prints, and a digest of the arrays (weights and optimiser variables) of the last checkpoint.
  Files are not compared byte for byte: ``.npz`` and ``.keras`` zips carry the time they were
  written, and ``history.csv`` holds step times. A run resumed from a checkpoint reaches the
  same weights only if the resumed steps see the same batches and the same optimiser state
  and TensorFlow's kernels are deterministic; the two clean runs show whether the last holds.
  Training runs ``--max-steps`` steps over as many epochs as that takes (the quick data give
  one step an epoch: with one epoch a run was a single step and its only checkpoint the
  last, so no restart could resume from one).

    .venv/bin/python benchmarks/bench_faults.py [--kills 10] [--quick] [--seed 0]
        [--only samples stage train] [--chain train] [--keep DIR] [--train-ranks 2]
        [--after-checkpoint]

    # train: 10 kills, each mid-training in a fresh folder, 10 comparisons
    .venv/bin/python benchmarks/bench_faults.py --only train --chain --after-checkpoint

How the figures could be wrong: a kill that lands after the process has ended is counted as
"missed", not as a kill; kill moments are drawn uniformly over the clean run's working time,
so short critical sections (a rename, a manifest write) are hit rarely and ten kills cannot
show they are safe; the load of other users on the machine stretches the runs and moves the
moments; "identical" compares the outputs that exist after the rerun against the reference,
and a missing or extra output counts as differing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
import numpy as np

PYTHON = sys.executable
VENV_BIN = str(Path(sys.executable).parent)


@dataclass
class Tally:
    command: str
    kills: int = 0
    missed: int = 0
    completed: int = 0
    overwrite_needed: int = 0
    identical: int = 0
    differing: int = 0
    leftover_tmp: int = 0
    notes: list[str] = field(default_factory=list)
    unstable: list[str] = field(default_factory=list)
    clean_seconds: float = 0.0
    work_seconds: float = 0.0
    ckpt_seconds: float = 0.0  # train: when the clean run's first checkpoint appeared
    last_ckpt_seconds: float = 0.0  # train: when its last checkpoint (the last step's) appeared
    chain: bool = False
    chains: int = 0


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------


def environment(mpi: bool) -> dict[str, str]:
    from climnb.runtime.cluster import mpi_settings

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_DETERMINISTIC_OPS": "1"}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    if mpi:
        env.update(mpi_settings(2))
    return env


def run(argv, env, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the process, its process group and every descendant (mpirun's ranks)."""
    import psutil

    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    psutil.wait_procs(family, timeout=10)


def _started(watch: Path) -> bool:
    return watch.exists() and any(watch.iterdir())


def start_and_kill(argv, env, watch: Path | None, delay: float, ready=None) -> bool:
    """Start ``argv``; once ``watch`` holds a path (at once if None), or once ``ready()`` is
    true when given, wait ``delay`` s and kill -9 the tree.

    Returns False when the process ended before the kill (a missed kill).
    """
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    if ready is None and watch is not None:

        def ready():
            return watch.exists() and any(watch.iterdir())

    deadline = time.monotonic() + 600
    while ready is not None and proc.poll() is None and not ready():
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    end = time.monotonic() + delay
    while proc.poll() is None and time.monotonic() < end:
        time.sleep(0.005)
    if proc.poll() is not None:
        return False
    kill_tree(proc)
    return True


# ---------------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tree_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` except temporary ones."""
    return {
        str(p.relative_to(folder)): sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".tmp")
    }


def progress(folder: Path) -> str:
    """What a killed run left under its trial folder (the output and what lies beside it:
    samples writes into a hidden folder beside OUT): files, and the newest checkpoint if any."""
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []
    ckpts = sorted(p.name for p in files if p.name.startswith("ckpt-"))
    return f"{len(files)} files" + (f", newest {ckpts[-1]}" if ckpts else "")


def leftovers(folder: Path) -> list[str]:
    """Temporary files and half-written folders (``*.tmp``, ``*.partial``) under ``folder``."""
    found = [*folder.rglob("*.tmp"), *folder.rglob("*.partial")]
    return sorted(str(p.relative_to(folder)) for p in found)


def train_digests(out: Path, stdout: str) -> dict[str, str]:
    """The final weights checksum (rank 0's line) and the last checkpoint's arrays."""
    found = re.findall(r"rank 0 of \d+: .*weights ([0-9a-f]{16})", stdout)
    digests = {"weights checksum (rank 0)": found[-1] if found else "none"}
    ckpts = sorted((out / "checkpoints").glob("ckpt-*.npz"))
    if ckpts:
        h = hashlib.sha256()
        with np.load(ckpts[-1]) as z:
            for k in sorted(n for n in z.files if n != "state"):
                h.update(k.encode() + np.ascontiguousarray(z[k]).tobytes())
        digests[f"checkpoint arrays ({ckpts[-1].name})"] = h.hexdigest()
    else:
        digests["checkpoint arrays"] = "none"
    digests["model bundle present"] = str((out / "model").is_dir())
    return digests


def compare(reference: dict, got: dict, unstable: set) -> list[str]:
    keys = (set(reference) | set(got)) - unstable
    return sorted(k for k in keys if reference.get(k) != got.get(k))


# ---------------------------------------------------------------------------------------------
# The commands
# ---------------------------------------------------------------------------------------------


@dataclass
class Command:
    """How to run one command into a folder and what its outputs are."""

    name: str
    argv: callable  # folder -> argv
    output: callable  # folder -> the folder to watch and to hash
    digests: callable  # (folder, stdout) -> {name: digest}
    mpi: bool = False


def trial(
    cmd: Command,
    tally: Tally,
    env,
    folder: Path,
    delay: float | None,
    ref,
    unstable,
    after_checkpoint: bool = False,
):
    """One run into ``folder``: killed after ``delay`` s of work (None: not killed), rerun.
    With ``after_checkpoint``, the delay counts from the run's first checkpoint on disk."""
    where = ""
    if delay is not None:
        ready = (lambda: _checkpointed(folder)) if after_checkpoint else None
        if not start_and_kill(cmd.argv(folder), env, folder, delay, ready=ready):
            tally.missed += 1
        else:
            tally.kills += 1
        since = "after its first checkpoint" if after_checkpoint else "into the work"
        where = f" (killed {delay:.2f} s {since}; left {progress(folder)})"
        print(f"  {cmd.name} {folder.name}{where}", flush=True)
    done, seconds, work, ckpt, last_ckpt = timed_run(cmd.argv(folder), env, folder)
    if ref is None and not tally.clean_seconds:  # the first clean run times the command
        tally.clean_seconds, tally.work_seconds, tally.ckpt_seconds = seconds, work, ckpt
        tally.last_ckpt_seconds = last_ckpt
    if done.returncode != 0 and "overwrite" in done.stderr.lower():
        tally.overwrite_needed += 1
        done = run([*cmd.argv(folder), "--overwrite"], env)
    if done.returncode != 0:
        tally.notes.append(f"{folder.name}: rerun exit {done.returncode}: {_last(done.stderr)}")
        return None
    tally.completed += 1
    got = cmd.digests(folder, done.stdout)
    if ref is not None:
        diff = compare(ref, got, unstable)
        if diff:
            tally.differing += 1
            tally.notes.append(f"{folder.name}: differ: {', '.join(diff[:4])}{where}")
        else:
            tally.identical += 1
        left = leftovers(folder)
        tally.leftover_tmp += len(left)
        if left:
            tally.notes.append(f"{folder.name}: left behind {left[:3]}")
        if not diff and not left:
            shutil.rmtree(folder, ignore_errors=True)  # the staging trials are large
    return got


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def bench(
    cmd: Command,
    root: Path,
    kills: int,
    rng,
    env,
    chain: bool,
    repeat: bool,
    after_checkpoint: bool = False,
) -> Tally:
    tally = Tally(cmd.name, chain=chain)
    base = root / cmd.name
    base.mkdir(parents=True, exist_ok=True)
    ref = trial(cmd, tally, env, base / "clean-a", None, None, set())
    if ref is None:
        tally.notes.insert(0, "the clean run failed; nothing to compare with")
        return tally
    if repeat:
        again = trial(cmd, tally, env, base / "clean-b", None, None, set())
        tally.unstable = compare(ref, again or {}, set())
    else:
        tally.notes.append("one clean run only (--no-repeat): reproducibility not checked")
    tally.completed = 0
    if not chain:  # each kill in a fresh folder, then a rerun there, until `kills` landed
        # with --after-checkpoint (train), each kill comes at a moment counted from the run's
        # own first checkpoint, over what followed it in the clean run: mid-training, so the
        # rerun resumes from a checkpoint
        # (between the clean run's first and last checkpoints: a kill after the last one
        # would only test the bundle's writing)
        timed = after_checkpoint and tally.ckpt_seconds > 0
        window = tally.work_seconds
        if timed:
            end = tally.last_ckpt_seconds
            end = end if end > tally.ckpt_seconds + 0.5 else tally.clean_seconds
            window = end - tally.ckpt_seconds
        k = 0
        while tally.kills < kills and k < 3 * kills:
            delay = float(rng.uniform(0.0, window))
            folder = base / f"kill-{k:02d}"
            trial(cmd, tally, env, folder, delay, ref, set(tally.unstable), after_checkpoint=timed)
            k += 1
        return tally
    # one folder killed again and again (each restart resumes) until a restart ends before its
    # kill: that chain is complete and compared, and the next kills start a new chain
    chains, folder, left, attempts, pending = 0, base / "chain-00", [], 0, False
    while tally.kills < kills and attempts < 3 * kills:
        attempts += 1
        # from the start of the process, within the clean run's working phase (after startup);
        # with --after-checkpoint, after its first checkpoint, so that every restart resumes
        # from one (under load the start-up takes most of a short run)
        low = tally.clean_seconds - tally.work_seconds
        if after_checkpoint and tally.ckpt_seconds:
            low = tally.ckpt_seconds
        delay = float(rng.uniform(low, tally.clean_seconds))
        if start_and_kill(cmd.argv(folder), env, None, delay):
            tally.kills += 1
            pending = True
            left.append(progress(folder).split(", newest ")[-1])
            print(f"  {cmd.name} {folder.name} kill at {delay:.1f} s: left {left[-1]}", flush=True)
            continue
        tally.missed += 1
        trial(cmd, tally, env, folder, None, ref, set(tally.unstable))
        chains += 1
        folder, pending = base / f"chain-{chains:02d}", False
    if left:
        tally.notes.append("after each kill: " + "; ".join(left))
    if pending:  # the last chain's kills, then the run to the end
        trial(cmd, tally, env, folder, None, ref, set(tally.unstable))
        chains += 1
    tally.chains = chains
    return tally


def _checkpointed(watch: Path) -> bool:
    return any(watch.glob("out/checkpoints/ckpt-*"))


def _newest_checkpoint(watch: Path) -> str:
    return max((p.name for p in watch.glob("out/checkpoints/ckpt-*.npz")), default="")


def timed_run(argv, env, watch: Path):
    """Run to the end; also return the seconds in all and from the first output to the end,
    and (train) the seconds from the start to the first checkpoint and to the moment the last
    one (the newest name) appeared (0: none)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        first = ckpt = last = None
        newest = ""
        while proc.poll() is None:
            if first is None and _started(watch):
                first = time.monotonic()
            if ckpt is None and _checkpointed(watch):
                ckpt = time.monotonic()
            if ckpt is not None and (name := _newest_checkpoint(watch)) > newest:
                newest, last = name, time.monotonic()
            time.sleep(0.01)
        end = time.monotonic()
        out.seek(0), err.seek(0)
        done = subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())
    since = [(t - t0) if t else 0.0 for t in (ckpt, last)]
    return done, end - t0, max(end - (first or t0), 0.05), *since


def commands(data: Path, args, train_ranks: int) -> list[Command]:
    fields = data / "fields.nc"
    samples = data / "samples"

    def samples_argv(folder):
        return [PYTHON, "-m", "climnb", "samples", "--input", str(fields), "--out",
                str(folder / "out"), "--seed", "0"]  # fmt: skip

    def stage_argv(folder):
        return ["mpirun", "-np", "2", PYTHON, "-m", "climnb", "stage",
                "--source", str(data / "stage-source" / "train"),
                "--dest", str(folder / "out" / "node{node}"),
                "--ranks-per-node", "2", "--samples-per-rank", str(args.stage_samples),
                "--seed", "1"]  # fmt: skip

    def train_argv(folder):
        launcher = ["mpirun", "-np", str(train_ranks)] if train_ranks > 1 else []
        return [*launcher, PYTHON, "-m", "climnb", "train", "--data", str(samples),
                "--out", str(folder / "out"), "--config", str(data / "train.json"),
                "--epochs", str(args.train_steps), "--max-steps", str(args.train_steps),
                "--batch-size", "2",
                "--threads", "1",
                "--checkpoint-every", "2", "--seed", "0"]  # fmt: skip

    def out(folder):
        return folder / "out"

    return [
        Command("samples", samples_argv, out, lambda f, _: tree_digests(f / "out")),
        Command("stage", stage_argv, out, lambda f, _: tree_digests(f / "out"), mpi=True),
        Command(
            "train", train_argv, out, lambda f, s: train_digests(f / "out", s), mpi=train_ranks > 1
        ),  # fmt: skip
    ]


def make_data(data: Path, n_time: int, stage_shape: str, env) -> None:
    import json

    data.mkdir(parents=True, exist_ok=True)
    fields, big = data / "fields.nc", data / "stage-fields.nc"
    steps = [
        ["synth", "--out", str(fields), "--n-time", str(n_time), "--seed", "5"],
        ["samples", "--input", str(fields), "--out", str(data / "samples"), "--seed", "0"],
    ]
    if stage_shape:  # staging copies bytes: larger files give its kills a longer window
        steps += [
            ["synth", "--out", str(big), "--n-time", "40", "--shape", stage_shape, "--seed", "6"],
            ["samples", "--input", str(big), "--out", str(data / "stage-source"), "--seed", "0"],
        ]
    for argv in steps:
        done = run([PYTHON, "-m", "climnb", *argv], env)
        if done.returncode:
            sys.exit(f"climnb {argv[0]} failed:\n{done.stderr}")
    small = {"model_overrides": {"growth_rate": 6, "initial_filters": 8}, "threads": 1}
    (data / "train.json").write_text(json.dumps(small))


def _horovod_available() -> bool:
    done = subprocess.run([PYTHON, "-c", "import horovod.tensorflow"], capture_output=True)
    return done.returncode == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="kills per command (default 10)")
    parser.add_argument("--quick", action="store_true", help="3 kills each, smaller data")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--only", nargs="*", default=("samples", "stage", "train"))
    parser.add_argument("--keep", help="work folder (kept); default a temporary one, removed")
    parser.add_argument("--train-ranks", type=int, default=None, help="default 2 with Horovod")
    parser.add_argument(
        "--no-repeat",
        dest="repeat",
        action="store_false",
        help="one clean run instead of two (skips the reproducibility check)",
    )
    parser.add_argument(
        "--chain",
        nargs="*",
        default=("train",),
        help="commands killed again and again in one folder, then run to completion "
        "(default: train, whose runs are long; the others get a fresh folder per kill)",
    )
    parser.add_argument(
        "--after-checkpoint",
        action="store_true",
        help="train: kill only after a checkpoint, so that every restart resumes from one "
        "(default: over the whole working phase). Fresh folders (--chain without train): each "
        "kill is timed from the run's own first checkpoint appearing; chained: from the process "
        "start, after the moment the clean run wrote its first checkpoint",
    )
    args = parser.parse_args(argv)
    kills = 3 if args.quick and args.kills == 10 else args.kills
    n_time = 24 if args.quick else 48  # 16 steps were too few for the block split
    args.stage_samples = 12 if args.quick else 24
    args.stage_shape = "192x288" if args.quick else "384x576"
    args.train_steps = 3 if args.quick else 8
    train_ranks = args.train_ranks or (2 if _horovod_available() else 1)
    if "stage" in args.only and shutil.which("mpirun") is None:
        sys.exit("mpirun not found: stage runs on 2 MPI ranks (install OpenMPI)")

    root = Path(args.keep or tempfile.mkdtemp(prefix="climnb-faults-"))
    rng = np.random.default_rng(args.seed)
    plain, mpi = environment(False), environment(True)
    t0 = time.perf_counter()
    make_data(root / "data", n_time, args.stage_shape if "stage" in args.only else "", plain)
    print(
        f"data: {n_time} toy steps (96 x 144), staging source "
        f"{len(list((root / 'data/stage-source/train').glob('data-*.h5')))} training files of "
        f"{args.stage_shape}, "
        f"made in {time.perf_counter() - t0:.0f} s; "
        f"{kills} kills per command, seed {args.seed}; train on {train_ranks} rank(s); "
        f"work folder {root}",
        flush=True,
    )
    tallies = []
    for cmd in commands(root / "data", args, train_ranks):
        if cmd.name not in args.only:
            continue
        t = time.perf_counter()
        env = mpi if cmd.mpi else plain
        tally = bench(
            cmd, root, kills, rng, env, cmd.name in args.chain, args.repeat, args.after_checkpoint
        )
        tallies.append(tally)
        runs = tally.chains if tally.chain else tally.kills + tally.missed
        mode = (
            f"in a row, {tally.chains} chain(s) each resumed to the end"
            if tally.chain
            else "each in a fresh folder"
        )
        print(
            f"\n{cmd.name} ({mode}): kills {tally.kills} (missed: ended before the kill "
            f"{tally.missed}), reruns completed {tally.completed}/{runs}, "
            f"outputs identical {tally.identical}, differing {tally.differing}, "
            f"leftover temp files {tally.leftover_tmp}, reruns needing --overwrite "
            f"{tally.overwrite_needed}; clean run {tally.clean_seconds:.1f} s "
            f"({tally.work_seconds:.1f} s from its first output"
            + (
                f", first checkpoint at {tally.ckpt_seconds:.1f} s, last at "
                f"{tally.last_ckpt_seconds:.1f} s"
                if tally.ckpt_seconds
                else ""
            )
            + "), all "
            f"{time.perf_counter() - t:.0f} s",
            flush=True,
        )
        if tally.unstable:
            print(f"  differ between two clean runs (not compared): {tally.unstable[:6]}")
        for note in tally.notes[:12]:
            print(f"  {note}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
