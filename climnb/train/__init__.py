"""Training: optimisers with the paper's tricks (:mod:`climnb.train.optim`: LARC on Adam,
gradient lag, warm-up and decay schedules, mixed precision) and the data-parallel Horovod loop.

These modules import TensorFlow; ``import climnb.train`` itself does not.
"""
