"""Moved to :mod:`climnb.inference.predict`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.inference.predict")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.predict moved to climnb.inference.predict; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
