"""Slices in the window: the Slices tab's combo lists the split's metadata columns, its rows are
core.evaluation.slices.evaluate_slices' records (computed on the worker), and the canvas overlays each slice's curve."""

import numpy as np
import pytest
from PySide6 import QtCore

from calibview.core.stats import smoothing
from calibview.core.evaluation.engine import Engine

slices = pytest.importorskip("calibview.core.evaluation.slices")
WAIT_MS = 60_000


def test_slice_by_a_metadata_column(qtbot, window, sliced_file):
    window.open_files([sliced_file])
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


def test_slice_by_class(qtbot, window, sliced_file):
    window.open_files([sliced_file])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.session.set_slice_by("class")
    qtbot.waitUntil(lambda: window.session.slices is not None, timeout=WAIT_MS)
    assert window.slices_view.table.rowCount() == 2 * (1 + 4)
    assert len(window.slice_overlay.drawn()) == 4


def test_slices_follow_a_new_evaluation(qtbot, window, sliced_file):
    window.open_files([sliced_file])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.session.set_slice_by("site")
    window.session.set_bandwidth(0.1)
    window.session.evaluate()                 # supersedes the slices just asked for
    qtbot.waitUntil(lambda: window.session.slices is not None and not window.session.busy, timeout=WAIT_MS)
    assert window.session.slices.evaluation.request.bandwidth == 0.1
    assert window.session.slices.evaluation.request == window.session.evaluation.request


@pytest.mark.parametrize("popup", [False, True])
def test_the_keyboard_path_in_slices_computes(qtbot, window, sliced_file, popup):
    """Down and Return in "Slice by" (on the closed combo, or in its open list) pick "class" and compute its
    slices, saying so at once: before, the caption still said "Pick a column" while nothing on screen changed."""
    from PySide6 import QtWidgets

    window.open_files([sliced_file])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.table.tabs.setCurrentWidget(window.slices_view)
    view = window.slices_view
    view.combo.setFocus()
    if popup:
        view.combo.showPopup()
        qtbot.waitUntil(lambda: view.combo.view().isVisible(), timeout=5000)
        target = view.combo.view()
    else:
        target = view.combo
    qtbot.keyClick(target, QtCore.Qt.Key.Key_Down)
    qtbot.keyClick(target, QtCore.Qt.Key.Key_Return)
    assert view.combo.currentText() == "class" and window.session.slice_by == "class"
    assert view.caption.text() == "Computing slices by class…"
    qtbot.waitUntil(lambda: window.session.slices is not None, timeout=WAIT_MS)
    assert window.session.slices.evaluation.column == "class"
    assert view.table.rowCount() == 2 * (1 + 4)
    assert "by class: 4 slices" in view.caption.text()
    assert len(window.slice_overlay.drawn()) == 4
    # and back to none with the keyboard: nothing left
    view.combo.setFocus()
    qtbot.keyClick(view.combo, QtCore.Qt.Key.Key_Up)
    assert window.session.slice_by is None and view.table.rowCount() == 0 and window.slice_overlay.drawn() == []
    assert QtWidgets.QApplication.activePopupWidget() is None


@pytest.mark.window(n_boot=0)
@pytest.mark.parametrize("size", [(1100, 660), (1280, 720), (1920, 1080)])
def test_the_slice_legend_covers_neither_the_legend_nor_the_plot_edge(qtbot, window, demo_file, size):
    """Ten classes of CIFAR-10 over seven calibrators: the slices' legend lay over the canvas's legend and ran out
    of the plot."""
    window.start([demo_file], run="resnet110-brier/cifar10", calibrators="ts,ts-grid,vs,hb,ir,mrr")
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.resize(*size)
    qtbot.wait(200)
    window.session.set_slice_by("class")
    qtbot.waitUntil(lambda: window.session.slices is not None, timeout=WAIT_MS)
    qtbot.wait(200)
    overlay, canvas, view = window.slice_overlay, window.canvas, window.slices_view
    assert len(overlay.drawn()) == 10
    pens = [item.opts["pen"].color().name() for item, _ in overlay.items]
    # the Slices tab's rows of the overlaid calibrator carry each curve's colour, whatever the legend shows
    rows = {view.table.item(r, 1).text(): view.table.item(r, 1) for r in range(view.table.rowCount())
            if view.table.item(r, 0).text() == window.session.slices.labels[view.overlay_calibrator()]}
    swatches = {name: item.icon().pixmap(14, 4).toImage().pixelColor(7, 2).name() for name, item in rows.items()
                if not item.icon().isNull()}
    assert sorted(swatches.values()) == sorted(pens) and len(swatches) == 10
    for step in ("shown", "zoomed", "fewer calibrators"):
        qtbot.wait(100)
        if overlay.legend.isVisible():
            box = overlay.legend.sceneBoundingRect()
            frame = canvas.accuracy_plot.vb.sceneBoundingRect()
            assert frame.contains(box), (step, box, frame)
            assert not box.intersects(canvas.legend_box.sceneBoundingRect()), step
            text = overlay.legend.textItem.toPlainText()
            assert "Temperature scaling by slice" in text
            if overlay.form[0]:
                assert all(name in text for name in ("airplane", "truck"))
        else:                                  # no room at all beside the canvas's legend: the table has them
            assert size == (1100, 660)
        if step == "shown":
            canvas.set_x_range((0.5, 1.0))
        elif step == "zoomed":
            window.session.set_visible({"none", "ts"})
    assert overlay.legend.isVisible()         # two calibrators' legend leaves room for the slices'
    if size == (1920, 1080):
        assert overlay.form == (1, True)       # room for the whole legend, one slice a row with its n
