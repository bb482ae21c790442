"""Moved to :mod:`climnb.data.lookalike`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.data.lookalike")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.lookalike moved to climnb.data.lookalike; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
