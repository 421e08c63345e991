"""QApplication and main(): ``calibview [FILE ...]`` opens the window; with no file it opens the bundled demo."""

from __future__ import annotations

import os
import signal
import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("win32", "darwin")
            or os.environ.get("QT_QPA_PLATFORM")):
        print("calibview: no display found (DISPLAY is not set); for the report without a window use "
              "`calibview report FILE --out DIR`.", file=sys.stderr)
        return 2
    from PySide6 import QtCore, QtWidgets

    from calibview.core.stream import tune_allocator
    from calibview.gui.main_window import MainWindow

    tune_allocator()                # a process-wide choice, so the program makes it, not the import of the core
    QtCore.QCoreApplication.setOrganizationName("calibview")
    QtCore.QCoreApplication.setApplicationName("calibview")
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0], *argv])
    window = MainWindow()
    files = [a for a in argv if not a.startswith("-")]
    if files:
        window.open_files(files)
    else:
        window.open_demo()
    window.show()
    # Ctrl+C in the terminal closes the window cleanly (Python only sees signals between Qt events).
    signal.signal(signal.SIGINT, lambda *_: window.close())
    timer = QtCore.QTimer()
    timer.start(200)
    timer.timeout.connect(lambda: None)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
