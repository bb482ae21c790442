"""GRIB files through cfgrib (ecCodes from the PyPI wheels), as one Dataset.

A GRIB file often mixes kinds of level (mean sea level, surface, isobaric, 2 m above ground):
cfgrib opens each kind as a Dataset of its own (:func:`cfgrib.open_datasets`). They are
joined into one here: variables whose names clash keep the first one; scalar coordinates that
differ between the parts (``step``, ``surface``, ``heightAboveGround``) are dropped; a part
whose dimensions clash with those already joined (another set of isobaric levels, say) is
left out and the log says which variables it held. No index file is written beside the GRIB
file (its folder may be read-only).

The names are cfgrib's: ``latitude``/``longitude``, ``time`` (the reference time, which for
analyses is the valid time), ``isobaricInhPa``, and the variables' GRIB short names (``msl``,
``prmsl``, ``u``, ``vo``, ``pwat``), which :mod:`climnb.io.variables` recognises.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import warnings

import xarray as xr

__all__ = ["is_grib", "open_grib", "check_messages"]

log = logging.getLogger(__name__)

_PRESSURE = ("isobaricInhPa", "isobaricInPa")
_SUFFIXES = (".grib", ".grib1", ".grib2", ".grb", ".grb1", ".grb2", ".gb2")


def is_grib(path: str | os.PathLike) -> bool:
    """A GRIB file: by its suffix, or by the ``GRIB`` its first message starts with."""
    p = str(path)
    if p.lower().endswith(_SUFFIXES):
        return True
    if not os.path.isfile(p):
        return False
    with open(p, "rb") as f:
        return f.read(4) == b"GRIB"


def open_grib(path: str | os.PathLike, chunks=None) -> xr.Dataset:
    """The messages of the GRIB file ``path`` as one lazy Dataset (see the module doc).

    Raises
    ------
    ImportError
        If cfgrib or ecCodes is missing, saying what to install.
    """
    try:
        import cfgrib
    except (ImportError, RuntimeError) as err:  # RuntimeError: ecCodes library not found
        raise ImportError(
            f"reading GRIB needs cfgrib and ecCodes: pip install cfgrib eccodes ({err})"
        ) from None
    check_messages(path)  # a truncated or damaged file: one line, before ecCodes' tracebacks
    # cfgrib opens the file once per kind of level: with an index (kept in a temporary
    # folder, not beside the file) the messages are scanned once, not each time (10x faster)
    with (
        warnings.catch_warnings(),
        tempfile.TemporaryDirectory(prefix="climnb-grib-") as tmp,
        _quiet("cfgrib"),
    ):
        warnings.simplefilter("ignore", FutureWarning)  # cfgrib's merges, xarray's defaults
        index = os.path.join(tmp, "{short_hash}.idx")
        parts = cfgrib.open_datasets(str(path), backend_kwargs={"indexpath": index})
    if not parts:
        raise ValueError("holds no GRIB messages cfgrib can read")
    # variables on levels first: a name on levels (t on isobaric levels) wins over the same
    # name at one level (t at the surface), which is kept as name_typeOfLevel (t_surface)
    parts = sorted(parts, key=lambda p: -max((v.ndim for v in p.data_vars.values()), default=0))
    joined = _drop_scalars(parts[0])
    for part in parts[1:]:
        part = _drop_scalars(part).rename(
            {v: _level_name(part[v]) for v in part.data_vars if v in joined.data_vars}
        )
        part = part.drop_vars([v for v in part.data_vars if v in joined.data_vars])
        if not part.data_vars:
            continue
        clash = [d for d in part.dims if d in joined.dims and not _same_axis(part, joined, d)]
        if clash:
            log.info(
                "%s: left out %s (their %s differ from the other variables')",
                path,
                ", ".join(map(str, part.data_vars)),
                ", ".join(map(str, clash)),
            )
            continue
        joined = xr.merge([joined, part], compat="override", join="exact")
    # coordinates in memory (small): cfgrib's lazy 0-d arrays cannot be chunked by dask
    joined = joined.assign_coords({k: c.load() for k, c in joined.coords.items()})
    return joined.chunk(chunks) if chunks else joined


def _level_name(var: xr.DataArray) -> str:
    return f"{var.name}_{var.attrs.get('GRIB_typeOfLevel', 'level')}"


def _drop_scalars(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` without the scalar coordinates that tell GRIB parts apart (``time`` and
    ``valid_time`` stay); a single pressure level becomes a dimension of length 1 (as the
    data store's NetCDF has it), so that the level stays known."""
    for level in _PRESSURE:
        if level in ds.coords and ds[level].ndim == 0:
            ds = ds.expand_dims(level)
    keep = {"time", "valid_time", "number"}
    return ds.drop_vars([k for k, c in ds.coords.items() if c.ndim == 0 and k not in keep])


def _same_axis(a: xr.Dataset, b: xr.Dataset, dim) -> bool:
    if a.sizes[dim] != b.sizes[dim]:
        return False
    return dim not in a.coords or dim not in b.coords or bool(a[dim].equals(b[dim]))


@contextlib.contextmanager
def _quiet(name: str):
    """cfgrib's own log records (a skipped message, a traceback) kept off the terminal."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def check_messages(path: str | os.PathLike) -> int:
    """Walk the GRIB messages of ``path`` by their headers (section 0 gives each one's
    length; each ends in ``7777``) without reading their data; the number of messages.

    Raises
    ------
    ValueError
        Naming the message (the opener adds the file): one that runs past the end of the
        file (a truncated copy: ecCodes would drop it without a word) or does not end in
        ``7777``.
    """
    size = os.path.getsize(path)
    count, pos = 0, 0
    with open(path, "rb") as f:
        while pos < size:
            f.seek(pos)
            head = f.read(16)
            if head[:4] != b"GRIB":
                found = _next_message(f, pos)
                if found is None:
                    break  # bytes after the last message (padding): not a message
                pos = found
                continue
            edition = head[7]
            if edition == 1:
                length = int.from_bytes(head[4:7], "big")
                if length & 0x800000:  # GRIB 1's large-message encoding: trust ecCodes
                    return count + 1
            elif edition == 2:
                length = int.from_bytes(head[8:16], "big")
            else:
                raise ValueError(
                    f"message {count + 1} at byte {pos} claims GRIB edition {edition}: damaged, "
                    "or not a GRIB file"
                )
            count += 1
            end = pos + length
            if end > size:
                raise ValueError(
                    f"truncated: GRIB message {count} at byte {pos} is {length} bytes "
                    f"long, but the file ends {size - pos} bytes after its start; copy the "
                    "file again"
                )
            f.seek(end - 4)
            if f.read(4) != b"7777":
                raise ValueError(
                    f"GRIB message {count} at byte {pos} does not end in 7777 where its "
                    "length says: the file is damaged; copy it again"
                )
            pos = end
    return count


def _next_message(f, pos: int, chunk: int = 2**20) -> int | None:
    """The byte of the next ``GRIB`` after ``pos`` in the open file ``f``, if any."""
    f.seek(pos + 1)
    offset = pos + 1
    while block := f.read(chunk + 3):
        i = block.find(b"GRIB")
        if i >= 0:
            return offset + i
        offset += chunk
        f.seek(offset)
    return None
