"""Moved to :mod:`climnb.data.synthetic`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.data.synthetic")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.synthetic moved to climnb.data.synthetic; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
