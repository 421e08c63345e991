"""Fits that cannot be trusted say so: exact-zero probabilities (a random forest's), diverged slopes, too few or
one-class fit samples; and the methods that promise the arg-max keep it, ties included (a property test)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from calibview.core import calibrators as calib
from calibview.core.calibrators import checks
from calibview.core.stats import rowwise
from calibview.core.errors import CalibviewError

SCALING = ["ts", "ts-grid", "vs", "ms", "dirichlet"]


@pytest.fixture(scope="module")
def forest():
    """scikit-learn's random forest on its bundled breast-cancer data: predict_proba of a fit and an evaluation
    split, as calibview reads a probabilities file (log p, exact zeros -inf), with the labels."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

    x, y = load_breast_cancer(return_X_y=True)
    x_tr, x_rest, y_tr, y_rest = train_test_split(x, y, test_size=0.6, random_state=0, stratify=y)
    x_ev, x_fit, y_ev, y_fit = train_test_split(x_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest)
    rf = RandomForestClassifier(n_estimators=100, random_state=0).fit(x_tr, y_tr)
    p_fit, p_ev = rf.predict_proba(x_fit), rf.predict_proba(x_ev)
    with np.errstate(divide="ignore"):
        return ((torch.from_numpy(np.log(p_fit)), torch.from_numpy(y_fit)),
                (torch.from_numpy(np.log(p_ev)), torch.from_numpy(y_ev)), p_fit)


def _error(log_probs, y):
    return float((log_probs.argmax(1) != y).double().mean())


def test_random_forest_exact_zeros_keep_the_error_rate_under_ts_and_warn(forest):
    (z, y), (z_ev, y_ev), p_fit = forest
    # the case that diverged: a fit row gives its true class probability exactly 0, so any finite T had an
    # infinite NLL and the fit ran to T = 1.8e19 (uniform rows, ties broken to class 0: error 8% -> 37%)
    assert (p_fit[np.arange(len(y)), y.numpy()] == 0).any()
    fitted = calib.fit("ts", z, y)
    t = fitted.params["temperature"]
    assert 0.01 <= t <= 100
    assert _error(fitted.apply(z_ev), y_ev) == _error(z_ev, y_ev)
    assert _error(fitted.apply(z), y) == _error(z, y)
    # the policy: T minimises the NLL of log(max(p, 1e-12)) / T, checked by a bounded scalar search
    floored = torch.from_numpy(np.log(np.maximum(p_fit, 1e-12)))
    ref = minimize_scalar(lambda s: float(F.cross_entropy(floored / s, y)), bounds=(0.05, 50), method="bounded",
                          options={"xatol": 1e-10}).x
    assert t == pytest.approx(ref, rel=1e-6)
    assert fitted.params["log_floor"] == pytest.approx(math.log(1e-12), rel=1e-15)
    zero_rows = int((p_fit == 0).any(axis=1).sum())
    assert zero_rows > 0
    said = [w for w in fitted.warnings if "exact-zero probability" in w]
    assert len(said) == 1 and said[0].startswith(f"{zero_rows} of the {len(y)} fit rows")
    assert "log(max(p, 1e-12))" in said[0]
    # the JSON form keeps the floor and the warning, and applies the same way
    back = calib.from_json(fitted.to_json())
    assert torch.equal(back.apply(z_ev), fitted.apply(z_ev)) and back.warnings == fitted.warnings


@pytest.mark.parametrize("name", ["ts-grid", "platt", "beta", "vs", "ms", "dirichlet"])
def test_random_forest_exact_zeros_warn_for_every_scaling_fit(forest, name):
    (z, y), (z_ev, y_ev), p_fit = forest
    fitted = calib.fit(name, z, y)
    zero_rows = int((p_fit == 0).any(axis=1).sum())
    assert any(w.startswith(f"{zero_rows} of the {len(y)} fit rows have an exact-zero") for w in fitted.warnings)
    out = fitted.apply(z_ev)
    assert torch.isfinite(out).all()
    # none of them wrecks the predictions (Platt fitted on the +-1e4 caps had a = 4e-4 and 20% error)
    assert _error(out, y_ev) <= _error(z_ev, y_ev) + 0.03


def test_platt_on_exact_zeros_fits_the_floored_log_odds_like_sklearn(forest):
    from sklearn.linear_model import LogisticRegression

    (z, y), _, p_fit = forest
    fitted = calib.fit("platt", z, y)
    lp = np.log(np.maximum(p_fit, 1e-12))
    lr = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-14, max_iter=1000).fit(
        (lp[:, 1] - lp[:, 0])[:, None], y.numpy())
    assert fitted.params["a"] == pytest.approx(lr.coef_[0, 0], rel=1e-7)
    assert fitted.params["c"] == pytest.approx(lr.intercept_[0], rel=1e-7)


def test_a_split_without_zeros_is_fitted_without_a_floor():
    rng = np.random.default_rng(0)
    z = torch.from_numpy(rng.normal(size=(300, 4)) * 3)
    y = torch.from_numpy(rng.integers(0, 4, 300))
    for name in SCALING:
        fitted = calib.fit(name, z, y)
        assert fitted.params.get("log_floor", -1000.0) < -700     # none, or float64 tiny's log
        assert not any("exact-zero" in w for w in fitted.warnings)
    assert checks.zero_rows(z) == 0


# --- one sample, one class, too few samples, a diverged slope, an unconverged search ----------------------------

def _toy(n=200, k=4, seed=1):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += 1.0
    return torch.from_numpy(2 * z), torch.from_numpy(y)


@pytest.mark.parametrize("name", SCALING + ["hb", "ir", "mrr"])
def test_one_sample_fit_split_warns(name):
    z, y = _toy()
    wrong = torch.tensor([(int(z[0].argmax()) + 1) % 4])
    fitted = calib.fit(name, z[:1], wrong)
    assert any("single sample" in w or "single row" in w for w in fitted.warnings)


@pytest.mark.parametrize("name", SCALING + ["hb", "ir", "mrr"])
def test_single_class_fit_split_warns(name):
    z, _ = _toy()
    fitted = calib.fit(name, z, torch.zeros(200, dtype=torch.int64))
    assert any("has class 0" in w or "do not occur" in w or "never occur" in w for w in fitted.warnings)


@pytest.mark.parametrize("name", ["platt", "beta"])
def test_single_class_binary_fit_split_is_a_one_sentence_error(name):
    z, _ = _toy(k=2)
    with pytest.raises(CalibviewError, match="needs both classes"):
        calib.fit(name, z, torch.ones(200, dtype=torch.int64))


def test_one_wrong_sample_diverges_ts_which_warns_and_keeps_every_arg_max():
    z, y = _toy()
    wrong = torch.tensor([(int(z[0].argmax()) + 1) % 4])
    fitted = calib.fit("ts", z[:1], wrong)
    assert fitted.params["temperature"] > 100          # the NLL of a wrong row falls as T grows without end
    assert any("outside [0.01, 100]" in w and "temperature T" in w for w in fitted.warnings)
    out = fitted.apply(z)
    # at T ~ 1e19 every row rounds to uniform; the tie-break keeps the uncalibrated arg-max (it moved 75% before)
    assert torch.equal(out.argmax(1), z.argmax(1))
    torch.testing.assert_close(out.exp().sum(1), torch.ones(200, dtype=torch.float64), rtol=0, atol=1e-12)


def test_too_few_samples_per_parameter_warn():
    z, y = _toy(n=9)
    assert any("fewer than 10 per parameter" in w for w in calib.fit("ts", z, y).warnings)
    zb, yb = _toy(n=19, k=2)
    yb[:2] = torch.tensor([0, 1])
    assert any("fewer than 10 per parameter" in w for w in calib.fit("platt", zb, yb).warnings)
    z, y = _toy(n=10)
    assert not any("per parameter" in w for w in calib.fit("ts", z, y).warnings)


def test_negative_platt_slope_and_grid_edge_warn():
    z, y = _toy(n=400, k=2)
    flipped = 1 - y                                    # scores that point the wrong way: Platt flips them
    assert any("slope a" in w and "outside" in w for w in calib.fit("platt", z, flipped).warnings)
    fitted = calib.fit("ts-grid", z * 50, y)            # far over-confident: the best T lies beyond 10
    assert fitted.params["temperature"] == 10.0
    assert any("end of its grid" in w for w in fitted.warnings)


def test_fit_temperature_that_does_not_converge_warns():
    z, y = _toy()
    _, _, warned = calib.fit_temperature(z, y, max_iter=1)
    assert any("did not converge" in w for w in warned)


# --- the arg-max: a property test over ties and extreme scales ----------------------------------------------------

# Rows of small integers times one scale: ties are frequent, and the scales reach where z / T rounds distinct
# values together (z ~ 1e-300 at T = 1e10 underflows) or overflows nothing (z ~ 1e300 at T = 1e-2 is inf).
_rows = st.integers(1, 12).flatmap(lambda n: st.integers(2, 6).flatmap(
    lambda k: st.lists(st.lists(st.integers(-3, 3), min_size=k, max_size=k), min_size=n, max_size=n)))
_scales = st.sampled_from([1e-300, 1e-30, 1e-8, 1.0, 1e8, 1e30, 1e150])
_temperatures = st.sampled_from([1e-6, 0.01, 0.37, 1.0, 3.0, 100.0, 1e10, 1.8446744073709552e19])


@settings(max_examples=300, deadline=None)
@given(rows=_rows, scale=_scales, t=_temperatures, noise=st.floats(0, 1e-3), as_float32=st.booleans())
def test_ts_and_ts_grid_never_move_the_arg_max(rows, scale, t, noise, as_float32):
    z = torch.tensor(rows, dtype=torch.float64) * scale
    z = z + noise * scale * torch.linspace(0, 1, z.numel(), dtype=torch.float64).reshape(z.shape)
    if as_float32 and scale < 1e38:      # float32 logits as a file stores them (beyond its range: inf, refused)
        z = z.float()
    for method in ("ts", "ts-grid"):
        out = calib.Fitted(method=method, k=z.shape[1], params={"temperature": t}).apply(z)
        assert torch.equal(out.argmax(1), z.argmax(1)), (method, z, out)
        assert not torch.isnan(out).any()


@settings(max_examples=300, deadline=None)
@given(rows=_rows.filter(lambda r: len(r[0]) == 2) | st.lists(st.lists(st.integers(-3, 3), min_size=2,
                                                                          max_size=2), min_size=1, max_size=12),
       scale=_scales, a=st.sampled_from([0.01, 0.5, 1.0, 7.0, 100.0]), c=st.sampled_from([0.0, -0.3, 2.0]))
def test_platt_keeps_the_order_of_the_log_odds(rows, scale, a, c):
    """Platt (slope a > 0, the sane range) predicts class 1 exactly where a s + c > 0, s = z_1 - z_0, ties
    included: with c = 0 it never changes the predicted class; otherwise only the threshold on s moves (to
    -c/a), so a larger s never gets a smaller class."""
    z = torch.tensor(rows, dtype=torch.float64) * scale
    fitted = calib.Fitted(method="platt", k=2, params={"a": a, "c": c})
    pred = fitted.apply(z).argmax(1)
    s = z[:, 1] - z[:, 0]
    assert torch.equal(pred, (a * s + c > 0).long())
    if c == 0.0:
        assert torch.equal(pred, z.argmax(1))
    order = torch.argsort(s, stable=True)
    assert bool((pred[order].diff() >= 0).all())


def test_keep_argmax_touches_only_rows_that_rounding_tied():
    z = torch.tensor([[0.0, 1e-20, -1.0], [3.0, 1.0, 2.0]], dtype=torch.float64)
    out = torch.log_softmax(z / 1e10, dim=1)           # row 0: 0 and 1e-20 round together
    assert out[0, 0] == out[0, 1]
    before_row1 = out[1].clone()
    kept = checks.keep_argmax(out, z)
    assert torch.equal(kept.argmax(1), z.argmax(1))
    assert torch.equal(kept[1], before_row1)
    assert kept[0, 0] == torch.nextafter(kept[0, 1], torch.tensor(-math.inf, dtype=torch.float64))


def test_keep_argmax_of_wide_rows_against_a_loop():
    """Rows wide enough for numpy's argmax (calibview.core.stats.rowwise.NUMPY_ARGMAX_FROM): every row whose
    uncalibrated arg-max was tied by rounding gets it back, checked by a loop over the rows; the others are
    untouched."""
    rng = np.random.default_rng(4)
    n, k = 64, rowwise.NUMPY_ARGMAX_FROM + 9
    z = torch.from_numpy(0.1 * rng.standard_normal((n, k)))
    for r in range(0, n, 2):                 # even rows: the arg-max b is 1e-12 above an earlier class a
        a, b = sorted(rng.choice(k, 2, replace=False))
        z[r, a], z[r, b] = 5.0, 5.0 + 1e-12
    out = torch.log_softmax(z / 1e6, dim=1)  # 1e-18 apart: the two round to one value
    before = out.clone()
    kept = checks.keep_argmax(out, z)
    moved = 0
    for r in range(n):
        want = int(z[r].argmax())
        assert int(kept[r].argmax()) == want
        if int(before[r].argmax()) == want:
            assert torch.equal(kept[r], before[r])
        else:
            moved += 1
    assert moved >= n // 4                   # the even rows were tied, and got their arg-max back


def test_zero_rows_counts_rows_by_brute_force_across_chunks():
    """The count of rows with a -inf (an exact-zero probability) against a loop over the rows, on a split longer
    than one chunk of the scan; a NaN elsewhere (its minimum compares False) must not hide them; none in logits."""
    rng = np.random.default_rng(3)
    n, k = 3 * checks.chunk_rows(7) + 5, 7
    lp = rng.standard_normal((n, k))
    assert checks.zero_rows(torch.from_numpy(lp)) == 0
    at = rng.integers(0, n, 40), rng.integers(0, k, 40)
    lp[at] = -np.inf
    lp[n - 1, 0] = np.nan
    expected = sum(1 for row in lp if np.isneginf(row).any())
    assert expected > 30
    assert checks.zero_rows(torch.from_numpy(lp)) == expected
    assert checks.zero_rows(torch.empty((0, k), dtype=torch.float64)) == 0


def test_has_neg_inf_by_brute_force():
    """The min-reduction test for a -inf against the elementwise scan, a NaN beside the -inf included."""
    x = torch.randn(50, 7, dtype=torch.float64)
    cases = [x, x.clone().fill_(float("inf"))]
    y = x.clone()
    y[4, 2] = float("-inf")
    cases.append(y)
    z = y.clone()
    z[0, 0] = float("nan")
    cases.append(z)
    w = x.clone()
    w[1, 1] = float("nan")
    cases.append(w)
    cases.append(torch.empty((0, 7)))
    for c in cases:
        assert checks.has_neg_inf(c) == bool(torch.isneginf(c).any())
