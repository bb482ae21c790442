"""Moved to :mod:`climnb.inference.postprocess`: this path warns, and works for one release."""

import importlib
import warnings

_new = importlib.import_module("climnb.inference.postprocess")
globals().update({k: v for k, v in vars(_new).items() if not k.startswith("__")})
__all__ = list(getattr(_new, "__all__", ()))
warnings.warn(
    "climnb.postprocess moved to climnb.inference.postprocess; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
