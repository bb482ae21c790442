"""The run folder (``out_dir``): checked before any work, and claimed for the run.

:func:`check_out_dir` refuses a run folder that cannot hold the run; :func:`claim_out_dir`
marks it as in use, so that a second live run into the same folder is refused at its start.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from climnb.io.atomic import remove_leftovers, temp_path
from climnb.train.config import TrainConfig

__all__ = ["check_out_dir", "claim_out_dir"]


def check_out_dir(config: TrainConfig) -> None:
    """Refuse, before any work, a run folder that is the sample set itself (a folder inside
    it is fine: the sample set reads only its own files), that is a file, or that cannot be
    written (a read-only file system, no permission): a probe file is written and removed in
    the run folder or, when it does not exist yet, in its nearest existing parent."""
    out = Path(config.out_dir)
    if out.resolve() == Path(config.data_dir).resolve():
        raise ValueError(
            f"the run folder {config.out_dir} (--out, out_dir) is the sample set "
            f"{config.data_dir} (--data, data_dir): the checkpoints, history and model would be "
            "written among the samples; give another folder"
        )
    where = out
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise ValueError(
            f"{where}: exists and is not a directory; the run folder {out} (--out, out_dir) "
            "cannot be made there"
        )
    probe = temp_path(where / ".climnb-write-probe")
    try:
        probe.write_bytes(b"\0" * 4096)  # a block of data: an empty file fits on a full disk
        probe.unlink()
    except OSError as err:
        with contextlib.suppress(OSError):
            probe.unlink()
        problem = f"cannot write the run folder (--out, out_dir) there: {err.strerror}"
        raise OSError(err.errno, problem, str(where)) from None


@contextlib.contextmanager
def claim_out_dir(config: TrainConfig, rank: int):
    """Rank 0 marks the run folder as in use for the run (``.OUT.PID-XXXX.tmp`` beside it);
    a second live run into the same folder is refused at its start
    (:class:`climnb.io.atomic.OutputBusy`), and a dead run's mark is removed."""
    if rank != 0:
        yield
        return
    out = Path(config.out_dir).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(out.parent, out.name)  # raises while another live run holds it
    mark = temp_path(out)
    try:
        mark.write_text(str(os.getpid()))
    except OSError as err:  # a full disk: name it, leave no mark
        mark.unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror, str(out)) from None
    try:
        yield
    finally:
        mark.unlink(missing_ok=True)
