"""Compare models in the window: tick runs under "Compare with", see one diagram per run and the Compare tab with
the paired differences of compare.csv; runs on other samples are refused with one sentence and nothing changes."""

import csv

import numpy as np
import pytest
from PySide6 import QtCore

from calibview.core.evaluation.compare import compare, requests_for
from calibview.core.evaluation.engine import Engine
from calibview.core.reports.contrasts import compare_columns
from calibview.core.stats.metrics import METRIC_NAMES
from calibview.gui.views.compare_view import MARK

WAIT_MS = 60_000
pytestmark = pytest.mark.window(n_boot=60)


def _idle(qtbot, w, gen=0):
    qtbot.waitUntil(lambda: w.session.generation > gen and not w.session.busy and w.session.evaluation is not None,
                    timeout=WAIT_MS)


def _item(window, name):
    picker = window.browser.run_picker
    return next(picker.item(i) for i in range(picker.count()) if picker.item(i).text() == name)


def test_comparing_two_runs_shows_both_diagrams_and_the_paired_differences(qtbot, window, tmp_path, runs_file):
    path = runs_file
    window.open_files([path])
    _idle(qtbot, window)
    picker = window.browser.run_picker
    assert [picker.item(i).text() for i in range(picker.count())] == ["b/toy", "c/toy", "d/more"]
    # another dataset is ruled out by its metadata: greyed out, the reason as its tooltip
    assert not _item(window, "d/more").flags() & QtCore.Qt.ItemIsEnabled
    assert "different datasets" in _item(window, "d/more").toolTip()
    gen = window.session.generation
    _item(window, "b/toy").setCheckState(QtCore.Qt.Checked)
    _idle(qtbot, window, gen)
    s = window.session
    assert [e.run.name for e in s.evaluations] == ["a/toy", "b/toy"] and s.comparison is not None
    # the canvas gives way to the comparison's figure: a panel per run, calibrators by colour, runs by line style
    fig = window.compare_figure
    assert fig.isVisible() and not window.domains.isVisible() and fig.layout_key() == "calibrator"
    fig.set_layout("run")
    view = fig.view
    assert [p.spec.title for p in view.panels] == ["a (reference)", "b"]
    for panel, ev in zip(view.panels, s.evaluations):
        assert [(se.result.name, se.result is ev.result(se.result.name)) for se in panel.series] == [
            ("none", True), ("ts", True)]
        for se in panel.series:                          # each drawing its own run's curve
            x, y = se.curve.getData()
            ref = ev.result(se.result.name).curve(s.bandwidth)
            ok = np.isfinite(y)
            assert ok.sum() > 10
            np.testing.assert_array_equal(ref.curve[np.searchsorted(ref.x, x[ok])], y[ok])
    series = [se for p in view.panels for se in p.series]
    colors = {(se.result.name, se.item.dash_key): se.color for se in series}
    dashes = {(se.result.name, se.item.dash_key): se.dash for se in series}
    assert colors[("ts", "a")] == colors[("ts", "b")] != colors[("none", "a")]     # colour: calibrator
    assert dashes[("ts", "a")] is None and dashes[("ts", "b")] is not None            # line style: run
    assert [se.name for se in view.panels[1].series] == ["b · Uncalibrated", "b · Temperature scaling"]
    # a panel per calibrator: the runs overlaid, titled with each run's ECE and the paired difference, marked
    fig.set_layout("calibrator")
    assert [p.spec.title for p in view.panels] == ["Uncalibrated", "Temperature scaling"]
    assert [len(p.series) for p in view.panels] == [2, 2]
    none_caption = view.panels[0].spec.subtitle
    assert none_caption.startswith("ΔECE vs reference: b +") and none_caption.endswith("●")
    fig.set_layout("overlay")
    assert len(view.panels) == 1 and len(view.panels[0].series) == 4
    # hiding a calibrator hides its curves in every layout
    s.set_visible({"ts"})
    assert [se.curve.isVisible() for se in view.panels[0].series] == [False, True, False, True]
    table = window.compare_view.table                  # and its columns in the Compare tab
    assert [table.isColumnHidden(j) for j in range(4)] == [True, True, False, False]
    s.set_visible({"none", "ts"})
    fig.set_layout("run")
    png = fig.export(str(tmp_path / "cmp.png"))[0]
    from PySide6 import QtGui
    img = QtGui.QImage(str(png))
    assert img.width() == 2100 and "reference a/toy" in img.text("Title")
    # bands off and the high-confidence range, kept across a new layout; the canvas's Export dialog drives it
    fig.bands.setChecked(False)
    fig.range_combo.setCurrentIndex(fig.range_combo.findData("high"))
    fig.set_layout("calibrator")
    assert view.x_range() == (0.8, 1.0) and not any(se.band.isVisible() for p in view.panels for se in p.series)
    from calibview.plot.export_dialog import ExportDialog
    dialog = ExportDialog(fig, fig)
    dialog.format.setCurrentIndex(dialog.format.findData("pdf"))
    assert dialog.export_to(tmp_path / "cmp")[0].read_bytes().startswith(b"%PDF")
    dialog.deleteLater()
    # the Compare tab is shown: a row per metric, a column per calibrator and run, the reference first
    view = window.compare_view
    assert window.table.tabs.currentWidget() is view
    assert view.table.rowCount() == len(METRIC_NAMES) and view.table.columnCount() == 4
    assert "a/toy (reference)" in view.table.horizontalHeaderItem(0).text()
    # its numbers are those of core.evaluation.compare on the same requests, and its marks those of the intervals
    want = compare(Engine(), requests_for(s.evaluation.request, ["a/toy", "b/toy"]))
    marks = {(r["run"], r["calibrator"], m) for r in want.rows for m in METRIC_NAMES if r[f"significant_{m}"]}
    assert set(view.marked()) == marks and ("b/toy", "none", "ece") in marks
    for r in want.rows:
        got = s.comparison.row(r["run"], r["calibrator"])
        for m in METRIC_NAMES:
            assert got[f"delta_{m}"] == pytest.approx(r[f"delta_{m}"], abs=1e-12, nan_ok=True)
            assert got[f"delta_{m}_lo"] == pytest.approx(r[f"delta_{m}_lo"], abs=1e-12, nan_ok=True)
    j = next(j for j in range(4) if "b/toy" in view.table.horizontalHeaderItem(j).text()
             and view.table.horizontalHeaderItem(j).text().startswith("Uncalibrated"))
    cell = view.table.item(METRIC_NAMES.index("ece"), j)
    assert "Δ +" in cell.text() and cell.text().endswith(MARK) and cell.font().bold()
    # the export is compare.csv
    out = view.export_csv(str(tmp_path / "compare.csv"))
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == compare_columns() and len(list(reader)) == 4
    # unticking goes back to the single run
    gen = s.generation
    _item(window, "b/toy").setCheckState(QtCore.Qt.Unchecked)
    _idle(qtbot, window, gen)
    assert len(s.evaluations) == 1 and s.comparison is None and view.table.columnCount() == 0
    assert window.domains.isVisible() and not fig.isVisible() and len(window.domains.canvases()) == 1


def test_a_run_on_other_labels_is_refused_with_one_sentence(qtbot, window, tmp_path, runs_file):
    path = runs_file
    window.open_files([path])
    _idle(qtbot, window)
    gen = window.session.generation
    _item(window, "c/toy").setCheckState(QtCore.Qt.Checked)
    qtbot.waitUntil(lambda: window.last_error is not None, timeout=WAIT_MS)
    title, message = window.last_error
    assert title == "Cannot compare" and "paired differences need the same samples" in message
    assert "differ at 5 of 500 rows" in message and "\n" not in message
    # nothing changed: no new evaluation, the tick is undone
    assert window.session.generation == gen and window.session.compare_runs == ()
    assert _item(window, "c/toy").checkState() == QtCore.Qt.Unchecked


def test_closing_the_file_of_a_compared_run_compares_the_rest(qtbot, window, tmp_path, runs_file):
    path = runs_file
    other = tmp_path / "copy.h5"
    other.write_bytes(path.read_bytes())                     # the same runs in a second file
    window.open_files([path, other])
    window.session.select_run(str(path.resolve()), "a/toy")
    _idle(qtbot, window)
    gen = window.session.generation
    assert window.session.set_compare_runs([(str(other.resolve()), "a/toy"), (str(path.resolve()), "b/toy")])
    _idle(qtbot, window, gen)
    assert [e.run.file for e in window.session.evaluations] == [str(path.resolve()), str(other.resolve()),
                                                                str(path.resolve())]
    # a run compared with its copy in another file: the same numbers, differences exactly 0
    row = window.session.comparison.row("a/toy", "ts", str(other.resolve()))
    assert row["delta_ece"] == 0.0 and row["delta_ece_lo"] == 0.0 and row["significant_ece"] is False
    gen = window.session.generation
    window.session.close_file(str(other.resolve()))
    _idle(qtbot, window, gen)
    assert [e.run.name for e in window.session.evaluations] == ["a/toy", "b/toy"]
    assert window.compare_view.table.columnCount() == 4
