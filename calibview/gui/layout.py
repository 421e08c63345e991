"""What makes the window fit a laptop (1280 x 720, 1366 x 768) as well as a desktop screen.

- :func:`scrollable`: a dock's content in a scroll area, so a tall panel (the calibrators) shrinks with the
  window instead of setting its minimum height;
- :func:`default_size` and :func:`fit_to_screen`: the first size fits the screen, and a size restored from a
  bigger screen is brought back onto this one;
- :class:`DockShare`: the bottom docks (Metrics, Decisions) keep their share of the window's height when it is
  resized, rather than a fixed height under a growing diagram; dragging the separator sets the share.
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

#: The size the window asks for on a large screen; smaller screens get a share of theirs.
PREFERRED = QtCore.QSize(1400, 900)


def scrollable(widget: QtWidgets.QWidget) -> QtWidgets.QScrollArea:
    """``widget`` in a frameless scroll area as wide as its content, scrolling vertically only."""
    area = QtWidgets.QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    # as wide as its content (no horizontal scrolling), as short as the window needs
    area.setMinimumWidth(widget.minimumSizeHint().width() + area.verticalScrollBar().sizeHint().width())
    return area


def available(window: QtWidgets.QWidget) -> QtCore.QRect:
    """The available geometry of ``window``'s screen (PREFERRED's size when there is no screen)."""
    screen = window.screen() or QtWidgets.QApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else QtCore.QRect(0, 0, PREFERRED.width(),
                                                                              PREFERRED.height())


def default_size(window: QtWidgets.QWidget) -> QtCore.QSize:
    """PREFERRED, or 94 % of the screen's available area where that is smaller (title bar and frame fit)."""
    avail = available(window)
    return QtCore.QSize(min(PREFERRED.width(), int(avail.width() * 0.94)),
                        min(PREFERRED.height(), int(avail.height() * 0.92)))


def fit_to_screen(window: QtWidgets.QWidget) -> None:
    """Shrink and move the window onto the screen's available area (after restoring another screen's size)."""
    avail = available(window)
    frame = window.frameGeometry()
    extra_w, extra_h = frame.width() - window.width(), frame.height() - window.height()
    w = min(window.width(), avail.width() - extra_w)
    h = min(window.height(), avail.height() - extra_h)
    if (w, h) != (window.width(), window.height()):
        window.resize(max(w, 1), max(h, 1))
    x = min(max(window.x(), avail.left()), avail.right() - w - extra_w + 1)
    y = min(max(window.y(), avail.top()), avail.bottom() - h - extra_h + 1)
    if (x, y) != (window.x(), window.y()):
        window.move(x, y)


class DockShare(QtCore.QObject):
    """Keeps ``dock``'s height a fixed share of ``window``'s height across window resizes."""

    def __init__(self, window: QtWidgets.QMainWindow, docks, share: float = 0.3, on_show: bool = True) -> None:
        """``on_show``: apply the share when the window is first shown (not when a saved layout was restored:
        the dock's size hint, a table's full height, would otherwise squeeze the diagram on a small screen)."""
        super().__init__(window)
        self.window, self.docks, self.share = window, list(docks), share
        self._on_show = on_show
        self._resizing = False
        self._height = window.height()
        window.installEventFilter(self)
        for dock in self.docks:
            dock.installEventFilter(self)

    def _visible_dock(self):
        return next((d for d in self.docks if d.isVisible() and not d.isFloating()
                     and self.window.dockWidgetArea(d) == Qt.DockWidgetArea.BottomDockWidgetArea), None)

    def apply(self) -> None:
        """Give the visible bottom dock its share of the window's current height."""
        self._height = self.window.height()
        dock = self._visible_dock()
        if dock is not None:
            self._resizing = True
            self.window.resizeDocks([dock], [int(self.share * self._height)], Qt.Orientation.Vertical)
            QtCore.QTimer.singleShot(0, self._done)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt naming)
        if obj is self.window and event.type() == QtCore.QEvent.Type.Show and self._on_show:
            self._on_show = False
            self.apply()
            return False
        if event.type() != QtCore.QEvent.Type.Resize:
            return False
        if obj is self.window:
            if self.window.height() != self._height:
                self.apply()
        elif not self._resizing and obj is self._visible_dock() and self.window.height() == self._height \
                and self._height > 0:
            self.share = min(0.8, max(0.1, obj.height() / self._height))    # the user dragged the separator
        return False

    def _done(self) -> None:
        self._resizing = False
