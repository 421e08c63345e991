"""QApplication and main(): ``calibview [FILE ...]`` opens the window; with no file it opens the bundled demo."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from calibview.core.errors import CalibviewError
from calibview.startup import add_log_options, configure_openmp, setup_logging


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``calibview [FILE ...] [--run MODEL/DATASET] [--calibrators LIST] [--log-level LEVEL]``; Qt's own options
    (``-style``, ``-platform``, ...) are left to QApplication."""
    p = argparse.ArgumentParser(prog="calibview", description="The calibview window (see `calibview --help` for "
                                                              "the commands without a window).")
    p.add_argument("files", nargs="*", metavar="FILE", help="HDF5 logits files to open (default: the demo)")
    p.add_argument("--run", metavar="MODEL/DATASET", help="the run to select and evaluate")
    p.add_argument("--calibrators", metavar="LIST", help="calibrators to tick, comma-separated: ts,vs,hb")
    add_log_options(p)
    args, _qt = p.parse_known_args(list(argv))
    return args


#: the application icon: an SVG master and PNGs rendered from it (resources/build_icons.py), installed as package data
ICONS = Path(__file__).resolve().parents[1] / "resources" / "icons"


def app_icon():
    """The calibview icon at every rendered size (the window's title bar, the task switcher, the bundle)."""
    from PySide6 import QtGui

    icon = QtGui.QIcon()
    for png in sorted(ICONS.glob("calibview-*.png")):
        icon.addFile(str(png))
    return icon


def exit_now(status: int) -> None:
    """End the process with ``status`` once the window has closed (its settings written, its worker cancelled and
    joined): logging and the standard streams are flushed, and the interpreter's teardown is skipped. That teardown
    only frees memory the system takes back anyway (the engine's cache, torch, every Qt and pyqtgraph object), and it
    took seconds, most of a quit."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):      # closed or replaced streams: nothing left to flush
            pass
    os._exit(status)


def main(argv: Optional[Sequence[str]] = None, *, exit_process: bool = True) -> int:
    """The ``calibview`` window command: parse ``argv``, check the display and Qt's system libraries, open the window
    on the files (the demo when none) and run the event loop; returns the exit status (2: a usage error, 1: Qt
    cannot start). Once the event loop has run, ``exit_process`` ends the process there (``exit_now``: a quit well
    under a second) instead of returning."""
    t0 = time.perf_counter()
    configure_openmp()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    setup_logging(args)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("win32", "darwin")
            or os.environ.get("QT_QPA_PLATFORM")):
        print("calibview: no display found (DISPLAY is not set); for the report without a window use "
              "`calibview report FILE --out DIR`.", file=sys.stderr)
        return 2
    from calibview.gui.syslibs import xcb_problem

    problem = xcb_problem()              # Qt would abort with SIGABRT and no package name
    if problem:
        print(f"calibview: error: {problem}", file=sys.stderr)
        return 1
    from PySide6 import QtCore, QtWidgets

    from calibview.core.io.stream import tune_allocator
    from calibview.gui.main_window import MainWindow

    tune_allocator()                # a process-wide choice, so the program makes it, not the import of the core
    QtCore.QCoreApplication.setOrganizationName("calibview")
    QtCore.QCoreApplication.setApplicationName("calibview")
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0], *argv])
    app.setWindowIcon(app_icon())
    app.setDesktopFileName("calibview")          # matches resources/calibview.desktop (Wayland, task switchers)
    window = MainWindow()
    try:
        window.start(args.files, run=args.run, calibrators=args.calibrators)
    except CalibviewError as e:
        print(f"calibview: error: {e}", file=sys.stderr)
        return 2
    window.show()
    QtCore.QTimer.singleShot(0, lambda: logging.getLogger("calibview").info(
        "window shown %.2f s after start-up", time.perf_counter() - t0))
    # Ctrl+C in the terminal closes the window cleanly (Python only sees signals between Qt events).
    signal.signal(signal.SIGINT, lambda *_: window.close())
    timer = QtCore.QTimer()
    timer.start(200)
    timer.timeout.connect(lambda: None)
    status = app.exec()
    if window.isVisible():              # the loop ended another way than closing the window: close it (joins)
        window.close()
    if exit_process:
        exit_now(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
