"""The command line (``calibview COMMAND``): ``program`` builds the parser and dispatches (``main`` is the entry
point), ``options`` holds the options and the request building the commands share, and each command lives in a
module of its own (``import`` in ``importer``: a Python keyword).

User errors exit with status 2 and one sentence on stderr."""

from calibview.cli.program import main

__all__ = ["main"]
