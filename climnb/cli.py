"""The ``climnb`` command line: ``climnb SUBCOMMAND ...`` for batch jobs and Makefiles.

Each subcommand is a small module in :mod:`climnb.commands` with ``HELP`` (one line),
``EXAMPLE`` (a shell line), ``add_arguments(parser)`` and ``run(args) -> int``; it is found
automatically, so adding a step to the workflow never means editing this file.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import errno
import importlib
import logging
import os
import pkgutil
import sys
import threading

import climnb.commands
from climnb.versions import __version__

__all__ = ["main", "build_parser"]


def _command_modules():
    for info in sorted(pkgutil.iter_modules(climnb.commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield info.name.replace("_", "-"), f"climnb.commands.{info.name}"


class _Parser(argparse.ArgumentParser):
    """A bad option is one line, like any other bad input (argparse printed the usage first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _seed(text: str) -> int:
    """A random seed: a whole number >= 0 (NumPy refused a negative one with "expected
    non-negative integer", naming no option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="climnb",
        description="Find tropical cyclones and atmospheric rivers in climate model output.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument("--version", action="version", version=f"climnb {__version__}")
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
        for action in p._actions:  # every command's --seed: checked alike
            if action.dest == "seed" and action.type is int:
                action.type = _seed
        p.set_defaults(_run=module.run)
    return parser


@contextlib.contextmanager
def _ctrl_c_not_lost():
    """Keep a Ctrl-C that lands in a finalizer (a weakref callback, a ``__del__``): Python
    prints such a KeyboardInterrupt as "Exception ignored" and carries on, so the command would
    run to its end. Seen here: ``climnb samples`` interrupted during a weakref callback of
    xarray's file cache wrote the whole set. The interrupt is raised again in the main
    thread 50 ms later, from a timer thread (raised from the hook itself, it would land in the
    hook and be ignored too); should that land in a finalizer as well, it goes round again."""
    previous = sys.unraisablehook

    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            timer = threading.Timer(0.05, _thread.interrupt_main)
            timer.daemon = True
            timer.start()
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def main(argv: list[str] | None = None) -> int:
    """Run ``climnb`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose + 1, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        with _ctrl_c_not_lost():
            return int(args._run(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C: one line; temporaries go with their context managers
        print(
            f"climnb {args.command}: interrupted; nothing half-written was left under an output "
            "name (run the same command again to resume where it can)",
            file=sys.stderr,
        )
        return 130
    except OSError as err:  # a full disk, a read-only folder, a path under a file, ...
        print(f"climnb {args.command}: error: {_os_error(err)}", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as err:
        print(f"climnb {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:  # the net under climnb.io.zarrstore.guard_reads: a codec's error
        where = _store_read(err)
        if where is None:
            raise
        print(f"climnb {args.command}: error: {where}", file=sys.stderr)
        return 2


def _store_read(err: BaseException) -> str | None:
    """One line for an error raised while a Zarr chunk was read or decoded (numcodecs' "Zstd
    decompression error", ...), naming the array when its frame shows it; None for others."""
    in_store, where = False, None
    tb = err.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] in ("zarr", "numcodecs"):
            in_store = True
        owner = frame.f_locals.get("self")
        if where is None and type(owner).__module__.startswith("zarr"):
            where = getattr(owner, "store_path", None)
        tb = tb.tb_next
    if not in_store and "numcodecs" not in type(err).__module__:
        return None
    gist = _one_line(err)[:160]
    return (
        f"{where or 'a Zarr store'}: a chunk cannot be read ({type(err).__name__}"
        + (f": {gist}" if gist else "")
        + "): the store is damaged; copy it again or rewrite it"
    )


def _one_line(err: BaseException) -> str:
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


_OS_PROBLEMS = {
    errno.ENOSPC: "no space left on the device (disk full)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system: cannot write there",
    errno.EACCES: "permission denied: cannot write or read there",
    errno.EPERM: "permission denied: cannot write or read there",
    errno.ENOTDIR: "a path component is a file, not a directory",
    errno.EISDIR: "is a directory; give a file name",
    errno.EEXIST: "already exists (as a file where a directory is needed?)",
    errno.ENOENT: "no such file or directory",
    errno.ELOOP: "a loop of symbolic links (a link that points back to itself)",
}


def _os_error(err: OSError) -> str:
    """One line naming the path and the problem of an operating-system error."""
    problem = _OS_PROBLEMS.get(err.errno, err.strerror or _one_line(err))
    paths = [p for p in (err.filename, err.filename2) if p]
    if err.errno == errno.ENOENT and paths and os.path.islink(paths[0]):
        problem = "a symbolic link whose target is missing (or a loop of links)"
    if not paths:
        return _one_line(err) if str(err) else problem
    return f"{' -> '.join(map(str, paths))}: {problem}"


if __name__ == "__main__":
    sys.exit(main())
