"""The 16 CAM5 input channels of the climate segmentation data set, in file order.

The order is the one of the SC18 Gordon Bell data and of the DeepCAM sample files
(``climate/data[..., i]`` is ``CHANNELS[i]``), so it must never change.

Examples
--------
>>> from climnb.io.channels import CHANNEL_NAMES, channel
>>> CHANNEL_NAMES[:3]
('TMQ', 'U850', 'V850')
>>> channel("PSL").units
'Pa'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Channel", "CHANNELS", "CHANNEL_NAMES", "CLASS_NAMES", "channel", "channel_index"]


@dataclass(frozen=True)
class Channel:
    """One input variable.

    Attributes
    ----------
    name : CAM5 variable name.
    units : UDUNITS string, as in CAM5 history files.
    long_name : human-readable description (the CF ``long_name``).
    cmap : a colour map name that HoloViews/Bokeh understand, chosen for the quantity:
        sequential for amounts, diverging for signed winds, thermal for temperatures.
    standard_name : CF standard name where one exists, else ``""``.
    """

    name: str
    units: str
    long_name: str
    cmap: str
    standard_name: str = ""

    @property
    def attrs(self) -> dict[str, str]:
        """CF attributes for an xarray variable."""
        attrs = {"units": self.units, "long_name": self.long_name}
        if self.standard_name:
            attrs["standard_name"] = self.standard_name
        return attrs


CHANNELS: tuple[Channel, ...] = (
    Channel(
        "TMQ",
        "kg m-2",
        "total (vertically integrated) precipitable water",
        "YlGnBu",
        "atmosphere_mass_content_of_water_vapor",
    ),
    Channel("U850", "m s-1", "zonal wind at 850 hPa", "RdBu_r", "eastward_wind"),
    Channel("V850", "m s-1", "meridional wind at 850 hPa", "RdBu_r", "northward_wind"),
    Channel("UBOT", "m s-1", "lowest model level zonal wind", "RdBu_r", "eastward_wind"),
    Channel("VBOT", "m s-1", "lowest model level meridional wind", "RdBu_r", "northward_wind"),
    Channel("QREFHT", "kg kg-1", "reference height humidity", "YlGnBu", "specific_humidity"),
    Channel("PS", "Pa", "surface pressure", "viridis", "surface_air_pressure"),
    Channel("PSL", "Pa", "sea level pressure", "viridis", "air_pressure_at_mean_sea_level"),
    Channel("T200", "K", "temperature at 200 hPa", "inferno", "air_temperature"),
    Channel("T500", "K", "temperature at 500 hPa", "inferno", "air_temperature"),
    Channel(
        "PRECT",
        "m s-1",
        "total (convective and large-scale) precipitation rate",
        "Blues",
        "lwe_precipitation_rate",
    ),
    Channel("TS", "K", "surface temperature (radiative)", "inferno", "surface_temperature"),
    Channel("TREFHT", "K", "reference height temperature", "inferno", "air_temperature"),
    Channel("Z1000", "m", "geopotential height at 1000 hPa", "cividis", "geopotential_height"),
    Channel("Z200", "m", "geopotential height at 200 hPa", "cividis", "geopotential_height"),
    Channel("ZBOT", "m", "lowest model level height", "cividis", "height"),
)

CHANNEL_NAMES: tuple[str, ...] = tuple(c.name for c in CHANNELS)

#: Segmentation classes; the index is the label value stored in masks and sample files.
CLASS_NAMES: tuple[str, ...] = ("background", "tropical_cyclone", "atmospheric_river")

_BY_NAME = {c.name: c for c in CHANNELS}


def channel(name: str) -> Channel:
    """Return the :class:`Channel` called ``name`` (a CAM5 variable name)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"unknown channel {name!r}; the channels are {', '.join(CHANNEL_NAMES)}"
        ) from None


def channel_index(name: str) -> int:
    """Position of channel ``name`` in the 16-channel order of the sample files."""
    channel(name)
    return CHANNEL_NAMES.index(name)
