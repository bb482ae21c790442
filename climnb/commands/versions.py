"""``climnb versions``: the versions of the stack, for bug reports."""

from climnb.versions import show_versions

HELP = "print the versions of climnb's stack and how Horovod was built"
EXAMPLE = "climnb versions"


def add_arguments(parser):
    pass


def run(args) -> int:
    show_versions()
    return 0
