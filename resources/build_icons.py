"""Render calibview/resources/icons/calibview.svg to the PNG sizes desktops and the bundle use (16 to 512 px).

    QT_QPA_PLATFORM=offscreen python resources/build_icons.py

A maintainer script (not installed); the PNGs are committed so that nothing needs Qt's SVG module at run time.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6 import QtCore, QtGui, QtSvg, QtWidgets

SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICONS = Path(__file__).resolve().parents[1] / "calibview" / "resources" / "icons"


def main() -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])   # noqa: F841 (QPainter needs it)
    renderer = QtSvg.QSvgRenderer(str(ICONS / "calibview.svg"))
    if not renderer.isValid():
        raise SystemExit("calibview.svg could not be read")
    for size in SIZES:
        image = QtGui.QImage(size, size, QtGui.QImage.Format_ARGB32)
        image.fill(QtCore.Qt.transparent)
        painter = QtGui.QPainter(image)
        painter.setRenderHint(QtGui.QPainter.Antialiasing)
        renderer.render(painter, QtCore.QRectF(0, 0, size, size))
        painter.end()
        out = ICONS / f"calibview-{size}.png"
        if not image.save(str(out)):
            raise SystemExit(f"could not write {out}")
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
