"""Guards against a Qt binding that corrupts Python's reference counts (PySide6 6.12.0 did: every void call
dropped a reference to None, and Python aborted with none_dealloc after a few minutes of use)."""

import sys

from PySide6 import QtCore, QtWidgets


def test_qt_calls_and_signals_keep_reference_counts(qtbot):
    w = QtWidgets.QWidget()
    qtbot.addWidget(w)
    w.show()

    class Emitter(QtCore.QObject):
        fired = QtCore.Signal(bool)

    e = Emitter()
    got = []
    e.fired.connect(got.append)
    app = QtWidgets.QApplication.instance()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(5000):
        app.processEvents()
        w.update()
        e.fired.emit(True)
    got.clear()
    assert sys.getrefcount(None) >= none_before - 100
    assert sys.getrefcount(True) >= true_before - 100
