"""Horovod is built with TensorFlow, MPI and Gloo, and both controllers really run.

Each rank also says whether its Horovod was built with MPI and with Gloo (this was a test of its
own, paying for one more Python process that loads TensorFlow)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.horovod]

# Each rank writes its result to its own file: the launchers' forwarding of the ranks' stdout
# may interleave the two lines (seen once with mpirun: "...sum 3.0rank 0...").
ALLREDUCE = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    total = hvd.allreduce(tf.constant([hvd.rank() + 1.0]), op=hvd.Sum)
    built = f"built with MPI {hvd.mpi_built()}, Gloo {hvd.gloo_built()}"
    line = f"rank {hvd.rank()} of {hvd.size()}: sum {float(total[0])}, {built}"
    Path(sys.argv[1], f"rank{hvd.rank()}.txt").write_text(line)
    """
)


def _ranks_agree(out_dir, stdout: str) -> None:
    lines = sorted(f.read_text() for f in out_dir.glob("rank*.txt"))
    assert lines == [f"rank {r} of 2: sum 3.0, built with MPI True, Gloo True" for r in (0, 1)], (
        stdout
    )


@pytest.mark.mpi
def test_allreduce_over_mpi(tmp_path, mpi_env):
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    out = subprocess.run(
        ["mpirun", "-np", "2", sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        env=mpi_env,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    _ranks_agree(tmp_path, out.stdout)


def test_horovod_built_with_mpi_and_gloo_and_allreduce_over_gloo(tmp_path, mpi_env):
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    horovodrun = shutil.which("horovodrun", path=mpi_env["PATH"])
    out = subprocess.run(
        [
            horovodrun,
            "--gloo",
            "-np",
            "2",
            "-H",
            "localhost:2",
            sys.executable,
            str(script),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=mpi_env,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    _ranks_agree(tmp_path, out.stdout)
