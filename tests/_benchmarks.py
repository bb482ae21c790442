"""Loading a benchmark script (``benchmarks/NAME.py``) as a module, as it runs as a script:
with ``benchmarks/`` on the path, so that its ``_quiet`` and sibling imports resolve."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str):
    """The module of ``benchmarks/<name>.py``, executed once per call."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
