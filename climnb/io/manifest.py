"""The manifest of a folder of sample files: ``manifest.json`` beside them.

It lists every sample file of the folder with its size and SHA-256 content digest (computed
from the bytes written, when the file is written), its time and pixels per class, and the
folder's channels and grid. Staging and resume compare these digests, never sizes or times; a
reader that verifies hashes the file and compares. A folder of training files also records the
digest of the ``stats.h5`` that summarises them (``stats``), so a changed ``stats.h5`` is seen
too. A sample made from expert labels records where its target came from: ``labeller`` (the
one labeller whose mask it is) or ``labellers`` and ``consensus`` (the labellers combined, and
the rule: ``majority``, ``union`` or ``mean``). Staged folders add their own keys (``node``,
``ranks``, ``source``) under ``extra``.

Examples
--------
>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> m = Manifest(files={"data-a.h5": Entry(bytes=3, sha256="ab" * 32)}, channels=("TMQ",))
>>> _ = m.write(folder)
>>> Manifest.read(folder).files["data-a.h5"].bytes
3
>>> Manifest.read(folder).digest() == m.digest()
True
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from climnb.io.atomic import atomic_path

__all__ = [
    "FORMAT",
    "JOURNAL_NAME",
    "MANIFEST_NAME",
    "Entry",
    "Manifest",
    "ManifestError",
    "sha256_file",
]

log = logging.getLogger(__name__)

MANIFEST_NAME = "manifest.json"
JOURNAL_NAME = ".manifest.jsonl"  # one line per file written since manifest.json
FORMAT = "climnb-manifest/1"
_CHUNK = 1 << 22


class ManifestError(ValueError):
    """A manifest that cannot be read, or a file that does not match it (names the file)."""


@dataclass(frozen=True)
class Entry:
    """One file of a manifest: size, SHA-256 of its bytes, time and class pixel counts; for a
    staged copy, ``source``: the identity of the shared file it copies; for a sample of expert
    labels, ``labeller`` (its one labeller, the ``N`` of ``data-...-1_N.nc``) or ``labellers``
    and ``consensus`` (the labellers combined and the rule)."""

    bytes: int
    sha256: str
    time: str | None = None
    class_counts: tuple[int, ...] | None = None
    source: str | None = None  # staged copies: identity of the shared file copied
    labeller: int | None = None
    labellers: tuple[int, ...] | None = None
    consensus: str | None = None

    def to_json(self) -> dict:
        return {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in asdict(self).items()
            if v is not None or k in ("time", "class_counts")
        }

    @classmethod
    def from_json(cls, d: Mapping) -> Entry:
        counts, labellers = d.get("class_counts"), d.get("labellers")
        return cls(
            int(d["bytes"]),
            str(d["sha256"]),
            d.get("time"),
            tuple(int(c) for c in counts) if counts is not None else None,
            d.get("source"),
            int(d["labeller"]) if d.get("labeller") is not None else None,
            tuple(int(n) for n in labellers) if labellers is not None else None,
            d.get("consensus"),
        )

    def expert_fields(self) -> dict:
        """The expert-label fields that are set (``labeller``, ``labellers``, ``consensus``)."""
        return {
            k: getattr(self, k)
            for k in ("labeller", "labellers", "consensus")
            if getattr(self, k) is not None
        }


@dataclass(frozen=True)
class Manifest:
    """What a folder of sample files holds.

    Attributes
    ----------
    files : file name -> :class:`Entry`.
    channels : channel names of the files, in order (``None``: not recorded).
    grid : (H, W) of the files.
    stats : ``(relative path, Entry)`` of the ``stats.h5`` that summarises these files.
    extra : further keys (a staged folder's node, rank lists and source).
    """

    files: Mapping[str, Entry] = field(default_factory=dict)
    channels: tuple[str, ...] | None = None
    grid: tuple[int, int] | None = None
    stats: tuple[str, Entry] | None = None
    extra: Mapping = field(default_factory=dict)

    def digest(self, names: Iterable[str] | None = None) -> str:
        """SHA-256 over the (name, file digest) pairs of ``names`` (default: all files).

        Names only, not folders: a file has the same digest wherever it is staged.
        """
        names = sorted(self.files if names is None else names)
        h = hashlib.sha256()
        for name in names:
            h.update(f"{Path(name).name} {self.files[name].sha256}\n".encode())
        return h.hexdigest()

    def with_files(self, entries: Mapping[str, Entry], **fields) -> Manifest:
        """A copy with ``entries`` added (replacing same-named ones) and ``fields`` set."""
        return replace(self, files={**self.files, **entries}, **fields)

    def to_json(self) -> dict:
        out = {
            "format": FORMAT,
            "channels": list(self.channels) if self.channels is not None else None,
            "grid": list(self.grid) if self.grid is not None else None,
            "files": {k: self.files[k].to_json() for k in sorted(self.files)},
        }
        if self.stats is not None:
            out["stats"] = {"path": self.stats[0], **self.stats[1].to_json()}
        out.update(self.extra)
        return out

    def write(self, folder: str | os.PathLike) -> Path:
        """Write ``folder/manifest.json`` atomically; the journal, now folded in, goes."""
        path = Path(folder) / MANIFEST_NAME
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(self.to_json(), indent=1))
        (Path(folder) / JOURNAL_NAME).unlink(missing_ok=True)
        return path

    @staticmethod
    def append(folder: str | os.PathLike, name: str, entry: Entry) -> None:
        """Record one file just written (a line in the folder's journal; cheap, and a line
        cut short by a kill is ignored on read)."""
        with open(Path(folder) / JOURNAL_NAME, "a") as f:
            f.write(json.dumps({"file": name, **entry.to_json()}) + "\n")

    @classmethod
    def read(cls, folder: str | os.PathLike) -> Manifest | None:
        """The manifest of ``folder`` with its journal applied, or ``None`` if it has neither."""
        path = Path(folder) / MANIFEST_NAME
        try:
            d = json.loads(path.read_text())
        except FileNotFoundError:
            d = None
        except (OSError, ValueError) as err:
            raise ManifestError(f"{path}: not a readable manifest: {err}") from err
        journal = _journal(Path(folder) / JOURNAL_NAME)
        if d is None:
            return cls(files=journal) if journal else None
        return cls._from_json(d, path).with_files(journal)

    @classmethod
    def _from_json(cls, d: dict, path: Path) -> Manifest:
        try:
            stats = d.get("stats")
            known = {"format", "channels", "grid", "files", "stats"}
            return cls(
                files={k: Entry.from_json(v) for k, v in d["files"].items()},
                channels=tuple(d["channels"]) if d.get("channels") is not None else None,
                grid=tuple(d["grid"]) if d.get("grid") is not None else None,
                stats=(stats["path"], Entry.from_json(stats)) if stats else None,
                extra={k: v for k, v in d.items() if k not in known},
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ManifestError(f"{path}: malformed manifest ({err!r})") from err

    def check(self, path: str | os.PathLike, name: str | None = None) -> None:
        """Hash ``path`` and compare with the entry ``name`` (default: the file's name)."""
        path = Path(path)
        entry = self.files.get(name or path.name)
        if entry is None:
            raise ManifestError(f"{path}: not listed in the manifest")
        got = sha256_file(path)
        if got != entry.sha256:
            raise ManifestError(
                f"{path}: content changed since it was written (SHA-256 {got[:12]}..., "
                f"manifest {entry.sha256[:12]}...): corrupt or modified file"
            )


def _journal(path: Path) -> dict[str, Entry]:
    entries = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return entries
    for line in lines:
        try:
            d = json.loads(line)
            entries[d["file"]] = Entry.from_json(d)
        except (ValueError, KeyError, TypeError):  # a line cut short by an interruption
            continue
    return entries


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()
