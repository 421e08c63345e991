"""Subcommands that live in a module of their own: ``calibview/commands/<name>.py`` defines ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int`` (exit status; raise CalibviewError for user errors). The CLI
discovers them here, so adding a command touches no other file. Modules must import cheaply (no torch at import
time): import the core inside ``run``."""

from __future__ import annotations

import importlib
import pkgutil


def modules() -> dict:
    """Command name -> module, in alphabetical order (a module ``foo_bar`` is the command ``foo-bar``)."""
    out = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            out[info.name.replace("_", "-")] = importlib.import_module(f"{__name__}.{info.name}")
    return out
