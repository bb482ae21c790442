"""A killed ``climnb samples`` resumed by the same command, against an uninterrupted run.

Writes ``--n-time`` synthetic steps on a ``--shape`` grid to a NetCDF file, then, each as its
own ``python -m climnb samples`` process (so every figure includes the same interpreter start
and imports, printed on its own as ``startup``):

* ``clean``: an uninterrupted run into a fresh folder (the baseline);
* ``killed``: the same command, killed with SIGKILL once ``--kill-at`` of the training files are
  journalled in the folder beside ``--out``;
* ``resume``: the same command again: it hashes the files kept, writes the rest, recomputes
  ``stats.h5`` and swaps.

Prints the times, the files kept, the ratio resume / clean and checks that the resumed set is
byte-identical (SHA-256 of every file) to the clean one.

Run: ``.venv/bin/python benchmarks/bench_resume.py --n-time 80 --shape 96x144``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
from _args import fewest_split_steps, fraction, synthetic_grid


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n-time", type=int, default=80)
    p.add_argument(
        "--shape", type=synthetic_grid, default=(96, 144), help="LATxLON (full size: 768x1152)"
    )
    p.add_argument("--kill-at", type=fraction, default=0.5, help="fraction of training files")
    p.add_argument("--dir", type=Path, default=None, help="working folder (default: a temp one)")
    args = p.parse_args(argv)
    # 2 train steps at least: one kept by the killed run, one left to resume
    if args.n_time < (least := fewest_split_steps(train=2)):
        p.error(
            f"argument --n-time: must be at least {least} (climnb samples' split into 2 train "
            f"steps or more, validation and test, 24 h apart), got {args.n_time}"
        )
    return args


def main(argv=None) -> int:
    args = parse_args(argv)

    from climnb.data.synthetic import make_dataset, save_dataset

    n_lat, n_lon = args.shape
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench_resume."))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "fields.nc"
    ds, events = make_dataset(n_time=args.n_time, n_lat=n_lat, n_lon=n_lon, seed=0)
    save_dataset(ds, events, src)

    def cmd(out: Path) -> list[str]:
        return [sys.executable, "-m", "climnb", "samples", "--input", str(src), "--out", str(out)]

    startup = timed([sys.executable, "-m", "climnb", "samples", "--help"])
    clean = timed([*cmd(work / "clean"), "--no-progress"])
    n_train = len(list((work / "clean" / "train").glob("data-*.h5")))
    target = max(1, round(args.kill_at * n_train))

    out = work / "out"
    start = time.perf_counter()
    proc = subprocess.Popen([*cmd(out), "--no-progress"], stdout=subprocess.DEVNULL)
    journal: list[str] = []
    while len(journal) < target and proc.poll() is None:
        journal = [
            line
            for f in work.glob(".out.*.partial/train/.manifest.jsonl")
            for line in f.read_text().splitlines()
        ]
        time.sleep(0.01)
    ended = proc.poll() is not None  # it finished before the kill: nothing to resume
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = time.perf_counter() - start
    kept = len({json.loads(line)["file"] for line in journal})

    print(f"{args.n_time} steps of {n_lat} x {n_lon}, {n_train} training files, in {work}")
    rows = [
        ("startup (climnb samples --help)", f"{startup:7.2f} s"),
        ("clean run", f"{clean:7.2f} s"),
    ]
    if ended:
        rows.append(
            (
                "killed run",
                f"{killed:7.2f} s: it ended before {target} train files were journalled, "
                "nothing to resume (more --n-time, or a smaller --kill-at)",
            )
        )
        same = None
    else:
        resume = timed([*cmd(out), "--no-progress"])
        same = digests(out) == digests(work / "clean")
        rows += [
            (f"killed run (SIGKILL after {kept} train files)", f"{killed:7.2f} s"),
            ("resumed run (same command)", f"{resume:7.2f} s"),
            ("resume / clean", f"{resume / clean:7.2f}"),
            (
                "resume / clean, startup subtracted",
                f"{(resume - startup) / (clean - startup):7.2f}",
            ),
            ("resumed set byte-identical to clean", f"{same!s:>7}"),
        ]
    for name, value in rows:
        print(f"{name:45s} {value}")
    return 1 if same is False else 0


if __name__ == "__main__":
    raise SystemExit(main())
