"""climnb: find tropical cyclones and atmospheric rivers in climate model output.

``import climnb`` is cheap: it imports neither TensorFlow nor xarray. Submodules load their
heavy dependencies when used.
"""

from climnb.versions import show_versions

__version__ = "0.1.0"
__all__ = ["show_versions", "__version__"]
