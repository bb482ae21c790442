"""Best tracks in: IBTrACS (CSV or NetCDF) and HURDAT2, as one table of storm points.

Every reader returns the same columns (:data:`BEST_TRACK_COLUMNS`), one row per storm and time:
``sid``, ``name``, ``basin``, ``time`` (UTC, naive), ``lat``, ``lon`` (degrees east, 0..360),
``wind_kt`` (maximum sustained wind, knots; NaN where the agency gave none), ``pres_hpa``
and ``nature`` (IBTrACS' storm type: ``TS`` tropical, ``ET`` extratropical, ``MX`` mixed, ``NR``
not reported, ...).

The wind of IBTrACS is taken from ``USA_WIND`` (JTWC's or NHC's 1-minute wind) where it is
given, else ``WMO_WIND`` (the responsible agency's, often a 10-minute wind): most storms of the
latest seasons are provisional, with the WMO columns blank and the USA ones filled. Over the
``34 kt`` threshold of a tropical storm the two differ by about 12 % (Harper et al. 2010,
WMO/TD-1555), which the verification's reference set inherits.

Examples
--------
>>> import io
>>> text = '''SID,NAME,BASIN,ISO_TIME,NATURE,LAT,LON,WMO_WIND,WMO_PRES,USA_WIND,USA_PRES
... ,,,Year,,degrees_north,degrees_east,kts,mb,kts,mb
... 2026005S10097,JENNA,SI,2026-01-05 00:00:00,NR,-9.9,96.5,,,35,998
... 2026005S10097,JENNA,SI,2026-01-05 06:00:00,NR,-10.2,96.0,40,,,'''
>>> tracks = read_best_tracks(io.StringIO(text))
>>> tracks[["name", "lat", "lon", "wind_kt"]].to_string(index=False)
' name   lat  lon  wind_kt\\nJENNA  -9.9 96.5     35.0\\nJENNA -10.2 96.0     40.0'
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["BEST_TRACK_COLUMNS", "read_best_tracks", "read_ibtracs", "read_hurdat2"]

#: The columns of every best-track reader, one row per storm and time.
BEST_TRACK_COLUMNS = ("sid", "name", "basin", "time", "lat", "lon", "wind_kt", "pres_hpa", "nature")

_IBTRACS_NEEDED = ("SID", "ISO_TIME", "LAT", "LON")


def read_best_tracks(source) -> pd.DataFrame:
    """Read a best-track file, whatever its kind: IBTrACS CSV or NetCDF, or HURDAT2 text.

    ``source``: a path, or a text stream of CSV (for tests and examples).
    """
    if not isinstance(source, (str, os.PathLike)):
        return read_ibtracs(source)
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"best-track file {path} does not exist (--best-track)")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith((b"CDF", b"\x89HDF")):
        return read_ibtracs(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        first = f.readline()
    if re.match(r"^[A-Z]{2}\d{6},", first):
        return read_hurdat2(path)
    return read_ibtracs(path)


def read_ibtracs(source) -> pd.DataFrame:
    """IBTrACS v04 as NCEI writes it: the CSV (a second header row of units is skipped) or the
    NetCDF (``storm`` x ``date_time`` arrays)."""
    if isinstance(source, (str, os.PathLike)) and open(source, "rb").read(4) in (
        b"CDF\x01",
        b"CDF\x02",
        b"\x89HDF",
    ):
        return _ibtracs_netcdf(Path(source))
    table = pd.read_csv(source, keep_default_na=False, na_values=["", " "], low_memory=False)
    name = getattr(source, "name", source)
    missing = [c for c in _IBTRACS_NEEDED if c not in table.columns]
    if missing:
        raise ValueError(
            f"{name}: not an IBTrACS CSV: no column {', '.join(missing)} (it has "
            f"{', '.join(map(str, table.columns[:8]))}); give IBTrACS v04 CSV or NetCDF, or "
            "HURDAT2 text (--best-track)"
        )
    if len(table) and not re.match(r"^\d{4}-", str(table.ISO_TIME.iloc[0])):
        table = table.iloc[1:]  # the row of units under the header
    wind = _first_given(table, ("USA_WIND", "WMO_WIND"))
    pres = _first_given(table, ("WMO_PRES", "USA_PRES"))
    out = pd.DataFrame(
        {
            "sid": table.SID.astype(str).str.strip(),
            "name": table.get("NAME", pd.Series("UNNAMED", index=table.index)).astype(str),
            "basin": table.get("BASIN", pd.Series("", index=table.index)).astype(str),
            "time": pd.to_datetime(table.ISO_TIME, format="ISO8601"),
            "lat": pd.to_numeric(table.LAT, errors="coerce"),
            "lon": pd.to_numeric(table.LON, errors="coerce") % 360.0,
            "wind_kt": wind,
            "pres_hpa": pres,
            "nature": table.get("NATURE", pd.Series("", index=table.index)).astype(str),
        }
    )
    return _checked(out, name)


def _first_given(table: pd.DataFrame, columns) -> pd.Series:
    out = pd.Series(np.nan, index=table.index)
    for c in columns:
        if c in table.columns:
            out = out.fillna(pd.to_numeric(table[c], errors="coerce"))
    return out


def _ibtracs_netcdf(path: Path) -> pd.DataFrame:
    import xarray as xr

    with xr.open_dataset(path, decode_times=True) as ds:
        missing = [v for v in ("sid", "time", "lat", "lon") if v not in ds.variables]
        if missing:
            raise ValueError(
                f"{path}: not an IBTrACS NetCDF: no variable {', '.join(missing)} (--best-track)"
            )
        n_storm, n_time = ds.time.shape
        flat = {}
        for ours, theirs in (("lat", "lat"), ("lon", "lon"), ("time", "time")):
            flat[ours] = ds[theirs].values.reshape(-1)
        wind = np.full(n_storm * n_time, np.nan)
        for v in ("usa_wind", "wmo_wind"):
            if v in ds:
                wind = np.where(np.isnan(wind), ds[v].values.reshape(-1).astype(float), wind)
        pres = ds["wmo_pres"].values.reshape(-1).astype(float) if "wmo_pres" in ds else np.nan

        def text(name, default):
            if name not in ds:
                return np.full(n_storm, default, object)
            return np.array([_decode(x) for x in ds[name].values.reshape(n_storm, -1)], object)

        sid, name, basin = text("sid", ""), text("name", "UNNAMED"), text("basin", "")
        nature = (
            np.array([_decode(x) for x in ds["nature"].values.reshape(n_storm * n_time, -1)])
            if "nature" in ds
            else ""
        )
    out = pd.DataFrame(
        {
            "sid": np.repeat(sid, n_time),
            "name": np.repeat(name, n_time),
            "basin": np.repeat(basin, n_time) if basin.ndim == 1 else basin.reshape(-1),
            "time": pd.to_datetime(flat["time"]),
            "lat": flat["lat"].astype(float),
            "lon": flat["lon"].astype(float) % 360.0,
            "wind_kt": wind,
            "pres_hpa": pres,
            "nature": nature,
        }
    )
    return _checked(out.dropna(subset=["time", "lat", "lon"]), path)


def _decode(value) -> str:
    if isinstance(value, np.ndarray):
        value = b"".join(v if isinstance(v, bytes) else bytes(v) for v in value.reshape(-1))
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value).strip("\x00 ").strip()


def read_hurdat2(path: str | os.PathLike) -> pd.DataFrame:
    """HURDAT2 (NHC's Atlantic and eastern Pacific best tracks): a header line per storm
    (``AL092018, FLORENCE, 79,``) followed by its points."""
    rows, sid, name = [], None, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = [p.strip() for p in line.split(",")]
            if re.match(r"^[A-Z]{2}\d{6}$", parts[0]):
                sid, name = parts[0], parts[1]
                continue
            if sid is None or len(parts) < 8:
                raise ValueError(f"{path}:{n}: not a HURDAT2 line: {line.strip()[:60]!r}")
            lat = float(parts[4][:-1]) * (-1 if parts[4].endswith("S") else 1)
            lon = float(parts[5][:-1]) * (-1 if parts[5].endswith("W") else 1)
            rows.append(
                {
                    "sid": sid,
                    "name": name,
                    "basin": sid[:2],
                    "time": pd.Timestamp(f"{parts[0]} {parts[1][:2]}:{parts[1][2:]}"),
                    "lat": lat,
                    "lon": lon % 360.0,
                    "wind_kt": float(parts[6]) if float(parts[6]) >= 0 else np.nan,
                    "pres_hpa": float(parts[7]) if float(parts[7]) > 0 else np.nan,
                    "nature": parts[3],
                }
            )
    return _checked(pd.DataFrame(rows, columns=list(BEST_TRACK_COLUMNS)), path)


def _checked(table: pd.DataFrame, name) -> pd.DataFrame:
    table = table.dropna(subset=["lat", "lon"]).reset_index(drop=True)
    if table.empty:
        raise ValueError(f"{name}: no best-track points (--best-track)")
    bad = table.lat.abs() > 90
    if bad.any():
        raise ValueError(f"{name}: latitude {table.lat[bad].iloc[0]} is outside -90..90")
    return table.reindex(columns=list(BEST_TRACK_COLUMNS)).sort_values(["sid", "time"])
