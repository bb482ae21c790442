"""Where the work runs: engines, schedulers and the notebook kernel.

* :mod:`~climnb.runtime.cluster` - ipyparallel engines with Horovod, on the nodes at hand or Slurm;
* :mod:`~climnb.runtime.scheduler` - dask.distributed for the data-parallel steps;
* :mod:`~climnb.runtime.kernel` - this environment registered as a Jupyter kernel;
* :mod:`~climnb.runtime.watchdog` - engines stopped when their kernel dies.

Import from the submodules.
"""
