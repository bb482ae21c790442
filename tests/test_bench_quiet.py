"""The benchmarks print their figures and climnb's own warnings: no library start-up logs, no
foreign warnings, nothing of the environment (benchmarks/_quiet.py)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
#: Its children are the test suite itself, which must see the caller's environment as it is;
#: it loads no library in its own process.
NOT_QUIETED = {"bench_mutation.py"}

#: Lines that come from the libraries, never from a benchmark or climnb: TensorFlow's and absl's
#: C++ logs, absl's and TensorFlow's Python logs, a Python warning as warnings.showwarning
#: prints it, and the repr of os.environ.
FOREIGN = re.compile(
    r"tensorflow/(core|compiler|tsl)|cpu_feature_guard|oneDNN custom operations|"
    r"^[IWE]\d{4} \d\d:\d\d|absl::|WARNING:absl|WARNING:tensorflow|AutoGraph|"
    r"\.py:\d+: \w*Warning: |environ\(\{",
    re.MULTILINE,
)


def _first_library_import(path: Path) -> str | None:
    """The first module a script imports that is not in the standard library."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in sys.stdlib_module_names:
                return name
    return None


@pytest.mark.parametrize(
    "script",
    sorted(p.name for p in BENCH.glob("bench_*.py") if p.name not in NOT_QUIETED),
)
def test_every_benchmark_starts_quiet(script):
    """Before numpy, TensorFlow or climnb: what a library prints at import is decided here."""
    assert _first_library_import(BENCH / script) == "_quiet", (
        f"{script}: import _quiet before any other library (benchmarks/_quiet.py)"
    )


QUIET_CHILD = r"""
import logging, os, subprocess, sys, warnings
sys.path.insert(0, sys.argv[1])
import _quiet

def warn_from(module, text, category, stacklevel=1):
    exec("import warnings\nwarnings.warn(TEXT, CATEGORY, stacklevel=LEVEL)",
         {"__name__": module, "TEXT": text, "CATEGORY": category, "LEVEL": stacklevel})

warn_from("xarray.core.dataset", "foreign-future", FutureWarning)
warn_from("numpy.lib.fake", "foreign-runtime", RuntimeWarning)
warn_from("distributed.worker", "foreign-user", UserWarning)
warn_from("climnb.labels.fake", "climnb-own", UserWarning)
warn_from("xarraylike", "not-a-named-library", UserWarning)
# a library's warning that points at the climnb line calling it: climnb's to fix, so shown
exec("def call():\n    warn_from('pandas.core.fake', 'pointed-at-climnb', FutureWarning, 3)\n"
     "call()", {"__name__": "climnb.stats.fake", "warn_from": warn_from})
logging.basicConfig(format="%(name)s %(levelname)s %(message)s")
logging.getLogger("absl").warning("absl-chatter")
logging.getLogger("absl").error("absl-error")
logging.getLogger("climnb.io.fake").warning("climnb-log")
level = "import os; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"
child = subprocess.run([sys.executable, "-c", level], capture_output=True, text=True)
print("child", child.stdout.strip())
print("built", _quiet.child_env({"X": "1"}, base={})["TF_CPP_MIN_LOG_LEVEL"])
print("mine", os.environ["TF_CPP_MIN_LOG_LEVEL"])
"""


def _run_quiet_child(env: dict) -> str:
    done = subprocess.run(
        [sys.executable, "-c", QUIET_CHILD, str(BENCH)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_quiet_drops_foreign_warnings_and_keeps_climnb_ones():
    env = {
        k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")
    }
    said = _run_quiet_child(env)
    for dropped in ("foreign-future", "foreign-runtime", "foreign-user", "absl-chatter"):
        assert dropped not in said, said
    for kept in ("climnb-own", "not-a-named-library", "pointed-at-climnb", "absl-error"):
        assert kept in said, f"{kept!r} missing from:\n{said}"
    assert "climnb-log" in said
    # 2, not 3: TensorFlow's errors still show; here and in every process started from here
    assert "child 2" in said and "mine 2" in said and "built 2" in said


def test_quiet_leaves_a_level_the_caller_set():
    said = _run_quiet_child({**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert "child 0" in said and "mine 0" in said


@pytest.mark.slow
def test_a_benchmark_loading_tensorflow_prints_only_its_figures(tmp_path):
    """The cheapest benchmark that loads TensorFlow and Keras (a paper Tiramisu saved and read
    back), in an environment with no quiet variables and a variable that must not be printed."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", "ABSL_MIN_LOG_LEVEL", "PYTHONWARNINGS")
    }
    env.update(CLIMNB_BENCH_SECRET="do-not-print-3141", TMPDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_training.py"), "--checkpoint"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "checkpoint, paper Tiramisu" in done.stdout
    assert "do-not-print-3141" not in said
    assert not FOREIGN.search(said), said
    assert done.stderr.strip() == "", done.stderr
