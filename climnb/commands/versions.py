"""``climnb versions``: the versions of the stack, for bug reports; ``--check``: what this
environment has and lacks for the notebooks, one line each with how to get it."""

from climnb.doctor import check_environment, format_report
from climnb.versions import show_versions

HELP = (
    "print the versions of climnb's stack and how Horovod was built; --check: what this "
    "environment has and lacks, and how to get it"
)
EXAMPLE = "climnb versions --check"


def add_arguments(parser):
    parser.add_argument(
        "--check",
        action="store_true",
        help="check TensorFlow and its precision, Horovod (MPI/Gloo), mpiexec/srun, mpi4py, "
        "ipyparallel, the Jupyter kernel and the JupyterLab extensions; exit status 1 when "
        "something is missing",
    )


def run(args) -> int:
    if not args.check:
        show_versions()
        return 0

    checks = check_environment()
    print(format_report(checks))
    return 1 if any(c.status == "missing" for c in checks) else 0
