"""What a calibview program (the CLI, the window) sets up at start-up, never a library import: how long torch's
idle OpenMP threads spin (before torch loads) and the ``calibview`` logger.

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


#: busy-wait iterations of an idle libgomp thread before it sleeps (libgomp's default is 300,000)
SPIN_COUNT = "3000"


def configure_openmp() -> bool:
    """Make torch's idle OpenMP threads spin only briefly before they sleep; True if it took effect.

    libgomp's default keeps each idle OpenMP thread spinning for ~300,000 iterations after every parallel region.
    The evaluation's OpenMP team shares the cores with the GUI thread, Qt's render threads, the display server,
    other processes; whenever one team thread is preempted its partners spin at the next barrier for their whole
    time slice. Measured on the 2-core dev machine under load, the seven-calibrator demo evaluation took 75-135 s
    spinning and 12-17 s passive (the VS fit alone 20 s vs 0.5 s); on 2026-12-07, beside two busy loops, 18 and 57 s
    with the default spin.

    Fully passive threads (OMP_WAIT_POLICY=PASSIVE, what this set until then) pay a wake-up at every operation
    instead, which is most of the time of a small split: its chunks are 4,096 rows, and one operation on 4,096 x 10
    values takes tens of microseconds. So the spin is cut to SPIN_COUNT iterations (GOMP_SPINCOUNT; an idle team
    then burns 0.1-3 ms of CPU after its last operation, the default 6-8 ms, passive 0.1 ms). benchmarks/
    bench_openmp.py, 2026-12-07 on the 2-core VM, 3 interleaved pairs each, spin / passive:

    - a none+ts evaluation of 10,000 x 10 logits: 0.67 with 3,000 spins (80-117 against 119-139 ms), 0.68 with
      10,000;
    - the seven-calibrator CIFAR-100 demo: 0.89 with 3,000, 1.05 with 10,000;
    - the same beside two busy loops: 1.04 with 3,000 (17.0-18.8 against 16.9-18.6 s), 1.14 with 10,000;
    - the 2 x 50,000 x 1,000 headline command (farm-bench, 3 pairs): 0.93 with 3,000, 0.89 with 10,000.

    LLVM's and Intel's OpenMP runtimes (torch builds for other platforms) read KMP_BLOCKTIME instead: 0, sleep at
    once, as PASSIVE made them. The runtimes read these once, when torch loads, so this must run before anything
    imports torch (``calibview.core`` does); an explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT in the environment
    wins (and then nothing is set).
    """
    if "torch" in sys.modules:
        return False
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
        os.environ.setdefault("KMP_BLOCKTIME", "0")
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
