"""The ``climnb`` command line: ``climnb SUBCOMMAND ...`` for batch jobs and Makefiles.

Each subcommand is a small module in :mod:`climnb.commands` with ``HELP`` (one line),
``EXAMPLE`` (a shell line), ``add_arguments(parser)`` and ``run(args) -> int``; it is found
automatically, so adding a step to the workflow never means editing this file.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

import climnb.commands

__all__ = ["main", "build_parser"]


def _command_modules():
    for info in sorted(pkgutil.iter_modules(climnb.commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield info.name.replace("_", "-"), f"climnb.commands.{info.name}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="climnb",
        description="Find tropical cyclones and atmospheric rivers in climate model output.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in _command_modules():
        module = importlib.import_module(module_name)
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=f"example:\n  {module.EXAMPLE}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``climnb`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose + 1, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return int(args._run(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"climnb {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
