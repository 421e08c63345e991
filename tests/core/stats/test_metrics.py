"""Metrics against independent references: torchmetrics, scikit-learn, netcal and hand-written loops."""

import numpy as np
import pytest
import torch
from sklearn.metrics import brier_score_loss, log_loss

from calibview.core.stats.metrics import (binned_metrics, classwise_ece, equal_width_bin, equal_width_table,
                                    resolve_bins, sample_stats, top_label, wilson_interval)


def _random_logits(n, k, seed, scale=3.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * scale
    y = rng.integers(0, k, size=n)
    # make the model informative so accuracy is not ~1/K
    z[np.arange(n), y] += rng.normal(2.0, 1.0, size=n)
    return z, y


def _stats(z, y, bins=15):
    lp = torch.log_softmax(torch.from_numpy(z).double(), dim=1)
    return sample_stats(lp, torch.from_numpy(y), n_bins=bins)


@pytest.mark.parametrize("n,k,seed", [(2000, 10, 0), (5000, 100, 1), (777, 3, 2)])
def test_scores_match_sklearn(n, k, seed):
    z, y = _random_logits(n, k, seed)
    s = _stats(z, y)
    p = torch.softmax(torch.from_numpy(z).double(), 1).numpy()
    assert s.nll.mean() == pytest.approx(log_loss(y, p, labels=np.arange(k)), rel=1e-10)
    assert s.brier.mean() == pytest.approx(brier_score_loss(y, p, labels=np.arange(k)), rel=1e-10)
    assert s.correct.mean() == pytest.approx((p.argmax(1) == y).mean(), abs=0)


@pytest.mark.parametrize("norm,key", [("l1", "ece"), ("l2", "rmsce"), ("max", "mce")])
@pytest.mark.parametrize("bins", [10, 15])
def test_binned_errors_match_torchmetrics(norm, key, bins):
    # multiclass_calibration_error rounds confidences to float32 before binning; its binning core is called
    # with the float64 top-label confidences so that the comparison is exact.
    from torchmetrics.functional.classification.calibration_error import _ce_compute

    z, y = _random_logits(20000, 10, 3)
    p = torch.softmax(torch.from_numpy(z).double(), 1)
    conf = p.max(1).values.numpy()
    # torchmetrics bins lo <= c < hi against float32 edges, we bin lo < c <= hi against float64 edges: keep
    # only samples well away from every edge, where both conventions must agree.
    edges = np.linspace(0, 1, bins + 1)
    keep = np.abs(conf[:, None] - edges[None, :]).min(1) > 1e-6
    assert keep.mean() > 0.99
    z, y, p = z[keep], y[keep], p[keep]
    s = _stats(z, y, bins)
    ref = _ce_compute(torch.from_numpy(s.conf), torch.from_numpy(s.correct), bins, norm=norm)
    ours = binned_metrics(s.conf, s.correct, bins)[key]
    assert ours == pytest.approx(float(ref), abs=1e-12)


def test_ece_matches_netcal():
    from netcal.metrics import ECE

    z, y = _random_logits(8000, 10, 4)
    s = _stats(z, y)
    p = torch.softmax(torch.from_numpy(z).double(), 1).numpy()
    ref = ECE(bins=15).measure(p, y)
    assert binned_metrics(s.conf, s.correct, 15)["ece"] == pytest.approx(ref, abs=1e-9)


def test_bin_edge_convention_is_lo_exclusive_hi_inclusive():
    # 0.4 * 15 is 6.000000000000001 in floating point: a ceil-based rule would put 0.4 in bin 6, not 5.
    edges = np.linspace(0, 1, 16)
    values = np.array([0.0, edges[1], np.nextafter(edges[1], 1), 0.4, edges[6], 1.0])
    assert equal_width_bin(values, 15).tolist() == [0, 0, 1, 5, 5, 14]


def test_ece_by_hand():
    # Two bins (B = 2): confidences 0.3 (wrong), 0.5 (right) in bin 0; 0.8 (right), 1.0 (wrong) in bin 1.
    conf = np.array([0.3, 0.5, 0.8, 1.0])
    correct = np.array([0.0, 1.0, 1.0, 0.0])
    m = binned_metrics(conf, correct, 2)
    # bin 0: acc 0.5 conf 0.4 gap 0.1; bin 1: acc 0.5 conf 0.9 gap 0.4
    assert m["ece"] == pytest.approx(0.5 * 0.1 + 0.5 * 0.4)
    assert m["mce"] == pytest.approx(0.4)
    assert m["rmsce"] == pytest.approx(np.sqrt(0.5 * 0.01 + 0.5 * 0.16))
    # equal-mass with B = 2 splits the sorted values into {0.3, 0.5} and {0.8, 1.0}: the same as above here
    assert m["ace"] == pytest.approx(0.25)
    # debiased: each bin n=2: (f - y)^2 - y(1-y)/(n-1) = 0.01 - 0.25 < 0 and 0.16 - 0.25 < 0 -> clipped to 0
    assert m["debiased_ece"] == 0.0


def _ace_reference(conf, correct, bins):
    order = np.argsort(conf, kind="stable")
    total = 0.0
    for idx in np.array_split(order, bins):
        if len(idx) == 0:      # more bins than samples: empty groups carry no mass
            continue
        total += len(idx) / len(conf) * abs(correct[idx].mean() - conf[idx].mean())
    return total


def _debiased_reference(conf, correct, bins):
    order = np.argsort(conf, kind="stable")
    total = 0.0
    for idx in np.array_split(order, bins):
        nb = len(idx)
        if nb < 2:
            continue
        f, yb = conf[idx].mean(), correct[idx].mean()
        total += nb / len(conf) * ((f - yb) ** 2 - yb * (1 - yb) / (nb - 1))
    return np.sqrt(max(total, 0.0))


@pytest.mark.parametrize("n,bins", [(1000, 15), (12345, 10), (50, 15), (7, 15)])
def test_equal_mass_metrics_match_array_split_loops(n, bins):
    z, y = _random_logits(n, 5, 5, scale=1.0)
    s = _stats(z, y, bins)
    m = binned_metrics(s.conf, s.correct, bins)
    assert m["ace"] == pytest.approx(_ace_reference(s.conf, s.correct, bins), abs=1e-13)
    assert m["debiased_ece"] == pytest.approx(_debiased_reference(s.conf, s.correct, bins), abs=1e-13)


def test_debiased_ece_is_positive_for_a_miscalibrated_model():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, 20000)
    correct = (rng.uniform(size=conf.size) < conf - 0.1).astype(float)   # 10 points over-confident
    assert binned_metrics(conf, correct, 15)["debiased_ece"] == pytest.approx(0.1, abs=0.01)


@pytest.mark.parametrize("k", [2, 10, 100])
def test_classwise_ece_matches_a_plain_loop(k):
    z, y = _random_logits(3000, k, 6, scale=2.0)
    s = _stats(z, y, 15)
    p = torch.softmax(torch.from_numpy(z).double(), 1).numpy()
    edges = np.linspace(0, 1, 16)
    per = []
    for c in range(k):
        pc, yc = p[:, c], (y == c).astype(float)
        e = 0.0
        for b in range(15):
            lo, hi = edges[b], edges[b + 1]
            m = (pc > lo) & (pc <= hi) if b else (pc <= hi)
            if m.any():
                e += m.sum() / len(pc) * abs(yc[m].mean() - pc[m].mean())
        per.append(e)
    mean, per_class = classwise_ece(s)
    np.testing.assert_allclose(per_class, per, atol=1e-13)
    assert mean == pytest.approx(np.mean(per), abs=1e-13)
    # the mean, not the sum (copied code that sums is K times too large)
    assert mean < 1.0


def test_classwise_sums_with_exact_zero_probabilities():
    # log p = -inf entries (a calibrator that outputs exact zeros) must land in bin 0 with p = 0.
    lp = torch.log(torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.2, 0.8]], dtype=torch.float64))
    y = torch.tensor([0, 2, 2])
    s = sample_stats(lp, y, n_bins=2)
    assert np.isinf(s.nll).tolist() == [False, True, False]
    # class 2: p = (0, 0, .8), y = (0, 1, 1): bin 0 holds samples 0, 1 -> sum(p - y) = -1; bin 1: .8 - 1
    np.testing.assert_allclose(s.classwise_sums[2], [-1.0, -0.2])


def test_resolve_bins_auto():
    assert resolve_bins("auto", 5000) == 10
    assert resolve_bins("auto", 50_000) == 15
    assert resolve_bins("auto", 500_000) == 20
    assert resolve_bins("12", 10) == 12
    with pytest.raises(ValueError):
        resolve_bins("many", 10)
    with pytest.raises(ValueError):
        resolve_bins(0, 10)


def test_wilson_interval_does_not_collapse_on_all_correct_bins():
    lo, hi = wilson_interval(np.array([20.0, 0.0]), np.array([20.0, 0.0]))
    assert 0.8 < lo[0] < 1.0 and hi[0] == 1.0      # the bootstrap would give [1, 1]
    assert np.isnan(lo[1]) and np.isnan(hi[1])
    # Known value: 8 of 10 -> Wilson 95 % [0.490, 0.943]
    lo, hi = wilson_interval(np.array([8.0]), np.array([10.0]))
    assert lo[0] == pytest.approx(0.4902, abs=1e-4) and hi[0] == pytest.approx(0.9433, abs=1e-4)


def test_equal_width_table_counts():
    t = equal_width_table(np.array([0.0, 0.1, 0.55, 1.0]), np.array([1.0, 0.0, 1.0, 1.0]), 2)
    assert t.count.tolist() == [2, 2]
    assert t.accuracy.tolist() == [0.5, 1.0]


def test_classwise_entries_are_every_probability_above_the_first_edge_in_row_order():
    """The accumulator's sparse entries against numpy's nonzero over the whole matrix, with chunks of uneven density:
    a first chunk with no entry, a sparse one that sets the first capacity, a dense one that outgrows it."""
    from calibview.core.stats.metrics import StatsAccumulator

    rng = np.random.default_rng(5)
    n, k = 300, 40
    logits = rng.normal(size=(n, k))
    logits[:50] = 0.0                                   # uniform rows: p = 1/40, below every first edge
    logits[50:150] = 0.0                                # sparse: entries in three rows only
    logits[50:53, :2] = 3.0
    logits[150:] *= 6.0                                 # dense
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = rng.integers(0, k, n)
    acc = StatsAccumulator(n, k, (10, 20))
    for a, b in [(0, 50), (50, 150), (150, 170), (170, 300)]:
        acc.add(a, torch.from_numpy(np.log(p[a:b])), torch.from_numpy(y[a:b]))
    rows, cols, vals, is_label = (t.numpy() for t in acc.entries())
    q = torch.from_numpy(np.log(p)).exp().numpy()       # the probabilities as the accumulator sees them
    want_r, want_c = np.nonzero(q > 1 / 20)
    np.testing.assert_array_equal(rows, want_r)
    np.testing.assert_array_equal(cols, want_c)
    np.testing.assert_array_equal(vals, q[want_r, want_c])
    np.testing.assert_array_equal(is_label, y[want_r] == want_c)
    assert 0 < 10 * np.count_nonzero(want_r < 150) < np.count_nonzero(want_r >= 150)    # the dense part outgrew it


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_top_label_against_numpy_softmax_with_ties(dtype):
    rng = np.random.default_rng(5)
    z = rng.integers(-3, 4, size=(3000, 7)).astype(np.float64)    # ties for the top class in many rows
    z[:1000] *= 7.5
    y = rng.integers(0, 7, size=3000)
    conf, correct = top_label(torch.from_numpy(z).to(dtype), torch.from_numpy(y), rows=256)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(conf, p.max(1), rtol=1e-14, atol=0)
    np.testing.assert_array_equal(correct, (p.argmax(1) == y).astype(np.float64))


@pytest.mark.parametrize("n_bins", [1, 2, 3, 7, 10, 15, 49, 100, 1000, 4096])
def test_equal_width_bin_equals_a_binary_search_of_the_edges(n_bins):
    # the guess-and-correct rule against np.searchsorted, on values at, just above and just below every edge
    rng = np.random.default_rng(n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    v = np.concatenate([rng.random(5000), edges, np.nextafter(edges, 2.0), np.nextafter(edges, -1.0),
                        [-0.5, 1.5, -1e300, 1e300, 5e-324, np.nan, np.inf, -np.inf]])
    ref = np.clip(np.searchsorted(edges, v, side="left") - 1, 0, n_bins - 1)
    np.testing.assert_array_equal(equal_width_bin(v, n_bins), ref)
    np.testing.assert_array_equal(equal_width_bin(v[:-3], n_bins), ref[:-3])     # the finite (fast) path
