"""The benchmarks' quiet start-up: their figures and climnb's own warnings, nothing else.

Every benchmark imports this module before anything that may load TensorFlow::

    import _quiet  # noqa: F401  (first: the libraries' start-up logs off, here and in children)

It sets :data:`QUIET_ENV` in ``os.environ`` where the caller has not set it (so that a
``TF_CPP_MIN_LOG_LEVEL=0`` given for a debugging run stands), and every process the benchmark
starts inherits it; :func:`child_env` gives the same to an environment built by hand. In the
benchmark's own process it also turns off the warnings that the libraries raise against their
own code (:data:`FOREIGN`) and absl's Python log below ERROR.

What stays: errors (C++ and Python), climnb's own warnings and log lines, and every warning a
library attributes to climnb's code (a deprecated call, a division by zero), since the filters
match the module a warning is attributed to: that is a climnb line to fix, not noise. The
``tensorflow`` logger stays at WARNING too: AutoGraph warns there when it cannot convert a
function of climnb's that a traced step calls (it once printed the whole environment that way;
the cause is fixed in :mod:`climnb.models.backend`).
"""

from __future__ import annotations

import logging
import os
import warnings

from climnb.models.backend import QUIET

__all__ = ["FOREIGN", "QUIET_ENV", "child_env", "quiet"]

#: TensorFlow's and absl's C++ logs at ERROR and above (2, not 3: errors still show): no
#: oneDNN notice, no cpu_feature_guard, no XLA or absl start-up lines.
QUIET_ENV = dict(QUIET)

#: The modules whose own warnings (Deprecation, Future, Runtime, User...) are not the
#: benchmarks' to show: a regular expression on the module a warning is attributed to.
FOREIGN = (
    r"(numpy|pandas|xarray|dask|distributed|bokeh|holoviews|panel|param|keras|tensorflow|"
    r"tf_keras|absl|h5py|netCDF4|zarr|numcodecs|scipy|skimage|horovod|ipyparallel|"
    r"jupyter_client|IPython|traitlets|tornado|tqdm)(\.|$)"
)


def child_env(extra: dict | None = None, base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) with :data:`QUIET_ENV` where it lacks it, then
    ``extra``: the environment of a process a benchmark starts."""
    env = dict(os.environ if base is None else base)
    for name, value in QUIET_ENV.items():
        env.setdefault(name, value)
    env.update(extra or {})
    return env


def quiet() -> None:
    """Set :data:`QUIET_ENV` in ``os.environ`` (where not set) and the warning filters and absl
    level of this process. Called when this module is imported; calling it again does no harm."""
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    warnings.filterwarnings("ignore", module=FOREIGN)
    logging.getLogger("absl").setLevel(logging.ERROR)


quiet()
