"""Compute precision of the networks: float32, or mixed precision with float32 master weights.

* ``"float32"``: everything in float32 (the default).
* ``"mixed_float16"``: float16 compute, float32 variables, as the paper trained on V100 GPUs;
  needs dynamic loss scaling (``OptimizerConfig(mixed_precision=True)``). CPUs emulate float16
  slowly.
* ``"auto"``: ``"mixed_bfloat16"`` where the hardware computes in bfloat16 natively (a CPU with
  AVX512_BF16 or AMX-BF16, a GPU from Ampere on), else ``"float32"``
  (:func:`auto_precision` says which and why).
* ``"mixed_bfloat16"``: bfloat16 compute, float32 variables. bfloat16 has float32's exponent
  range, so no loss scaling is needed. Fast on CPUs with AVX512_BF16 / AMX-BF16 (oneDNN uses
  them) and on GPUs from Ampere on; elsewhere TensorFlow emulates it, slowly.

Batch normalisation statistics, the loss and the logits stay in float32 in every mode.

This module imports neither TensorFlow nor Keras.

Examples
--------
>>> from climnb.models.precision import policy_name
>>> policy_name(False), policy_name(True), policy_name("bfloat16")
('float32', 'mixed_float16', 'mixed_bfloat16')
>>> policy_name("int8")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown precision 'int8'; choose one of float32, mixed_float16, mixed_bfloat16 ...
"""

from __future__ import annotations

import glob
import logging
from functools import cache

__all__ = [
    "PRECISIONS",
    "policy_name",
    "cpu_bf16_flags",
    "check_bf16_support",
    "auto_precision",
    "resolve_precision",
]

logger = logging.getLogger(__name__)

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
_ALIASES = {
    "fp32": "float32",
    "float16": "mixed_float16",
    "fp16": "mixed_float16",
    "bfloat16": "mixed_bfloat16",
    "bf16": "mixed_bfloat16",
}
#: /proc/cpuinfo flags of native bfloat16 arithmetic that oneDNN uses.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def policy_name(precision: bool | str | None) -> str:
    """Keras dtype-policy name of ``precision``.

    ``False``/``None`` mean ``"float32"`` and ``True`` means ``"mixed_float16"`` (the meaning of
    the older ``mixed_precision=True``); strings may be a policy name or a short alias
    (``"bf16"``, ``"bfloat16"``, ``"fp16"``, ``"fp32"``).
    """
    if precision is None or precision is False:
        return "float32"
    if precision is True:
        return "mixed_float16"
    key = str(precision).lower()
    key = _ALIASES.get(key, key)
    if key not in PRECISIONS:
        raise ValueError(
            f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)} "
            f"(or {', '.join(_ALIASES)})"
        )
    return key


@cache
def cpu_bf16_flags(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """The native-bfloat16 flags of this CPU (empty where there are none or no cpuinfo)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return tuple(flag for flag in BF16_FLAGS if flag in flags)
    except OSError:
        pass
    return ()


def check_bf16_support(gpus: int = 0) -> bool:
    """Whether bfloat16 runs natively here; logs a warning when it would be emulated.

    ``gpus`` is the number of visible GPUs (bfloat16 is native on Ampere and newer; older GPUs
    are not told apart here).
    """
    if gpus or cpu_bf16_flags():
        return True
    logger.warning(
        "mixed_bfloat16 requested, but this CPU has none of %s and no GPU is visible: "
        "TensorFlow will emulate bfloat16, which is much slower than float32",
        "/".join(BF16_FLAGS),
    )
    return False


def auto_precision(gpu_capabilities: tuple[tuple[int, int], ...] = ()) -> tuple[str, str]:
    """The precision ``"auto"`` stands for here, and why: ``(policy name, reason)``.

    ``gpu_capabilities`` are the visible GPUs' compute capabilities (major, minor); bfloat16
    is native from Ampere (8.0) on. Without GPUs the CPU's flags decide.

    >>> auto_precision(((7, 0),))[0], auto_precision(((8, 0),))[0]
    ('float32', 'mixed_bfloat16')
    """
    if gpu_capabilities:
        if all(major >= 8 for major, _ in gpu_capabilities):
            return "mixed_bfloat16", "GPUs with native bfloat16 (compute capability >= 8.0)"
        return "float32", "a GPU older than Ampere (no native bfloat16)"
    flags = cpu_bf16_flags()
    if flags:
        return "mixed_bfloat16", f"CPU with native bfloat16 ({', '.join(flags)})"
    return "float32", f"CPU without native bfloat16 (none of {', '.join(BF16_FLAGS)})"


def resolve_precision(precision: bool | str | None) -> tuple[str, str]:
    """``(policy name, why)`` for a requested precision; ``"auto"`` is decided here.

    On a node with NVIDIA GPUs (``/dev/nvidia0`` ...), ``"auto"`` stays with float32: which
    GPUs compute bfloat16 natively is known only once TensorFlow has started, so give
    ``mixed_bfloat16`` yourself on Ampere or newer.
    """
    if str(precision).lower() != "auto":
        return policy_name(precision), "as requested"
    if glob.glob("/dev/nvidia[0-9]*"):
        return "float32", (
            "auto on a GPU node: float32 (give mixed_bfloat16 on Ampere or newer GPUs)"
        )
    name, why = auto_precision()
    return name, f"auto: {why}"
