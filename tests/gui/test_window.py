"""The window driven as a person would: start on the demo, drag the slider, fit, export, bad files, cancel."""

import csv
import time

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.cli import main as cli_main
from calibview.core.evaluation.toplabel.absent import BINARY_METRICS
from calibview.core.reports.tables import metric_columns
from calibview.core.stats.metrics import NO_INTERVAL
from calibview.gui.main_window import bandwidth_to_slider, slider_to_bandwidth

WAIT_MS = 120_000


def assert_drawn_is_core_curve(window, result, h, kernel="gaussian"):
    """The canvas draws the core's curve: every drawn point (x, y) is a grid point of result.curve(h) with
    exactly its value (the canvas may thin the grid, and draws gaps where the curve is undefined)."""
    x, y = window.canvas.drawn_curve(result.name)
    ref = result.curve(h, kernel)
    ok = np.isfinite(y)
    assert ok.sum() > 100
    idx = np.searchsorted(ref.x, x[ok])
    np.testing.assert_array_equal(ref.x[idx], x[ok])
    assert ref.valid[idx].all()
    np.testing.assert_array_equal(ref.curve[idx], y[ok])


def _wait_idle(qtbot, w, timeout=WAIT_MS):
    qtbot.waitUntil(lambda: not w.session.busy and w.session.evaluation is not None, timeout=timeout)


def test_starts_on_the_demo_and_draws_its_diagram(qtbot, window, demo_file):
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    ev = window.session.evaluation
    assert ev.run.name == "resnet110-brier/cifar10" and {r.name for r in ev.results} == {"none", "ts"}
    assert_drawn_is_core_curve(window, ev.result("none"), window.session.bandwidth)
    assert window.browser.tree.topLevelItemCount() == 1


def test_slider_redraws_the_core_curve_without_the_worker(qtbot, window, demo_file):
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    gen = window.session.generation
    slider = window.bandwidth_bar.slider
    slider.setSliderDown(True)                  # dragging: no re-evaluation while the button is held
    for value in (100, 350, 600, 900):
        slider.setValue(value)
        h = slider_to_bandwidth(value)
        assert window.session.bandwidth == pytest.approx(h)
        assert window.bandwidth_bar.box.value() == pytest.approx(h, abs=1e-4)
        for r in window.session.evaluation.results:
            assert_drawn_is_core_curve(window, r, h)
    assert window.session.generation == gen     # the worker was never asked
    slider.setSliderDown(False)
    # released: the bandwidth-dependent metrics (CAL, TOT) are refreshed by one new evaluation
    qtbot.waitUntil(lambda: window.session.generation == gen + 1, timeout=5000)
    _wait_idle(qtbot, window)
    assert window.session.evaluation.request.bandwidth == pytest.approx(slider_to_bandwidth(900))
    assert bandwidth_to_slider(slider_to_bandwidth(350)) == 350


def test_fit_matches_calibview_report(qtbot, window, demo_file, tmp_path):
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    window.browser.tree.setCurrentItem(_run_item(window, "resnet110-brier/cifar100"))
    _wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.session.evaluation.run.name == "resnet110-brier/cifar100", timeout=WAIT_MS)
    for name, box in window.panel.boxes.items():
        box.setChecked(name in ("ts", "ts-grid"))
    window.panel.n_boot.setValue(200)
    gen = window.session.generation
    qtbot.mouseClick(window.panel.fit_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: window.session.generation > gen and not window.session.busy, timeout=WAIT_MS)
    ev = window.session.evaluation
    assert [r.name for r in ev.results] == ["none", "ts", "ts-grid"]
    out = tmp_path / "rep"
    assert cli_main(["report", str(demo_file), "--run", "resnet110-brier/cifar100", "--calibrators",
                     "none,ts,ts-grid", "--n-boot", "200", "--out", str(out), "--quiet"]) == 0
    with open(out / "metrics.csv", newline="") as f:
        cli_rows = {r["calibrator"]: r for r in csv.DictReader(f)}
    # the table's CSV is the report's CSV, digit for digit
    table_rows = {r["calibrator"]: r for r in csv.DictReader(window.table.csv_text().splitlines())}
    for name in ("none", "ts", "ts-grid"):
        for col in metric_columns():
            assert table_rows[name][col] == cli_rows[name][col], (name, col)
    assert_drawn_is_core_curve(window, ev.result("ts"), window.session.bandwidth)


def _run_item(window, name):
    it = QtWidgets.QTreeWidgetItemIterator(window.browser.tree)
    while it.value():
        if it.value().data(0, QtCore.Qt.UserRole + 1) == name:
            return it.value()
        it += 1
    raise AssertionError(name)


def test_exports(qtbot, window, demo_file, tmp_path):
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    png = window.export("png", str(tmp_path / "d.png"))
    img = QtGui.QImage(png)
    assert img.width() == 2 * window.canvas.width() and img.height() == 2 * window.canvas.height()
    colors = {img.pixel(x, y) for x in range(0, img.width(), 17) for y in range(0, img.height(), 17)}
    assert len(colors) > 20                                         # not blank
    svg = window.export("svg", str(tmp_path / "d.svg"))
    assert "<svg" in open(svg).read()
    path = window.export("metrics", str(tmp_path / "m.csv"))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    ev = window.session.evaluation
    for row, r in zip(rows, ev.results):
        assert row["calibrator"] == r.name
        for m, est in r.metrics.items():
            if not row[m]:                              # empty: absent here (K > 2's log CORP)
                assert m in BINARY_METRICS and np.isnan(est.value)
                continue
            lo = float(row[m + "_lo"]) if row[m + "_lo"] else None     # a p-value has no interval
            assert float(row[m]) == est.value and lo == (None if m in NO_INTERVAL else est.lo)
    assert window.export("curves", str(tmp_path / "c.csv"))
    assert window.export("json", str(tmp_path / "c.json"))


def test_malformed_file_gives_a_dialog_not_a_crash(qtbot, window, tmp_path, nan_file):
    bad = tmp_path / "bad.h5"
    bad.write_text("this is not hdf5")
    window.open_files([bad])
    assert window.last_error is not None and "not an HDF5 file" in window.last_error[1]
    assert window.error_box is not None and window.error_box.isVisible()
    window.error_box.close()
    # NaN logits pass the metadata check and fail in the worker: a dialog again, the window lives on
    window.last_error = None
    window.open_files([nan_file])
    qtbot.waitUntil(lambda: window.last_error is not None, timeout=WAIT_MS)
    assert "NaN" in window.last_error[1] and str(nan_file) in window.last_error[1]
    assert not window.session.busy


def test_cancel_a_long_evaluation(qtbot, window, big_file):
    path = big_file()
    window.session.n_boot = 1000
    window.open_files([path])
    qtbot.waitUntil(lambda: window.session.busy, timeout=5000)
    qtbot.waitUntil(lambda: window.progress.value() > 0, timeout=WAIT_MS)
    t = time.monotonic()
    qtbot.mouseClick(window.cancel_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: not window.session.busy, timeout=WAIT_MS)
    assert time.monotonic() - t < 5.0
    assert window.session.evaluation is None
    assert window.progress_label.text() == "cancelled"


def test_a_second_request_while_one_runs_wins(qtbot, window, demo_file, big_file):
    path = big_file()
    window.session.n_boot = 1000
    window.open_files([path])
    qtbot.waitUntil(lambda: window.session.busy, timeout=5000)
    window.open_files([demo_file])              # selects the demo's first run: a newer request
    _wait_idle(qtbot, window)
    qtbot.wait(200)                             # let any stale result arrive: it must be dropped
    assert window.session.evaluation.run.name == "resnet110-brier/cifar10"
    assert window.canvas.drawn_curve("none")[0].size > 0


def test_theme_switch_and_settings_persist(qtbot, window, tmp_path, demo_file):
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    light = window.canvas.image(scale=1.0).pixel(5, 5)
    window.set_theme("dark")
    assert window.canvas.image(scale=1.0).pixel(5, 5) != light
    window.bandwidth_bar.set_bandwidth(0.1)
    window.save_settings()
    s = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.IniFormat)
    assert s.value("theme") == "dark" and float(s.value("bandwidth")) == pytest.approx(0.1)
    assert str(demo_file.resolve()) in (s.value("recent") or [])


def test_event_loop_keeps_running_during_a_large_evaluation(qtbot, window, big_file):
    """A freeze shows as a long gap between timer ticks (measured precisely in benchmarks/bench_gui.py)."""
    path = big_file(n=200_000)
    window.session.n_boot = 300
    ticks = []
    timer = QtCore.QTimer()
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start(10)
    window.open_files([path])
    _wait_idle(qtbot, window)
    timer.stop()
    gaps = np.diff(ticks)
    assert len(ticks) > 20 and gaps.max() < 1.0, gaps.max()


def test_cancel_puts_the_pickers_back_to_what_is_shown(qtbot, window, demo_file, big_file):
    path = big_file()
    window.session.n_boot = 1000
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    shown = window.session.evaluation
    window.open_files([path])                   # a long evaluation of another file ...
    qtbot.waitUntil(lambda: window.session.busy, timeout=5000)
    assert window.stale and not window.table.isEnabled()     # the old results are marked as such
    assert window.stale_label.isVisible() and "big/data" in window.stale_label.text()
    window.session.cancel()                     # ... cancelled: the demo run is still what is drawn
    qtbot.waitUntil(lambda: not window.session.busy, timeout=WAIT_MS)
    assert window.session.evaluation is shown
    assert window.session.run == shown.run and window.session.eval_split == shown.request.eval_split
    assert window.browser.eval_combo.currentText() == shown.request.eval_split
    assert window.browser.tree.currentItem().data(0, QtCore.Qt.UserRole + 1) == shown.run.name
    assert not window.stale and window.table.isEnabled() and not window.stale_label.isVisible()


def test_calibrator_options_from_the_panel(qtbot, window, demo_file):
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    for name, box in window.panel.boxes.items():
        box.setChecked(name in ("ts", "hb"))
    window.panel.option_widgets["hb"]["bins"].setValue(7)
    gen = window.session.generation
    window.panel.fit()
    qtbot.waitUntil(lambda: window.session.generation > gen and not window.session.busy, timeout=WAIT_MS)
    hb = window.session.evaluation.result("hb")
    assert hb.fitted.params["bins"] == 7
    assert window.session.evaluation.request.options_for("hb") == {"bins": 7}


def test_a_non_numeric_lambda_is_refused_with_a_message(qtbot, window, demo_file):
    """Not quietly replaced by 'auto'."""
    window.open_files([demo_file])
    _wait_idle(qtbot, window)
    for name, box in window.panel.boxes.items():
        box.setChecked(name in ("ts", "ms"))
    lam = window.panel.option_widgets["ms"]["λ"]
    lam.setText("abc")
    gen, options = window.session.generation, window.session.options
    window.panel.fit()
    assert window.session.generation == gen and window.session.options == options     # nothing started
    title, message = window.last_error
    assert "option" in title.lower()
    assert all(f in message for f in ("Matrix scaling", "λ", "'abc'", "'auto'")), message
    window.error_box.close()
    window.panel.boxes["ms"].setChecked(False)           # an unticked calibrator's field does not block a fit
    window.panel.fit()
    assert window.session.generation == gen + 1
    _wait_idle(qtbot, window)
    window.panel.boxes["ms"].setChecked(True)
    lam.setText("0.5")
    window.panel.fit()
    assert window.session.generation == gen + 2 and dict(window.session.options)["ms"] == (("lam", 0.5),)
    _wait_idle(qtbot, window)
