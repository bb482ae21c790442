"""Tables a person reads: times to the minute, class names whole, numbers with their units.

Event, track and summary tables hold full-precision numbers and microsecond times, and a
notebook showing them as they are gets a table wider than its cell with ``723410.512`` and
``2000-01-01 03:00:00``. :func:`readable` shows a DataFrame (pandas' HTML, for notebooks and
reports) and :func:`bokeh_columns` sets up a Bokeh ``DataTable`` (the tables of
:mod:`climnb.viz.events`) the same way: times as ``YYYY-MM-DD HH:MM``, a unit in each header
(from the one event schema, :data:`climnb.labels.schema.COLUMNS`, and the track summary's
names), each number at the precision its unit deserves, columns that hold nothing left out.
The values themselves are not changed: this is how they are shown.

Examples
--------
>>> import pandas as pd
>>> frame = pd.DataFrame({"time": pd.to_datetime(["2000-01-01 03:00"]), "area_km2": [723410.5]})
>>> header("area_km2"), header("lat"), header("class_name")
('area (km²)', 'lat (°N)', 'class')
>>> text = readable(frame).to_html()
>>> "2000-01-01 03:00" in text and "723,410" in text
True
"""

from __future__ import annotations

import pandas as pd

from climnb.labels.schema import COLUMNS

__all__ = ["readable", "bokeh_columns", "header", "decimals", "TIME_FORMAT"]

#: How times are shown: to the minute (3-hourly data have no seconds to show).
TIME_FORMAT = "%Y-%m-%d %H:%M"

#: Units as a header shows them.
_UNITS = {
    "degrees_north": "°N",
    "degrees_east": "°E",
    "km2": "km²",
    "km": "km",
    "Pa": "Pa",
    "m s-1": "m/s",
    "kg m-1 s-1": "kg/m/s",
    "s-1": "1/s",
    "km h-1": "km/h",
    "h": "h",
}
#: Decimals worth showing for a unit (positions to 0.1 degree, sizes to the km).
_DECIMALS = {
    "°N": 1,
    "°E": 1,
    "km²": 0,
    "km": 0,
    "Pa": 0,
    "m/s": 1,
    "kg/m/s": 0,
    "km/h": 0,
    "h": 0,
}
#: Columns of tables outside the event schema (track summaries, statistics): (name, unit).
_OTHER = {
    "start": ("start", ""),
    "end": ("end", ""),
    "lifetime_h": ("lifetime", "h"),
    "distance_km": ("distance", "km"),
    "mean_speed_kmh": ("mean speed", "km/h"),
    "max_speed_kmh": ("max speed", "km/h"),
    "start_lat": ("start lat", "°N"),
    "start_lon": ("start lon", "°E"),
    "end_lat": ("end lat", "°N"),
    "end_lon": ("end lon", "°E"),
    "max_area_km2": ("max area", "km²"),
    "min_psl": ("min psl", "Pa"),
    "psl_drop_pa": ("psl drop", "Pa"),
    "max_wind": ("max wind", "m/s"),
    "max_ivt": ("max IVT", "kg/m/s"),
}
_SUFFIXES = ("_km2", "_km", "_kmh", "_h")


def _name_and_unit(column: str) -> tuple[str, str]:
    if column in _OTHER:
        return _OTHER[column]
    if column == "class_name":
        return "class", ""
    if column in COLUMNS:
        unit = _UNITS.get(COLUMNS[column].units, COLUMNS[column].units)
        name = column
        for suffix in _SUFFIXES:
            name = name.removesuffix(suffix)
        return name.replace("_", " "), "" if unit in ("", "1") else unit
    return column, ""


def header(column: str) -> str:
    """The column's header: its name with its unit, e.g. ``"area (km²)"``."""
    name, unit = _name_and_unit(str(column))
    return f"{name} ({unit})" if unit else name


def decimals(column: str, values: pd.Series | None = None) -> int | None:
    """Decimals to show in ``column`` (``None``: not a float column, shown as it is)."""
    if values is not None and not pd.api.types.is_float_dtype(values):
        return None
    _, unit = _name_and_unit(str(column))
    return _DECIMALS.get(unit, 2)


def _is_time(values: pd.Series) -> bool:
    return pd.api.types.is_datetime64_any_dtype(values) or (
        values.dtype == object and hasattr(values.dropna().iloc[0], "strftime")
        if values.notna().any()
        else False
    )


def _time_text(value) -> str:
    return "" if pd.isna(value) else value.strftime(TIME_FORMAT)


def readable(frame: pd.DataFrame, *, columns=None, index: bool | None = None):
    """``frame`` as a pandas ``Styler`` a person reads (see the module docstring).

    Parameters
    ----------
    frame : the table (unchanged).
    columns : the columns shown, in order (default: all that hold anything).
    index : show the index (default: only a named one, e.g. ``track_id``).
    """
    shown = [c for c in (columns or frame.columns) if frame[c].notna().any()]
    table = frame[shown]
    formats = {}
    for column in shown:
        values = table[column]
        if _is_time(values):
            formats[column] = _time_text
        elif (places := decimals(column, values)) is not None:
            formats[column] = f"{{:,.{places}f}}"
    styler = table.style.format(formats, na_rep="").format_index(header, axis=1)
    if index is False or (index is None and table.index.name is None):
        styler = styler.hide(axis="index")
    return styler


def bokeh_columns(table, frame: pd.DataFrame, *, char_px: float = 7.0) -> int:
    """Format the columns of a Bokeh ``DataTable`` showing ``frame`` (headers with units,
    numbers at their precision) and size each to its longest text; returns the total width.
    The table keeps these widths (``autosize_mode="none"``): none is cut."""
    from bokeh.models import NumberFormatter, StringFormatter

    total = 0
    for column in table.columns:
        values = frame[column.field] if column.field in frame else pd.Series(dtype=object)
        column.title = header(column.field)
        places = decimals(column.field, values)
        if places is not None:
            pattern = "0,0" + (f".{'0' * places}" if places else "")
            column.formatter = NumberFormatter(format=pattern, text_align="right")
            texts = [f"{v:,.{places}f}" for v in values.dropna()]
        else:
            column.formatter = StringFormatter()
            texts = [str(v) for v in values.dropna()]
        longest = max([len(column.title), *map(len, texts)])
        column.width = int(longest * char_px) + 16
        total += column.width
    table.autosize_mode = "none"
    return total
