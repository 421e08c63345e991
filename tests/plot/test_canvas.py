"""The calibration-sharpness canvas: draws exactly the core's curves, hides and shows, exports, themes, hover."""

import os
import subprocess
import sys
import textwrap
import warnings
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6 import QtCore, QtGui, QtWidgets  # noqa: E402

from calibview.core.stats import smoothing  # noqa: E402
from calibview.core.evaluation.engine import evaluate  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.plot import curve_items  # noqa: E402
from calibview.plot.canvas import CalibrationCanvas, render_diagram_png  # noqa: E402
from calibview.plot.curve_items import DRAW_FLOOR  # noqa: E402
from calibview.plot.theme import THEMES, calibrator_color  # noqa: E402

RUN = "resnet110-brier/cifar100"
NAMES = ("none", "ts", "ts-grid")


@pytest.fixture(scope="module")
def results(demo_file):
    return evaluate(EvalRequest(file=str(demo_file), run=RUN, calibrators=NAMES, n_boot=0)).results


@pytest.fixture
def canvas(qtbot, results):
    c = CalibrationCanvas()
    qtbot.addWidget(c)
    c.resize(640, 480)
    c.show()
    qtbot.waitExposed(c)
    c.set_results(results, title="test run")
    return c


def _items(c, name):
    s = c._get(name)
    return s.curve, s.band, s.density


def _bin_items(c, name):
    s = c._get(name)
    return s.bin_points, s.bin_errors


def _assert_drawn_is_core(c, result, h, kernel):
    x, y = c.drawn_curve(result.name)
    ref = result.curve(h, kernel)
    assert x.shape == y.shape and x.size >= 256
    idx = np.searchsorted(ref.x, x)
    np.testing.assert_array_equal(ref.x[idx], x)                 # drawn x are grid points of the core's curve
    # drawn exactly where the core's curve is defined, there is data (density >= DRAW_FLOOR of its peak) and a
    # top-label confidence can be (x >= 1/K)
    k = result.per_class_count.shape[0]
    valid = ref.valid[idx] & (ref.density[idx] >= DRAW_FLOOR) & (x >= 1 / k - 1e-9)
    assert valid.any()
    np.testing.assert_array_equal(y[valid], ref.curve[idx][valid])
    assert np.isnan(y[~valid]).all()                              # gaps stay gaps
    assert x[0] == 0.0 and x[-1] == 1.0


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_drawn_curve_is_the_core_curve(qtbot, canvas, results, kernel):
    for h in (0.01, 0.05, 0.2):
        canvas.set_bandwidth(h, kernel)
        QtWidgets.QApplication.processEvents()
        for r in results:
            _assert_drawn_is_core(canvas, r, h, kernel)


def test_bandwidth_updates_items_in_place_without_autorange(qtbot, canvas, results):
    before = {r.name: _items(canvas, r.name) for r in results}
    ranges = (canvas._top.vb.viewRange(), canvas._bottom.vb.viewRange())
    n_items = len(canvas._view.scene().items())
    canvas.set_bandwidth(0.02, "epanechnikov")
    canvas.set_bandwidth(0.13, "gaussian")
    for r in results:
        assert all(a is b for a, b in zip(before[r.name], _items(canvas, r.name)))
    assert len(canvas._view.scene().items()) == n_items
    assert (canvas._top.vb.viewRange(), canvas._bottom.vb.viewRange()) == ranges
    assert ranges[0] == [[0.0, 1.0], [-0.02, 1.02]]          # y padded: a curve at accuracy 1 is not under the frame


def test_set_visible_hides_and_shows(qtbot, canvas, results):
    canvas.set_show_bins(True)
    canvas.set_visible(["none", "ts-grid"])
    assert not any(item.isVisible() for item in _items(canvas, "ts") + _bin_items(canvas, "ts"))
    for name in ("none", "ts-grid"):
        assert all(item.isVisible() for item in _items(canvas, name) + _bin_items(canvas, name))
    # a hidden calibrator is not recomputed while hidden, but is up to date when shown again
    canvas.set_bandwidth(0.03, "epanechnikov")
    canvas.set_visible(NAMES)
    assert all(item.isVisible() for item in _items(canvas, "ts"))
    _assert_drawn_is_core(canvas, results[1], 0.03, "epanechnikov")
    # the legend lists the shown calibrators only
    canvas.set_visible(["ts"])
    html = canvas._legend.textItem.toHtml()
    assert results[1].label in html and results[0].label not in html


def test_bins_toggle(qtbot, canvas):
    assert not any(item.isVisible() for item in _bin_items(canvas, "ts"))
    canvas.set_show_bins(True)
    assert all(item.isVisible() for item in _bin_items(canvas, "ts"))
    canvas.set_show_bins(False)
    assert not any(item.isVisible() for item in _bin_items(canvas, "ts"))


def _qimage_array(img):
    img = img.convertToFormat(QtGui.QImage.Format.Format_ARGB32)
    ptr = img.constBits()
    arr = np.frombuffer(ptr, dtype=np.uint8, count=img.sizeInBytes()).reshape(img.height(), img.bytesPerLine())
    return arr[:, :img.width() * 4].reshape(img.height(), img.width(), 4).copy()


def _n_colors(img) -> int:
    a = _qimage_array(img).view(np.uint32)[..., 0]
    return np.unique(a).size


def test_export_png_size_and_content(qtbot, canvas, tmp_path):
    canvas.set_show_bins(True)
    path = tmp_path / "diagram.png"
    canvas.export_png(path)
    img = QtGui.QImage(str(path))
    assert not img.isNull()
    assert (img.width(), img.height()) == (2 * canvas.width(), 2 * canvas.height())
    assert _n_colors(img) > 200
    assert sorted(os.listdir(tmp_path)) == ["diagram.png"]       # no temporary file left behind
    canvas.export_png(path, scale=1.0)                            # overwrites in place
    img = QtGui.QImage(str(path))
    assert (img.width(), img.height()) == (canvas.width(), canvas.height())


def test_export_svg_is_xml_with_paths(qtbot, canvas, tmp_path):
    path = tmp_path / "diagram.svg"
    canvas.export_svg(path)
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    paths = [el for el in root.iter() if el.tag.split("}")[-1] == "path"]
    assert len(paths) > 10
    assert sorted(os.listdir(tmp_path)) == ["diagram.svg"]


def test_theme_switch_changes_background(qtbot, canvas):
    light = canvas.image(scale=1.0)
    assert QtGui.QColor(light.pixel(3, 3)) == QtGui.QColor(THEMES["light"].background)
    canvas.set_theme("dark")
    dark = canvas.image(scale=1.0)
    assert QtGui.QColor(dark.pixel(3, 3)) == QtGui.QColor(THEMES["dark"].background)
    assert canvas.theme == "dark"
    # text and axes follow the theme: the dark image has light pixels (labels) on its dark background
    a = _qimage_array(dark)[..., :3].astype(int).sum(axis=2)
    assert (a > 600).sum() > 100


def test_render_diagram_png_in_process(qtbot, results, tmp_path):
    path = tmp_path / "report.png"
    render_diagram_png(results, path, size=(500, 400), scale=1.5, theme="dark", title="report")
    img = QtGui.QImage(str(path))
    assert (img.width(), img.height()) == (750, 600)
    assert _n_colors(img) > 100


def test_render_diagram_png_from_a_plain_script(tmp_path, demo_file):
    """No QApplication, no display: the function makes an offscreen one itself."""
    out = tmp_path / "plain.png"
    script = textwrap.dedent(f"""
        from calibview.core.evaluation.engine import evaluate
        from calibview.core.evaluation.request import EvalRequest
        from calibview.plot.canvas import render_diagram_png
        ev = evaluate(EvalRequest(file={str(demo_file)!r}, run={RUN!r}, calibrators=("none", "ts"), n_boot=0))
        render_diagram_png(ev.results, {str(out)!r}, bandwidth=0.1, kernel="epanechnikov", size=(300, 250), scale=2)
        from PySide6 import QtGui
        img = QtGui.QImage({str(out)!r})
        print(img.width(), img.height())
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["600", "500"]


def _move_mouse(c, x_data, y_data=0.5):
    vb = c._top.vb
    scene_pos = vb.mapViewToScene(QtCore.QPointF(x_data, y_data))
    view_pos = QtCore.QPointF(c._view.mapFromScene(scene_pos))
    global_pos = QtCore.QPointF(c._view.viewport().mapToGlobal(view_pos.toPoint()))
    ev = QtGui.QMouseEvent(QtCore.QEvent.Type.MouseMove, view_pos, global_pos, QtCore.Qt.MouseButton.NoButton,
                           QtCore.Qt.MouseButton.NoButton, QtCore.Qt.KeyboardModifier.NoModifier)
    QtWidgets.QApplication.sendEvent(c._view.viewport(), ev)


def test_hover_readout(qtbot, canvas, results, monkeypatch):
    import pyqtgraph as pg
    monkeypatch.setitem(pg.CONFIG_OPTIONS, "mouseRateLimit", -1)   # deliver every synthetic move
    with qtbot.waitSignal(canvas.hover_changed, timeout=2000) as blocker:
        _move_mouse(canvas, 0.83)
    text = blocker.args[0]
    assert text.startswith("conf 0.83")
    for name in NAMES:
        assert f"{name}: acc" in text
    assert "density" in text and "n≈" in text and "±0.05" in text
    assert all(line.isVisible() and abs(line.value() - 0.83) < 0.01 for line in canvas._hover_lines)
    # the sample count near x is the core's binned count within +-h
    stats = results[0].stats
    g = stats.grid.shape[0]
    inside = np.abs(stats.grid - 0.83) <= 0.05 + 1e-12
    approx = float(stats.count[inside].sum())
    count = int(text.split("none: ")[1].split("n≈")[1].split()[0])
    assert abs(count - approx) <= max(2.0, 0.02 * approx) and g == 4096
    # hidden calibrators drop out of the readout
    canvas.set_visible(["ts"])
    _move_mouse(canvas, 0.4)
    assert "ts: acc" in canvas._readout and "none:" not in canvas._readout
    # leaving clears it
    with qtbot.waitSignal(canvas.hover_changed, timeout=2000) as blocker:
        QtWidgets.QApplication.sendEvent(canvas, QtCore.QEvent(QtCore.QEvent.Type.Leave))
    assert blocker.args[0] == ""
    assert not any(line.isVisible() for line in canvas._hover_lines)


def test_gaps_and_all_invalid_draw_without_nan_warnings(qtbot, canvas, results, monkeypatch, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            canvas.set_bandwidth(0.01, "epanechnikov")          # undefined stretches at low confidence
            ref = results[0].curve(0.01, "epanechnikov")
            assert not ref.valid.all()
            x, y = canvas.drawn_curve("none")
            assert np.isnan(y).any() and np.isfinite(y).any()
            canvas.set_show_bins(True)
            canvas.repaint()
            canvas.export_png(tmp_path / "gaps.png", scale=1.0)

            real = smoothing.sharpness_curve

            def all_invalid(stats, bandwidth=0.05, kernel="gaussian"):
                c = real(stats, bandwidth, kernel)
                nan = np.full_like(c.curve, np.nan)
                return replace(c, curve=nan, band_lo=nan, band_hi=nan, valid=np.zeros_like(c.valid))

            monkeypatch.setattr(curve_items.smoothing, "sharpness_curve", all_invalid)
            canvas.set_bandwidth(0.07, "gaussian")
            for name in NAMES:
                x, y = canvas.drawn_curve(name)
                assert x.size == 0 and y.size == 0
                assert canvas._get(name).band.path().isEmpty()
            canvas.repaint()
            canvas.export_png(tmp_path / "empty.png", scale=1.0)
            _move_mouse(canvas, 0.5)
            assert "acc n/a" in canvas._readout


def test_refused_bandwidth_leaves_canvas_as_it_was(qtbot, canvas, results):
    canvas.set_bandwidth(0.08)
    with pytest.raises(Exception):
        canvas.set_bandwidth(1e-6)
    assert canvas.bandwidth == (0.08, "gaussian")
    _assert_drawn_is_core(canvas, results[0], 0.08, "gaussian")


def test_set_results_replaces_everything(qtbot, canvas, results):
    n_before = len(canvas._view.scene().items())
    canvas.set_results(results[:1])
    assert canvas.names() == ["none"]
    assert len(canvas._view.scene().items()) < n_before
    canvas.set_results([])
    assert canvas.names() == [] and not canvas._legend.isVisible()
    canvas.set_results(results)
    assert len(canvas._view.scene().items()) == n_before


def test_calibrator_colors_are_stable_and_distinct():
    names = ["none", "ts", "ts-grid", "vs", "ms", "dirichlet", "hb", "ir"]
    colors = [calibrator_color(n, i) for i, n in enumerate(names)]
    assert len(set(colors)) == len(colors)
    assert calibrator_color("ts", 0) == calibrator_color("ts", 5)     # the name decides, not the position
    assert len({calibrator_color(f"custom{i}", i) for i in range(6)}) == 6
    assert all(QtGui.QColor(c).isValid() for c in colors)


def test_theme_switch_keeps_hidden_reliability_bars_hidden(qtbot, results):
    canvas = CalibrationCanvas()
    qtbot.addWidget(canvas)
    canvas.set_results(results)
    canvas.set_show_bins(False)
    canvas.set_theme("dark")
    canvas.set_theme("light")
    for s in canvas._series:
        assert not s.bin_errors.isVisible() and not s.bin_points.isVisible()
    canvas.set_show_bins(True)
    canvas.set_theme("dark")
    assert all(s.bin_errors.isVisible() for s in canvas._series)
