"""Regression runs in the window: listed with their form, evaluated on the worker, their diagram redrawn by the
slider without another evaluation, their metrics table checked against the core's evaluation and a numpy brute
force, the coverage tab filled, and the diagram exported as a PDF without a temporary file left behind."""

import math

import h5py
import numpy as np
import pytest
from scipy import stats

from tests.gui.conftest import WAIT_MS

pytestmark = [pytest.mark.qt, pytest.mark.window(n_boot=40)]

N_VAL, N_TEST = 300, 400
LEVELS = np.array([0.1, 0.25, 0.5, 0.75, 0.9])


def _split(rng, n):
    """Heteroscedastic data: y = 2 sin x + noise of sd 0.3 + 0.4 |x|; the predicted sd is 0.8 of the true one
    (over-confident), the mean is biased by +0.1."""
    x = rng.uniform(-2, 2, n)
    sd = 0.3 + 0.4 * np.abs(x)
    y = 2 * np.sin(x) + rng.normal(0, sd)
    return 2 * np.sin(x) + 0.1, y, 0.8 * sd


@pytest.fixture
def mixed_file(tmp_path):
    """A file with a var regression run, a quantile regression run and a classification run."""
    rng = np.random.default_rng(7)
    path = tmp_path / "mixed.h5"
    with h5py.File(path, "w") as f:
        for split, n in (("val", N_VAL), ("test", N_TEST)):
            mean, y, sd = _split(rng, n)
            g = f.create_group(f"/hetero/var/{split}")
            g["mean"], g["targets"], g["var"] = mean, y, sd ** 2
            g = f.create_group(f"/hetero/quant/{split}")
            g["mean"], g["targets"] = mean, y
            g["quantiles"] = mean[:, None] + sd[:, None] * stats.norm.ppf(LEVELS)[None, :]
            g["quantiles"].attrs["levels"] = LEVELS
            g = f.create_group(f"/clf/data/{split}")
            g["logits"] = rng.normal(size=(n, 3)).astype(np.float32)
            g["labels"] = rng.integers(0, 3, n)
    return path


def _select(qtbot, window, path, name):
    window.session.select_run(str(path.resolve()), name)
    qtbot.waitUntil(lambda: not window.session.busy and window.session.regression is not None
                    and window.session.regression.run.name == name, timeout=WAIT_MS)


def _item(window, name):
    from calibview.gui.views.browser import RUN_ROLE
    from PySide6 import QtWidgets

    it = QtWidgets.QTreeWidgetItemIterator(window.browser.tree)
    while it.value():
        if it.value().data(0, RUN_ROLE) == name:
            return it.value()
        it += 1
    raise AssertionError(f"{name} not in the browser")


def _counting(monkeypatch):
    """Count the worker's regression evaluations (the worker calls its module's evaluate_regression)."""
    import calibview.gui.worker as worker

    calls = []
    real = worker.evaluate_regression

    def counted(req, *a, **kw):
        calls.append(req)
        return real(req, *a, **kw)

    monkeypatch.setattr(worker, "evaluate_regression", counted)
    return calls


def test_var_run_listed_evaluated_and_drawn(qtbot, window, mixed_file, monkeypatch):
    from calibview.core.io.regression.discovery import list_regression_runs
    from calibview.core.io.regression.read import read_regression_split
    from calibview.core.regression.evaluate import RegRequest, evaluate_regression
    from calibview.core.regression.kernel import silverman
    from calibview.core.regression.metrics import REG_METRIC_NAMES

    calls = _counting(monkeypatch)
    window.open_files([mixed_file])
    qtbot.waitUntil(lambda: not window.session.busy, timeout=WAIT_MS)
    # the browser marks both regression runs with their form, the classification run keeps its K
    assert "regression · var" in _item(window, "hetero/var").text(0)
    assert "regression · quantiles (Q=5)" in _item(window, "hetero/quant").text(0)
    assert _item(window, "clf/data").text(1) == "3"

    _select(qtbot, window, mixed_file, "hetero/var")
    assert len(calls) == 1 and calls[0].fit_split == "val" and calls[0].eval_split == "test"
    assert calls[0].calibrators == ("none", "var-scaling", "isotonic-pit")
    assert window.regression.active and window.session.evaluation is None
    # classification controls that do not apply: disabled, and say why
    assert not window.panel.isEnabled() and "regression run" in window.panel.toolTip()
    tabs = window.table.tabs
    i = tabs.indexOf(window.slices_view)
    assert not tabs.isTabEnabled(i) and "classification runs" in tabs.tabToolTip(i)
    assert tabs.currentWidget() is window.regression.table

    # the table's numbers are the core's, computed here on their own
    run = next(r for r in list_regression_runs(mixed_file) if r.name == "hetero/var")
    ref = evaluate_regression(RegRequest(run=run, eval_split="test", fit_split="val", n_boot=40,
                                         calibrators=("none", "var-scaling", "isotonic-pit")))
    table = window.regression.table
    for res in ref.results:
        for m in REG_METRIC_NAMES:
            want, got = res.metrics[m].value, table.value(res.name, m)
            assert (math.isnan(want) and math.isnan(got)) or got == pytest.approx(want, rel=1e-12, abs=1e-15), \
                (res.name, m)
    assert table.text("none", "nll_gaussian") != "n/a"
    assert table.text("isotonic-pit", "nll_gaussian") == "n/a"      # its output is quantiles
    # rmse and mae against a plain loop over the test split
    data = read_regression_split(run, "test")
    se = ae = 0.0
    for m, y in zip(data.mean.tolist(), data.targets.tolist()):
        se += (m - y) ** 2
        ae += abs(m - y)
    assert table.value("none", "rmse") == pytest.approx(math.sqrt(se / N_TEST), rel=1e-12)
    assert table.value("none", "mae") == pytest.approx(ae / N_TEST, rel=1e-12)

    # the slider: Silverman by default, the curve moves, no evaluation
    view, canvas = window.regression.view, window.regression.canvas
    h0 = silverman(data.mean)
    assert canvas.bandwidth == pytest.approx(h0) and window.session.regression.bandwidth == pytest.approx(h0)
    x0, y0 = canvas.drawn_curve()
    computed = canvas.computed
    view.slider.setValue(view.slider.value() + 300)
    qtbot.wait(50)
    x1, y1 = canvas.drawn_curve()
    assert canvas.bandwidth > 3 * h0 and canvas.computed == computed + 1
    assert x1.shape != x0.shape or not np.allclose(y1, y0)
    assert f"{canvas.bandwidth:.3g}" in canvas.legend_text()[0]
    assert "conditional SD" in canvas.legend_text()[1]
    view.set_bandwidth(h0)                                 # back: from the cache
    assert canvas.computed == computed + 1 and np.allclose(canvas.drawn_curve()[1], y0)
    assert len(calls) == 1 and not window.session.busy

    # the coverage tab: one coverage curve, PIT histogram and quantile curve per recalibrator
    data_drawn = window.regression.coverage.panels.data()
    assert set(data_drawn) == {"none", "var-scaling", "isotonic-pit"}
    nominal, observed, lo, hi = data_drawn["none"]["coverage"]
    np.testing.assert_allclose(observed, ref.results[0].observed)
    assert np.isfinite(lo[1:-1]).all() and (lo <= observed + 1e-12).all()
    assert data_drawn["none"]["pit"].density.sum() > 0


def test_quantile_run_and_pdf_export(qtbot, window, mixed_file, tmp_path, monkeypatch):
    from calibview.gui.views.regression_table import NA_TEXT

    calls = _counting(monkeypatch)
    window.open_files([mixed_file])
    _select(qtbot, window, mixed_file, "hetero/quant")
    assert calls[-1].calibrators == ("none", "isotonic-pit")     # var-scaling does not apply to quantiles
    table = window.regression.table
    for m in ("nll_gaussian", "crps_gaussian", "sharpness", "ence"):
        assert table.text("none", m) == NA_TEXT
    assert table.text("none", "pinball") != NA_TEXT

    out = tmp_path / "out"
    out.mkdir()
    from calibview.plot.export_dialog import ExportDialog

    dialog = ExportDialog(window.regression.canvas, window)
    assert dialog.layout_box.isEnabled() and "recalibrator" in dialog.layout_box.itemText(1)
    dialog.layout_box.setCurrentIndex(dialog.layout_box.findData("grid"))
    assert "at least 16 in" in dialog.size_note.text()
    dialog.layout_box.setCurrentIndex(dialog.layout_box.findData("overlay"))
    assert "at least" not in dialog.size_note.text()
    assert not dialog.ci_band.isEnabled()
    dialog.format.setCurrentIndex(dialog.format.findData("pdf"))
    written = dialog.export_to(out / "diagram.pdf")
    assert [p.name for p in written] == ["diagram.pdf"]
    data = (out / "diagram.pdf").read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 1000
    assert sorted(p.name for p in out.iterdir()) == ["diagram.pdf"]     # no temporary file left
    # the menu's exports of the regression view
    assert window.export("metrics", str(out / "m.csv"))
    assert "pinball" in (out / "m.csv").read_text().splitlines()[0]
    assert window.export("png", str(out / "d.png")) and (out / "d.png").stat().st_size > 0
    assert len(calls) == 1


def test_back_to_classification(qtbot, window, mixed_file):
    window.open_files([mixed_file])
    _select(qtbot, window, mixed_file, "hetero/var")
    window.session.select_run(str(mixed_file.resolve()), "clf/data")
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    assert not window.regression.active and window.session.regression is None
    assert window.panel.isEnabled()
    tabs = window.table.tabs
    assert tabs.isTabEnabled(tabs.indexOf(window.slices_view))
    assert not tabs.isTabEnabled(tabs.indexOf(window.regression.table))
    assert window.central_stack.currentWidget() is not window.regression.view


def test_grid_layout_rows_slider_and_pdf(qtbot, window, mixed_file, tmp_path, monkeypatch):
    """The grid: a row per recalibrator whose coverage panels are that recalibrator's (they differ), whose
    diagrams share one curve per bandwidth (the counter: one computation for every row), redrawn in place by the
    slider; exported as a PDF with a page per grid, not the single diagram."""
    import re

    from PySide6 import QtCore

    calls = _counting(monkeypatch)
    window.open_files([mixed_file])
    _select(qtbot, window, mixed_file, "hetero/var")
    view, canvas = window.regression.view, window.regression.canvas
    ev = window.session.regression
    view.set_layout("grid")
    assert canvas.layout_mode == "grid" and view.layout_box.currentData() == "grid"
    rows = canvas.grid_rows
    assert [r.result.name for r in rows] == [r.name for r in ev.results] == ["none", "var-scaling", "isotonic-pit"]
    # the coverage curve drawn in each row is its recalibrator's: var-scaling widens the over-confident intervals
    for r, res in zip(rows, ev.results):
        np.testing.assert_allclose(r.coverage.getData()[1], res.observed)
    assert not np.allclose(rows[0].coverage.getData()[1], rows[1].coverage.getData()[1])
    before = canvas.computed
    h = canvas.bandwidth * 1.7
    view.set_bandwidth(h)
    assert canvas.computed == before + 1                     # three rows, one shared curve
    x_ref, y_ref = canvas.drawn_curve()
    for r in rows:
        x, y = r.curve.getData()
        np.testing.assert_allclose(y, y_ref)
        assert f"h = {h:.3g}" in r.top.titleLabel.text
    assert canvas.grid_rows[0] is rows[0]                    # redrawn in place, not rebuilt

    from calibview.plot.spec import FigureOptions

    written = canvas.export_figure(tmp_path / "grid.pdf", FigureOptions(layout="grid"))
    data = written[0].read_bytes()
    assert data.startswith(b"%PDF")
    single = canvas.export_figure(tmp_path / "one.pdf", FigureOptions(layout="overlay"))[0]
    # the grid's page: at least 16 in wide, three rows of 0.2 x its width; the single diagram's 0.72 x its own
    w, hgt = map(float, re.search(rb"/MediaBox \[0 0 ([\d.]+) ([\d.]+)\]", data).groups())
    w1, h1 = map(float, re.search(rb"/MediaBox \[0 0 ([\d.]+) ([\d.]+)\]", single.read_bytes()).groups())
    assert w >= 16 * 72 - 1 and hgt / w == pytest.approx(3 * 0.2, rel=0.02) and h1 / w1 == pytest.approx(0.72, rel=0.02)
    view.set_layout("overlay")
    assert canvas._stack.currentWidget() is not None and canvas.layout_mode == "overlay"
    assert len(calls) == 1
    QtCore.QCoreApplication.processEvents()
