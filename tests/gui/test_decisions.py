"""The Decisions view: risk-coverage and the threshold audit come from the session's worker path, the slider does
an O(log N) lookup per move, and the audit agrees with direct computations (Wilson interval against scipy)."""

import math
import statistics
import time

import numpy as np
import pytest
from PySide6 import QtCore
from scipy.stats import binomtest

from calibview.core.evaluation.engine import Engine
from calibview.gui.views.decisions_view import STEPS, slider_to_threshold, threshold_to_slider

WAIT_MS = 60_000
pytestmark = pytest.mark.window(n_boot=0, size=(1280, 800))


def _open(qtbot, w, path):
    w.open_files([path])
    qtbot.waitUntil(lambda: not w.session.busy and w.session.evaluation is not None, timeout=WAIT_MS)


def _direct(conf, correct, t):
    above = conf >= t
    n = int(above.sum())
    hits = int(correct[above].sum())
    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    return n, hits / n, float(conf[above].mean()), ci.low, ci.high


def test_nothing_is_computed_while_the_view_is_hidden(qtbot, window, domains_file):
    _open(qtbot, window, domains_file)
    qtbot.wait(100)
    assert window.session.decisions is None          # the Decisions tab is behind Metrics
    window.decisions_dock.raise_()
    qtbot.waitUntil(lambda: window.session.decisions is not None, timeout=WAIT_MS)


def test_audit_matches_direct_computation(qtbot, window, domains_file):
    path = domains_file
    _open(qtbot, window, path)
    window.decisions_dock.raise_()
    qtbot.waitUntil(lambda: window.session.decisions is not None, timeout=WAIT_MS)
    data = window.session.decisions
    assert data.eval_split == "test" and list(data.calibrators) == ["none", "ts"]
    scored = Engine().scored(window.session.evaluation.request)       # an independent engine
    for t in (0.5, 0.8, 0.9, 0.95, 0.999):
        window.decisions.set_threshold(t)
        shown = window.decisions.readout()
        for name, a in shown.items():
            st = scored[name].stats
            if not (st.conf >= t).any():
                assert a.n == 0 and math.isnan(a.accuracy) and not a.flagged
                continue
            n, acc, mean_conf, lo, hi = _direct(st.conf, st.correct, t)
            assert (a.n, a.coverage) == (n, n / st.conf.shape[0])
            assert a.accuracy == pytest.approx(acc, abs=1e-12) and a.mean_conf == pytest.approx(mean_conf, abs=1e-12)
            assert a.lo == pytest.approx(lo, abs=1e-12) and a.hi == pytest.approx(hi, abs=1e-12)
            assert a.flagged == (not lo <= mean_conf <= hi)
        table = window.decisions.table
        assert table.rowCount() == 2 and table.item(0, 1).text() == f"{shown['none'].n:,}"
    # the curve: selective risk at the tie-group ends, ending at the overall error; its area is the table's AURC
    for name, c in data.calibrators.items():
        assert c.aurc == pytest.approx(window.session.evaluation.result(name).metrics["aurc"].value, abs=1e-12)
    c = data.calibrators["none"]
    st = scored["none"].stats
    assert c.coverage[-1] == 1.0 and c.risk[-1] == pytest.approx(1 - st.correct.mean(), abs=1e-12)
    # hiding a calibrator removes its curve and row
    window.session.set_visible({"none"})
    assert list(window.decisions.readout()) == ["none"] and window.decisions.table.rowCount() == 1


def test_deploy_split_is_flagged_over_confident(qtbot, window, domains_file):
    _open(qtbot, window, domains_file)
    window.browser.compare_list.item(1).setCheckState(QtCore.Qt.Checked)        # deploy
    qtbot.waitUntil(lambda: len(window.session.evaluations) == 2 and not window.session.busy, timeout=WAIT_MS)
    window.decisions_dock.raise_()
    qtbot.waitUntil(lambda: window.session.decisions is not None, timeout=WAIT_MS)
    combo = window.decisions.split_combo
    assert [combo.itemText(i) for i in range(combo.count())] == ["test", "deploy"] and combo.isEnabled()
    combo.setCurrentIndex(1)
    combo.activated.emit(1)
    qtbot.waitUntil(lambda: window.session.decisions.eval_split == "deploy", timeout=WAIT_MS)
    window.decisions.set_threshold(0.9)
    a = window.decisions.readout()["none"]
    assert a.flagged and a.mean_conf > a.hi
    assert "over-conf" in window.decisions.table.item(0, 5).text()


def test_slider_mapping_round_trips():
    assert slider_to_threshold(0) == 0.0 and slider_to_threshold(STEPS) == pytest.approx(0.999)
    for t in (0.5, 0.9, 0.95, 0.99):
        assert slider_to_threshold(threshold_to_slider(t)) == pytest.approx(t, abs=0.01 * (1 - t) + 1e-9)


def test_threshold_move_latency_in_a_real_event_loop(qtbot, window, demo_file, capsys):
    """Slider moves driven by a timer inside the running event loop (each move followed by the repaint the loop
    does on its own): the handler's time per move and the time between consecutive moves."""
    _open(qtbot, window, demo_file)
    window.decisions_dock.raise_()
    qtbot.waitUntil(lambda: window.session.decisions is not None, timeout=WAIT_MS)
    slider = window.decisions.slider
    handler, ticks, values = [], [], list(range(200, 1000, 4))
    loop = QtCore.QEventLoop()

    def move():
        if not values:
            timer.stop()
            loop.quit()
            return
        t0 = time.perf_counter()
        slider.setValue(values.pop(0))
        handler.append(time.perf_counter() - t0)
        ticks.append(t0)

    timer = QtCore.QTimer()
    timer.setInterval(0)
    timer.timeout.connect(move)
    timer.start()
    QtCore.QTimer.singleShot(60_000, loop.quit)
    loop.exec()
    assert not values
    gaps = np.diff(ticks)
    med, p95 = statistics.median(handler), float(np.quantile(handler, 0.95))
    with capsys.disabled():
        print(f"\nthreshold move (N = {window.session.decisions.n:,}, {len(window.decisions.readout())} calibrators): "
              f"handler median {1e3 * med:.2f} ms, p95 {1e3 * p95:.2f} ms; move-to-move incl. repaint median "
              f"{1e3 * statistics.median(gaps):.2f} ms, max {1e3 * gaps.max():.2f} ms")
    assert med < 0.005 and p95 < 0.02
    assert math.isclose(window.decisions.threshold, slider_to_threshold(996))


def test_the_accuracy_interval_has_its_estimates_precision(qtbot, window, domains_file):
    """The interval has its estimate's decimals ("97.12 [96.8, 97.4]" gave it one fewer)."""
    import re
    _open(qtbot, window, domains_file)
    window.decisions_dock.raise_()
    qtbot.waitUntil(lambda: window.session.decisions is not None, timeout=WAIT_MS)
    window.decisions.set_threshold(0.5)
    text = window.decisions.table.item(0, 3).text()
    numbers = re.findall(r"\d+\.(\d+)", text)
    assert len(numbers) == 3 and len({len(d) for d in numbers}) == 1, text


def test_the_audit_column_is_never_cut(qtbot, window, binary_file):
    """Seven calibrators at 1280 x 720: the table was narrower than its columns, and the Audit column ("⚠ ove")
    lay behind a horizontal scroll bar."""
    window.start([binary_file], calibrators="none,ts,hb,ir,platt,beta,vs")
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.resize(1280, 720)
    window.decisions_dock.raise_()
    qtbot.waitUntil(lambda: window.session.decisions is not None, timeout=WAIT_MS)
    view = window.decisions
    view.set_threshold(0.99)
    qtbot.wait(200)
    table, header = view.table, view.table.horizontalHeader()
    audit = table.columnCount() - 1
    assert table.rowCount() == 7
    assert table.horizontalScrollBar().maximum() == 0
    right = header.sectionViewportPosition(audit) + header.sectionSize(audit)
    assert right <= table.viewport().width()
    texts = [table.item(r, audit).text() for r in range(table.rowCount())]
    assert any(t.startswith("⚠") for t in texts) or all(t == "ok" for t in texts)
    metrics = table.fontMetrics()
    for col in range(1, table.columnCount()):               # every number and flag whole, its header too
        widest = max(metrics.horizontalAdvance(table.item(r, col).text()) for r in range(table.rowCount()))
        assert header.sectionSize(col) >= widest, table.horizontalHeaderItem(col).text()
    assert view.plot.width() >= view.plot.minimumWidth()
