"""Import TensorFlow and Keras 3 on demand, quietly, with a message that says what to install.

TensorFlow's C++ runtime writes start-up messages (oneDNN, CPU instruction sets, absl) straight
to the process's stderr, which a Jupyter kernel shows in the cell that first imports it. climnb
imports TensorFlow only through :func:`import_tf`, which first sets the logging variables
(:data:`QUIET`) unless the environment sets them already.
"""

from __future__ import annotations

import os
import sys

__all__ = ["import_keras", "import_tf", "quiet_tensorflow", "INSTALL_HINT", "QUIET"]

#: Environment set before TensorFlow is imported: C++ logs at ERROR and above only.
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2", "ABSL_MIN_LOG_LEVEL": "2"}

INSTALL_HINT = (
    "climnb's models and training need TensorFlow 2.18 with Keras 3: "
    "pip install 'climnb[train]' (or 'climnb[gpu]' on a CUDA machine)"
)


def quiet_tensorflow(env: dict | None = None) -> None:
    """Set :data:`QUIET` in ``env`` (default ``os.environ``) where not set already; it takes
    effect only before TensorFlow is first imported."""
    env = os.environ if env is None else env
    for name, value in QUIET.items():
        env.setdefault(name, value)


def import_tf():
    """Return the ``tensorflow`` module (quietly), or raise ImportError naming what to install.

    Once TensorFlow is loaded the environment is left alone: losses and layers call this
    inside traced functions, where AutoGraph, failing to convert ``os.environ.setdefault``,
    warned with the repr of the whole process environment.
    """
    loaded = sys.modules.get("tensorflow")
    if loaded is not None:
        return loaded
    quiet_tensorflow()
    try:
        import tensorflow as tf
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(INSTALL_HINT) from err
    return tf


def import_keras():
    """Return the ``keras`` (3.x) module on the TensorFlow backend, or raise ImportError."""
    import_tf()
    try:
        import keras
    except ImportError as err:  # pragma: no cover
        raise ImportError(INSTALL_HINT) from err
    if int(keras.__version__.split(".")[0]) < 3:  # pragma: no cover
        raise ImportError(f"found Keras {keras.__version__}, need 3.x. {INSTALL_HINT}")
    if keras.backend.backend() != "tensorflow":  # pragma: no cover
        raise ImportError(
            f"Keras runs on the {keras.backend.backend()!r} backend; climnb needs "
            "KERAS_BACKEND=tensorflow (Horovod and the input pipeline are TensorFlow)"
        )
    return keras
