"""The regression metrics against uncertainty-toolbox 0.1.1 (its defaults), brute-force loops and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from calibview.core.io.regression.discovery import list_regression_runs
from calibview.core.regression import recalibrators as recal
from calibview.core.regression.evaluate import RegRequest, evaluate_regression
from calibview.core.regression.forms import Predictive
from calibview.core.regression.kernel import decomposition, silverman
from calibview.core.regression.metrics import COVERAGE_LEVELS, Terms
from _regression_data import hetero, write_runs

uct = pytest.importorskip("uncertainty_toolbox")

PAIRS = {"rmse": ("accuracy", "rmse"), "mae": ("accuracy", "mae"), "nll_gaussian": ("scoring_rule", "nll"),
         "crps_gaussian": ("scoring_rule", "crps"), "miscalibration_area": ("avg_calibration", "miscal_area"),
         "rms_calibration_error": ("avg_calibration", "rms_cal"), "ma_calibration_error": ("avg_calibration", "ma_cal"),
         "sharpness": ("sharpness", "sharp")}


def _point(pred, y, bins=10, h=0.2) -> dict:
    return {k: float(v[0]) for k, v in Terms.build(pred, y, bins, h).metrics(np.ones((1, y.size))).items()}


def _toolbox(mean, std, y) -> dict:
    ref = {"rmse": np.sqrt(np.mean((mean - y) ** 2)), "mae": np.mean(np.abs(mean - y)),
           "nll_gaussian": uct.metrics_scoring_rule.nll_gaussian(mean, std, y),
           "crps_gaussian": uct.metrics_scoring_rule.crps_gaussian(mean, std, y),
           "miscalibration_area": uct.metrics_calibration.miscalibration_area(mean, std, y),
           "rms_calibration_error": uct.metrics_calibration.root_mean_squared_calibration_error(mean, std, y),
           "ma_calibration_error": uct.metrics_calibration.mean_absolute_calibration_error(mean, std, y),
           "sharpness": uct.metrics_calibration.sharpness(std)}
    return {k: float(v) for k, v in ref.items()}


def _assert_toolbox(ours: dict, mean, var, y) -> None:
    ref = _toolbox(mean, np.sqrt(var), y)
    full = uct.get_all_metrics(mean, np.sqrt(var), y, verbose=False)       # its one-call defaults agree too
    for name, (group, key) in PAIRS.items():
        assert ours[name] == pytest.approx(ref[name], abs=1e-9), name
        assert ours[name] == pytest.approx(full[group][key], abs=1e-9), name


@pytest.mark.parametrize("n,seed", [(300, 0), (1000, 1), (2500, 2)])
def test_eight_metrics_equal_uncertainty_toolbox(n, seed):
    mean, var, y = hetero(n, seed)
    _assert_toolbox(_point(Predictive("var", mean, var=var), y), mean, var, y)


@pytest.mark.parametrize("split", ["test", "val"])
def test_the_demo_var_run_through_metrics_json_equals_uncertainty_toolbox(split, capsys):
    """The bundled demo's BayesianRidge run on the diabetes data (real predictive variances, N = 130), as
    ``calibview metrics --json`` reports it uncalibrated, against uncertainty-toolbox on the arrays read with h5py."""
    import json

    import h5py

    import calibview
    from calibview.cli.program import main

    demo = calibview.demo_path()
    with h5py.File(demo, "r") as f:
        g = f[f"bayesian-ridge/diabetes/{split}"]
        mean, var, y = g["mean"][()], g["var"][()], g["targets"][()]
    assert y.shape == (130,)
    other = "val" if split == "test" else "test"
    assert main(["metrics", str(demo), "--run", "bayesian-ridge/diabetes", "--calibrators", "none", "--n-boot", "0",
                 "--eval-split", split, "--fit-split", other, "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["model"] == "bayesian-ridge"]
    assert [(r["calibrator"], r["eval_split"], r["n"]) for r in rows] == [("none", split, 130)]
    _assert_toolbox(rows[0], mean, var, y)


def test_ence_and_coverage_equal_a_brute_force_loop():
    mean, var, y = hetero(503, 3)
    bins = 7
    ours = _point(Predictive("var", mean, var=var), y, bins=bins)
    std = np.sqrt(var)
    order = sorted(range(y.size), key=lambda i: (std[i], i))
    size, extra = divmod(y.size, bins)
    total, start = 0.0, 0
    for j in range(bins):
        idx = order[start:start + size + (1 if j < extra else 0)]
        start += len(idx)
        rmv = np.sqrt(sum(var[i] for i in idx) / len(idx))
        rmse = np.sqrt(sum((y[i] - mean[i]) ** 2 for i in idx) / len(idx))
        total += abs(rmv - rmse) / rmv
    assert ours["ence"] == pytest.approx(total / bins, abs=1e-12)
    for name, p in COVERAGE_LEVELS.items():
        z = stats.norm.ppf(0.5 + p / 2)
        inside = sum(1 for i in range(y.size) if mean[i] - z * std[i] <= y[i] <= mean[i] + z * std[i])
        assert ours[name] == pytest.approx(inside / y.size, abs=1e-12), name


def test_quantile_coverage_and_pinball_equal_a_loop():
    mean, var, y = hetero(400, 4)
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    q = mean[:, None] + np.sqrt(var)[:, None] * stats.norm.ppf(levels)
    ours = _point(Predictive("quantiles", mean, quantiles=q, levels=levels), y)
    # the 50 % and 90 % intervals are the (0.25, 0.75) and (0.05, 0.95) quantiles themselves
    assert ours["coverage_50"] == pytest.approx(np.mean((y >= q[:, 1]) & (y <= q[:, 3])), abs=1e-12)
    assert ours["coverage_90"] == pytest.approx(np.mean((y >= q[:, 0]) & (y <= q[:, 4])), abs=1e-12)
    pin = np.mean([[max(t * (y[i] - q[i, j]), (t - 1) * (y[i] - q[i, j])) for j, t in enumerate(levels)]
                   for i in range(y.size)])
    assert ours["pinball"] == pytest.approx(pin, abs=1e-12)
    assert np.isnan(ours["nll_gaussian"]) and np.isnan(ours["crps_gaussian"]) and np.isnan(ours["sharpness"])


def test_samples_from_the_gaussian_give_its_coverages_within_monte_carlo_error():
    mean, var, y = hetero(2000, 5)
    rng = np.random.default_rng(11)
    s = 400
    samples = mean[:, None] + np.sqrt(var)[:, None] * rng.standard_normal((y.size, s))
    gauss = _point(Predictive("var", mean, var=var), y)
    mc = _point(Predictive("samples", mean, samples=samples), y)
    for name, p in COVERAGE_LEVELS.items():
        # the bounds' Monte-Carlo error moves a handful of targets across them: 4 standard errors of a
        # binomial proportion, plus the density of targets near the bounds times the quantile's error
        se = np.sqrt(p * (1 - p) / y.size) + np.sqrt(p * (1 - p) / s) * 0.5
        assert abs(mc[name] - gauss[name]) < 4 * se, name
    assert mc["sharpness"] == pytest.approx(gauss["sharpness"], rel=0.02)


def test_var_scaling_is_the_gaussian_nll_minimum():
    mean, var, y = hetero(700, 6)
    fitted = recal.fit("var-scaling", Predictive("var", mean, var=var), y)

    def nll(log_s: float) -> float:
        return float(-np.mean(stats.norm.logpdf(y, mean, np.sqrt(np.exp(log_s) * var))))

    best = optimize.minimize_scalar(nll, bounds=(-5, 5), method="bounded", options={"xatol": 1e-10})
    assert fitted.params["s"] == pytest.approx(np.exp(best.x), rel=1e-6)


def test_cal_plus_the_rest_is_the_mse():
    mean, var, y = hetero(1500, 7)
    h = silverman(mean)
    d = decomposition(mean, y, h)
    assert d["cal"] + d["sharpness_gap"] == pytest.approx(d["mse"], abs=1e-12)
    assert d["cal"] + d["rest"] + d["cross"] == pytest.approx(d["mse"], abs=1e-12)
    assert abs(d["cross"]) < 0.05 * d["mse"]          # the NW estimate is nearly orthogonal to its residual
    ours = _point(Predictive("var", mean, var=var), y, h=h)
    assert ours["cal"] == pytest.approx(d["cal"], abs=1e-12)
    assert ours["cal"] + ours["sharpness_gap"] == pytest.approx(ours["rmse"] ** 2, abs=1e-12)


def test_the_grid_path_of_cal_is_close_to_the_dense_one():
    from calibview.core.regression import kernel

    mean, var, y = hetero(3000, 8)
    h = silverman(mean)
    grid = decomposition(mean, y, h)["cal"]
    old = kernel.DENSE_MAX
    kernel.DENSE_MAX = 10 ** 6
    try:
        dense = decomposition(mean, y, h)["cal"]
    finally:
        kernel.DENSE_MAX = old
    assert grid == pytest.approx(dense, rel=1e-3)


def test_the_evaluation_gives_intervals_around_every_metric(tmp_path):
    path = tmp_path / "reg.h5"
    write_runs(path, samples=50)
    runs = {r.name: r for r in list_regression_runs(path)}
    assert {r: runs[r].form for r in runs} == {"gp/toy": "var", "qr/toy": "quantiles", "mc/toy": "samples"}
    ev = evaluate_regression(RegRequest(runs["gp/toy"], "test", "val", ("none", "var-scaling", "isotonic-pit"),
                                        n_boot=100))
    assert [r.name for r in ev.results] == ["none", "var-scaling", "isotonic-pit"]
    none, scaled, iso = ev.results
    for r in ev.results:
        for name, est in r.metrics.items():
            if np.isfinite(est.value):
                assert est.lo <= est.value <= est.hi, (r.name, name)
    # the variance is too small by 0.7^2: scaling brings the 90 % coverage near 0.9
    assert none.metrics["coverage_90"].value < 0.8 < scaled.metrics["coverage_90"].value
    assert abs(iso.metrics["coverage_90"].value - 0.9) < 0.05
    assert np.isnan(iso.metrics["nll_gaussian"].value)
    assert none.observed.shape == (100,) and np.all(none.observed_lo <= none.observed_hi)


def test_biased_calibration_errors_get_the_basic_interval_around_their_estimate(tmp_path):
    """The calibration errors' resamples lie almost all above the estimate (a plug-in error is biased up on a
    resample), so a percentile interval would start at the estimate; the basic interval reflects them back:
    lo = max(0, 2 est - q_hi), hi = 2 est - q_lo, recomputed here from the resamples' metrics by hand."""
    from calibview.core.regression.evaluate import BIASED_REG_METRICS

    path = tmp_path / "reg.h5"
    write_runs(path, samples=50)
    run = {r.name: r for r in list_regression_runs(path)}["gp/toy"]
    auto = evaluate_regression(RegRequest(run, "test", "val", ("var-scaling",), n_boot=200)).results[0]
    pct = evaluate_regression(RegRequest(run, "test", "val", ("var-scaling",), n_boot=200,
                                         interval="percentile")).results[0]
    for name in BIASED_REG_METRICS:
        a, p = auto.metrics[name], pct.metrics[name]
        assert a.method == "basic" and p.method == "percentile"
        assert a.value == p.value
        q_lo, q_hi = p.lo, p.hi            # the percentiles of the same resamples (same seed)
        if q_lo > p.value:                 # the percentile interval was widened down to the estimate
            q_lo = p.value
        assert a.hi == pytest.approx(2 * a.value - q_lo, abs=1e-12) or a.hi == pytest.approx(a.value)
        assert a.lo == pytest.approx(max(0.0, 2 * a.value - q_hi), abs=1e-12)
        assert a.lo < a.value <= a.hi      # the percentile interval started at the estimate
    assert auto.metrics["rmse"].method == "percentile"
