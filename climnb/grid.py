"""Moved to :mod:`climnb.io.grid`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.io.grid")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.grid moved to climnb.io.grid; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
