"""The bandwidth-free statistics of calibview.core.stats.corp against independent sources: model-diagnostics'
CORP decomposition and scikit-learn's isotonic regression on the real CIFAR-10 logits, a brute-force double sum
for the SKCE, and the behaviour of the bands and p-values on synthetic forecasts whose calibration is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.isotonic import IsotonicRegression

from calibview.core.stats.corp import decomposition as dec
from calibview.core.stats.corp import reliability as rel
from calibview.core.stats.corp import significance as sig


def _top_label(shared_data, name="mukhoti_brier_cifar10_resnet110.npz"):
    d = np.load(shared_data / name)
    z = d["logits_test"].astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p.max(axis=1), (p.argmax(axis=1) == d["labels_test"]).astype(np.float64)


def _calibrated(rng, n, temperature=1.0):
    """(forecast, outcome): outcomes drawn from true probabilities; the forecast is them sharpened by
    ``temperature`` on the logit scale (1: calibrated)."""
    q = rng.uniform(0.05, 0.95, n)
    a = (rng.random(n) < q).astype(np.float64)
    f = 1.0 / (1.0 + np.exp(-temperature * np.log(q / (1.0 - q))))
    return f, a


@pytest.mark.parametrize("score", ["brier", "log"])
def test_the_decomposition_equals_model_diagnostics_on_cifar10(shared_data, score):
    from model_diagnostics.scoring import LogLoss, SquaredError, decompose

    c, a = _top_label(shared_data)
    peer = decompose(a, c, scoring_function=SquaredError() if score == "brier" else LogLoss()).row(0, named=True)
    mine = dec.decompose(c, a, score)
    for ours, theirs in (("score", "score"), ("mcb", "miscalibration"), ("dsc", "discrimination"),
                         ("unc", "uncertainty")):
        assert mine[ours] == pytest.approx(peer[theirs], abs=1e-12, rel=0)
    assert mine["score"] == pytest.approx(mine["mcb"] - mine["dsc"] + mine["unc"], abs=1e-12)
    assert mine["mcb"] >= 0 and mine["dsc"] >= 0


def test_the_curve_pools_ties_and_equals_scikit_learns_isotonic_fit(shared_data):
    c, a = _top_label(shared_data)
    c = np.round(c, 3)                         # many tied forecasts: each must get one recalibrated value
    curve = rel.reliability(c, a)
    assert np.all(np.diff(curve.x) > 0) and np.all(np.diff(curve.y) >= 0)
    assert curve.counts.sum() == c.size
    peer = IsotonicRegression(y_min=0.0, y_max=1.0).fit(c, a)
    np.testing.assert_allclose(curve.y, peer.predict(curve.x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(rel.recalibrated(c, a), peer.predict(c), rtol=0, atol=1e-12)
    assert np.array_equal(curve.at(curve.x), curve.y)


def test_the_consistency_band_covers_a_calibrated_forecast_at_its_nominal_rate():
    rng = np.random.default_rng(0)
    x0, hits, reps = np.array([0.6]), 0, 200
    for r in range(reps):
        f, a = _calibrated(rng, 400)
        lo, hi = rel.consistency_band(f, x0, n_resamples=200, seed=r, level=0.9)
        hits += int(lo[0] <= rel.reliability(f, a).at(x0)[0] <= hi[0])
    lo_ci, hi_ci = stats.binomtest(hits, reps).proportion_ci(0.99)
    assert lo_ci <= 0.9 <= hi_ci, hits


def test_the_bootstrap_band_holds_the_curve_and_narrows_with_more_samples():
    rng = np.random.default_rng(1)
    grid = np.linspace(0.2, 0.8, 7)
    widths = []
    for n in (500, 8000):
        f, a = _calibrated(rng, n)
        lo, hi = rel.bootstrap_band(f, a, grid, n_resamples=200, seed=3)
        assert np.all(lo <= hi)
        widths.append(float(np.mean(hi - lo)))
    assert widths[1] < widths[0] / 2


def test_the_quadratic_skce_equals_a_brute_force_double_sum():
    rng = np.random.default_rng(2)
    c, a = _calibrated(rng, 2000, temperature=1.3)
    ell = sig.kernel_length(c)
    e = a - c
    total = []
    for i in range(c.size):          # every ordered pair i != j, one row at a time
        h = np.exp(-(c[i] - c) ** 2 / (2 * ell * ell)) * e[i] * e
        h[i] = 0.0
        total.append(math.fsum(h))
    brute = math.fsum(total) / (c.size * (c.size - 1))
    got = sig.skce(c, a, n_resamples=10)
    assert got.estimator == "quadratic" and got.length == ell
    assert got.value == pytest.approx(brute, abs=1e-12, rel=0)
    i, j = np.triu_indices(c.size, k=1)
    assert ell == np.median(np.abs(c[i] - c[j]))


def test_the_linear_skce_is_the_mean_over_disjoint_pairs():
    rng = np.random.default_rng(3)
    c, a = _calibrated(rng, sig.QUADRATIC_MAX + 1001)
    got = sig.skce(c, a, length=0.1)
    m = c.size // 2
    h = [math.exp(-(c[2 * t] - c[2 * t + 1]) ** 2 / 0.02) * (a[2 * t] - c[2 * t]) * (a[2 * t + 1] - c[2 * t + 1])
         for t in range(m)]
    assert got.estimator == "linear" and got.value == pytest.approx(math.fsum(h) / m, abs=1e-15, rel=0)


def test_the_ece_is_the_binned_ece_and_its_p_value_is_never_zero():
    rng = np.random.default_rng(4)
    f, a = _calibrated(rng, 3000, temperature=2.0)
    ece, p = sig.p_ece(f, a, 15, n_resamples=99, seed=1)
    edges = np.linspace(0, 1, 16)
    brute = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (f > lo) & (f <= hi) if lo > 0 else (f <= hi)
        brute += abs(a[inside].sum() - f[inside].sum())
    assert ece == pytest.approx(brute / f.size, abs=1e-12)
    assert p == pytest.approx(1 / 100)


def test_the_p_values_are_uniform_under_calibration_and_small_for_an_overconfident_forecast():
    rng = np.random.default_rng(5)
    p_ece, p_skce = [], []
    for r in range(200):
        f, a = _calibrated(rng, 400)
        p_ece.append(sig.p_ece(f, a, 10, n_resamples=200, seed=r)[1])
        p_skce.append(sig.skce(f, a, n_resamples=200, seed=r).p)
    for p in (p_ece, p_skce):
        assert stats.kstest(p, "uniform").pvalue > 0.01
    # the top-label confidence of a 10-class softmax at temperature 1 / 1.5 against labels drawn from the softmax
    # at temperature 1: overconfident everywhere
    z = rng.normal(size=(10_000, 10)) * 1.5
    p_true = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (rng.random(10_000)[:, None] > np.cumsum(p_true, axis=1)).sum(axis=1).clip(0, 9)
    sharp = np.exp(1.5 * z) / np.exp(1.5 * z).sum(axis=1, keepdims=True)
    f, a = sharp.max(axis=1), (sharp.argmax(axis=1) == y).astype(np.float64)
    assert sig.p_ece(f, a, 15, n_resamples=1000)[1] < 0.01
    got = sig.skce(f, a)
    assert got.estimator == "linear" and got.p < 0.01


def test_the_grouped_ece_redraws_of_a_large_split_keep_the_test_uniform_and_powerful(monkeypatch):
    """Above EXACT_MAX samples the outcomes are drawn per (bin, confidence cell) group as binomials: still a
    uniform p-value under calibration (the grouped path forced on small splits here), still rejecting a model
    overconfident by 1.5."""
    monkeypatch.setattr(sig, "EXACT_MAX", 100)
    rng = np.random.default_rng(11)
    ps = [sig.p_ece(*_calibrated(rng, 1000), 10, n_resamples=200, seed=r)[1] for r in range(200)]
    assert stats.kstest(ps, "uniform").pvalue > 0.01
    f, a = _calibrated(rng, 10_000, temperature=1.5)
    assert sig.p_ece(f, a, 15, n_resamples=1000)[1] < 0.01


def test_the_grouped_redraws_sum_each_bin_as_a_plain_loop_over_the_groups_does(monkeypatch):
    """The grouped test's per-bin sums of the binomial redraws against a loop over (redraw, group), with the groups
    found by np.unique and the same seeded draws: the same p-value, to the last count."""
    monkeypatch.setattr(sig, "EXACT_MAX", 100)
    f, a = _calibrated(np.random.default_rng(5), 3000)
    n_bins, n_res, seed = 10, 150, 4          # 150 redraws: two full blocks of 64 and a partial one
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    b = np.clip(np.searchsorted(edges, f, side="left") - 1, 0, n_bins - 1)
    s_conf = np.bincount(b, weights=f, minlength=n_bins)
    ece = np.abs(np.bincount(b, weights=a, minlength=n_bins) - s_conf).sum() / f.size
    cell = np.minimum((f * sig.CELLS).astype(np.int64), sig.CELLS - 1)
    keys, inv = np.unique(b * sig.CELLS + cell, return_inverse=True)
    size = np.bincount(inv)
    mean = np.clip(np.bincount(inv, weights=f) / size, 0.0, 1.0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 27]))
    above = 0
    for start in range(0, n_res, sig._BLOCK):
        rows = min(sig._BLOCK, n_res - start)
        drawn = rng.binomial(size[None, :], mean[None, :], size=(rows, size.size))
        for i in range(rows):
            sums = np.zeros(n_bins)
            for g in range(size.size):
                sums[keys[g] // sig.CELLS] += drawn[i, g]
            above += int(np.abs(sums - s_conf).sum() / f.size >= ece - 1e-15)
    got_ece, got_p = sig.p_ece(f, a, n_bins, n_resamples=n_res, seed=seed)
    assert got_ece == pytest.approx(ece, abs=1e-15)
    assert got_p == (1 + above) / (n_res + 1)
    assert 0.0 < got_p < 1.0 and above > 0        # a case where the count is neither 0 nor every redraw


def test_the_refinement_nodes_are_torch_autograds_derivatives_in_beta():
    """Per row, the NLL f(beta) = log sum_k exp(beta v_k) - beta v_y and its first four derivatives, and the Brier
    term b(beta) = sum_k p_k^2 - 2 p_y + 1 and its first three (p = softmax(beta v)), against torch autograd
    differentiating the plain formulas in float64 (one beta per row, so a sum's gradient is each row's own);
    rows of exact zeros (-inf), of a near-certain class and of a uniform one included, and blocks of 3 rows."""
    from calibview.core.stats.corp import refinement as rf

    rng = np.random.default_rng(8)
    z = rng.normal(size=(40, 6)) * 3.0
    z[0, :2] = -np.inf                 # exact zeros
    z[1] = [40.0, 0, 0, 0, 0, 0]        # a near-certain class
    z[2] = 0.0                          # uniform
    u = torch.log_softmax(torch.from_numpy(z), dim=1)
    y = torch.from_numpy(rng.integers(0, 6, size=40))
    beta0 = 0.8
    old = rf._BLOCK_ENTRIES
    try:
        rf._BLOCK_ENTRIES = 18          # 3 rows per block: the sums of several blocks land in one (10, N) array
        f, b = rf._blocks(u, y, beta0)
    finally:
        rf._BLOCK_ENTRIES = old
    v = u.clamp(min=rf._FLOOR)
    v = v - v.max(dim=1, keepdim=True).values
    beta = torch.full((40,), beta0, dtype=torch.float64, requires_grad=True)

    def derivatives(value, order):
        out, cur = [value.detach()], value
        for _ in range(order):
            (cur,) = torch.autograd.grad(cur.sum(), beta, create_graph=True)
            out.append(cur.detach())
        return torch.stack(out, 1)
    v_y = v.gather(1, y[:, None])[:, 0]
    nll = torch.logsumexp(beta[:, None] * v, dim=1) - beta * v_y
    p = torch.softmax(beta[:, None] * v, dim=1)
    brier = (p * p).sum(1) - 2.0 * p.gather(1, y[:, None])[:, 0] + 1.0
    torch.testing.assert_close(f, derivatives(nll, 4), rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(b, derivatives(brier, 3), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("temperature", [0.04, 0.3, 1.0, 2.5, 12.0, 40.0])
def test_the_first_beta_is_scipys_minimum_of_the_nll_found_in_few_curve_evaluations(temperature):
    """The first beta of a split small enough to be its own subsample (no control variate) against scipy's
    bounded minimiser of the mean NLL in beta over the searched range [1/16, 16]. The model's log-probabilities
    are the true logits divided by T, so beta = T calibrates them: T = 0.04 and 40 lie beyond the range, and the
    search stops at its end. Within it, the whole refinement then equals scipy's fit."""
    from scipy.optimize import minimize_scalar

    from calibview.core.stats.corp import refinement as rf

    rng = np.random.default_rng(3)
    n, k = 3000, 7
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += 1.5
    # log-probabilities that temperature T calibrates: the true probabilities are softmax(z), the model's are
    # softmax(z / T)
    yt = np.array([rng.choice(k, p=q) for q in torch.softmax(torch.from_numpy(z), 1).numpy()])
    lp = torch.log_softmax(torch.from_numpy(z / temperature), 1)
    yy = torch.from_numpy(yt)
    ref = rf.Refinement(n, k, seed=0, resampled=False)
    assert ref.rows.size == n                          # the subsample is the split: the curve is exact
    ref.add(0, lp, lp.exp(), yy)
    before = rf.curve_evaluations
    beta = ref.nodes()
    used = rf.curve_evaluations - before
    v = lp.numpy() - lp.numpy().max(1, keepdims=True)

    def nll(b):
        s = b * v
        top = s.max(1)
        return float(np.mean(top + np.log(np.exp(s - top[:, None]).sum(1)) - s[np.arange(n), yt]))

    lo, hi = rf._SEARCH
    fit = minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13})
    assert beta == pytest.approx(fit.x, rel=1e-7)
    assert used <= 10, used                            # a grid of 9 points and then Newton took up to 29
    if lo < temperature < hi:
        ref.add_node(0, lp, yy)
        full = minimize_scalar(nll, bounds=(0.5 * beta, 1.5 * beta), method="bounded", options={"xatol": 1e-13})
        assert ref.result(True).nll == pytest.approx(full.fun, abs=1e-10)


@pytest.mark.parametrize("levels", [1, 4, 300, None])
def test_pooling_by_a_known_order_is_numpys_unique(levels):
    """CORP pools equal forecasts from the confidences' sort, shared with the other metrics, rather than sorting
    again in ``np.unique``: the distinct values, each sample's index and the counts must be np.unique's."""
    from calibview.core.stats.corp.reliability import pooled

    rng = np.random.default_rng(levels or 0)
    f = rng.random(4000) if levels is None else np.round(rng.random(4000) * levels) / levels
    want = np.unique(f, return_inverse=True, return_counts=True)
    got = pooled(f, np.argsort(f, kind="stable"))
    for w, g in zip(want, got):
        assert np.array_equal(w.reshape(-1), g)
    assert pooled(f[:0], np.zeros(0, np.int64))[0].size == 0
