"""From masks to answers: frequency, events, landfall, attributed precipitation, change.

The last step of the workflow. Inputs are what climnb writes (labels, predictions, tracks) or
any class mask with 0/1/2 flag values (ClimateNet's ``LABELS``), with the fields they were made
from where needed. numpy/xarray science core, dask around it: the masks are read in one lazy
pass with bounded memory, on whatever dask scheduler is current.

* :mod:`~climnb.stats.masks` - find and check a class mask (flags, classes, grid);
* :mod:`~climnb.stats.groups` - seasons, months, years, blocks; per-group class counts;
* :mod:`~climnb.stats.frequency` - how often each point is inside each class (CF output);
* :mod:`~climnb.stats.regions` - built-in regions, boxes, SREX, US states, shapefile and
  GeoJSON polygons and the land-sea mask, all from packaged data;
* :mod:`~climnb.stats.events` - events from tracks: counts, genesis, lifetime,
  Saffir-Simpson and Ralph et al. (2019) categories, landfall by region;
* :mod:`~climnb.stats.precip` - share of total and extreme precipitation inside events;
* :mod:`~climnb.stats.change` - change between two periods or runs: block permutation,
  block bootstrap, FDR (Wilks 2016);
* :mod:`~climnb.stats.change_tables` - the same for event counts, landfalls, intensities and
  attributed precipitation.

Examples
--------
>>> from climnb.data.synthetic import make_dataset
>>> from climnb.stats import class_mask, frequency
>>> ds, _ = make_dataset(n_time=4, seed=0)
>>> frequency(class_mask(ds), by="season").frequency.dims
('class', 'season', 'lat', 'lon')
"""

from climnb.stats.change import CompareConfig, Comparison, compare, fdr_mask
from climnb.stats.change_tables import compare_events, compare_precip
from climnb.stats.events import (
    event_counts,
    event_steps,
    event_table,
    events_to_dataset,
    landfall_table,
    ralph_category,
    saffir_simpson,
)
from climnb.stats.frequency import frequency, write_frequency
from climnb.stats.masks import check_same_grid, class_mask, mask_classes
from climnb.stats.precip import attributed_precipitation, precipitation
from climnb.stats.regions import (
    BUILTIN,
    Region,
    box,
    builtin_region,
    land_fraction,
    land_mask,
    parse_region,
    read_geojson,
    read_polygons,
    region_masks,
    srex_regions,
    us_state,
)

__all__ = [
    "BUILTIN",
    "CompareConfig",
    "Comparison",
    "Region",
    "attributed_precipitation",
    "box",
    "builtin_region",
    "check_same_grid",
    "class_mask",
    "compare",
    "compare_events",
    "compare_precip",
    "event_counts",
    "event_steps",
    "event_table",
    "events_to_dataset",
    "fdr_mask",
    "frequency",
    "land_fraction",
    "land_mask",
    "landfall_table",
    "mask_classes",
    "parse_region",
    "precipitation",
    "ralph_category",
    "read_geojson",
    "read_polygons",
    "region_masks",
    "saffir_simpson",
    "srex_regions",
    "us_state",
    "write_frequency",
]
