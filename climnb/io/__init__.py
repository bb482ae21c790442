"""Fields in and results out: the one door for files as they come, and the sample files.

* :mod:`~climnb.io.files` - the door: :func:`~climnb.io.files.open_fields`,
  :func:`~climnb.io.files.input_grid` and the way back to it,
  :func:`~climnb.io.files.check_output`, :func:`~climnb.io.files.write`;
* :mod:`~climnb.io.netcdf` - the opener behind it (NetCDF, Zarr, GRIB; joins along time);
  :mod:`~climnb.io.paths` - input paths and globs, checked without loading xarray;
  :mod:`~climnb.io.canonical` - climnb's names, units and grid, and the input grid
  (:class:`~climnb.io.canonical.InputGrid`);
* :mod:`~climnb.io.outputs` - the output rule; :mod:`~climnb.io.atomic` - atomic writes and
  run claims; :mod:`~climnb.io.grid` - CF coordinates and the caller's grid;
  :mod:`~climnb.io.steps` - time series read a block of steps at a time;
* :mod:`~climnb.io.variables` - the names and units of each quantity in real files;
  :mod:`~climnb.io.channels` - the 16 CAM5 channels and the classes;
* :mod:`~climnb.io.levels` - IVT from winds and humidity on pressure levels;
* :mod:`~climnb.io.grib` - GRIB through cfgrib; :mod:`~climnb.io.regrid` - projected and
  curvilinear grids onto a regular grid (pyresample) and back;
* :mod:`~climnb.io.samplefile` (one file) and :mod:`~climnb.io.samples` (writing them),
  :mod:`~climnb.io.sampleset` (with :mod:`~climnb.io.setread`, :mod:`~climnb.io.setstaged`,
  :mod:`~climnb.io.setinputs` and :mod:`~climnb.io.setrun`), :mod:`~climnb.io.stats`, ... - the
  DeepCAM-style HDF5 sample files, their sets and statistics.

Import from the submodules.
"""
