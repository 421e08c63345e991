"""The small multiples in the window at a laptop's size: seven calibrators in the canvas's grid, and seven in each
panel of the compared runs' figure, at 1280 x 720 and 1400 x 900. Before, the panels were 20-30 px tall, their
legends lay over the curves, their labels were cut ("0-brier · none") and the two axis titles ran into each other
("densityaccuracy").

Everything is measured in the scene's pixels of what is drawn; where a legend stays inside a plot, every drawn
point of every curve and band is mapped by pyqtgraph itself (ViewBox.mapViewToScene) and none may lie under it."""

import numpy as np
import pytest
from PySide6 import QtCore

from calibview.plot.figure_fit import MIN_PANEL_PX

WAIT_MS = 120_000
SIZES = [(1280, 720), (1400, 900)]
BINARY = "none,ts,hb,ir,platt,beta,vs"
MULTI = ("none", "ts", "ts-grid", "vs", "hb", "ir", "mrr")
pytestmark = pytest.mark.window(n_boot=0)


def _resize(qtbot, w, size):
    w.resize(*size)
    qtbot.waitUntil(lambda: w.size() == QtCore.QSize(*size), timeout=5000)
    qtbot.wait(300)                     # the fitted layout settles after the resize (a timer of 0 ms, twice)


def _points_under(panel, box, hidden=()) -> int:
    """How many drawn curve and band points of ``panel`` lie inside the scene rectangle ``box``."""
    vb, count = panel.top.vb, 0
    for s in panel.series:
        if s.name in hidden or not s.curve.isVisible() or s.curve.xData is None:
            continue
        x, y = s.curve.xData, s.curve.yData
        ok = np.isfinite(y)
        edges = [y]
        if s.band.isVisible():
            edges += [np.interp(x, s.sc.x, s.sc.band_lo), np.interp(x, s.sc.x, s.sc.band_hi)]
        for yy in edges:
            for xi, yi in zip(x[ok][::3], yy[ok][::3]):
                count += box.contains(vb.mapViewToScene(QtCore.QPointF(float(xi), float(yi))))
    return count


def _check_panels(view, fitted):
    assert view.panels
    width = fitted.viewport().width()
    for p in view.panels:
        plots = p.bottom.sceneBoundingRect().bottom() - p.top.sceneBoundingRect().top()
        assert plots >= MIN_PANEL_PX - 2, (p.spec.title, plots)
        assert p.top.vb.height() >= 0.5 * MIN_PANEL_PX          # the accuracy plot has most of it
        assert p.layout.sceneBoundingRect().right() <= width + 1  # nothing runs off the right edge
        assert not p.title.clipped(), p.spec.title
        assert not p.legend_below.clipped()
        top_axis, bottom_axis = p.top.getAxis("left"), p.bottom.getAxis("left")
        if p.show_y:
            acc = top_axis.label.sceneBoundingRect()
            assert top_axis.label.isVisible() and acc.height() <= p.top.sceneBoundingRect().height()
            dens = (bottom_axis.label.sceneBoundingRect() if bottom_axis.label.isVisible()
                    else p.density_title.sceneBoundingRect())
            assert not acc.intersects(dens), p.spec.title          # "densityaccuracy"
            assert bottom_axis.label.isVisible() != (getattr(p, "density_title", None) is not None
                                                     and p.density_title.isVisible())
        if p.legend.isVisible():
            box = p.legend.sceneBoundingRect()
            assert p.top.vb.sceneBoundingRect().contains(box), p.spec.title
            assert _points_under(p, box, view.hidden) == 0, p.spec.title
    if fitted.scrolling:                  # every panel can be scrolled to: the view is as tall as its panels
        bottom = max(p.layout.sceneBoundingRect().bottom() for p in view.panels)
        assert view.height() >= bottom - 1 and fitted.verticalScrollBar().maximum() > 0


@pytest.mark.parametrize("size", SIZES)
def test_seven_calibrators_in_the_grid_are_readable(qtbot, window, binary_file, size):
    window.start([binary_file], calibrators=BINARY)
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    assert len(window.session.evaluation.results) == 7
    window.canvas.set_layout("grid")
    _resize(qtbot, window, size)
    view, fitted = window.canvas.grid_view, window.canvas._grid_layout.widget
    assert len(view.panels) == 6 and fitted.isVisible()        # "none" is the grey curve in each
    _check_panels(view, fitted)
    titles = [p.title.text for p in view.panels]
    assert all("ECE" in t and "Brier" in t for t in titles)


def test_a_long_calibrator_name_wraps_instead_of_being_cut(qtbot, window, demo_file):
    window.start([demo_file], calibrators="ts,ts-grid,vs,hb,ir,mrr")
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    window.canvas.set_layout("grid")
    _resize(qtbot, window, (1280, 720))
    view, fitted = window.canvas.grid_view, window.canvas._grid_layout.widget
    panel = next(p for p in view.panels if p.spec.title.startswith("Temperature scaling (ECE grid"))
    assert panel.spec.title == "Temperature scaling (ECE grid)"
    assert not panel.title.clipped()
    _check_panels(view, fitted)


@pytest.mark.parametrize("size", SIZES)
def test_seven_calibrators_per_compared_run_keep_their_legends_off_the_curves(qtbot, window, runs_file, size):
    window.session.set_calibrators(list(MULTI))
    window.open_files([runs_file])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    _resize(qtbot, window, size)
    gen = window.session.generation
    window.session.set_compare_runs([(str(runs_file.resolve()), "b/toy")])
    qtbot.waitUntil(lambda: window.session.generation > gen and not window.session.busy
                    and window.session.comparison is not None, timeout=WAIT_MS)
    fig = window.compare_figure
    qtbot.wait(300)
    assert window.size() == QtCore.QSize(*size)          # a tall scrolled figure never grows the window
    fitted = fig.view.parentWidget().parentWidget()
    for layout in ("run", "calibrator"):
        fig.set_layout(layout)
        qtbot.wait(300)
        view = fig.view
        assert len(view.panels) == (2 if layout == "run" else 7)
        _check_panels(view, fitted)
        if layout == "run":                # seven curves under a seven-row legend: it goes under the plots
            assert all(p.legend_outside and p.legend_below.isVisible() for p in view.panels)
            assert all(p.legend_below.sceneBoundingRect().top() >= p.bottom.sceneBoundingRect().bottom() - 1
                       for p in view.panels)
