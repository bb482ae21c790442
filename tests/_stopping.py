"""``climnb`` commands that stop at an exact point of their writing, for the kill and
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


_MIDWRITE = """
import os, signal, sys
from pathlib import Path
what, k, seen = sys.argv.pop(1), int(sys.argv.pop(1)), []
def cut_and_kill(path):
    # the file as a kill in the middle of its write leaves it: its first half, then SIGKILL
    size = Path(path).stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    os.kill(os.getpid(), signal.SIGKILL)
if what == "samples":
    import climnb.io.samples as samples
    digest = samples.sha256_file
    def hashing(path):  # each file is hashed as soon as it is written, before it is listed
        if Path(path).parent.name == "train":
            seen.append(path)
            if len(seen) == k:
                cut_and_kill(path)
        return digest(path)
    samples.sha256_file = hashing
else:
    import climnb.labels.writer as writer
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    compute = writer.compute
    def computing(*args, **kwargs):  # the labels' write has run: cut the file it wrote
        result = compute(*args, **kwargs)
        temps = [p for p in out.parent.glob(f".{out.name}.*.tmp")]
        written = temps + ([out] if out.exists() else [])
        cut_and_kill(max(written, key=lambda p: p.stat().st_mtime_ns))
        return result
    writer.compute = computing
from climnb.cli import main
sys.exit(main(sys.argv[1:]))
"""


def killed_midwrite(what: str, k: int, *args: str) -> list[str]:
    """The command line of ``climnb ARGS`` that is killed (SIGKILL) in the middle of writing a
    file, the file left as such a kill leaves it (its first half): for ``what="samples"`` the
    ``k``-th file of the training split, for ``what="labels"`` the labels' file."""
    if what not in ("samples", "labels"):
        raise ValueError(f"what must be 'samples' or 'labels', got {what!r}")
    return [sys.executable, "-c", _MIDWRITE, what, str(k), *args]
