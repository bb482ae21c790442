"""Horovod is built with TensorFlow, MPI and Gloo, and both controllers really run."""

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
    line = f"rank {hvd.rank()} of {hvd.size()}: sum {float(total[0])}"
    Path(sys.argv[1], f"rank{hvd.rank()}.txt").write_text(line)
    """
)


def test_horovod_built_with_mpi_and_gloo(mpi_env):
    code = "import horovod.tensorflow as h; print(h.mpi_built(), h.gloo_built())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=mpi_env, check=True
    )
    assert out.stdout.split() == ["True", "True"]


def _ranks_agree(out_dir, stdout: str) -> None:
    lines = sorted(f.read_text() for f in out_dir.glob("rank*.txt"))
    assert lines == ["rank 0 of 2: sum 3.0", "rank 1 of 2: sum 3.0"], stdout


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


def test_allreduce_over_gloo(tmp_path, mpi_env):
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
