"""The CORP curves as the diagram draws them and curves.csv tabulates them, against independent sources: the step
function at the kernel curve's grid equals scikit-learn's isotonic fit (read as the same right-continuous steps
at its thresholds), the consistency band of a calibrated forecast holds the diagonal, the MCB-DSC points equal
model-diagnostics' decomposition, and curves.csv's CORP columns are probabilities with lo <= hi."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.reports import corp as corp_report
from calibview.core.reports.tables import CURVE_COLUMNS, write_report
from calibview.core.stats.corp.curves import corp_curve, forecast_outcome

GRID = np.linspace(0.0, 1.0, 4096)


@pytest.fixture(scope="module")
def demo_eval(demo_file):
    engine = Engine()
    req = EvalRequest(file=str(demo_file), run="resnet110-brier/cifar10", calibrators=("none", "ts", "hb"),
                      n_boot=50)
    return engine, engine.evaluate(req)


def _sklearn_steps(f, a, x):
    """scikit-learn's isotonic fit, read as right-continuous steps: the fit at the largest threshold <= x."""
    iso = IsotonicRegression(y_min=0.0, y_max=1.0).fit(f, a)
    t, y = iso.X_thresholds_, iso.y_thresholds_
    out = y[np.clip(np.searchsorted(t, x, side="right") - 1, 0, t.size - 1)]
    return np.where((x >= f.min()) & (x <= f.max()), out, np.nan), iso


@pytest.mark.parametrize("name", ["none", "ts", "hb"])
def test_the_drawn_step_curve_equals_scikit_learns_isotonic_fit_at_the_grid(demo_eval, name):
    engine, ev = demo_eval
    f, a = forecast_outcome(engine.scored(ev.request)[name].stats)
    curve = corp_curve(f, a, GRID, bands=False)
    theirs, iso = _sklearn_steps(f, a, GRID)
    np.testing.assert_allclose(curve.at(GRID), theirs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve.at(f), iso.predict(f), rtol=0, atol=1e-12)     # at every sample too
    xs, ys = curve.stairs()                           # the drawn polyline: the same steps
    mid = (xs[0::2] + xs[1::2]) / 2
    np.testing.assert_allclose(ys[0::2], curve.at(mid), rtol=0, atol=0)


def test_ties_are_pooled_as_scikit_learn_pools_them():
    rng = np.random.default_rng(3)
    f = np.round(rng.beta(5, 2, 3000), 2)            # ~100 distinct values, each shared by many samples
    a = (rng.random(f.size) < f ** 1.3).astype(float)
    curve = corp_curve(f, a, GRID, bands=False)
    theirs, _ = _sklearn_steps(f, a, GRID)
    np.testing.assert_allclose(curve.at(GRID), theirs, rtol=0, atol=1e-12)


def test_the_consistency_band_holds_the_diagonal_of_a_calibrated_forecast():
    rng = np.random.default_rng(11)
    f = rng.uniform(0.05, 0.95, 4000)
    a = (rng.random(f.size) < f).astype(float)
    curve = corp_curve(f, a, GRID, n_resamples=200, seed=1)
    inside = np.isfinite(curve.cons_lo)
    covered = (curve.cons_lo[inside] <= GRID[inside] + 1e-12) & (GRID[inside] <= curve.cons_hi[inside] + 1e-12)
    assert covered.mean() > 0.9
    assert np.all(curve.cons_lo[inside] <= curve.cons_hi[inside])
    lo, hi = curve.boot_lo[inside], curve.boot_hi[inside]
    assert np.all(lo <= hi) and np.mean((lo <= curve.at(GRID)[inside]) & (curve.at(GRID)[inside] <= hi)) > 0.95
    # an over-confident forecast of the same outcomes leaves the band
    sharp = 1 / (1 + np.exp(-2.0 * np.log(f / (1 - f))))
    over = corp_curve(sharp, a, GRID, n_resamples=200, seed=1)
    ok = np.isfinite(over.cons_lo) & np.isfinite(over.at(GRID))
    assert np.mean((over.at(GRID)[ok] < over.cons_lo[ok]) | (over.at(GRID)[ok] > over.cons_hi[ok])) > 0.3


def test_the_mcb_dsc_points_equal_model_diagnostics_decomposition(demo_eval):
    from model_diagnostics.scoring import SquaredError, decompose

    engine, ev = demo_eval
    sets = corp_report.corp_sets(engine, [ev], bands=False)
    points = corp_report.mcb_dsc_points([ev], sets)
    assert [p["calibrator"] for p in points] == ["none", "ts", "hb"]
    scored = engine.scored(ev.request)
    for p in points:
        st = scored[p["calibrator"]].stats
        peer = decompose(st.correct, st.conf, scoring_function=SquaredError()).row(0, named=True)
        assert p["mcb"] == pytest.approx(peer["miscalibration"], abs=1e-12, rel=0)
        assert p["dsc"] == pytest.approx(peer["discrimination"], abs=1e-12, rel=0)
        assert p["unc"] == pytest.approx(peer["uncertainty"], abs=1e-12, rel=0)
        assert p["score"] == pytest.approx(float(np.mean((st.conf - st.correct) ** 2)), abs=1e-12)


def test_the_rows_decomposition_wins_over_the_computed_one(demo_eval):
    from dataclasses import replace

    from calibview.core.evaluation.results import Estimate

    engine, ev = demo_eval
    r = ev.results[1]
    given = {**r.metrics, "corp_mcb": Estimate(0.5, 0, 1), "corp_dsc": Estimate(0.25, 0, 1),
             "corp_unc": Estimate(0.125, 0, 1)}
    ev2 = replace(ev, results=(replace(r, metrics=given),))
    (p,) = corp_report.mcb_dsc_points([ev2], {})          # no CorpSet: read off the row alone
    assert (p["mcb"], p["dsc"], p["unc"], p["score"]) == (0.5, 0.25, 0.125, 0.375)


def test_curves_csv_has_the_corp_columns_as_probabilities_on_the_kernel_grid(demo_eval, tmp_path):
    engine, ev = demo_eval
    before = dict(corp_report.COUNTERS)
    sets = corp_report.corp_sets(engine, [ev])
    assert corp_report.COUNTERS["bands"] - before.get("bands", 0) == 3
    write_report([ev], tmp_path, corp=sets)
    with open(tmp_path / "curves.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(CURVE_COLUMNS)
    assert list(CURVE_COLUMNS[-5:]) == ["corp", "corp_cons_lo", "corp_cons_hi", "corp_lo", "corp_hi"]
    filled = [r for r in rows if r["corp"]]
    assert len(filled) > 1000
    for r in filled:
        v = {c: float(r[c]) for c in CURVE_COLUMNS[-5:] if r[c]}
        assert all(0.0 <= x <= 1.0 for x in v.values())
        assert v["corp_cons_lo"] <= v["corp_cons_hi"] and v["corp_lo"] <= v["corp_hi"]
    for name in ("none", "ts"):                 # the same steps as the curve itself at each row's x
        mine = [r for r in filled if r["calibrator"] == name]
        x = np.array([float(r["x"]) for r in mine])
        np.testing.assert_allclose([float(r["corp"]) for r in mine], sets[(ev.run.file, ev.run.name, "test")]
                                   .of(name).at(x), rtol=0, atol=1e-15)
    # without CORP curves the columns are there and empty
    write_report([ev], tmp_path / "plain")
    with open(tmp_path / "plain" / "curves.csv", newline="") as fh:
        assert all(not r["corp"] for r in csv.DictReader(fh))
