"""The ensemble's curve split by epistemic tercile: the three sample sets are a brute-force tercile split of the
mutual information computed here in numpy from the file's members, each curve is the public kernel curve of its
subset (recomputed here from the members and the fitted temperature), the canvas and the grid draw exactly those
curves, exports change with them, and ``calibview report --diagram-by epistemic`` adds them to its diagram."""

import h5py
import numpy as np
import pytest

pytest.importorskip("pytestqt")

from calibview.core.evaluation.engine import Engine  # noqa: E402
from calibview.core.evaluation.members.terciles import tercile_split  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.stats import smoothing  # noqa: E402

M, N, K = 5, 3000, 10


def write_members_run(path, seed=0):
    """A members run (ens/toy, val and test) whose members disagree a little, more or much per sample, and a plain
    run (plain/toy) of the same samples, written with h5py alone. Returns {split: (members (M, N, K), labels)}."""
    rng = np.random.default_rng(seed)
    out = {}
    with h5py.File(path, "w") as f:
        for split in ("val", "test"):
            y = rng.integers(0, K, N)
            base = rng.normal(size=(N, K))
            base[np.arange(N), y] += 2.5
            spread = rng.choice([0.2, 1.0, 3.0], N)
            z = (base[None] + spread[None, :, None] * rng.normal(size=(M, N, K))).astype(np.float32)
            g = f.create_group(f"ens/toy/{split}")
            g.create_dataset("members", data=z, chunks=(1, N, K)).attrs["kind"] = "ensemble"
            g.create_dataset("labels", data=y)
            p = f.create_group(f"plain/toy/{split}")
            p.create_dataset("logits", data=base.astype(np.float32))
            p.create_dataset("labels", data=y)
            out[split] = (z, y)
    return out


def _softmax(z):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _entropy(p):
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


def brute_force_terciles(members):
    """Row sets of the low / mid / high thirds of the samples by MI = H(mean p) - mean H(p_m) (nats)."""
    p = _softmax(members)                                   # (M, N, K)
    mi = _entropy(p.mean(axis=0)) - _entropy(p).mean(axis=0)
    order = np.argsort(mi)
    n = mi.shape[0]
    return [set(order[t * n // 3:(t + 1) * n // 3].tolist()) for t in range(3)]


def reference_vectors(members, labels, temperature=1.0):
    """(conf, correct, brier) of the ensemble (mean member probability), after dividing its log by
    ``temperature`` (temperature scaling of the ensemble), in numpy."""
    pbar = _softmax(members).mean(axis=0)
    q = _softmax(np.log(pbar) / temperature)
    onehot = np.eye(q.shape[1])[labels]
    return q.max(axis=1), (q.argmax(axis=1) == labels).astype(float), ((q - onehot) ** 2).sum(axis=1)


@pytest.fixture(scope="module")
def members_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("terciles") / "members.h5"
    data = write_members_run(path)
    engine = Engine()
    req = EvalRequest(file=str(path), run="ens/toy", calibrators=("none", "ts"), n_boot=0)
    ev = engine.evaluate(req)
    return path, data, engine, req, ev


def test_the_three_sample_sets_are_a_brute_force_tercile_split_of_the_mi(members_run):
    path, data, engine, req, ev = members_run
    split = tercile_split(engine, req, ev.run)
    want = brute_force_terciles(data["test"][0])
    for name in ("none", "ts"):
        curves = split.of(name)
        assert [c.tercile for c in curves] == [0, 1, 2]
        assert [set(c.rows.tolist()) for c in curves] == want, name
        assert [c.n for c in curves] == [1000, 1000, 1000]
    assert [c.label for c in split.of("ts")] == [f"{t} epistemic (MI terciles)" for t in ("low", "mid", "high")]


@pytest.mark.parametrize("name", ["none", "ts"])
def test_each_curve_is_the_kernel_curve_of_its_subset(members_run, name):
    path, data, engine, req, ev = members_run
    temperature = engine.fitted(req)[name].params["temperature"] if name == "ts" else 1.0
    conf, correct, brier = reference_vectors(*data["test"], temperature)
    want = brute_force_terciles(data["test"][0])
    for curve, rows in zip(tercile_split(engine, req, ev.run).of(name), want):
        rows = np.array(sorted(rows))
        for h, kernel in ((0.05, "gaussian"), (0.12, "epanechnikov")):
            ref = smoothing.sharpness_curve(smoothing.bin_stats(conf[rows], correct[rows], brier[rows]), h, kernel)
            got = curve.curve(h, kernel)
            assert np.array_equal(got.valid, ref.valid)
            np.testing.assert_allclose(got.curve[ref.valid], ref.curve[ref.valid], atol=1e-6)
            assert curve.curve(h, kernel) is got                  # cached per bandwidth and kernel


@pytest.fixture
def canvas(qtbot, members_run):
    from calibview.plot.canvas import CalibrationCanvas

    path, data, engine, req, ev = members_run
    c = CalibrationCanvas()
    qtbot.addWidget(c)
    c.resize(900, 640)
    c.show()
    qtbot.waitExposed(c)
    c.set_results(ev.results)
    return c


def _drawn_matches(series, bandwidth, kernel="gaussian"):
    x, y = series.curve.xData, series.curve.yData
    ok = np.isfinite(y)
    assert ok.sum() > 50
    ref = series.result.curve(bandwidth, kernel)
    np.testing.assert_allclose(y[ok], np.interp(x[ok], ref.x, ref.curve), atol=1e-9)


def test_canvas_and_grid_draw_the_tercile_curves_and_follow_the_bandwidth(canvas, members_run):
    path, data, engine, req, ev = members_run
    curves = tercile_split(engine, req, ev.run).of("ts")
    canvas.set_terciles("ts", curves)
    layer = canvas.terciles
    assert [s.name for s in layer.series] == [c.label for c in curves]
    assert len({s.color for s in layer.series} | {s.color for s in canvas._series}) == 5     # all distinct
    assert len({s.dash for s in layer.series}) == 3 and None not in {s.dash for s in layer.series}
    legend = canvas.legend_box.toPlainText()
    assert "epistemic (MI terciles)" in legend and legend.count("n=1,000") == 3
    for s in layer.series:
        assert s.curve.isVisible() and not s.band.isVisible() and not s.density.isVisible()
        _drawn_matches(s, 0.05)
    before = [s.curve.yData.copy() for s in layer.series]
    canvas.set_bandwidth(0.15)
    for s, y in zip(layer.series, before):
        _drawn_matches(s, 0.15)
        assert not np.array_equal(np.nan_to_num(s.curve.yData), np.nan_to_num(y))
    canvas.set_visible(["none"])                          # the split calibrator hidden: so are its terciles
    assert not any(s.curve.isVisible() for s in layer.series)
    canvas.set_visible(["none", "ts"])
    canvas.set_layout("grid")
    panels = canvas.grid_view.panels
    ts_panel = next(p for p in panels if p.spec.title == ev.result("ts").label)
    split = [s for s in ts_panel.series if s.name.endswith("(MI terciles)")]
    assert [s.name for s in split] == [c.label for c in curves]
    assert sum(s.name.endswith("(MI terciles)") for p in panels for s in p.series) == 3
    for s in split:
        _drawn_matches(s, 0.15)
        assert not s.density.isVisible()
    canvas.set_bandwidth(0.03)
    for s in split:
        _drawn_matches(s, 0.03)
    canvas.set_terciles(None, ())
    assert canvas.terciles.series == []
    assert not any(s.name.endswith("(MI terciles)") for p in canvas.grid_view.panels for s in p.series)


@pytest.mark.parametrize("layout", ["overlay", "grid"])
def test_an_export_with_the_terciles_differs_from_one_without(canvas, members_run, tmp_path, layout):
    path, data, engine, req, ev = members_run
    from calibview.plot.spec import FigureOptions

    opts = FigureOptions(layout=layout, width_in=5, dpi=100)
    canvas.set_layout(layout)
    plain = canvas.export_figure(tmp_path / "plain.svg", opts, formats=("svg", "png"))
    canvas.set_terciles("ts", tercile_split(engine, req, ev.run).of("ts"))
    split = canvas.export_figure(tmp_path / "split.svg", opts, formats=("svg", "png"))
    for a, b in zip(plain, split):
        assert a.read_bytes() != b.read_bytes()
    svg_plain, svg_split = (p.read_text() for p in (plain[0], split[0]))
    assert "epistemic (MI terciles)" in svg_split and "epistemic (MI terciles)" not in svg_plain
    assert svg_split.count("<path") > svg_plain.count("<path")


def test_report_diagram_by_epistemic(members_run, tmp_path, capsys):
    from calibview.cli.program import main

    path = members_run[0]
    common = [str(path), "--calibrators", "none,ts", "--n-boot", "0", "--quiet", "--format", "svg"]
    assert main(["report", *common, "--run", "ens/toy", "--out", str(tmp_path / "plain")]) == 0
    assert main(["report", *common, "--run", "ens/toy", "--out", str(tmp_path / "split"), "--diagram-by",
                 "epistemic", "--layout", "grid"]) == 0
    plain = (tmp_path / "plain" / "diagram.svg").read_text()
    split = (tmp_path / "split" / "diagram.svg").read_text()
    assert "epistemic (MI terciles)" in split and "epistemic (MI terciles)" not in plain
    capsys.readouterr()
    assert main(["report", *common, "--run", "plain/toy", "--out", str(tmp_path / "no"), "--diagram-by",
                 "epistemic"]) == 2
    err = capsys.readouterr().err
    assert "needs a run with members" in err and err.count("\n") == 1 and not (tmp_path / "no").exists()
