"""The worker's life: closing the window joins it, and a stale *completed* result is dropped (issue 9, 8.8-8.9)."""

import logging
import threading
import time

import numpy as np
from PySide6 import QtCore

from calibview.core.evaluate import evaluate
from calibview.core.logits import write_run
from calibview.gui import worker as worker_module
from calibview.gui.main_window import MainWindow


def _file(path, n=200_000, k=50):
    rng = np.random.default_rng(1)
    for split in ("val", "test"):
        write_run(path, "big", "data", split, logits=rng.normal(size=(n, k)).astype(np.float32),
                  labels=rng.integers(0, k, n), compression=None)
    return path


def test_closing_the_window_joins_a_worker_stuck_in_a_long_step(qtbot, tmp_path, monkeypatch, capfd, caplog):
    """A step that does not look at the cancel event for longer than shutdown's first wait (5 s): before, the
    window closed with the thread still running and Qt aborted with "Destroyed while thread is still running"."""
    path = _file(tmp_path / "big.h5")
    started = threading.Event()

    def slow_then_real(request, progress=None, cancel=None):
        started.set()
        time.sleep(6.0)                              # e.g. one long HDF5 read or solver call
        return evaluate(request, progress=progress, cancel=cancel)

    monkeypatch.setattr(worker_module, "evaluate", slow_then_real)
    w = MainWindow(settings=QtCore.QSettings(str(tmp_path / "s.ini"), QtCore.QSettings.IniFormat))
    qtbot.addWidget(w)
    w.show()
    w.open_files([path])
    assert started.wait(10)
    thread = w.session._thread
    with caplog.at_level(logging.WARNING, logger="calibview.gui.session"):
        w.close()
    finished = thread.isFinished()
    thread.wait()                                    # so that a failure here does not abort the test process
    assert finished
    assert [r.getMessage() for r in caplog.records].count(
        "calibview: waiting for the running evaluation to stop before closing.") == 1
    assert "Destroyed while thread" not in capfd.readouterr().err


def test_closing_the_window_right_after_starting_joins_the_worker(qtbot, tmp_path, capfd):
    path = _file(tmp_path / "big.h5")
    w = MainWindow(settings=QtCore.QSettings(str(tmp_path / "s.ini"), QtCore.QSettings.IniFormat))
    qtbot.addWidget(w)
    w.show()
    w.open_files([path])
    assert w.session.busy
    w.close()
    assert w.session._thread.isFinished()
    assert "Destroyed while thread" not in capfd.readouterr().err
