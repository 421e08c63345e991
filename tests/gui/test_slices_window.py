"""Slices in the window: the Slices tab's combo lists the split's metadata columns, its rows are
core.slices.evaluate_slices' records (computed on the worker), and the canvas overlays each slice's curve."""

import numpy as np
import pytest
from PySide6 import QtCore

from calibview.core.stats import smoothing
from calibview.core.evaluation.engine import Engine
from calibview.core.io.logits import write_run
from calibview.gui.main_window import MainWindow

slices = pytest.importorskip("calibview.core.evaluation.slices")
WAIT_MS = 60_000


def sliced_file(path, n=1200, k=4, seed=0):
    """site B is over-confident (its logits scaled up), site A is not."""
    rng = np.random.default_rng(seed)
    for split in ("val", "test"):
        y = rng.integers(0, k, n)
        z = rng.normal(size=(n, k))
        z[np.arange(n), y] += 1.0
        site = np.where(rng.random(n) < 0.5, "A", "B")
        z[site == "B"] *= 3.0
        write_run(path, "m", "d", split, logits=(1.5 * z).astype(np.float32), labels=y,
                  meta={"site": site, "age": rng.uniform(20, 80, n)})
    return path


@pytest.fixture
def window(qtbot, tmp_path):
    w = MainWindow(settings=QtCore.QSettings(str(tmp_path / "s.ini"), QtCore.QSettings.IniFormat))
    qtbot.addWidget(w)
    w.session.n_boot = 100
    w.show()
    yield w
    w.close()


def test_slice_by_a_metadata_column(qtbot, window, tmp_path):
    path = sliced_file(tmp_path / "s.h5")
    window.open_files([path])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    view = window.slices_view
    assert [view.combo.itemText(i) for i in range(view.combo.count())] == ["(none)", "class", "site", "age"]
    view.combo.setCurrentText("site")
    view.combo.activated.emit(view.combo.currentIndex())
    qtbot.waitUntil(lambda: window.session.slices is not None, timeout=WAIT_MS)
    res = window.session.slices
    ref = slices.evaluate_slices(Engine(), window.session.evaluation.request, "site")
    assert len(res.evaluation.records) == len(ref.records) == 2 * 3           # (all, A, B) x (none, ts)
    for a, b in zip(res.evaluation.records, ref.records):
        assert (a["calibrator"], a["slice"]) == (b["calibrator"], b["slice"])
        assert a["ece"] == b["ece"] and a["delta_ece"] == b["delta_ece"] and a["flagged"] == b["flagged"]
    table = view.table
    assert table.rowCount() == 6 and table.item(0, 1).text() == "(all)" and table.item(1, 1).text() == "A"
    assert any(r["flagged"] for r in ref.records if r["calibrator"] == "none")   # site B is over-confident
    # the overlay: one curve per slice of the chosen calibrator, the core's curve of that slice's samples
    assert view.overlay_calibrator() == "ts"
    drawn = window.slice_overlay.drawn()
    assert len(drawn) == 2
    st = Engine().scored(window.session.evaluation.request)["ts"].stats
    rows = {s.name: s.rows for s in ref.slices}
    for (x, y), (name, n, _) in zip(drawn, sorted(res.curves["ts"], key=lambda e: -e[1])):
        sc = smoothing.sharpness_curve(smoothing.bin_stats(st.conf[rows[name]], st.correct[rows[name]],
                                                           st.brier[rows[name]]), window.session.bandwidth)
        ok = np.isfinite(y)
        assert ok.sum() > 50
        np.testing.assert_allclose(y[ok], sc.curve[::4][ok], rtol=0, atol=1e-12)
    window.bandwidth_bar.set_bandwidth(0.1)           # the overlay follows the bandwidth
    x, y = window.slice_overlay.drawn()[0]
    assert window.slice_overlay._at == (0.1, "gaussian")
    # back to none: no rows, no overlay
    view.combo.setCurrentText("(none)")
    view.combo.activated.emit(view.combo.currentIndex())
    assert window.session.slices is None and view.table.rowCount() == 0 and window.slice_overlay.drawn() == []


def test_slice_by_class(qtbot, window, tmp_path):
    window.open_files([sliced_file(tmp_path / "s.h5")])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.session.set_slice_by("class")
    qtbot.waitUntil(lambda: window.session.slices is not None, timeout=WAIT_MS)
    assert window.slices_view.table.rowCount() == 2 * (1 + 4)
    assert len(window.slice_overlay.drawn()) == 4


def test_slices_follow_a_new_evaluation(qtbot, window, tmp_path):
    window.open_files([sliced_file(tmp_path / "s.h5")])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.session.set_slice_by("site")
    window.session.set_bandwidth(0.1)
    window.session.evaluate()                 # supersedes the slices just asked for
    qtbot.waitUntil(lambda: window.session.slices is not None and not window.session.busy, timeout=WAIT_MS)
    assert window.session.slices.evaluation.request.bandwidth == 0.1
    assert window.session.slices.evaluation.request == window.session.evaluation.request
