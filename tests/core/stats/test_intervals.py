"""Bootstrap intervals (calibview.core.stats.intervals) and the jackknife behind BCa
(calibview.core.stats.jackknife), against scipy's BCa (its own brute-force jackknife of a statistic written
here) and against leave-one-out recomputation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import _resampling as scipy_resampling

from calibview.core.stats import intervals, jackknife
from calibview.core.stats.metrics import equal_mass_order


def _ece_family(conf, correct, b):
    """ECE, RMSCE, MCE of one sample, by a loop over bins (lo < c <= hi, 0 in the first bin)."""
    edges = np.linspace(0, 1, b + 1)
    n = conf.size
    ece = sq = mce = 0.0
    for j in range(b):
        m = (conf > edges[j]) & (conf <= edges[j + 1]) if j else (conf <= edges[1])
        if m.any():
            gap = correct[m].sum() - conf[m].sum()
            ece += abs(gap) / n
            sq += gap * gap / m.sum() / n
            mce = max(mce, abs(gap) / m.sum())
    return ece, np.sqrt(sq), mce


def _data(n=300, seed=0, tilt=1.4):
    rng = np.random.default_rng(seed)
    conf = rng.beta(5, 2, n)
    correct = (rng.random(n) < conf ** tilt).astype(np.float64)
    return conf, correct


@pytest.mark.parametrize("metric", ["ece", "rmsce", "mce"])
def test_binned_leave_one_out_equals_recomputation(metric):
    conf, correct = _data(120, seed=1)
    loo = jackknife.binned_loo(conf, correct, 15)[metric]
    j = ("ece", "rmsce", "mce").index(metric)
    brute = [_ece_family(np.delete(conf, i), np.delete(correct, i), 15)[j] for i in range(conf.size)]
    np.testing.assert_allclose(loo, brute, rtol=0, atol=1e-13)


def test_ace_leave_one_out_keeps_the_splits_groups():
    conf, correct = _data(90, seed=2)
    order, group = equal_mass_order(conf, 10)
    g = np.empty_like(group)
    g[order] = group
    out = []
    for i in range(conf.size):
        keep = np.arange(conf.size) != i
        gaps = [abs(correct[keep & (g == q)].sum() - conf[keep & (g == q)].sum()) for q in range(10)]
        out.append(sum(gaps) / (conf.size - 1))
    np.testing.assert_allclose(jackknife.binned_loo(conf, correct, 10)["ace"], out, rtol=0, atol=1e-13)


@pytest.mark.parametrize("n, k, b, scale", [(80, 6, 10, 2.0), (300, 200, 15, 1.5), (300, 40, 5, 3.0)])
def test_classwise_leave_one_out_equals_recomputation(n, k, b, scale):
    """Few classes (most entries above the first bin edge) and many (nearly all in the first bin, whose sums
    come out negative, positive, and positive but below the edge: every branch of classwise_loo)."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=(n, k)) * scale
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = rng.integers(0, k, n)

    def cw(p, y):
        d = p.copy()
        d[np.arange(len(y)), y] -= 1
        edges = np.linspace(0, 1, b + 1)
        cell = np.clip(np.searchsorted(edges, p, side="left") - 1, 0, b - 1)
        sums = np.zeros((k, b))
        np.add.at(sums, (np.broadcast_to(np.arange(k), p.shape), cell), d)
        return sums, np.abs(sums).sum() / (len(y) * k)

    sums, _ = cw(p, y)
    if k > 100:
        s0, edge = sums[:, 0], 1.0 / b
        assert (s0 < 0).any() and ((s0 > 0) & (s0 < edge)).any() and (s0 >= edge).any()
    rows = np.array([0, 5, 17, 79]) if k < 100 else np.arange(n)
    ours = jackknife.classwise_loo(p[rows], y[rows], sums, n)
    brute = [cw(np.delete(p, i, 0), np.delete(y, i))[1] for i in rows]
    np.testing.assert_allclose(ours, brute, rtol=0, atol=1e-14)


def _resampled(conf, correct, stat, r=400, seed=5):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, conf.size, (r, conf.size))
    return np.array([stat(conf[i], correct[i]) for i in idx])


@pytest.mark.parametrize("metric", ["ece", "rmsce", "mce", "accuracy"])
def test_bca_equals_scipys_bca(metric):
    conf, correct = _data(150, seed=4, tilt=1.2)
    j = {"ece": 0, "rmsce": 1, "mce": 2}.get(metric)

    def stat(c, y):
        return _ece_family(c, y, 15)[j] if j is not None else y.mean()

    def scipy_stat(idx, axis=-1):     # scipy jackknifes this by brute force, batched over leading axes
        idx = np.asarray(idx).astype(int)
        flat = idx.reshape(-1, idx.shape[-1])
        return np.array([stat(conf[i], correct[i]) for i in flat]).reshape(idx.shape[:-1])

    dist = _resampled(conf, correct, stat)
    a1, a2, a_hat = scipy_resampling._bca_interval((np.arange(conf.size, dtype=float),), scipy_stat, -1, 0.025,
                                                   dist, None, np)
    est = stat(conf, correct)
    loo = jackknife.binned_loo(conf, correct, 15)[metric] if j is not None else \
        (correct.sum() - correct) / (conf.size - 1)
    a = intervals.acceleration(loo)
    assert a == pytest.approx(float(a_hat), rel=1e-9, abs=1e-15)
    iv, method = intervals.interval(dist, est, 0.95, "bca", a)
    lo, hi = np.percentile(dist, [100 * float(a1), 100 * float(a2)])
    if method == "bca":
        assert (iv.lo, iv.hi) == pytest.approx((lo, hi), abs=1e-12)
    else:                                   # widened: the scipy interval misses the estimate
        assert method == "bca-widened" and not lo <= est <= hi


def test_basic_and_percentile_by_hand():
    v = np.arange(1.0, 102.0)                       # percentiles 2.5 / 97.5: 3.5 and 98.5
    iv, m = intervals.interval(v, 50.0, 0.95, "percentile")
    assert (iv.lo, iv.hi) == pytest.approx((3.5, 98.5), abs=1e-12) and m == "percentile"
    iv, m = intervals.interval(v, 50.0, 0.95, "basic")
    assert (iv.lo, iv.hi) == pytest.approx((100 - 98.5, 100 - 3.5), abs=1e-12) and m == "basic"


@pytest.mark.parametrize("method", intervals.METHODS)
def test_every_interval_contains_its_estimate(method):
    above = np.linspace(0.02, 0.05, 200)            # all resamples above the estimate (a biased plug-in)
    iv, used = intervals.interval(above, 0.01, 0.95, method, 0.1)
    assert iv.lo <= 0.01 <= iv.hi and used == method + "-widened"
    iv, used = intervals.interval(above, 0.035, 0.95, method, 0.0)
    assert iv.lo <= 0.035 <= iv.hi and used == method


def test_the_acceleration_of_a_subsample_scales_to_the_whole():
    rng = np.random.default_rng(6)
    loo = rng.gamma(2.0, size=4000)
    whole = intervals.acceleration(loo)
    assert intervals.acceleration(loo, 4000 * 9) == pytest.approx(whole / 3.0, rel=1e-12)


def test_auto_uses_basic_for_the_binned_errors_only():
    assert intervals.method_for("ece", "auto", True) == "basic"
    assert intervals.method_for("classwise_ece", "auto", False) == "basic"
    assert intervals.method_for("accuracy", "auto", True) == "percentile"
    assert intervals.method_for("smece", "bca", False) == "percentile"
    assert intervals.method_for("accuracy", "basic", True) == "basic"


def test_for_each_runs_every_item_once_and_a_nested_call_does_not_wait_for_itself():
    """Side by side when asked, in turn when nested (a nested call would otherwise wait for pool threads that
    are all waiting for it), and every item exactly once either way."""
    import threading

    from calibview.core.stats.resampling import for_each

    done, names = [], set()
    lock = threading.Lock()

    def inner(i):
        with lock:
            done.append(i)
            names.add(threading.current_thread().name.split("_")[0])

    def outer(i):
        for_each(inner, [(i, j) for j in range(3)])

    worker = threading.Thread(target=for_each, args=(outer, list(range(4))), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "a nested for_each deadlocked"
    assert sorted(done) == [(i, j) for i in range(4) for j in range(3)]
    assert names == {"calibview-resample"}
