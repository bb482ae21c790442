"""Moved to :mod:`climnb.io.atomic`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.io.atomic")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.atomic moved to climnb.io.atomic; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
