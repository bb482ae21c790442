"""Import TensorFlow and Keras 3 on demand, with a message that says what to install."""

from __future__ import annotations

__all__ = ["import_keras", "import_tf", "INSTALL_HINT"]

INSTALL_HINT = (
    "climnb's models and training need TensorFlow 2.18 with Keras 3: "
    "pip install 'climnb[train]' (or 'climnb[gpu]' on a CUDA machine)"
)


def import_tf():
    """Return the ``tensorflow`` module, or raise ImportError naming what to install."""
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
