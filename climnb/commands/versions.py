"""``climnb versions``: the versions of the stack, for bug reports."""

HELP = "print the versions of climnb's stack and how Horovod was built"
EXAMPLE = "climnb versions"


def add_arguments(parser):
    pass


def run(args) -> int:
    from climnb.versions import show_versions

    show_versions()
    return 0
