"""climnb: find tropical cyclones and atmospheric rivers in climate model output.

``import climnb`` is cheap: it imports neither TensorFlow nor xarray. Submodules load their
heavy dependencies when used.
"""

from climnb.versions import __version__, show_versions

__all__ = ["show_versions", "__version__"]
