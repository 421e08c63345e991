"""The curve's confidence band and its pale, sparse parts as the window and the exports draw them: the band off by
default, drawn only at the bandwidth it was computed at, in the legend; the curve pale exactly where a brute-force
Kish count under the kernel is below 30."""

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6 import QtGui  # noqa: E402

from calibview.core.evaluation.engine import evaluate  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.stats.grid import kernel_values  # noqa: E402
from calibview.plot.canvas import CalibrationCanvas  # noqa: E402
from calibview.plot.spec import FigureOptions  # noqa: E402


@pytest.fixture(scope="module")
def sparse_run(tmp_path_factory):
    """A 3-class run whose confidences are dense above 0.7 and sparse (a dozen samples) around 0.45."""
    from calibview.core.io.writer import write_run
    rng = np.random.default_rng(5)
    path = tmp_path_factory.mktemp("sparse") / "sparse.h5"
    for split in ("val", "test"):
        n_dense, n_sparse = 3000, 12
        conf = np.r_[rng.uniform(0.7, 0.99, n_dense), rng.uniform(0.42, 0.48, n_sparse)]
        rest = (1 - conf) / 2
        probs = np.stack([conf, rest, rest], 1)
        labels = np.where(rng.random(conf.size) < conf, 0, 1)
        write_run(path, "net", "toy", split, logits=np.log(probs).astype(np.float32), labels=labels)
    ev = evaluate(EvalRequest(file=str(path), run="net/toy", calibrators=("none", "ts"), n_boot=60, seed=1))
    return ev, path


@pytest.fixture
def canvas(qtbot, sparse_run):
    ev, _ = sparse_run
    c = CalibrationCanvas()
    qtbot.addWidget(c)
    c.resize(900, 640)
    c.show()
    qtbot.waitExposed(c)
    c.set_results(ev.results, title="sparse", computed_at=(ev.request.bandwidth, ev.request.kernel))
    c.set_bandwidth(ev.request.bandwidth, ev.request.kernel)
    return c


def _legend(c) -> str:
    return c.legend_box.textItem.toPlainText()


def test_confidence_band_is_off_by_default_and_drawn_when_asked(canvas, sparse_run):
    ev, _ = sparse_run
    r = ev.result("none")
    s = canvas._get("none")
    assert not canvas.ci_on and not s.ci_lo.isVisible() and not s.ci_hi.isVisible()
    canvas.toolbar.ci.click()                        # the toolbar button, as a user switches it on
    assert canvas.ci_on and s.ci_lo.isVisible() and s.ci_hi.isVisible()
    band = r.curve_band
    x, lo, hi = s.ci_lo.xData, s.ci_lo.yData, s.ci_hi.yData
    np.testing.assert_array_equal(x, band.x)
    drawn = np.isfinite(lo)
    assert drawn.sum() > 50
    np.testing.assert_array_equal(lo[drawn], band.lo[drawn])
    np.testing.assert_array_equal(hi[drawn], band.hi[drawn])
    assert (lo[drawn] <= hi[drawn]).all()
    # drawn only where the curve is: nothing below 1/K or where no sample is near
    assert x[drawn].min() >= 1 / 3 - 1e-9
    assert "95 % confidence band" in _legend(canvas)


def test_confidence_band_is_not_drawn_at_another_bandwidth(canvas, sparse_run):
    ev, _ = sparse_run
    canvas.set_ci(True)
    s = canvas._get("ts")
    assert np.isfinite(s.ci_lo.yData).any()
    canvas.set_bandwidth(0.1)
    assert s.ci_lo.xData.size == 0 and s.ci_hi.xData.size == 0
    assert f"confidence band at h = {ev.request.bandwidth:g} only" in _legend(canvas)
    canvas.set_bandwidth(ev.request.bandwidth)
    assert np.isfinite(s.ci_lo.yData).any()
    assert "only" not in _legend(canvas)


def test_curve_is_pale_exactly_where_few_samples_lie_under_the_kernel(canvas, sparse_run):
    import h5py
    ev, path = sparse_run
    h = ev.request.bandwidth
    with h5py.File(path, "r") as f:
        z = f[f"net/toy/{ev.request.eval_split}/logits"][()].astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    conf = (p / p.sum(1, keepdims=True)).max(1)
    s = canvas._get("none")
    x, y = canvas.drawn_curve("none")
    solid, pale = s.curve.yData, s.thin.yData
    assert s.has_thin and "pale: fewer than 30 samples" in _legend(canvas)
    k = kernel_values(x[:, None] - conf[None, :], h, "gaussian")
    kish = k.sum(1) ** 2 / (k * k).sum(1)
    drawn = np.isfinite(y)
    clear = drawn & (np.abs(kish - 30) > 3)               # away from the threshold, where binning cannot flip it
    assert (clear & (kish < 30)).sum() > 5 and (clear & (kish > 30)).sum() > 50
    np.testing.assert_array_equal(np.isnan(solid[clear]), kish[clear] < 30)
    assert np.isfinite(pale[clear & (kish < 30)]).all()
    # the pale colour is the curve's at a lower opacity
    assert s.thin.opts["pen"].color().alpha() < s.curve.opts["pen"].color().alpha()


def test_a_dense_run_has_no_pale_part_and_no_note(qtbot, demo_file):
    ev = evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", calibrators=("none",), n_boot=0))
    c = CalibrationCanvas()
    qtbot.addWidget(c)
    c.show()
    c.set_results(ev.results)
    c.set_ci(True)
    s = c._get("none")
    assert not s.has_thin and s.thin.xData.size == 0
    text = _legend(c)
    assert "pale" not in text and "no confidence band: evaluated without resamples" in text


def test_export_draws_the_band_when_asked(canvas, tmp_path):
    off = tmp_path / "off.png"
    on = tmp_path / "on.png"
    canvas.export_figure(off, FigureOptions(width_in=4, dpi=100, layout="overlay"))
    canvas.export_figure(on, FigureOptions(width_in=4, dpi=100, layout="overlay", ci_band=True))
    a, b = QtGui.QImage(str(off)), QtGui.QImage(str(on))
    assert a.size() == b.size() and a != b
    assert "confidence_band=on" in b.text("Description") and "confidence_band" not in a.text("Description")
