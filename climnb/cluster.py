"""Moved to :mod:`climnb.runtime.cluster`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.runtime.cluster")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.cluster moved to climnb.runtime.cluster; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
