"""The command line: ``calibview report|metrics|runs|apply|import|check|desktop-install|drift|release|slices|conformal``.
Builds the parser from the command modules and runs the chosen command; uses the core only (no Qt), except that
``calibview`` with no command (or with a file) opens the window.

User errors exit with status 2 and one sentence on stderr, never a traceback; a progress bar goes to stderr when
it is a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

from calibview._version import __version__
from calibview.cli import (apply, check, collect, conformal, desktop_install, drift, importer, metrics, release, report,
                           runs, slices)
from calibview.cli.options import flag_message
from calibview.core.errors import Cancelled, CalibviewError
from calibview.startup import configure_openmp, setup_logging

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
#: every command in the order of --help; each module defines HELP, add_arguments(parser) and run(args) -> int
COMMANDS = {"report": report, "metrics": metrics, "runs": runs, "apply": apply, "import": importer,
            "check": check, "desktop-install": desktop_install, "drift": drift, "release": release,
            "slices": slices, "collect": collect, "conformal": conformal}


def build_parser(commands: Optional[Iterable[str]] = None) -> argparse.ArgumentParser:
    """The parser of every command. With ``commands``, only those get their options (the others keep their name
    and help): the defaults in the help texts come from the core, which need not be imported for
    ``calibview --help`` or for another command."""
    chosen = set(COMMANDS if commands is None else commands)
    parser = argparse.ArgumentParser(
        prog="calibview", description="Calibration and sharpness of stored classifier logits.")
    parser.add_argument("--version", action="version", version=f"calibview {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP)
        if name in chosen:
            module.add_arguments(p)
    return parser


def opens_window(argv: Sequence[str]) -> bool:
    """Whether ``calibview ARGV`` opens the window: no argument, an option first (``--run R``, Qt's ``-style``) or
    something that names a file (it exists, or has a path separator or a suffix: ``f.h5``, ``./logits``). A bare
    word that is neither a command nor a file (``calibview reprot f.h5``) is a mistyped command, for argparse to
    refuse with the list of commands, rather than a window with "file does not exist" dialogs for every word."""
    if not argv:
        return True
    first = argv[0]
    if first in COMMANDS or first in ("-h", "--help", "--version"):
        return False
    if first.startswith("-"):
        return True
    return Path(first).exists() or "/" in first or "\\" in first or "." in first


def _input_policy(args):
    """What the input may do (core.guard), for this command only: links, sparse data and the read budget."""
    if not hasattr(args, "allow_external"):
        return contextlib.nullcontext()
    from calibview.core.io import guard
    from calibview.core.io.memory import parse_size
    return guard.using(args.allow_external, args.allow_sparse, parse_size(getattr(args, "max_memory", None)),
                       getattr(args, "allow_large_read", False))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``calibview ARGV`` (default: the process's arguments) and return its exit status: 0, a command's own
    (check and drift: 1 when a criterion fails or the data drifted), 2 for a user error, 130 when interrupted."""
    configure_openmp()              # before anything loads torch (see calibview.startup)
    argv = list(sys.argv[1:] if argv is None else argv)
    if opens_window(argv):
        # `calibview`, `calibview FILE ...` and `calibview --run R --calibrators ts,vs` open the desktop app (the
        # bundled demo when no file is given).
        from calibview.gui.app import main as gui_main
        return gui_main(argv)
    parser = build_parser(argv[:1])
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    from calibview.core.io.heap import tune_allocator        # ctypes only: no numpy, no torch
    tune_allocator()                # a process-wide choice, so the program makes it, not the import of the core
    if hasattr(args, "log_level"):
        setup_logging(args)
    try:
        if hasattr(args, "lock_timeout"):     # how long writers of one output wait for each other
            from calibview.core.io.durable.locks import set_timeout
            set_timeout(args.lock_timeout)
        with _input_policy(args):
            return COMMANDS[args.command].run(args)
    except Cancelled:
        print("calibview: cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("\ncalibview: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CalibviewError as e:
        print(f"calibview: error: {flag_message(e)}", file=sys.stderr)      # the core's parameters as flags
        return EXIT_USER_ERROR
    except (OSError, ValueError) as e:
        print(f"calibview: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
