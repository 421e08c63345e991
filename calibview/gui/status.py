"""The window's status bar: the hover readout and the evaluation's status each in their own field.

Left, stretching: the hover readout (confidence, then each curve's accuracy and density), elided with "…" at
its field's edge. Right, after a separator: the status of the last request ("Reading …", "Evaluated in 6.8 s on
cpu · 3 warning(s)", "Evaluation failed."), elided at its end rather than cut, so its beginning stays readable
and a long progress message never widens the window; then the progress bar and Cancel. Full texts are in the
tooltips.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt


class ElidedLabel(QtWidgets.QLabel):
    """A one-line label that shows as much of its text as fits, ending in "…"; ``text()`` is the full text."""

    def __init__(self, text: str = "", min_chars: int = 0, parent=None) -> None:
        super().__init__(text, parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._min_chars = min_chars
        self._tip = ""

    def setText(self, text: str) -> None:  # noqa: N802 (Qt naming)
        super().setText(text)
        self.updateGeometry()
        self.update()

    def setToolTip(self, tip: str) -> None:  # noqa: N802
        self._tip = tip
        super().setToolTip(tip)

    def displayed_text(self) -> str:
        """The text as painted at the label's current width."""
        width = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, max(width, 0))

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802
        hint = super().minimumSizeHint()
        m = self.contentsMargins()
        return QtCore.QSize(self.fontMetrics().averageCharWidth() * self._min_chars + m.left() + m.right(),
                            hint.height())

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802
        shown = self.displayed_text()
        full = self.text()
        # the full text on hover when it is cut (and the caller's own tooltip otherwise)
        QtWidgets.QLabel.setToolTip(self, "\n".join(t for t in (full if shown != full else "", self._tip) if t))
        painter = QtGui.QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), shown)


class StatusFields(QtCore.QObject):
    """Builds the fields into ``bar``; ``hover`` and ``status`` are ElidedLabels, ``progress`` a QProgressBar,
    ``cancel`` a QPushButton."""

    def __init__(self, bar: QtWidgets.QStatusBar, parent=None) -> None:
        super().__init__(parent or bar)
        self.hover = ElidedLabel("")
        self.hover.setObjectName("hover-readout")
        self.hover.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
        self.status = ElidedLabel("", min_chars=16)
        self.status.setObjectName("status-text")
        self.status.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Preferred)
        self.status.setContentsMargins(6, 0, 2, 0)
        separator = QtWidgets.QFrame()
        separator.setFrameShape(QtWidgets.QFrame.Shape.VLine)
        separator.setFrameShadow(QtWidgets.QFrame.Shadow.Sunken)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(220)
        self.progress.setMinimumWidth(60)
        self.progress.setTextVisible(False)
        self.cancel = QtWidgets.QPushButton("Cancel")
        self.cancel.setToolTip("Stop the running evaluation (Esc)")
        bar.addWidget(self.hover, 1)
        bar.addPermanentWidget(separator)
        bar.addPermanentWidget(self.status)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel)
