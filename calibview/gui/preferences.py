"""What the window remembers between sessions, in its QSettings: the bandwidth and kernel, the theme, the window's
geometry and dock layout, and the last folder a file was opened from or exported to. Also the application's
light and dark palettes, so that the docks match the canvas's theme.

Keys: ``bandwidth``, ``kernel``, ``theme``, ``geometry``, ``window_state``, ``last_dir`` (and ``recent``, kept by
:mod:`calibview.gui.recent`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.evaluation.request import KERNELS
from calibview.gui import layout
from calibview.gui.model.document import REQUEST_DEFAULTS
from calibview.gui.views.bandwidth_bar import H_MAX, H_MIN

THEMES = ("light", "dark")


def theme_name(value) -> str:
    """A theme's name as stored; "light" for anything that is not one."""
    return value if value in THEMES else "light"


def last_dir(settings: QtCore.QSettings) -> Path:
    """The folder of the last file opened or exported (the home folder at first)."""
    return Path(settings.value("last_dir", str(Path.home())))


def remember_dir(settings: QtCore.QSettings, folder) -> None:
    """The folder the next file dialog starts in."""
    settings.setValue("last_dir", str(folder))


def restore_session(settings: QtCore.QSettings, session) -> None:
    """The last session's bandwidth (within the slider's range) and kernel; EvalRequest's defaults when the
    stored values are missing or unreadable."""
    try:
        session.bandwidth = min(max(float(settings.value("bandwidth", REQUEST_DEFAULTS["bandwidth"])), H_MIN), H_MAX)
    except (TypeError, ValueError):
        session.bandwidth = REQUEST_DEFAULTS["bandwidth"]
    kernel = settings.value("kernel", REQUEST_DEFAULTS["kernel"])
    session.kernel = kernel if kernel in KERNELS else REQUEST_DEFAULTS["kernel"]


def restore_layout(window: QtWidgets.QMainWindow, settings: QtCore.QSettings) -> bool:
    """The geometry and dock layout of the last session, brought onto this screen; False when there was none."""
    geometry = settings.value("geometry")
    state = settings.value("window_state")
    if geometry is not None:
        window.restoreGeometry(geometry)
    if state is not None:
        window.restoreState(state)
    layout.fit_to_screen(window)          # a size saved on a bigger screen
    return state is not None


def save(window: QtWidgets.QMainWindow, settings: QtCore.QSettings, session, theme: str) -> None:
    """Keep the window's geometry and dock layout, the session's bandwidth and kernel, and the theme."""
    settings.setValue("geometry", window.saveGeometry())
    settings.setValue("window_state", window.saveState())
    settings.setValue("bandwidth", session.bandwidth)
    settings.setValue("kernel", session.kernel)
    settings.setValue("theme", theme)
    settings.sync()


def apply_palette(app: Optional[QtWidgets.QApplication], name: str) -> None:
    """Fusion style with a light or dark palette, so the docks match the canvas."""
    if app is None:
        return
    app.setStyle("Fusion")
    if name == "light":
        app.setPalette(app.style().standardPalette())
        return
    p = QtGui.QPalette()
    c = QtGui.QColor
    roles = {
        QtGui.QPalette.Window: c(37, 38, 41), QtGui.QPalette.WindowText: c(225, 225, 225),
        QtGui.QPalette.Base: c(27, 28, 30), QtGui.QPalette.AlternateBase: c(44, 45, 48),
        QtGui.QPalette.ToolTipBase: c(50, 50, 54), QtGui.QPalette.ToolTipText: c(230, 230, 230),
        QtGui.QPalette.Text: c(225, 225, 225), QtGui.QPalette.Button: c(48, 49, 53),
        QtGui.QPalette.ButtonText: c(225, 225, 225), QtGui.QPalette.Highlight: c(56, 117, 215),
        QtGui.QPalette.HighlightedText: c(255, 255, 255), QtGui.QPalette.PlaceholderText: c(140, 140, 140),
    }
    for role, color in roles.items():
        p.setColor(role, color)
    p.setColor(QtGui.QPalette.Disabled, QtGui.QPalette.Text, c(120, 120, 120))
    p.setColor(QtGui.QPalette.Disabled, QtGui.QPalette.WindowText, c(110, 110, 110))
    p.setColor(QtGui.QPalette.Disabled, QtGui.QPalette.ButtonText, c(120, 120, 120))
    app.setPalette(p)
