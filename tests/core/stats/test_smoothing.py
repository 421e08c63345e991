"""SmoothECE against relplot 1.0.3 and the calibration-sharpness estimator against sharpcal's dense formula."""


import numpy as np
import pytest
import relplot
import torch

import calibview
from calibview.core.stats import grid, smooth_ece
from calibview.core.errors import CalibviewError
from calibview.core.stats.smooth_ece import smece, smece_at, smece_resampled
from calibview.core.stats.smoothing import bin_stats, cal_resampled, cal_tot, sharpness_curve

DEMO = calibview.demo_path()
# Real CIFAR logits, as bundled in the demo file.
SPLITS = ["resnet110-brier/cifar10", "resnet110-flsd53/cifar10", "resnet110-brier/cifar100"]


def _real(name, split="test"):
    from calibview.core.io.logits import read_split
    d = read_split(DEMO, name, split)
    z = d.scores.astype(np.float64)
    y = d.labels
    p = torch.softmax(torch.from_numpy(z), dim=1).numpy()          # float64 softmax
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(np.float64)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(y)), y] = 1.0
    brier = ((p - onehot) ** 2).sum(axis=1)                          # full-vector Brier per sample
    return conf, correct, brier


def _synthetic(n, seed, power=1.0):
    """Confidences skewed towards 1 like a trained classifier; power 1 = calibrated, > 1 = overconfident."""
    rng = np.random.default_rng(seed)
    conf = rng.beta(5.0, 1.0, size=n)
    correct = (rng.random(n) < conf ** power).astype(np.float64)
    loss = (1.0 - conf) ** 2 * (1 + rng.random(n)) + (1.0 - correct) * conf
    return conf, correct, loss


# ------------------------------------------------------------------------------------------- SmoothECE
@pytest.mark.parametrize("name", SPLITS)
def test_smece_matches_relplot_on_real_cifar(name):
    conf, correct, _ = _real(name)
    ref, ref_sigma = relplot.smECE(conf, correct, return_width=True)
    ours, sigma = smece(conf, correct)
    assert abs(ours - ref) < 1e-9
    assert sigma == ref_sigma


@pytest.mark.parametrize("n", [100, 10_000, 100_000])
@pytest.mark.parametrize("power", [1.0, 2.0])
def test_smece_matches_relplot_on_random_data(n, power):
    conf, correct, _ = _synthetic(n, seed=n + int(10 * power), power=power)
    ref, ref_sigma = relplot.smECE(conf, correct, return_width=True)
    ours, sigma = smece(conf, correct)
    assert abs(ours - ref) < 1e-9
    assert sigma == ref_sigma


def test_smece_sigma_below_base_grid_matches_relplot():
    # Large calibrated data: sigma* < 0.0107, so the bisection visits the finer grids (odd and even sizes).
    conf, correct, _ = _synthetic(100_000, seed=7)
    ours, sigma = smece(conf, correct)
    assert sigma < 0.0107
    ref, ref_sigma = relplot.smECE(conf, correct, return_width=True)
    assert abs(ours - ref) < 1e-9 and sigma == ref_sigma


@pytest.mark.parametrize("sigma", [0.5, 0.05, 0.0107, 7 / 1024, 3 / 1024, 0.0013])
def test_smece_at_matches_relplot_smece_sigma(sigma):
    conf, correct, _ = _synthetic(20_000, seed=3, power=1.3)
    assert abs(smece_at(conf, correct, sigma) - relplot.smECE_sigma(conf, correct, sigma)) < 1e-9


def test_smece_edge_confidences_match_relplot():
    rng = np.random.default_rng(11)
    conf = np.concatenate([np.ones(300), np.zeros(20), rng.random(500)])
    correct = (rng.random(conf.size) < conf).astype(np.float64)
    ref, ref_sigma = relplot.smECE(conf, correct, return_width=True)
    ours, sigma = smece(conf, correct)
    assert abs(ours - ref) < 1e-9 and sigma == ref_sigma


def test_smece_extreme_miscalibration_keeps_sigma_one():
    # Confident and always wrong: every bisection midpoint passes, relplot returns sigma = 1 and smECE(1).
    rng = np.random.default_rng(12)
    conf = 1.0 - 1e-4 * rng.random(2000)
    correct = np.zeros(2000)
    ref, ref_sigma = relplot.smECE(conf, correct, return_width=True)
    ours, sigma = smece(conf, correct)
    assert ref_sigma == 1 and sigma == 1.0 and abs(ours - ref) < 1e-9
    weights = _resample_weights(2000, 5, seed=2)
    counts = weights.numpy().astype(np.int64)
    values = smece_resampled(conf, correct, weights)
    for r in range(5):
        assert abs(values[r].item() - relplot.smECE(np.repeat(conf, counts[r]), np.repeat(correct, counts[r]))) < 1e-7


def _resample_weights(n, r, seed):
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, n, (r, n), generator=gen) + torch.arange(r)[:, None] * n
    return torch.bincount(idx.view(-1), minlength=r * n).view(r, n).to(torch.float32)


@pytest.mark.parametrize("n,power", [(50_000, 1.0), (50_000, 1.15), (3_000, 2.0)])
def test_smece_resampled_matches_relplot_on_repeated_data(n, power):
    conf, correct, _ = _synthetic(n, seed=21, power=power)
    weights = _resample_weights(n, 70, seed=5)
    values = smece_resampled(conf, correct, weights)
    assert values.dtype == torch.float64 and values.shape == (70,)
    counts = weights.numpy().astype(np.int64)
    # Every row against the exact single-split implementation, a few rows against relplot itself.
    for r in range(70):
        ref, _ = smece(np.repeat(conf, counts[r]), np.repeat(correct, counts[r]))
        assert abs(values[r].item() - ref) < 1e-7          # float32 grid sums: ~1e-9 measured
    for r in (0, 33, 69):
        ref = relplot.smECE(np.repeat(conf, counts[r]), np.repeat(correct, counts[r]))
        assert abs(values[r].item() - ref) < 1e-6


@pytest.mark.parametrize("name", SPLITS)
def test_smece_resampled_on_real_cifar(name):
    # Many confidences saturate near 1: thousands of samples share the last grid nodes.
    conf, correct, _ = _real(name)
    weights = _resample_weights(conf.size, 40, seed=8)
    values = smece_resampled(conf, correct, weights)
    counts = weights.numpy().astype(np.int64)
    for r in range(40):
        ref, _ = smece(np.repeat(conf, counts[r]), np.repeat(correct, counts[r]))
        assert abs(values[r].item() - ref) < 1e-7
    ref = relplot.smECE(np.repeat(conf, counts[7]), np.repeat(correct, counts[7]))
    assert abs(values[7].item() - ref) < 1e-7


def test_smece_resampled_visits_fine_grids():
    # Calibrated N = 50,000: resamples have sigma* < 0.0107, i.e. the exact segment path for finer grids.
    conf, correct, _ = _synthetic(50_000, seed=21, power=1.0)
    assert smece(conf, correct)[1] < 0.0107
    weights = _resample_weights(50_000, 40, seed=9)
    fine = smooth_ece._FineGrids.__init__
    calls = []

    def spy(self, *args):
        calls.append(1)
        fine(self, *args)

    smooth_ece._FineGrids.__init__ = spy
    try:
        grid._CACHE.clear()
        smece_resampled(conf, correct, weights)
    finally:
        smooth_ece._FineGrids.__init__ = fine
    assert calls


def test_smece_resampled_identity_weights_equal_smece():
    conf, correct, _ = _real(SPLITS[2])
    value = smece_resampled(conf, correct, torch.ones(3, conf.size))
    assert np.allclose(value.numpy(), smece(conf, correct)[0], atol=1e-7, rtol=0)


def test_smece_resampled_rejects_bad_weights():
    conf, correct, _ = _synthetic(100, seed=1)
    with pytest.raises(CalibviewError):
        smece_resampled(conf, correct, torch.ones(2, 99))
    bad = torch.ones(2, 100)
    bad[1] = 0
    with pytest.raises(CalibviewError):
        smece_resampled(conf, correct, bad)
    bad = torch.ones(2, 100)
    bad[0, 3] = -1
    with pytest.raises(CalibviewError):
        smece_resampled(conf, correct, bad)


def test_smece_rejects_user_errors():
    with pytest.raises(CalibviewError):
        smece(np.array([0.5, np.nan]), np.array([1.0, 0.0]))
    with pytest.raises(CalibviewError):
        smece(np.array([0.5, 1.5]), np.array([1.0, 0.0]))
    with pytest.raises(CalibviewError):
        smece(np.array([0.5, 0.7]), np.array([1.0]))
    with pytest.raises(CalibviewError):
        smece(np.array([]), np.array([]))
    with pytest.raises(CalibviewError):
        smece_at(np.array([0.5, 0.7]), np.array([1.0, 0.0]), 0.0)


# ------------------------------------------------------------------------- calibration-sharpness estimator
def _kernel(u, h, kernel):
    """sharpcal's Gaussian1D / Epanechnikov1D."""
    if kernel == "gaussian":
        return 1.0 / (h * np.sqrt(2 * np.pi)) * np.exp(-np.square(u) / (2 * h ** 2))
    return 3.0 / (4 * h) * (1 - (u / h) ** 2) * (np.abs(u / h) <= 1)


def _kernel_regression(x, preds, labels, h, kernel):
    """sharpcal.prediction.kernel_regression in float64 numpy, in chunks: (NW estimate, KDE) at the points x."""
    reg, kde = np.empty(x.size), np.empty(x.size)
    for s in range(0, x.size, 500):
        w = _kernel(x[s:s + 500, None] - preds[None, :], h, kernel)
        kde[s:s + 500] = w.mean(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):      # 0/0 where no data is in reach
            reg[s:s + 500] = (w * labels[None, :]).mean(axis=1) / kde[s:s + 500]
    return reg, kde


def _sharpcal_cal(conf, correct, h, kernel):
    """SharpCal.get_full_loss_and_cal for N <= n_points: Brier divergence of the NW curve at the data points."""
    reg, _ = _kernel_regression(conf, conf, correct, h, kernel)
    return float(np.mean((reg - conf) ** 2))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("h", [0.01, 0.05, 0.2])
def test_cal_tot_exact_matches_sharpcal_formula(kernel, h):
    conf, correct, loss = _synthetic(3000, seed=4, power=1.4)
    cal, tot = cal_tot(conf, correct, loss, h, kernel)
    assert cal == pytest.approx(_sharpcal_cal(conf, correct, h, kernel), rel=1e-12)
    assert tot == pytest.approx(float(np.mean(loss)), rel=1e-14)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_cal_tot_exact_on_real_val_split(kernel):
    conf, correct, brier = _real(SPLITS[0], "val")           # 5000 samples: the exact path
    cal, tot = cal_tot(conf, correct, brier, 0.05, kernel)
    assert cal == pytest.approx(_sharpcal_cal(conf, correct, 0.05, kernel), rel=1e-12)
    assert tot == pytest.approx(float(np.mean(brier)), rel=1e-14)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_cal_tot_exact_path_holds_no_n_squared_temporaries(kernel):
    """The dense formula at its largest N works through a small reused block: neither numpy's traced
    allocations nor any torch operation's come near one (N, N) float64 matrix (200 MB at N = 5,000), nor the 32 MB
    of one former 4-million-entry block."""
    import tracemalloc

    from torch.profiler import ProfilerActivity, profile

    conf, correct, loss = _synthetic(5000, seed=5, power=1.2)
    tracemalloc.start()
    try:
        cal, _ = cal_tot(conf, correct, loss, 0.05, kernel)
        numpy_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:      # apart: it allocates too
        cal_tot(conf, correct, loss, 0.05, kernel)
    torch_largest = max((e.cpu_memory_usage for e in prof.events()), default=0)
    assert numpy_peak < 4e6
    assert torch_largest < 4e6
    assert cal == pytest.approx(_sharpcal_cal(conf, correct, 0.05, kernel), rel=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("h", [0.01, 0.05])
def test_cal_tot_grid_matches_sharpcal_formula(kernel, h):
    conf, correct, loss = _synthetic(20_000, seed=5, power=1.4)
    cal, tot = cal_tot(conf, correct, loss, h, kernel)          # N > exact_max_n: grid + interpolation
    assert cal == pytest.approx(_sharpcal_cal(conf, correct, h, kernel), rel=1e-6)
    assert tot == pytest.approx(float(np.mean(loss)), rel=1e-14)


def test_cal_tot_grid_path_agrees_with_exact_path():
    conf, correct, loss = _real(SPLITS[2], "val")
    exact, _ = cal_tot(conf, correct, loss, 0.05)
    grid, _ = cal_tot(conf, correct, loss, 0.05, exact_max_n=0)
    assert grid == pytest.approx(exact, rel=1e-6)
    assert grid != exact


def _dense_curve(conf, correct, loss, x, h, kernel):
    curve, dens = _kernel_regression(x, conf, correct, h, kernel)
    m_loss, _ = _kernel_regression(x, conf, loss, h, kernel)
    half = 0.5 * dens * (m_loss - (curve - x) ** 2)
    return curve, dens, np.maximum(curve - half, 0.0), curve + half


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("h", [0.01, 0.05, 0.2])
def test_sharpness_curve_matches_dense_formula(kernel, h):
    conf, correct, loss = _synthetic(4000, seed=6, power=1.3)
    stats = bin_stats(conf, correct, loss)
    sc = sharpness_curve(stats, h, kernel)
    assert sc.bandwidth == h and sc.kernel == kernel and sc.notice is None
    idx = np.arange(0, stats.grid.size, 37)
    x = stats.grid[idx]
    curve, dens, lo, hi = _dense_curve(conf, correct, loss, x, h, kernel)
    full_dens = _kernel_regression(stats.grid, conf, correct, h, kernel)[1]
    keep = dens > 1e-3 * full_dens.max()
    assert keep.sum() > 20 and sc.valid[idx][keep].all()
    # Grid errors: O((dx/h)^2) for the smooth Gaussian, O(dx/h) near the Epanechnikov kink.
    dx = 1.0 / (stats.grid.size - 1)
    tol = max(1e-7, 0.05 * (dx / h) ** 2) if kernel == "gaussian" else 0.1 * dx / h
    dens_tol = 0.5 * (dx / h) ** 2 if kernel == "gaussian" else 0.5 * dx / h
    assert np.abs(sc.curve[idx][keep] - curve[keep]).max() < tol
    assert np.abs(sc.band_lo[idx][keep] - lo[keep]).max() < tol
    assert np.abs(sc.band_hi[idx][keep] - hi[keep]).max() < tol
    assert (np.abs(sc.density_raw[idx][keep] - dens[keep]) / dens[keep]).max() < dens_tol
    assert np.abs(sc.density - full_dens / full_dens.max()).max() < 10 * dens_tol


def test_sharpness_curve_is_independent_of_n():
    # (Its speed is measured in benchmarks/bench_smoothing.py, not asserted here.)
    conf, correct, loss = _synthetic(1000, seed=8, power=1.2)
    # Duplicating every sample changes no ratio: the curve and band are the same.
    twice = bin_stats(np.tile(conf[:1000], 2), np.tile(correct[:1000], 2), np.tile(loss[:1000], 2))
    once = bin_stats(conf[:1000], correct[:1000], loss[:1000])
    a, b = sharpness_curve(once, 0.05), sharpness_curve(twice, 0.05)
    assert np.allclose(a.curve, b.curve, rtol=1e-12, atol=1e-14, equal_nan=True)
    assert np.allclose(a.density_raw, b.density_raw, rtol=1e-12, atol=1e-14)


def test_epanechnikov_gap_is_masked_not_nan_elsewhere():
    rng = np.random.default_rng(9)
    conf = 0.5 + 0.5 * rng.random(3000)
    correct = (rng.random(3000) < conf).astype(np.float64)
    stats = bin_stats(conf, correct, 0.2 * np.ones(3000))
    h = 0.05
    sc = sharpness_curve(stats, h, "epanechnikov")
    x = sc.x
    assert not sc.valid[x < conf.min() - h - 1e-3].any()
    assert sc.valid[x > conf.min() - h + 1e-3].all()
    assert np.isnan(sc.curve[~sc.valid]).all() and np.isnan(sc.band_hi[~sc.valid]).all()
    assert np.isfinite(sc.curve[sc.valid]).all() and np.isfinite(sc.band_lo[sc.valid]).all()
    assert np.isfinite(sc.density).all() and (sc.density >= 0).all() and sc.density.max() == 1.0
    assert np.all(sc.density_raw[x < conf.min() - h - 1e-3] < 1e-12)
    # Arrays handed to the GUI are read-only.
    with pytest.raises(ValueError):
        sc.curve[0] = 0.0
    with pytest.raises(ValueError):
        stats.count[0] = 0.0


def test_constant_confidence_curve_is_mean_accuracy():
    rng = np.random.default_rng(10)
    conf = np.full(500, 0.8)
    correct = (rng.random(500) < 0.8).astype(np.float64)
    loss = rng.random(500)
    stats = bin_stats(conf, correct, loss)
    for kernel in ("gaussian", "epanechnikov"):
        sc = sharpness_curve(stats, 0.05, kernel)
        assert sc.notice is not None and "constant" in sc.notice
        assert np.all(sc.curve == correct.mean()) and sc.valid.all()
        for arr in (sc.curve, sc.band_lo, sc.band_hi, sc.density, sc.density_raw):
            assert not np.isnan(arr).any()
        cal, _ = cal_tot(conf, correct, loss, 0.05, kernel)
        assert cal == pytest.approx((correct.mean() - 0.8) ** 2, rel=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_cal_resampled_matches_cal_tot_on_repeated_data(kernel):
    conf, correct, loss = _synthetic(2500, seed=12, power=1.5)
    weights = _resample_weights(2500, 12, seed=3)
    cal, tot = cal_resampled(conf, correct, loss, weights, 0.05, kernel)
    assert cal.dtype == torch.float64 and cal.shape == (12,) and tot.shape == (12,)
    counts = weights.numpy().astype(np.int64)
    for r in range(12):
        ref_cal, ref_tot = cal_tot(np.repeat(conf, counts[r]), np.repeat(correct, counts[r]),
                                   np.repeat(loss, counts[r]), 0.05, kernel)   # exact dense path
        # grid dx <= h / 50: relative error ~1e-6 (Gaussian), ~1e-5 (Epanechnikov kink)
        assert cal[r].item() == pytest.approx(ref_cal, rel=2e-5)
        assert tot[r].item() == pytest.approx(ref_tot, rel=1e-6)


def test_cal_resampled_isolated_samples_left_out():
    # Isolated samples (no neighbour within an Epanechnikov bandwidth) dropped from some resamples leave only
    # rounding residue at their grid nodes: no NaN, no blow-up.
    conf, correct, loss = _synthetic(1500, seed=14, power=1.3)
    conf = np.concatenate([conf, [0.02, 0.11, 0.3]])
    correct = np.concatenate([correct, [1.0, 0.0, 1.0]])
    loss = np.concatenate([loss, [0.9, 0.1, 0.5]])
    weights = _resample_weights(conf.size, 6, seed=6)
    weights[:3, -3:] = 0
    weights[3:, -3:] = 2
    counts = weights.numpy().astype(np.int64)
    for kernel in ("gaussian", "epanechnikov"):
        cal, tot = cal_resampled(conf, correct, loss, weights, 0.01, kernel)
        assert torch.isfinite(cal).all() and torch.isfinite(tot).all()
        for r in range(6):
            ref, _ = cal_tot(np.repeat(conf, counts[r]), np.repeat(correct, counts[r]), np.repeat(loss, counts[r]),
                             0.01, kernel)
            assert cal[r].item() == pytest.approx(ref, rel=5e-4)


def test_cal_resampled_small_bandwidth():
    conf, correct, loss = _synthetic(2000, seed=13, power=1.5)
    weights = _resample_weights(2000, 4, seed=4)
    cal, _ = cal_resampled(conf, correct, loss, weights, 0.01)
    counts = weights.numpy().astype(np.int64)
    for r in range(4):
        ref, _ = cal_tot(np.repeat(conf, counts[r]), np.repeat(correct, counts[r]), np.repeat(loss, counts[r]), 0.01)
        assert cal[r].item() == pytest.approx(ref, rel=1e-4)


def test_sharpness_rejects_user_errors():
    conf, correct, loss = _synthetic(100, seed=1)
    stats = bin_stats(conf, correct, loss)
    with pytest.raises(CalibviewError):
        sharpness_curve(stats, 0.05, "triangular")
    with pytest.raises(CalibviewError):
        sharpness_curve(stats, -0.1)
    with pytest.raises(CalibviewError):
        sharpness_curve(stats, float("nan"))
    with pytest.raises(CalibviewError):
        sharpness_curve(stats, 1e-5)                   # finer than the 4096-point grid
    with pytest.raises(CalibviewError):
        bin_stats(conf, correct, loss[:-1])
    with pytest.raises(CalibviewError):
        cal_tot(conf, correct, np.where(np.arange(100) == 3, np.inf, loss))
    with pytest.raises(CalibviewError):
        cal_resampled(conf, correct, loss, torch.ones(2, 50))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_effective_n_is_kish_under_the_kernel(kernel):
    from calibview.core.stats.grid import kernel_values
    from calibview.core.stats.smoothing import bin_stats, effective_n

    rng = np.random.default_rng(12)
    conf = np.r_[rng.beta(8, 2, 3000), rng.uniform(0.1, 0.3, 13)]
    correct = (rng.random(conf.size) < conf).astype(float)
    st = bin_stats(conf, correct, correct)
    ne = effective_n(st, 0.05, kernel)
    for x in (0.2, 0.5, 0.8, 0.95):
        k = kernel_values(x - conf, 0.05, kernel)
        ref = k.sum() ** 2 / (k * k).sum()
        i = int(round(x * (st.grid.size - 1)))
        assert ne[i] == pytest.approx(ref, rel=2e-3), x
    assert ne[int(0.2 * (st.grid.size - 1))] < 30 < ne[int(0.8 * (st.grid.size - 1))]
