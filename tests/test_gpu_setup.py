"""tools/gpu_setup.sh in dry-run mode on canned nvidia-smi output (no GPU here), and the peak
arithmetic of benchmarks/bench_models.py on canned lscpu output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gpu_setup.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def dry_run(tmp_path, smi: str, *args: str) -> subprocess.CompletedProcess:
    smi_file = tmp_path / "smi.txt"
    smi_file.write_text(smi)
    venv = tmp_path / "venv"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VENV": str(venv), "OUT": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", "--nvidia-smi-output", str(smi_file), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert not venv.exists(), "a dry run must not create anything"
    return proc


H100 = "NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15, 9.0\n"


def test_h100_plan(tmp_path):
    proc = dry_run(tmp_path, H100)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert (
        "GPU 0: NVIDIA H100 80GB HBM3, 81559 MiB, driver 550.54.15, compute capability 9.0" in out
    )
    assert "pip install -q -e .[gpu,dev]" in out  # tensorflow[and-cuda], never tensorflow-cpu
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in out
    assert "HOROVOD_BUILD_CUDA_CC_LIST=90 " in out
    assert "HOROVOD_NCCL_LIB=" in out and "libnccl.so.2" in out
    assert "bench_models.py --full --precision all" in out


def test_mixed_gpus_build_for_each_capability_once(tmp_path):
    smi = H100 + "NVIDIA A100-SXM4-40GB, 40960 MiB, 550.54.15, 8.0\n" + H100
    proc = dry_run(tmp_path, smi, "--skip-bench")
    assert proc.returncode == 0, proc.stderr
    assert "3 GPU(s)" in proc.stdout
    assert "HOROVOD_BUILD_CUDA_CC_LIST=90,80 " in proc.stdout
    assert "bench_models.py" not in proc.stdout


@pytest.mark.parametrize(
    "smi, message",
    [
        ("Tesla V100-SXM2-16GB, 16160 MiB, 470.82.01, 7.0\n", "too old for CUDA 12"),
        ("Tesla V100-SXM2-16GB, 16160 MiB, 535.1.1, [N/A]\n", "cannot read the compute capability"),
        ("\n", "lists no GPU"),
    ],
    ids=["old-driver", "no-compute-cap", "no-gpu"],
)
def test_refuses_what_cannot_work(tmp_path, smi, message):
    proc = dry_run(tmp_path, smi)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_benchmark_only(tmp_path):
    proc = dry_run(tmp_path, H100, "--skip-setup")
    assert proc.returncode == 0, proc.stderr
    assert "pip" not in proc.stdout and "bench_models.py --full" in proc.stdout


@pytest.fixture(scope="module")
def bench_models():
    return load_benchmark("bench_models")


def test_theoretical_peak_from_lscpu(bench_models):
    info = {
        "Model name": "Intel(R) Xeon(R) Processor",
        "Core(s) per socket": "2",
        "Socket(s)": "1",
        "BogoMIPS": "5199.99",
        "Flags": "fma avx2 avx512f avx512_bf16 amx_bf16",
    }
    peak = bench_models.theoretical_peak(info)
    assert peak["fp32"] == pytest.approx(2 * 2.6 * 64e9, rel=1e-5)
    assert peak["bf16"] == pytest.approx(2 * 2.6 * 1024e9, rel=1e-5)
    info |= {"CPU max MHz": "3000.0", "Flags": "fma avx2"}
    peak = bench_models.theoretical_peak(info)
    assert peak["fp32"] == pytest.approx(2 * 3.0 * 32e9) and peak["bf16"] == 0


def test_precision_choice(bench_models):
    choose = bench_models.choose_precisions
    assert choose("auto", gpus=0, cpu_bf16=True) == ["float32", "mixed_bfloat16"]
    assert choose("auto", gpus=0, cpu_bf16=False) == ["float32"]
    assert choose("auto", gpus=2, cpu_bf16=False)[1] == "mixed_float16"
