"""Time from ``Engines(...)`` to all engines registered: mpiexec, srun inside an allocation, and
engines submitted with sbatch, on a real one-node Slurm cluster started for the run.

Measured in the same run, ``--repeat`` times each (median printed, and the ratio to mpiexec):

* baseline: ``Engines(n, launcher="mpi").start()`` (mpiexec, no Slurm);
* ``"slurm"``: ``salloc -n N python -c 'Engines().start()'`` — the time inside the allocation,
  from ``Engines(...)`` to ready (salloc's own grant is not included);
* ``"sbatch"``: ``Engines(n, launcher="sbatch").start()`` from outside any allocation: the
  controller, sbatch, the job's scheduling and start, srun, and the engines' registration.

Each start also stops the engines (and cancels the job) before the next. Horovod is not
initialised (that is the same under every launcher). Needs root and Debian's slurm-wlm and
munge (the cluster is the tests' ``tests/slurm_cluster.py``).

    .venv/bin/python benchmarks/bench_engines_slurm.py [--engines 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _quiet  # noqa: F401  (before the libraries: their start-up logs and warnings off)
from _args import at_least

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import slurm_cluster  # noqa: E402  (the tests' one-node cluster)

from climnb.runtime.cluster import Engines, mpi_settings  # noqa: E402

INSIDE = """
import json, time
from climnb.runtime.cluster import Engines
t0 = time.perf_counter()
engines = Engines().start()
ready = time.perf_counter() - t0
engines.stop()
print("READY " + json.dumps(ready), flush=True)
"""


def time_mpi(n: int) -> float:
    t0 = time.perf_counter()
    engines = Engines(n=n, launcher="mpi").start()
    ready = time.perf_counter() - t0
    engines.stop()
    return ready


def time_srun(cluster, n: int) -> float:
    env = {k: v for k, v in cluster.env.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = str(cluster.conf)
    # Engines gives each engine its share of the node's cores as threads, and its srun asks
    # for that many CPUs per task: the allocation must hold them, else Slurm refuses the step
    # ("More processors requested than permitted"), as for one engine on a 2-core node
    cpus = max(1, cluster.cpus // n)
    out = subprocess.run(
        ["salloc", "-n", str(n), "--cpus-per-task", str(cpus), sys.executable, "-c", INSIDE],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = [x for x in out.stdout.splitlines() if x.startswith("READY ")]
    if not line:
        raise RuntimeError(out.stdout[-2000:] + out.stderr[-2000:])
    return json.loads(line[0].split(" ", 1)[1])


def time_sbatch(cluster, n: int) -> float:
    t0 = time.perf_counter()
    engines = Engines(n=n, launcher="sbatch", walltime="10").start()
    ready = time.perf_counter() - t0
    engines.stop()
    cluster.wait_idle()
    return ready


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engines", type=at_least(1), default=2, help="at most this machine's CPUs"
    )
    parser.add_argument("--repeat", type=at_least(1), default=3)
    args = parser.parse_args(argv)
    if args.engines > (cpus := os.cpu_count() or 1):
        # the cluster is one node of this machine's CPUs, one per task
        parser.error(f"argument --engines: must be at most {cpus} (this machine's CPUs)")
    os.environ.update(mpi_settings(args.engines), IPP_NONINTERACTIVE="1")
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        del os.environ[key]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            cluster = slurm_cluster.start(Path(tmp) / "slurm")
        except slurm_cluster.SlurmUnavailable as err:
            print(f"no Slurm cluster: {err}")
            return 1
        os.environ["SLURM_CONF"] = str(cluster.conf)
        try:
            times = {"mpiexec": [], "srun": [], "sbatch": []}
            for _ in range(args.repeat):  # interleaved, so that load changes hit all three
                times["mpiexec"].append(time_mpi(args.engines))
                times["srun"].append(time_srun(cluster, args.engines))
                times["sbatch"].append(time_sbatch(cluster, args.engines))
        finally:
            cluster.stop()
    base = statistics.median(times["mpiexec"])
    print(f"{args.engines} engines, {args.repeat} runs each, load {os.getloadavg()[0]:.1f}")
    for name, values in times.items():
        median = statistics.median(values)
        runs = ", ".join(f"{v:.1f}" for v in values)
        print(f"  {name:8s} ready after {median:5.1f} s (runs {runs}); x{median / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
