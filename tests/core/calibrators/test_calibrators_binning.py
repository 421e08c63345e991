"""hb, ir, platt, beta and mrr against independent implementations (sklearn, netcal, betacal, by hand), their
degenerate fit splits, and the calibrator interface (JSON round trip, chunking, normalised rows)."""

import threading
import warnings

import numpy as np
import pytest
import torch
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from calibview.core import calibrators as calib
from calibview.core.calibrators import binning as cb
from calibview.core.errors import Cancelled, CalibviewError
from calibview.core.stats.metrics import sample_stats

METHODS = ("hb", "ir", "platt", "beta", "mrr")


def _logits(n, k, seed, scale=2.0, signal=1.5, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += signal
    return torch.from_numpy(z * scale).to(dtype), torch.from_numpy(y)


def _from_probs(p):
    """Scores as calibview passes a probabilities file: log p (exact zeros become -inf)."""
    with np.errstate(divide="ignore"):
        return torch.from_numpy(np.log(np.asarray(p, dtype=np.float64)))


def _sklearn_ir(p_fit, y_fit, p_eval):
    k = p_fit.shape[1]
    out = np.empty((p_eval.shape[0], k))
    for c in range(k):
        ir = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1, increasing=True)
        ir.fit(p_fit[:, c], (y_fit == c).astype(np.float64))
        out[:, c] = ir.predict(p_eval[:, c])
    return out


# --- isotonic regression ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("k,scale,rounding", [(2, 1.0, None), (6, 2.0, None), (6, 3.0, 1), (20, 4.0, 0)])
def test_ir_maps_equal_sklearn_random(k, scale, rounding):
    z, y = _logits(3000, k, 0, scale)
    if rounding is not None:                    # coarse logits: many tied probabilities to pool
        z = torch.round(z, decimals=rounding)
    z_eval, _ = _logits(2000, k, 1, scale * 1.5)          # wider: exercises the clipping at both ends
    fitted = calib.fit("ir", z, y)
    p_fit, p_eval = cb.probabilities(z).numpy(), cb.probabilities(z_eval).numpy()
    ours = cb.one_vs_rest(fitted, z_eval).numpy()
    np.testing.assert_allclose(ours, _sklearn_ir(p_fit, y.numpy(), p_eval), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cb.one_vs_rest(fitted, z).numpy(), _sklearn_ir(p_fit, y.numpy(), p_fit),
                               rtol=0, atol=1e-12)
    # renormalised rows = the maps divided by their sums, where the sum is positive
    lp = fitted.apply(z_eval).numpy()
    s = ours.sum(1)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(lp[s > 0], np.log(ours[s > 0] / s[s > 0, None]), rtol=0, atol=1e-12)


def test_ir_maps_equal_sklearn_on_cifar10_val(demo_file):
    from calibview.core.io.logits import read_split
    d = read_split(demo_file, "resnet110-brier/cifar10", "val")
    z, y = torch.from_numpy(d.scores.copy()), torch.from_numpy(d.labels.copy())
    fit, ev = slice(0, 3000), slice(3000, None)
    fitted = calib.fit("ir", z[fit], y[fit])
    p = cb.probabilities(z).numpy()
    ref = _sklearn_ir(p[fit], d.labels[fit], p[ev])
    np.testing.assert_allclose(cb.one_vs_rest(fitted, z[ev]).numpy(), ref, rtol=0, atol=1e-12)
    assert fitted.warnings == ()
    assert len(fitted.params["x"]) < 3000 * 10 / 5           # only the steps are stored


def test_ir_binary_direct_comparison():
    """K = 2: the class-1 map is sklearn's isotonic fit of y on p_1, nothing else involved."""
    z, y = _logits(500, 2, 3, 1.0)
    fitted = calib.fit("ir", z, y)
    p = cb.probabilities(z).numpy()
    ir = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(p[:, 1], y.numpy())
    grid = np.linspace(-4, 4, 801)
    zg = torch.from_numpy(np.stack([np.zeros_like(grid), grid], 1))
    np.testing.assert_allclose(cb.one_vs_rest(fitted, zg).numpy()[:, 1],
                               ir.predict(cb.probabilities(zg).numpy()[:, 1]), rtol=0, atol=1e-12)


def _greedy_runs(x, eps=np.finfo(np.float64).resolution):
    """Run starts of sorted x by sklearn's _make_unique loop, written out."""
    starts, current = [0], x[0]
    for j in range(1, len(x)):
        if x[j] - current >= eps:
            starts.append(j)
            current = x[j]
    return np.array(starts)


@pytest.mark.parametrize("seed", range(4))
def test_ir_runs_pool_values_within_1e15_of_their_first_as_sklearn(seed):
    rng = np.random.default_rng(seed)
    # chains of steps under 1e-15 that add up to more (a greedy split), exact ties, tiny values and clear gaps
    steps = rng.choice([0.0, 1e-17, 3e-16, 7e-16, 9.9e-16, 1e-15, 2e-14, 1e-3], size=3000,
                       p=[.2, .1, .2, .2, .1, .05, .1, .05])
    x = np.sort(np.r_[np.cumsum(steps), rng.uniform(0, 1e-13, 500), 0.5 + np.cumsum(steps[:300]) * 1e-3])
    np.testing.assert_array_equal(cb.run_starts(x), _greedy_runs(x))
    assert len(cb.run_starts(x)) < len(np.unique(x))            # the case pools more than exact ties


def test_ir_maps_equal_sklearn_where_probabilities_differ_below_1e15():
    """Binary logits spread so that class-1 probabilities cluster within a few 1e-15 (some chains longer than
    1e-15 in all): sklearn pools them by its tolerance, and so must the fit, or the maps differ by far more
    than 1e-12 there."""
    rng = np.random.default_rng(5)
    base = rng.uniform(-40, 2, 300)
    t = np.repeat(base, 20) + np.tile(np.arange(20), 300) * rng.choice([1e-16, 2e-15, 1e-14], 6000)
    y = (rng.uniform(size=t.size) < 1 / (1 + np.exp(-t))).astype(np.int64)
    z = torch.from_numpy(np.stack([np.zeros_like(t), t], 1))
    fitted = calib.fit("ir", z, torch.from_numpy(y))
    p = cb.probabilities(z).numpy()
    assert len(cb.run_starts(np.sort(p[:, 1]))) < len(np.unique(p[:, 1]))
    ir = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(p[:, 1], y)
    np.testing.assert_allclose(cb.one_vs_rest(fitted, z).numpy()[:, 1], ir.predict(p[:, 1]), rtol=0, atol=1e-12)


# --- histogram binning ------------------------------------------------------------------------------------------

def _netcal_hb(p_fit, y_fit, p_eval, bins, independent):
    from netcal.binning import HistogramBinning
    hb = HistogramBinning(bins=bins, independent_probabilities=independent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hb.fit(p_fit, y_fit)
        return hb.transform(p_eval)


@pytest.mark.parametrize("k,bins,n", [(5, 15, 4000), (10, 10, 800), (4, 30, 300)])
def test_hb_maps_equal_netcal(k, bins, n):
    pytest.importorskip("netcal")
    z, y = _logits(n, k, 2, 2.0)
    z_eval, _ = _logits(3000, k, 3, 2.5)
    fitted = calib.fit("hb", z, y) if bins == 15 else \
        calib.Fitted("hb", k, *calib.get("hb").fit(z, y, bins=bins))
    p_fit, p_eval = cb.probabilities(z).numpy(), cb.probabilities(z_eval).numpy()
    on_edge = np.isin(p_fit, np.linspace(0, 1, bins + 1)[1:-1])
    assert not on_edge.any()                 # netcal counts lo <= p < hi at fit, lo < p <= hi at transform
    ours = cb.one_vs_rest(fitted, z_eval).numpy()
    np.testing.assert_allclose(ours, _netcal_hb(p_fit, y.numpy(), p_eval, bins, True), rtol=0, atol=1e-12)
    # netcal's renormalised output: equal wherever netcal is not NaN
    ref = _netcal_hb(p_fit, y.numpy(), p_eval, bins, False)
    ok = ~np.isnan(ref).any(1)
    np.testing.assert_allclose(fitted.apply(z_eval).exp().numpy()[ok], ref[ok], rtol=0, atol=1e-12)


def _zero_row_setup():
    """K = 3, 15 bins: class 0's bin 4 (0.27, 0.33], class 1's bin 4 and class 2's bin 5 (0.33, 0.4] hold
    negatives only, so the row (0.31, 0.31, 0.38) maps to zeros everywhere."""
    rows = [[0.31, 0.06, 0.63], [0.06, 0.31, 0.63], [0.55, 0.07, 0.38]] * 10
    labels = [2, 2, 0] * 10
    return _from_probs(rows), torch.tensor(labels)


def test_hb_all_zero_row_falls_back_to_uncalibrated_where_netcal_returns_nan():
    z, y = _zero_row_setup()
    fitted = calib.fit("hb", z, y)
    z_eval = _from_probs([[0.31, 0.31, 0.38], [0.05, 0.05, 0.9]])
    maps = cb.one_vs_rest(fitted, z_eval).numpy()
    assert (maps[0] == 0).all()
    np.testing.assert_array_equal(maps[1], [0, 0, 0.5 * (13 / 15 + 14 / 15)])     # an empty bin: its centre
    out = fitted.apply(z_eval)
    torch.testing.assert_close(out[0], torch.log_softmax(z_eval[0], 0), rtol=0, atol=0)
    assert torch.isfinite(out[0]).all()
    torch.testing.assert_close(out.exp().sum(1), torch.ones(2, dtype=torch.float64))
    pytest.importorskip("netcal")
    p_fit = cb.probabilities(z).numpy()
    ref = _netcal_hb(p_fit, y.numpy(), cb.probabilities(z_eval).numpy(), 15, False)
    assert np.isnan(ref[0]).all()                  # netcal divides the all-zero row by 0
    np.testing.assert_allclose(out[1].exp().numpy(), ref[1], atol=1e-12)


def test_ir_all_zero_row_falls_back():
    z, y = _zero_row_setup()
    fitted = calib.fit("ir", z, y)
    z_eval = _from_probs([[0.31, 0.31, 0.38]])
    assert (cb.one_vs_rest(fitted, z_eval) == 0).all()
    torch.testing.assert_close(fitted.apply(z_eval), torch.log_softmax(z_eval, 1), rtol=0, atol=0)


def test_hb_gives_minus_inf_and_infinite_nll_when_the_labels_bin_has_no_positives():
    z, y = _zero_row_setup()
    fitted = calib.fit("hb", z, y)
    z_eval = _from_probs([[0.31, 0.06, 0.63], [0.55, 0.07, 0.38]])
    y_eval = torch.tensor([0, 0])   # row 0: class 0's bin 4 has no positives; row 1: its bin 8 only positives
    lp = fitted.apply(z_eval)
    assert lp[0, 0] == -np.inf and lp[1, 0] == 0.0
    assert not torch.isnan(lp).any()
    stats = sample_stats(lp, y_eval, n_bins=15)
    assert stats.nll[0] == np.inf and stats.nll[1] == 0.0 and stats.nll.mean() == np.inf


def test_hb_uniform_bins_follow_equal_width_bin_on_edges():
    """Values exactly on an edge belong to the lower bin (lo < p <= hi), 0 to the first and 1 to the last."""
    from calibview.core.stats.metrics import equal_width_bin
    edges = np.linspace(0, 1, 6)
    p1 = np.array([0.0, edges[1], edges[1] + 1e-12, edges[3], 0.5, 1.0, 1e-300])
    z = _from_probs(np.stack([1 - p1, p1], 1))
    y = torch.tensor([1, 0, 1, 1, 0, 1, 0])
    params, _ = calib.get("hb").fit(z, y, bins=5)
    bins = equal_width_bin(cb.probabilities(z).numpy()[:, 1], 5)
    value = np.asarray(params["value"])[1]
    for b in range(5):
        sel = bins == b
        expect = (y.numpy()[sel] == 1).mean() if sel.any() else (edges[b] + edges[b + 1]) / 2
        assert value[b] == pytest.approx(expect, abs=0)


def test_hb_quantile_edges_and_means_by_hand():
    z, y = _logits(1000, 4, 5, 2.0)
    params, warns = calib.get("hb").fit(z, y, bins=7, strategy="quantile")
    fitted = calib.Fitted("hb", 4, params, warns)
    p = cb.probabilities(z).numpy()
    edges, value = np.asarray(params["edges"]), np.asarray(params["value"])
    z_eval, _ = _logits(500, 4, 6, 3.0)
    pe = cb.probabilities(z_eval).numpy()
    for c in range(4):
        e = np.r_[0.0, np.quantile(p[:, c], np.arange(1, 7) / 7), 1.0]
        np.testing.assert_allclose(edges[c], e, rtol=0, atol=1e-15)
        b = np.clip(np.searchsorted(e, p[:, c], side="left") - 1, 0, 6)
        counts = np.bincount(b, minlength=7)
        assert counts.max() - counts.min() <= 2                 # equal mass
        expect = np.array([(y.numpy()[b == j] == c).mean() for j in range(7)])
        np.testing.assert_allclose(value[c], expect, rtol=0, atol=1e-15)
        be = np.clip(np.searchsorted(e, pe[:, c], side="left") - 1, 0, 6)
        np.testing.assert_array_equal(cb.one_vs_rest(fitted, z_eval).numpy()[:, c], expect[be])


def test_hb_options_are_checked():
    z, y = _logits(50, 3, 0)
    with pytest.raises(CalibviewError, match="at least 1 bin"):
        calib.get("hb").fit(z, y, bins=0)
    with pytest.raises(CalibviewError, match="uniform or quantile"):
        calib.get("hb").fit(z, y, strategy="kmeans")


# --- Platt and beta ---------------------------------------------------------------------------------------------

def _binary(n, seed, a=0.6, c=0.3, scale=2.0):
    """Logits whose labels follow sigmoid(a s + c), s = z_1 - z_0: a well-posed logistic fit."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2)) * scale
    s = z[:, 1] - z[:, 0]
    y = (rng.random(n) < 1 / (1 + np.exp(-(a * s + c)))).astype(np.int64)
    return torch.from_numpy(z), torch.from_numpy(y)


def _lr(x, y, w=None):
    return LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-14, max_iter=1000).fit(
        x, y, sample_weight=w)


@pytest.mark.parametrize("seed,a", [(0, 0.6), (1, 2.5), (2, -0.4)])
def test_platt_equals_sklearn_unregularised(seed, a):
    z, y = _binary(3000, seed, a=a)
    fitted = calib.fit("platt", z, y)
    s = (z[:, 1] - z[:, 0]).numpy()[:, None]
    lr = _lr(s, y.numpy())
    assert fitted.params["a"] == pytest.approx(lr.coef_[0, 0], rel=1e-7)
    assert fitted.params["c"] == pytest.approx(lr.intercept_[0], rel=1e-7, abs=1e-9)
    z_eval, _ = _binary(1000, seed + 10, scale=4.0)
    s_eval = (z_eval[:, 1] - z_eval[:, 0]).numpy()[:, None]
    np.testing.assert_allclose(fitted.apply(z_eval).exp().numpy(), lr.predict_proba(s_eval), rtol=0, atol=1e-9)
    assert not fitted.params["smooth_targets"]
    if a > 0:
        assert fitted.warnings == ()
    else:       # the fit is the peer's, but a negative slope reverses the model's predictions: warned
        assert len(fitted.warnings) == 1 and "slope a = -0.4" in fitted.warnings[0]
        assert "outside [0.01, 100]" in fitted.warnings[0]


def test_platt_smoothed_targets_equal_weighted_sklearn():
    z, y = _binary(400, 4)
    params, _ = calib.get("platt").fit(z, y, smooth_targets=True)
    n1 = int(y.sum())
    t = np.where(y.numpy() == 1, (n1 + 1) / (n1 + 2), 1 / (400 - n1 + 2))
    s = (z[:, 1] - z[:, 0]).numpy()[:, None]
    lr = _lr(np.vstack([s, s]), np.r_[np.ones(400), np.zeros(400)], np.r_[t, 1 - t])
    assert params["smooth_targets"] is True
    assert params["a"] == pytest.approx(lr.coef_[0, 0], rel=1e-7)
    assert params["c"] == pytest.approx(lr.intercept_[0], rel=1e-7)


def _beta_data(n, seed, a, b, c):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.002, 0.998, n)
    eta = a * np.log(p) - b * np.log1p(-p) + c
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(np.int64)
    return _from_probs(np.stack([1 - p, p], 1)), torch.from_numpy(y), p


def _beta_by_sklearn(p, y):
    """betacal's procedure with a converged unregularised sklearn fit."""
    x = np.stack([np.log(p), -np.log1p(-p)], 1)
    lr = _lr(x, y)
    a, b = lr.coef_[0]
    if a < 0:
        lr = _lr(x[:, 1:], y)
        return 0.0, lr.coef_[0, 0], lr.intercept_[0]
    if b < 0:
        lr = _lr(x[:, :1], y)
        return lr.coef_[0, 0], 0.0, lr.intercept_[0]
    return a, b, lr.intercept_[0]


@pytest.mark.parametrize("a,b,c", [(1.3, 0.7, 0.2), (0.5, 2.0, -1.0), (-0.6, 1.5, 0.0), (1.2, -0.5, 0.3)])
def test_beta_equals_sklearn_and_betacal(a, b, c, monkeypatch):
    z, y, p = _beta_data(4000, 7, a, b, c)
    fitted = calib.fit("beta", z, y)
    ra, rb, rc = _beta_by_sklearn(p, y.numpy())
    got = fitted.params
    assert (got["a"] == 0) == (ra == 0) and (got["b"] == 0) == (rb == 0)
    assert (got["a"], got["b"], got["c"]) == pytest.approx((ra, rb, rc), rel=1e-6, abs=1e-9)
    assert got["a"] >= 0 and got["b"] >= 0
    pe = np.linspace(0.001, 0.999, 999)
    z_eval = _from_probs(np.stack([1 - pe, pe], 1))
    ours = fitted.apply(z_eval).exp().numpy()[:, 1]
    ref = 1 / (1 + np.exp(-(ra * np.log(pe) - rb * np.log1p(-pe) + rc)))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)
    betacal = pytest.importorskip("betacal")
    bc = betacal.BetaCalibration(parameters="abm").fit(p, y.numpy())
    a_bc, b_bc, _ = bc.calibrator_.map_
    assert (a_bc == 0) == (got["a"] == 0) and (b_bc == 0) == (got["b"] == 0)      # the same feature dropped
    # betacal stops lbfgs at sklearn's default tol = 1e-4, so it agrees to about 1e-4, and never fits better
    np.testing.assert_allclose(ours, bc.predict(pe), rtol=0, atol=2e-4)
    nll = lambda q: -np.mean(np.where(y.numpy() == 1, np.log(q), np.log1p(-q)))
    assert nll(fitted.apply(z).exp().numpy()[:, 1]) <= nll(bc.predict(p)) + 1e-12
    # betacal itself, with its logistic regressions run to convergence: 1e-6
    import betacal.beta_calibration as bcm
    stock = bcm.LogisticRegression
    monkeypatch.setattr(bcm, "LogisticRegression", lambda C: stock(C=C, tol=1e-13, max_iter=100_000))
    bc = betacal.BetaCalibration(parameters="abm").fit(p, y.numpy())
    np.testing.assert_allclose(ours, bc.predict(pe), rtol=0, atol=1e-6)


def test_binary_methods_refuse_more_than_two_classes():
    z, y = _logits(100, 3, 0)
    for name in ("platt", "beta"):
        with pytest.raises(CalibviewError, match="K = 2"):
            calib.fit(name, z, y)


# --- MRR --------------------------------------------------------------------------------------------------------

def test_mrr_by_hand():
    z = torch.tensor([[3.0, 1.0, 0.0, 0.0], [0.0, 2.0, 1.0, 0.0], [0.0, 0.0, 5.0, 1.0], [1.0, 1.0, 1.0, 2.0],
                      [4.0, 0.0, 0.0, 0.0]])
    y = torch.tensor([0, 1, 3, 3, 2])                         # 3 of 5 correct
    fitted = calib.fit("mrr", z, y)
    assert fitted.params["accuracy"] == 0.6 and fitted.keeps_argmax
    lp = fitted.apply(torch.tensor([[0.0, 9.0, 1.0, 2.0], [7.0, 7.0, 0.0, 0.0]]))
    expect = np.full((2, 4), np.log(0.4 / 3))
    expect[0, 1] = expect[1, 0] = np.log(0.6)                 # ties: the first maximum is the prediction
    np.testing.assert_allclose(lp.numpy(), expect, rtol=1e-15)


def test_mrr_keeps_the_argmax_only_while_the_fit_accuracy_exceeds_one_over_k():
    z = torch.tensor([[3.0, 1.0, 0.0, 0.0], [0.0, 2.0, 1.0, 0.0], [0.0, 0.0, 5.0, 1.0], [1.0, 1.0, 1.0, 2.0]])
    assert calib.get("mrr").keeps_argmax is False              # not a promise the method makes for every fit
    assert calib.fit("mrr", z, torch.tensor([0, 1, 3, 0])).keeps_argmax      # accuracy 1/2 > 1/4
    for y in ([0, 0, 0, 0], [1, 0, 0, 0]):                                     # accuracy 0 and 1/4 = 1/K
        fitted = calib.fit("mrr", z, torch.tensor(y))
        assert not fitted.keeps_argmax
        assert not torch.equal(fitted.apply(z).argmax(1), z.argmax(1))       # and it really moves it


def test_mrr_low_accuracy_warns_and_perfect_accuracy_gives_zeros():
    z, y = _logits(200, 4, 0)
    low = calib.fit("mrr", z, (z.argmax(1) + 1) % 4)           # accuracy 0
    assert low.params["accuracy"] == 0 and any("at most 1/K" in w for w in low.warnings)
    assert (low.apply(z)[torch.arange(200), z.argmax(1)] == -np.inf).all()
    perfect = calib.fit("mrr", z, z.argmax(1))
    lp = perfect.apply(z)
    assert (lp.max(1).values == 0).all() and (lp == -np.inf).sum() == 200 * 3
    assert any("accuracy is 1" in w for w in perfect.warnings)


# --- degenerate fit splits --------------------------------------------------------------------------------------

def _valid_rows(lp):
    assert lp.dtype == torch.float64 and not torch.isnan(lp).any()
    torch.testing.assert_close(lp.exp().sum(1), torch.ones(lp.shape[0], dtype=torch.float64))


@pytest.mark.parametrize("name", ["hb", "ir"])
def test_class_absent_from_fit_split(name):
    z, y = _logits(600, 4, 8)
    keep = y != 3
    fitted = calib.fit(name, z[keep], y[keep])
    assert any("class 3" in w and "never occur" in w for w in fitted.warnings)
    z_eval, _ = _logits(500, 4, 9, 3.0)
    maps = cb.one_vs_rest(fitted, z_eval)
    lp = fitted.apply(z_eval)
    _valid_rows(lp)
    if name == "ir":
        fell_back = maps.sum(1) == 0          # rows whose maps are all 0 keep the uncalibrated row
        assert (maps[:, 3] == 0).all() and (lp[~fell_back, 3] == -np.inf).all()
        torch.testing.assert_close(lp[fell_back], torch.log_softmax(z_eval[fell_back], 1), rtol=0, atol=0)
    else:   # zero wherever class 3's bin held fit rows; the empty (high) bins map to their centre
        p3 = cb.probabilities(z_eval)[:, 3]
        assert (maps[p3 < 0.2, 3] == 0).all()


@pytest.mark.parametrize("name", METHODS)
def test_all_predictions_correct(name):
    k = 2 if name in ("platt", "beta") else 5
    z, _ = _logits(300, k, 10)
    y = z.argmax(1)
    fitted = calib.fit(name, z, y)
    lp = fitted.apply(_logits(200, k, 11)[0])
    _valid_rows(lp)
    if name in ("platt", "beta"):          # separable: no maximum-likelihood fit, smoothed targets instead
        assert fitted.params["smooth_targets"] is True
        assert any("separable" in w for w in fitted.warnings)
        coef = [v for key, v in fitted.params.items() if key in ("a", "b", "c")]
        assert all(np.isfinite(coef)) and max(map(abs, coef)) < 50
        assert torch.isfinite(lp).all()
    if name == "mrr":
        assert fitted.params["accuracy"] == 1.0 and fitted.warnings


@pytest.mark.parametrize("name", METHODS)
def test_single_sample(name):
    k = 2 if name in ("platt", "beta") else 4
    z, y = _logits(1, k, 12)
    if name in ("platt", "beta"):
        with pytest.raises(CalibviewError, match="both classes"):
            calib.fit(name, z, y)
        return
    fitted = calib.fit(name, z, y)
    assert any("single row" in w for w in fitted.warnings)
    _valid_rows(fitted.apply(_logits(300, k, 13)[0]))


@pytest.mark.parametrize("name", METHODS)
def test_binary_identical_scores_in_every_row(name):
    z = torch.tensor([[0.3, 1.1]]).repeat(100, 1)
    y = torch.tensor([1] * 30 + [0] * 70)
    fitted = calib.fit(name, z, y)
    assert any("same scores" in w for w in fitted.warnings)
    lp = fitted.apply(torch.cat([z[:1], torch.tensor([[2.0, -1.0], [-3.0, 4.0]])]))
    _valid_rows(lp)
    if name == "mrr":                     # the one prediction (class 1) is right 30% of the time
        np.testing.assert_allclose(lp[0].exp().numpy(), [0.7, 0.3], rtol=1e-14)
        assert any("at most 1/K" in w for w in fitted.warnings)
    else:                                 # the class frequencies
        np.testing.assert_allclose(lp[0].exp().numpy(), [0.7, 0.3], rtol=1e-12)
    if name in ("platt", "beta"):
        np.testing.assert_allclose(lp.exp().numpy(), [[0.7, 0.3]] * 3, rtol=1e-12)


def test_empty_fit_split_is_an_error():
    for name in METHODS:
        with pytest.raises(CalibviewError, match="no rows"):
            calib.fit(name, torch.zeros(0, 2), torch.zeros(0, dtype=torch.int64))


@pytest.mark.parametrize("name", ["hb", "ir", "mrr"])
def test_probability_files_with_exact_zeros(name):
    rng = np.random.default_rng(14)
    p = rng.dirichlet(np.full(5, 0.3), 400)
    p[rng.random(p.shape) < 0.3] = 0.0
    p[np.arange(400), p.argmax(1)] += 1e-3
    p /= p.sum(1, keepdims=True)
    z, y = _from_probs(p), torch.from_numpy(rng.integers(0, 5, 400))
    _valid_rows(calib.fit(name, z, y).apply(z))


@pytest.mark.parametrize("name", ["platt", "beta"])
def test_binary_probability_files_with_exact_zeros(name):
    p1 = np.r_[np.linspace(0, 1, 101), 0.0, 1.0]
    z = _from_probs(np.stack([1 - p1, p1], 1))
    y = torch.from_numpy((np.random.default_rng(15).random(103) < p1).astype(np.int64))
    y[:3] = torch.tensor([1, 0, 1])
    _valid_rows(calib.fit(name, z, y).apply(z))


# --- the interface ----------------------------------------------------------------------------------------------

def _fit_any(name, seed=16):
    k = 2 if name in ("platt", "beta") else 7
    z, y = _logits(5000, k, seed, 2.0, dtype=torch.float32)
    return calib.fit(name, z, y), _logits(9000, k, seed + 1, 2.5, dtype=torch.float32)[0]


@pytest.mark.parametrize("name", METHODS)
def test_json_round_trip_chunks_and_normalised_rows(name):
    fitted, z = _fit_any(name)
    whole = fitted.apply(z)
    _valid_rows(whole)
    chunks = torch.cat([fitted.apply(z[s:s + 4096]) for s in range(0, z.shape[0], 4096)])
    assert torch.equal(whole, chunks)
    again = calib.from_json(fitted.to_json())
    assert again.method == name and again.warnings == fitted.warnings
    assert torch.equal(again.apply(z), whole)
    import json
    assert torch.equal(calib.from_json(json.dumps(fitted.to_json())).apply(z), whole)
    assert again.keeps_argmax == (name == "mrr" and fitted.params["accuracy"] > 1 / z.shape[1])
    if name == "mrr":
        assert torch.equal(whole.argmax(1), z.argmax(1))


def test_quantile_hb_round_trips():
    z, y = _logits(3000, 6, 17)
    fitted = calib.Fitted("hb", 6, *calib.get("hb").fit(z, y, strategy="quantile", bins=10))
    z_eval, _ = _logits(5000, 6, 18, 3.0)
    whole = fitted.apply(z_eval)
    _valid_rows(whole)
    import json
    again = calib.from_json(json.dumps(fitted.to_json()))
    assert torch.equal(again.apply(z_eval), whole)
    assert torch.equal(torch.cat([fitted.apply(z_eval[s:s + 1000]) for s in range(0, 5000, 1000)]), whole)


@pytest.mark.parametrize("name", ["hb", "ir"])
def test_fit_reports_progress_and_stops_on_cancel(name):
    z, y = _logits(20000, 200, 19)
    seen = []
    calib.fit(name, z, y, progress=lambda f, m: seen.append(f))
    assert seen and all(0 <= f <= 1 for f in seen) and seen[-1] == pytest.approx(1.0)
    cancel = threading.Event()

    def stop_soon(f, m):
        if f > 0.2:
            cancel.set()
    with pytest.raises(Cancelled):
        calib.fit(name, z, y, progress=stop_soon, cancel=cancel)


def test_registered_flags():
    assert {m: calib.get(m).keeps_argmax for m in METHODS} == {
        "hb": False, "ir": False, "platt": False, "beta": False, "mrr": False}   # MRR: only while acc > 1/K
    assert {m: calib.get(m).binary_only for m in METHODS} == {
        "hb": False, "ir": False, "platt": True, "beta": True, "mrr": False}
