"""Before a bootstrap estimated above a minute, the window asks; No starts nothing, Yes evaluates."""

from __future__ import annotations

import pytest
from PySide6 import QtCore, QtWidgets

from calibview.core.evaluation import cost

pytestmark = pytest.mark.qt


@pytest.mark.parametrize("answer", ["No", "Yes"])
def test_a_long_bootstrap_asks_first(qtbot, window, demo_file, monkeypatch, answer):
    window.open_files([demo_file])
    qtbot.waitUntil(lambda: window.session.evaluation is not None and not window.session.busy, timeout=60_000)
    asked = []

    def reply(parent, title, text, *a, **k):
        asked.append(text)
        return getattr(QtWidgets.QMessageBox.StandardButton, answer)

    monkeypatch.setattr(QtWidgets.QMessageBox, "question", reply)
    monkeypatch.setattr(cost, "ANNOUNCE_S", 0.0)         # any bootstrap counts as long here
    window.panel.n_boot.setValue(50)
    gen = window.session.generation
    qtbot.mouseClick(window.panel.fit_button, QtCore.Qt.LeftButton)
    assert len(asked) == 1 and "resamples" in asked[0] and "(estimated)" in asked[0]
    if answer == "No":
        qtbot.wait(200)
        assert window.session.generation == gen
    else:
        qtbot.waitUntil(lambda: window.session.generation > gen and not window.session.busy, timeout=60_000)
        assert window.session.evaluation.request.n_boot == 50
