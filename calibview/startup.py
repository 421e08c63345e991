"""What a calibview program (the CLI, the window) sets up at start-up, never a library import: OpenMP's idle
policy (before torch loads) and the ``calibview`` logger.

The logger writes ``calibview: message`` lines on stderr at the level the user chose.

Shared by the CLI and the window (``--log-level error|warning|info|debug``; ``--quiet`` is ``error``). At INFO the
engine logs one line per finished request, e.g.
``calibview: evaluated resnet110-brier/cifar100 fit=val eval=test: fitted 6, reused 0, scored 7, 4.21 s``.
Nothing is configured on import: a program calls :func:`setup_logging` once it has parsed its arguments.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def configure_openmp() -> bool:
    """Make torch's OpenMP threads sleep instead of spin when idle; True if it took effect.

    libgomp's default keeps each idle OpenMP thread spinning for ~300,000 iterations after every parallel region.
    The evaluation's OpenMP team shares the cores with the GUI thread, Qt's render threads, the display server,
    other processes; whenever one team thread is preempted its partners spin at
    the next barrier for their whole time slice. Measured on the 2-core dev machine under load, the seven-calibrator
    demo evaluation took 75-135 s spinning and 12-17 s passive (the VS fit alone 20 s vs 0.5 s). libgomp reads
    the setting once, when torch loads it, so this must run before anything imports torch (``calibview.core``
    does); an explicit OMP_WAIT_POLICY in the environment wins.
    """
    if "torch" in sys.modules:
        return False
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return True


LOG_LEVELS = ("error", "warning", "info", "debug")


def setup_logging(args) -> None:
    """The ``calibview`` logger writes ``calibview: message`` lines to stderr at the chosen level."""
    level = args.log_level or ("error" if getattr(args, "quiet", False) else "warning")
    log = logging.getLogger("calibview")
    log.setLevel(getattr(logging, level.upper()))
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("calibview: %(message)s"))
        log.addHandler(handler)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time of each record (not the one of its creation)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def add_log_options(p: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--quiet``, shared by the evaluation commands and the window."""
    p.add_argument("--log-level", default=None, choices=LOG_LEVELS,
                   help="messages on stderr: error, warning (default), info (one line per evaluation: what was "
                        "fitted, reused and scored) or debug")
    p.add_argument("--quiet", action="store_true",
                   help="only errors on stderr: no progress bar, warnings or notes; the same as --log-level error")
