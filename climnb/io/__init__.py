"""Fields in and results out: the one door for files as they come, and the sample files.

* :mod:`~climnb.io.netcdf` - the opener (NetCDF, Zarr, GRIB; names, units, calendars, levels,
  joins along time) and the input grid with the one way back to it (:class:`InputGrid`);
* :mod:`~climnb.io.variables` - the names and units of each quantity in real files;
* :mod:`~climnb.io.levels` - IVT from winds and humidity on pressure levels;
* :mod:`~climnb.io.grib` - GRIB through cfgrib; :mod:`~climnb.io.regrid` - projected and
  curvilinear grids onto a regular grid (pyresample) and back;
* :mod:`~climnb.io.samples`, :mod:`~climnb.io.sampleset`, :mod:`~climnb.io.stats`, ... - the
  DeepCAM-style HDF5 sample files, their sets and statistics.

Import from the submodules.
"""
