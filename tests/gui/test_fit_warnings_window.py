"""The window shows a fit split's warnings: a one-sample and a single-class fit split each mark temperature
scaling with ⚠, its tooltip and the status line's tooltip saying why."""

import numpy as np
import pytest

from conftest import WAIT_MS, _wait_idle

pytestmark = pytest.mark.window(n_boot=0)


def _file(tmp_path, name, fit_labels):
    from calibview.core.io.writer import write_run

    rng = np.random.default_rng(0)
    path = tmp_path / f"{name}.h5"
    for split, y in (("val", np.asarray(fit_labels)), ("test", rng.integers(0, 4, 300))):
        z = rng.normal(size=(len(y), 4))
        z[np.arange(len(y)), y] += 1.0
        write_run(path, "m", "d", split, logits=(2 * z).astype(np.float32), labels=y)
    return path


@pytest.mark.parametrize("case,labels,words", [("one", [2], "single sample"),
                                                ("single", [0] * 200, "has class 0")])
def test_fit_split_warnings_are_marked_in_the_calibrator_list_and_status(qtbot, window, tmp_path, case, labels,
                                                                          words):
    from PySide6 import QtCore

    window.session.set_calibrators(["none", "ts"])
    window.open_files([_file(tmp_path, case, labels)])
    _wait_idle(qtbot, window, WAIT_MS)
    ev = window.session.evaluation
    assert ev.request.fit_split == "val" and ev.n_fit == len(labels)
    items = [window.panel.list.item(i) for i in range(window.panel.list.count())]
    ts = next(it for it in items if it.data(QtCore.Qt.UserRole) == "ts")
    assert ts.text().endswith("⚠")
    assert any(line.startswith("⚠ ") and words in line for line in ts.toolTip().splitlines())
    assert "warning(s)" in window.progress_label.text() and words in window.progress_label.toolTip()
