"""One module per ``climnb`` subcommand (see :mod:`climnb.cli`): thin wrappers, no logic."""
