"""The output rule: every command's outputs checked before any work starts.

A ground-floor module (the standard library only, no climnb import): the commands,
:mod:`climnb.io.files`, :mod:`climnb.io.sampleset` and :mod:`climnb.data.staging` all take the rule
from here, so that none of them imports upward for it.

The rule (``climnb label``, ``predict``, ``tracks``, ``samples``, ``stage``, ``score``,
``stats``): a missing parent folder is created when the output is written. Refused before any
work, with one line naming the path (exit status 2):

* an output that is an input (the same path, a symbolic or a hard link to it, a member of an
  input glob), lies inside an input (a Zarr store, a sample folder, an expert folder) or, for
  a folder output, holds one; two outputs of one command that are the same path
  (:func:`check_outputs` checks all of a command's outputs against all of its inputs);
* a file output that is an existing directory (a Zarr store is replaced by a ``*.zarr``
  output), a folder output that is an existing file;
* an output whose parent is a file, or that cannot be written (permissions, read-only file
  system);
* a non-empty folder output without ``--overwrite`` (``climnb samples``; ``climnb stage``
  resumes in its folders), and with it a folder holding anything the command does not write.

An existing file output is replaced atomically (:mod:`climnb.io.atomic`): the new one appears
only when complete, so a rerun redoes it and an interrupted run leaves the old one.

Examples
--------
>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> check_output(folder / "labels.nc", [folder / "fields.nc"]).name
'labels.nc'
>>> check_output(folder / "fields.nc", [folder / "fields.nc"])
Traceback (most recent call last):
...
climnb.io.outputs.OutputError: --out ... is an input (...fields.nc); refusing to overwrite it
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

__all__ = ["OutputError", "check_output", "check_outputs", "input_paths"]

PathLike = str | os.PathLike


class OutputError(ValueError):
    """An output path that must not be written (an input, a directory, not writable)."""


def check_output(
    out: PathLike,
    inputs: PathLike | Sequence[PathLike] = (),
    *,
    kind: str = "file",
    option: str = "--out",
    overwrite: bool = False,
    contents: Collection[str] | None = None,
    others: Mapping[str, PathLike] | None = None,
    what: str = "what this command writes",
) -> Path:
    """Refuse ``out`` before any work if writing it could destroy an input or must fail.

    The one rule for every output of climnb's commands; see the module docstring. Raises
    :class:`OutputError`, one line naming the path.

    Parameters
    ----------
    out : the output path.
    inputs : the command's inputs (files, Zarr stores, sample folders).
    kind : ``"file"`` (a NetCDF/CSV file, or a Zarr store for a ``*.zarr`` name) or
        ``"folder"`` (a folder the command fills: a sample set, a staged set).
    option : the command-line option naming ``out``, for the message.
    overwrite : ``"folder"`` only: a non-empty folder may be written into (replaced or
        resumed); without it a non-empty folder is refused.
    contents : ``"folder"`` with ``overwrite``: the names a folder written by the command may
        hold; anything else in it (an input, say) is refused, as replacing it would delete it.
    others : the command's other outputs (option -> path): ``out`` must differ from each.
    what : what a folder output is, for the messages ("a sample set").
    """
    if kind not in ("file", "folder"):
        raise ValueError(f"kind must be 'file' or 'folder', got {kind!r}")
    out = Path(out)
    resolved = _resolve(out, option)
    for other, path in (others or {}).items():
        if resolved == _resolve(Path(path), other):
            raise OutputError(f"{option} {out} is the same file as {other}; give another name")
    _check_kind(out, kind, option)
    _check_writable(out, resolved, option)
    if kind == "folder" and out.is_dir():
        _check_folder(out, option, overwrite, contents, what)
    _check_inputs(out, resolved, inputs, kind, option)
    return out


def check_outputs(
    outputs: Mapping[str, PathLike | None],
    inputs: PathLike | Sequence[PathLike] = (),
    **rule,
) -> dict[str, Path]:
    """Every output of one command (option -> path; ``None``: not asked) checked by
    :func:`check_output` against every input the command reads and against each other; the
    checked paths by option. ``rule``: :func:`check_output`'s keyword arguments (``kind``,
    ``overwrite``, ...), the same for each.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> sorted(check_outputs({"--out": d / "a.nc", "--csv": d / "a.csv", "--events": None}))
    ['--csv', '--out']
    >>> check_outputs({"--out": d / "a.nc", "--csv": d / "a.nc"})
    Traceback (most recent call last):
    ...
    climnb.io.outputs.OutputError: --csv ...a.nc is the same file as --out; give another name
    """
    inputs = input_paths(inputs)
    checked: dict[str, Path] = {}
    for option, path in outputs.items():
        if path is not None:
            checked[option] = check_output(path, inputs, option=option, others=checked, **rule)
    return checked


def input_paths(inputs: PathLike | Sequence[PathLike]) -> list[Path]:
    """``inputs`` as paths, glob patterns expanded (a pattern matching nothing is kept as
    given: whoever reads the inputs names it). Folders stay folders: an output inside one is
    an output inside an input."""
    import glob

    out = []
    for p in [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs:
        text = os.fspath(p)
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else []
        out += [Path(m) for m in matches] or [Path(text)]
    return out


def _resolve(path: Path, option: str) -> Path:
    """``path`` made absolute with symbolic links followed; a loop of links is refused."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # Python < 3.13 raises RuntimeError for a loop
        raise OutputError(
            f"{option} {path}: a loop of symbolic links (it never reaches a folder); fix the "
            "link or give another path"
        ) from None


def _check_kind(out: Path, kind: str, option: str) -> None:
    """A file output must not be a directory (but a ``*.zarr`` store), a folder not a file."""
    zarr = out.suffix == ".zarr"  # a store is a directory that a *.zarr output replaces
    if kind == "file":
        if out.is_dir() and not zarr:
            raise OutputError(
                f"{option} {out} is a directory; give a file name (.nc, or .zarr for Zarr)"
            )
        if out.exists() and not out.is_dir() and zarr:
            raise OutputError(f"{option} {out} exists and is not a Zarr store")
    elif out.exists() and not out.is_dir():
        raise OutputError(f"{option} {out} exists and is not a directory")


def _check_writable(out: Path, resolved: Path, option: str) -> None:
    parent = resolved.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{option} {out}: cannot write in {parent} (not a directory)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {out}: cannot write in {parent} (permission denied)")
    if out.exists() and not os.access(out, os.W_OK | (os.X_OK if out.is_dir() else 0)):
        raise OutputError(f"{option} {out}: exists and is not writable")


def _check_folder(out: Path, option: str, overwrite: bool, contents, what: str) -> None:
    names = sorted(p.name for p in out.iterdir())
    if names and not overwrite:
        raise OutputError(
            f"{option} {out} is not empty; use --overwrite to replace {what}, or choose another "
            "folder"
        )
    foreign = [n for n in names if contents is not None and n not in contents]
    if foreign:
        raise OutputError(
            f"{option} {out} holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, "
            f"not part of {what}; --overwrite replaces only {what}: choose another folder"
        )


def _check_inputs(out: Path, resolved: Path, inputs, kind: str, option: str) -> None:
    """``out`` must not be an input, lie inside one, or (a folder) hold one."""
    for p in input_paths(inputs):
        src = _resolve(p, "input")
        if resolved == src or (out.exists() and p.exists() and os.path.samefile(out, p)):
            raise OutputError(f"{option} {out} is an input ({p}); refusing to overwrite it")
        link = _linked_inside(out, src)
        if link is not None:
            raise OutputError(
                f"{option} {out} is a hard link to {link}, in the input {p}; refusing to "
                "overwrite it"
            )
        if src.is_dir() and src in resolved.parents:
            raise OutputError(f"{option} {out} is inside the input {p}; write it elsewhere")
        if kind == "folder" and resolved in src.parents:
            raise OutputError(f"{option} {out} holds the input {p}; write it elsewhere")


def _linked_inside(out: Path, folder: Path) -> Path | None:
    """The file in the input ``folder`` that ``out`` is a hard link of (``None``: none)."""
    try:
        st = out.stat()
    except OSError:
        return None
    if st.st_nlink < 2 or not folder.is_dir() or out.is_dir():
        return None
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root, name)
            try:
                other = path.stat()
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                return path
    return None
