"""``climnb`` commands that stop at an exact point of their sample writing, for the kill and
Ctrl-C tests: watching the output from outside and signalling raced once the writer got fast
enough to finish between two looks."""

from __future__ import annotations

import sys

_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
from climnb.cli import main
from climnb.io.manifest import Manifest
how, k, append, written = sys.argv.pop(1), int(sys.argv.pop(1)), Manifest.append, []
def stopping_append(folder, name, entry):
    append(folder, name, entry)
    if os.path.basename(folder) == "train":
        written.append(name)
        if len(written) == k and how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if len(written) == k:
            Path("written").touch()
            time.sleep(120)
Manifest.append = staticmethod(stopping_append)
sys.exit(main(sys.argv[1:]))
"""


def stopping_after(k: int, how: str, *args: str) -> list[str]:
    """The command line of ``climnb ARGS`` that, right after the ``k``-th file of the training
    split is journalled, kills itself with SIGKILL (``how="kill"``), or touches ``written`` in
    its working folder and sleeps there, waiting for a signal (``how="wait"``)."""
    if how not in ("kill", "wait"):
        raise ValueError(f"how must be 'kill' or 'wait', got {how!r}")
    return [sys.executable, "-c", _SCRIPT, how, str(k), *args]
