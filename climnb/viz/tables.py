"""Tables a person reads: times to the minute, class names whole, numbers with their units.

Event, track and summary tables hold full-precision numbers and microsecond times, and a
notebook showing them as they are gets a table wider than its cell with ``723410.512`` and
``2000-01-01 03:00:00``. :func:`readable` shows a DataFrame (pandas' HTML, for notebooks and
reports) and :func:`bokeh_columns` sets up a Bokeh ``DataTable`` (the tables of
:mod:`climnb.viz.events`) the same way: times as ``YYYY-MM-DD HH:MM``, a unit in each header
(from the one event schema, :data:`climnb.labels.schema.COLUMNS`, and the track summary's
names), each number at the precision its unit deserves, names with spaces (so that a table
wraps them to fit its cell, each whole), columns that hold nothing left out.
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

import numpy as np
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
    "hPa": 1,
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
    "mean_lifetime_h": ("mean lifetime", "h"),
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
    "mean_ivt": ("mean IVT", "kg/m/s"),
    "genesis_lat": ("genesis lat", "°N"),
    "genesis_lon": ("genesis lon", "°E"),
    "ar_category": ("AR category", ""),
    "landfall_regions": ("landfall", ""),
}
#: Units shown in another unit: pressures in hPa, as weather maps give them.
_SHOWN_AS = {"Pa": ("hPa", 0.01)}
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
    return column.replace("_", " "), ""  # a header that may wrap


def _shown(column: str) -> tuple[str, str, float]:
    """Name, unit shown and the factor from the stored unit to it."""
    name, unit = _name_and_unit(str(column))
    unit, factor = _SHOWN_AS.get(unit, (unit, 1.0))
    return name, unit, factor


def header(column: str) -> str:
    """The column's header: its name with its unit, e.g. ``"area (km²)"``."""
    name, unit, _ = _shown(column)
    return f"{name} ({unit})" if unit else name


def decimals(column: str, values: pd.Series | None = None) -> int | None:
    """Decimals to show in ``column`` (``None``: not a float column, shown as it is; ``-1``:
    no unit known, three significant digits)."""
    if values is not None and not pd.api.types.is_float_dtype(values):
        return None
    _, unit, _ = _shown(column)
    return _DECIMALS.get(unit, -1)


def _significant(value: float) -> str:
    """Three significant digits, without an exponent down to 0.0001: 548, 3.86, 0.0172,
    0.000601; smaller values (a precipitation rate in m/s) with one: 1.23e-11."""
    if not np.isfinite(value) or value == 0:
        return "" if np.isnan(value) else f"{value:g}"
    if abs(value) < 0.01:  # 0.000601, not 0.0006; 1.23e-11, not 0.0000
        return f"{value:.3g}"
    places = int(min(4, max(0, 2 - np.floor(np.log10(abs(value))))))
    return f"{value:,.{places}f}"


def _number(places: int, factor: float):
    if places < 0:
        return lambda v: "" if pd.isna(v) else _significant(float(v) * factor)
    return lambda v: "" if pd.isna(v) else f"{float(v) * factor:,.{places}f}"


def _is_time(values: pd.Series) -> bool:
    return pd.api.types.is_datetime64_any_dtype(values) or (
        values.dtype == object and hasattr(values.dropna().iloc[0], "strftime")
        if values.notna().any()
        else False
    )


def _holds_anything(values: pd.Series) -> bool:
    if values.dtype == object or pd.api.types.is_string_dtype(values):
        return bool(values.dropna().astype(str).str.strip().ne("").any())
    return bool(values.notna().any())


def _yes_no(value) -> str:
    return "" if pd.isna(value) else ("yes" if value else "no")


def _words(value) -> str:
    """Names with spaces, not underscores: "landfalls per year" may wrap in a narrow cell,
    so the table fits its cell with every name whole."""
    return "" if pd.isna(value) else str(value).replace("_", " ")


def _word_list(value) -> str:
    """A space-separated list of names ("california us_west_coast") with commas between."""
    return "" if pd.isna(value) else ", ".join(_words(v) for v in str(value).split())


#: Columns that hold space-separated lists of names.
_LISTS = {"landfall_regions"}


def _index_text(value) -> str:
    return _words(value) if isinstance(value, str) else str(value)


def _time_text(value) -> str:
    return "" if pd.isna(value) else value.strftime(TIME_FORMAT)


def readable(frame: pd.DataFrame, *, columns=None, index: bool | None = None):
    """``frame`` as a pandas ``Styler`` a person reads (see the module docstring).

    Parameters
    ----------
    frame : the table (unchanged).
    columns : the columns shown, in order (default: all that hold anything).
    index : show the index (default: only a named one, e.g. ``track_id``, or one whose
        levels are all named).
    """
    shown = [c for c in (columns or frame.columns) if _holds_anything(frame[c])]
    table = frame[shown]
    formats, whole = {}, []
    for column in shown:
        values = table[column]
        if _is_time(values):
            formats[column] = _time_text
            whole.append(column)
        elif pd.api.types.is_bool_dtype(values):
            formats[column] = _yes_no
        elif (places := decimals(column, values)) is not None:
            formats[column] = _number(places, _shown(column)[2])
            whole.append(column)
        elif values.dtype == object or pd.api.types.is_string_dtype(values):
            formats[column] = _word_list if column in _LISTS else _words
    styler = table.style.format(formats, na_rep="").format_index(header, axis=1)
    styler = styler.format_index(_index_text, axis=0)  # "tropical cyclone" rows, as columns
    if whole:  # times and numbers on one line; names and headers may wrap
        styler = styler.set_properties(subset=whole, **{"white-space": "nowrap"})
    # JupyterLab pads each cell by half a line each side: a third is enough between numbers
    styler = styler.set_table_styles([{"selector": "td, th", "props": "padding: 0.3em 0.4em"}])
    if index is False or (index is None and all(n is None for n in table.index.names)):
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
        name, unit = _name_and_unit(column.field)  # the stored unit: Bokeh shows the values
        column.title = f"{name} ({unit})" if unit else name
        places = decimals(column.field, values)
        if places is not None:
            places = 2 if places < 0 else places
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
    table.index_position = None  # the row numbers say nothing a reader needs
    return total
