"""Domains in the window: tick further eval splits, see one diagram per split and a row per split."""

import csv

import numpy as np
import pytest
from PySide6 import QtCore

from calibview.cli import main as cli_main
from calibview.core.reports.tables import metric_columns

WAIT_MS = 60_000


def _idle(qtbot, w):
    qtbot.waitUntil(lambda: not w.session.busy and w.session.evaluation is not None, timeout=WAIT_MS)


def _check(window, name):
    lst = window.browser.compare_list
    for i in range(lst.count()):
        if lst.item(i).text() == name:
            lst.item(i).setCheckState(QtCore.Qt.Checked)
            return
    raise AssertionError(name)


def test_compare_on_a_deploy_split(qtbot, window, tmp_path, domains_file):
    path = domains_file
    window.open_files([path])
    _idle(qtbot, window)
    assert len(window.domains.canvases()) == 1
    lst = window.browser.compare_list
    assert [lst.item(i).text() for i in range(lst.count())] == ["val", "deploy"]      # not the eval split
    gen = window.session.generation
    _check(window, "deploy")
    qtbot.waitUntil(lambda: window.session.generation > gen and not window.session.busy, timeout=WAIT_MS)
    evs = window.session.evaluations
    assert [e.request.eval_split for e in evs] == ["test", "deploy"]
    assert window.session.eval_splits == ("test", "deploy")
    # the same fitted calibrator on both splits: fitted by the first, reused (not refitted) by the second
    assert evs[1].counters.fitted == () and evs[0].result("ts").fitted is evs[1].result("ts").fitted
    # one diagram per split, each drawing its own split's curve
    canvases = window.domains.canvases()
    assert len(canvases) == 2 and all(c.isVisible() for c in canvases)
    for canvas, ev in zip(canvases, evs):
        x, y = canvas.drawn_curve("ts")
        ref = ev.result("ts").curve(window.session.bandwidth)
        ok = np.isfinite(y)
        np.testing.assert_array_equal(ref.curve[np.searchsorted(ref.x, x[ok])], y[ok])
    # the table: a Split column and a row per calibrator x split, calibrators together
    model = window.table.metrics_proxy
    assert model.headerData(1, QtCore.Qt.Horizontal) == "Split"
    rows = [(model.data(model.index(r, 0), QtCore.Qt.UserRole), model.data(model.index(r, 1)))
            for r in range(model.rowCount())]
    assert rows == [("none", "test"), ("none", "deploy"), ("ts", "test"), ("ts", "deploy")]
    # its CSV is the CLI's for --eval-split test,deploy, digit for digit
    out = tmp_path / "rep"
    assert cli_main(["report", str(path), "--calibrators", "none,ts", "--eval-split", "test,deploy", "--n-boot",
                     "100", "--out", str(out), "--quiet", "--no-diagram"]) == 0
    with open(out / "metrics.csv", newline="") as f:
        cli = list(csv.DictReader(f))
    mine = list(csv.DictReader(window.table.csv_text().splitlines()))
    assert len(mine) == len(cli) == 4
    for a, b in zip(mine, cli):
        for col in metric_columns():
            if col != "calibview_version":
                assert a[col] == b[col], col
    # the PNG export holds both diagrams side by side
    from PySide6 import QtGui
    png = QtGui.QImage(window.export("png", str(tmp_path / "d.png")))
    assert png.width() == sum(2 * c.width() for c in canvases) and png.height() == 2 * canvases[0].height()
    # bandwidth moves redraw every split; hiding a calibrator hides it everywhere
    window.bandwidth_bar.set_bandwidth(0.1)
    for canvas, ev in zip(canvases, evs):
        x, y = canvas.drawn_curve("none")
        ref = ev.result("none").curve(0.1)
        ok = np.isfinite(y)
        np.testing.assert_array_equal(ref.curve[np.searchsorted(ref.x, x[ok])], y[ok])
    _idle(qtbot, window)
    # unticking goes back to one diagram
    gen = window.session.generation
    lst.item(1).setCheckState(QtCore.Qt.Unchecked)
    qtbot.waitUntil(lambda: window.session.generation > gen and not window.session.busy, timeout=WAIT_MS)
    assert len(window.domains.canvases()) == 1 and len(window.session.evaluations) == 1
    assert window.table.metrics_proxy.headerData(1, QtCore.Qt.Horizontal) != "Split"


def test_a_new_run_starts_without_compare_splits(qtbot, window, demo_file, domains_file):
    path = domains_file
    window.open_files([path])
    _idle(qtbot, window)
    _check(window, "deploy")
    qtbot.waitUntil(lambda: len(window.session.evaluations) == 2 and not window.session.busy, timeout=WAIT_MS)
    window.open_files([demo_file])
    qtbot.waitUntil(lambda: window.session.evaluation.run.name == "resnet110-brier/cifar10"
                    and not window.session.busy, timeout=WAIT_MS)
    assert window.session.compare_splits == () and len(window.domains.canvases()) == 1
