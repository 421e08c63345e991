"""The command line (``calibview COMMAND``): ``program`` parses and dispatches (``main`` is its entry point), ``options`` holds the options and the
request building every command shares, and each command lives in a module of its own.

User errors exit with status 2 and one sentence on stderr."""

from calibview.cli.program import main

__all__ = ["main"]
