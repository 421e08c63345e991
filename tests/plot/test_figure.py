"""Figures: small multiples, a palette that never clashes, navigation, exports at a
physical size, the honest curve domain. Image tests check what a person sees."""

import re

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6 import QtGui  # noqa: E402

from calibview.core.evaluation.engine import evaluate  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.plot.canvas import CalibrationCanvas  # noqa: E402
from calibview.plot.figure import FigureView, legend_numbers  # noqa: E402
from calibview.plot.spec import (CurveItem, FigureOptions, calibrator_panels, parse_length,  # noqa: E402
                                       split_panels)
from calibview.plot.palette import (MIN_DISTANCE, NEUTRAL, PALETTE, PREFERRED, assign_colors,  # noqa: E402
                                   color_distance, contrast, deuteranopia_distance)
from calibview.plot import palette  # noqa: E402
from calibview.plot.theme import THEMES  # noqa: E402

RUN = "resnet110-brier/cifar100"
NAMES = ("none", "ts", "ts-grid", "vs", "hb", "ir", "mrr")


@pytest.fixture(scope="module")
def evaluation(demo_file):
    return evaluate(EvalRequest(file=str(demo_file), run=RUN, calibrators=NAMES, n_boot=0))


@pytest.fixture
def canvas(qtbot, evaluation):
    c = CalibrationCanvas()
    qtbot.addWidget(c)
    c.resize(900, 640)
    c.show()
    qtbot.waitExposed(c)
    c.set_results(evaluation.results, title="test run")
    return c


def _pen_color(item) -> str:
    return item.opts["pen"].color().name().upper()


def _light_fraction(img: QtGui.QImage) -> float:
    img = img.convertToFormat(QtGui.QImage.Format.Format_RGB32)
    a = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())[:, :img.width() * 4]
    rgb = a.reshape(img.height(), img.width(), 4)[..., :3].astype(float)
    return float((rgb.mean(axis=2) > 200).mean())


# ------------------------------------------------------------------------------------------------ palette
def test_palette_contrast_and_deuteranopia():
    for c in PALETTE + (NEUTRAL,):
        for t in THEMES.values():
            assert contrast(c, t.background) >= 3.0, (c, t.name)
    assert len(set(PALETTE)) == len(PALETTE)
    for order in (["none", "ts", "ts-grid", "vs", "ms", "dirichlet", "hb", "ir", "mrr"],
                  ["none", "platt", "beta", "hb", "ir", "mrr"], list(NAMES)):
        colors = assign_colors(order)
        assert len(set(colors.values())) == len(order)
        for a, b in zip(order, order[1:]):
            assert deuteranopia_distance(colors[a], colors[b]) >= 20, (a, b)
    # unknown names never take a colour a shown calibrator has
    colors = assign_colors(["ts", "my-method", "vs", "other"])
    assert len(set(colors.values())) == 4


def test_the_colour_distance_is_ciede2000():
    """Against the published test pairs of Sharma, Wu and Dalal (2005), table 1: (L, a, b) twice and the
    CIEDE2000 difference."""
    pairs = (((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
             ((50.0, -1.3802, -84.2814), (50.0, 0.0, -82.7485), 1.0),
             ((50.0, 2.5, 0.0), (50.0, 0.0, -2.5), 4.3065),
             ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
             ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
             ((22.7233, 20.0904, -46.694), (23.0331, 14.973, -42.5619), 2.0373),
             ((90.9257, -0.5406, -0.9208), (88.6381, -0.8985, -0.7239), 1.5381))
    for a, b, want in pairs:
        assert palette._de2000(a, b) == pytest.approx(want, abs=1e-4)
        assert palette._de2000(b, a) == pytest.approx(want, abs=1e-4)
    assert color_distance("#CC79A7", "#CC79A7") == 0.0


def test_every_two_calibrator_colours_are_distinct():
    """Beta (#E7298A) and isotonic regression (#CC79A7) were two pinks 13.5 apart; any calibrators can be shown
    together, so every pair is checked, the grey baseline included."""
    names = sorted(PREFERRED)
    close = [(a, b, round(color_distance(PREFERRED[a], PREFERRED[b]), 1))
             for i, a in enumerate(names) for b in names[i + 1:]
             if color_distance(PREFERRED[a], PREFERRED[b]) < MIN_DISTANCE]
    assert not close
    assert MIN_DISTANCE >= 20
    assert len(set(PREFERRED.values())) == len(PREFERRED)
    everything = assign_colors(names)                         # all shown at once: still the preferred colours
    assert everything == {n: PREFERRED[n] for n in names}
    for i, a in enumerate(PALETTE):                           # unknown names take these: distinct as well
        for b in PALETTE[i + 1:] + (NEUTRAL,):
            assert color_distance(a, b) >= MIN_DISTANCE, (a, b)


def test_no_two_visible_items_share_a_colour(canvas, evaluation):
    pens = [_pen_color(canvas._get(r.name).curve) for r in evaluation.results]
    assert len(set(pens)) == len(pens)
    canvas.set_layout("grid")
    grid = canvas.grid_view
    seen = {}
    for _, s in grid.all_series():
        if s.faint:
            continue
        seen.setdefault(s.item.color_key, set()).add(_pen_color(s.curve))
    assert all(len(v) == 1 for v in seen.values())
    assert len({next(iter(v)) for v in seen.values()}) == len(seen)


# ------------------------------------------------------------------------------------------------ grid
def test_grid_every_panel_has_its_title_and_curve(canvas, evaluation):
    canvas.set_layout("grid")
    grid = canvas.grid_view
    assert grid is not None and grid.isVisible()
    shown = [r for r in evaluation.results if r.name != "none"]
    assert len(grid.panels) == len(shown)                          # "none" is the faint reference in each
    for panel, r in zip(grid.panels, shown):
        assert r.label in panel.title.text
        assert "ECE" in panel.title.text and "CAL" in panel.title.text and "Brier" in panel.title.text
        mine = [s for s in panel.series if not s.faint]
        assert [s.result.name for s in mine] == [r.name]
        assert mine[0].curve.isVisible() and np.isfinite(mine[0].curve.yData).any()
        ref = [s for s in panel.series if s.faint]
        assert [s.result.name for s in ref] == ["none"] and not ref[0].band.isVisible()
    # the bandwidth reaches every panel
    canvas.set_bandwidth(0.1)
    x, y = grid.panels[0].series[-1].curve.xData, grid.panels[0].series[-1].curve.yData
    ref = shown[0].curve(0.1)
    idx = np.searchsorted(ref.x, x)
    ok = np.isfinite(y)
    np.testing.assert_array_equal(y[ok], ref.curve[idx][ok])
    canvas.set_layout("overlay")
    assert canvas._view.isVisible()


def test_split_panels_is_the_one_layout_rule(evaluation):
    """Panels by one factor, overlay by the other: two 'runs' x calibrators, either way round."""
    items = [CurveItem(result=r, label=f"{run} {r.label}", color_key=r.name, dash_key=run, k=100)
             for run in ("A", "B") for r in evaluation.results[1:3]]
    by_cal = split_panels(items, panel_of=lambda it: it.color_key)
    assert [len(p.items) for p in by_cal] == [2, 2] and {it.dash_key for it in by_cal[0].items} == {"A", "B"}
    by_run = split_panels(items, panel_of=lambda it: it.dash_key)
    assert [p.title for p in by_run] == ["A", "B"]
    assert len(split_panels(items, panel_of=lambda it: it.dash_key, layout="overlay")) == 1
    view = FigureView()
    view.set_panels(by_cal)
    dashed = {s.item.dash_key: s.curve.opts["pen"].style() for _, s in view.all_series()}
    assert dashed["A"] != dashed["B"]


def test_bands_toggle_globally_and_per_item(canvas):
    canvas.set_bands(False)
    assert not any(canvas.bands_shown().values())
    canvas.set_bands(True)
    canvas.set_bands(False, "mrr")
    shown = canvas.bands_shown()
    assert not shown["mrr"] and shown["ts"]
    canvas.set_layout("grid")
    mrr = [s for _, s in canvas.grid_view.all_series() if s.item.color_key == "mrr" and not s.faint]
    assert mrr and not mrr[0].band.isVisible()


# ------------------------------------------------------------------------------------------------ navigation
def test_range_presets_and_linked_density(canvas):
    canvas.set_x_range("high")
    assert canvas.x_range() == pytest.approx((0.8, 1.0))
    assert canvas._bottom.vb.viewRange()[0] == pytest.approx([0.8, 1.0])      # the density strip follows
    canvas.set_x_range("domain")
    assert canvas.x_range() == pytest.approx((0.01, 1.0))
    canvas.set_x_range("full")
    assert canvas.x_range() == pytest.approx((0.0, 1.0))
    assert canvas._top.vb.state["mouseEnabled"] == [True, False]               # wheel zoom / drag pan on x


def test_nothing_under_the_frame(canvas):
    lo, hi = canvas._top.vb.viewRange()[1]
    assert lo < 0 and hi > 1                                       # a curve at accuracy 1.0 is drawn inside


# ------------------------------------------------------------------------------------------------ domain
def test_curve_band_and_density_on_one_over_k_to_one(canvas, evaluation):
    for r in evaluation.results:
        x, y = canvas.drawn_curve(r.name)
        assert np.isnan(y[x < 0.01 - 1e-9]).all()
        path = canvas._get(r.name).density.path()
        assert path.boundingRect().left() >= 0.01 - 1e-9


# ------------------------------------------------------------------------------------------------ exports
def test_dark_session_exports_a_light_png_of_7in_at_300_dpi(canvas, tmp_path):
    canvas.set_theme("dark")
    out = canvas.export_figure(tmp_path / "fig.png", FigureOptions(width_in=7, dpi=300, layout="grid"))
    img = QtGui.QImage(str(out[0]))
    assert img.width() == 2100
    assert _light_fraction(img) > 0.8
    assert "dpi=300" in img.text("Description") and "layout=grid" in img.text("Description")
    small = canvas.export_figure(tmp_path / "one.png", FigureOptions(width_in=3.5, dpi=300, layout="overlay"))
    assert QtGui.QImage(str(small[0])).width() == 1050


def test_pdf_export_is_vector_and_svg_has_its_settings(canvas, tmp_path):
    pdf, svg = canvas.export_figure(tmp_path / "fig", FigureOptions(layout="grid"), formats=["pdf", "svg"])
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    assert b"/Subtype /Image" not in data and b"/Subtype/Image" not in data     # no raster at all
    assert b"/FontFile" in data                                               # fonts embedded
    assert len(data) < 2_000_000
    text = svg.read_text()
    assert "<svg" in text and "layout=grid" in text


def test_export_dialog_sizes(qtbot, canvas, tmp_path):
    from calibview.plot.export_dialog import ExportDialog
    d = ExportDialog(canvas)
    qtbot.addWidget(d)
    d.set_preset(3.5)
    assert d.options().width_in == 3.5 and d.options().dpi == 300 and d.options().theme == "light"
    d.unit.setCurrentIndex(2)                                    # px
    assert d.width.value() == pytest.approx(1050)
    d.width.setValue(600)
    d.dpi.setValue(200)
    out = d.export_to(tmp_path / "x.png")
    assert QtGui.QImage(str(out[0])).width() == 600


def test_lengths_and_legend_units():
    assert parse_length("7in") == 7 and parse_length("2100px", 300) == 7
    assert parse_length("17.78cm") == pytest.approx(7)
    with pytest.raises(ValueError):
        parse_length("7 furlongs")

    class E:
        def __init__(self, v):
            self.value = v
    text = legend_numbers({"ece": E(0.0469), "cal": E(0.0033), "brier": E(0.3661)})
    assert re.search(r"ECE 4\.69 ?%", text) and "CAL×100 0.33" in text and "Brier×100 36.61" in text


def test_calibrator_panels_overlay_and_grid(evaluation):
    assert len(calibrator_panels(evaluation.results, layout="overlay")) == 1
    assert len(calibrator_panels(evaluation.results, layout="grid")) == len(NAMES) - 1


def test_legend_stays_in_view_when_zooming(canvas):
    canvas.set_x_range("high")
    lo, hi = canvas.x_range()
    assert lo <= canvas._legend.pos().x() <= hi
    canvas._legend.frac = (0.6, 0.4)                 # as if dragged to the lower right
    canvas.set_x_range("full")
    assert canvas._legend.pos().x() == pytest.approx(0.6) and canvas._legend.pos().y() == pytest.approx(0.4)
    assert canvas._bottom.getAxis("bottom").labelText == "confidence"        # no "(x0.001)" when zoomed


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    from calibview.core.io.writer import write_run
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("bin") / "bin.h5"
    for split, n in (("val", 3000), ("test", 3000)):
        y = rng.integers(0, 2, n)
        z = rng.normal(0, 1.5, n) + (2 * y - 1) * 1.2
        write_run(path, "net", "toy", split, logits=np.stack([-z / 2, z / 2], 1).astype(np.float32), labels=y)
    return evaluate(EvalRequest(file=str(path), run="net/toy", calibrators=("none", "ts"), n_boot=0))


def test_binary_run_is_drawn_from_one_half(qtbot, binary, tmp_path):
    from calibview.core.reports.tables import curves_csv
    c = CalibrationCanvas()
    qtbot.addWidget(c)
    c.resize(700, 500)
    c.show()
    c.set_results(binary.results)
    for r in binary.results:
        x, y = c.drawn_curve(r.name)
        assert np.isnan(y[x < 0.5 - 1e-9]).all() and np.isfinite(y[x >= 0.5]).any()
        assert c._get(r.name).density.path().boundingRect().left() >= 0.5 - 1e-9
    assert c._floor[0].getRegion() == pytest.approx((0.0, 0.5))
    c.set_x_range("domain")
    assert c.x_range() == pytest.approx((0.5, 1.0))
    rows = curves_csv([binary]).splitlines()[1:]
    assert min(float(r.split(",")[6]) for r in rows) == pytest.approx(0.5, abs=1e-3)


def test_grid_hover_and_range_box(qtbot, canvas):
    from PySide6 import QtCore
    canvas.set_layout("grid")
    panel = canvas.grid_view.panels[1]
    got = []
    canvas.hover_changed.connect(got.append)
    pos = panel.top.vb.mapViewToScene(QtCore.QPointF(0.9, 0.5))
    canvas.grid_view.scene().sigMouseMoved.emit(pos)
    assert got and got[-1].startswith("conf 0.90") and panel.series[-1].name in got[-1]
    canvas.set_x_range("high")
    assert canvas.toolbar.range_box.currentData() == "high"
    canvas.set_x_range((0.5, 0.7))                   # as after a wheel zoom: no preset claimed
    assert canvas.toolbar.range_box.currentIndex() == -1
