"""``climnb kernel install``: register this environment as a Jupyter kernel (JupyterHub)."""

import sys

from climnb.runtime.kernel import DEFAULT_NAME, install_kernel

HELP = "register this environment as a Jupyter kernel, with PATH and quiet TensorFlow logging"
EXAMPLE = "climnb kernel install --user"
MISSING = {
    "mpiexec": "notebooks 02 and 04 start their MPI engines with it (install OpenMPI)",
    "horovodrun": "needed only to launch `climnb train` with horovodrun (`climnb versions --check` "
    "says how to get Horovod)",
}


def add_arguments(parser):
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    install = actions.add_parser(
        "install",
        help="install the kernel spec (ipykernel's installer)",
        description="Install the kernel spec of this environment with ipykernel's installer. "
        "Without --user, --sys-prefix or --prefix: system-wide (needs write access).",
    )
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for you only (~/.local/share)")
    where.add_argument(
        "--sys-prefix",
        action="store_const",
        const=sys.prefix,
        dest="prefix",
        help=f"into this environment ({sys.prefix}), for a Jupyter installed in it",
    )
    where.add_argument("--prefix", help="into PREFIX/share/jupyter/kernels")
    install.add_argument("--name", default=DEFAULT_NAME, help=f"kernel name ({DEFAULT_NAME})")
    install.add_argument(
        "--display-name", help="name shown in JupyterLab (default: climnb VERSION (Python, env))"
    )


_STANDARD = ("python3", "python2", "python")  # the kernels Jupyter installs itself


def run(args) -> int:
    name = args.name.strip()
    if not name:
        raise ValueError(
            f"--name is empty: give the kernel a name of letters, digits, '-', '_' or '.' "
            f"(default {DEFAULT_NAME})"
        )
    if name.lower() in _STANDARD:
        raise ValueError(
            f"--name {args.name}: that is the standard Python kernel's name, which this one "
            f"would shadow; give another (default {DEFAULT_NAME})"
        )
    done = install_kernel(
        args.name, display_name=args.display_name, user=args.user, prefix=args.prefix
    )
    print(f"installed kernel {done.name!r} ({done.display_name}) in {done.path}")
    print(f"  python: {done.python}")
    for tool, found in done.launchers.items():
        print(f"  {tool}: {found or 'not found: ' + MISSING[tool]}")
    print(
        f'pick "{done.display_name}" in JupyterLab, or: papermill -k {done.name} IN.ipynb OUT.ipynb'
    )
    return 0
