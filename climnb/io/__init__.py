"""Reading and writing data: CAM5 / ClimateNet NetCDF, DeepCAM-style HDF5 samples and stats.

Import from the submodules (``climnb.io.netcdf``, ``climnb.io.samples``, ``climnb.io.stats``).
"""
