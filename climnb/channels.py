"""Moved to :mod:`climnb.io.channels`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.io.channels")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.channels moved to climnb.io.channels; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
