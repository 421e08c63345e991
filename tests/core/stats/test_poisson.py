"""The Poisson bootstrap: its draws (Poisson(1), seeded per shard and row block, independent of how they are
read) and every resampled metric against the metric recomputed on the explicitly repeated samples."""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from calibview.core.evaluation.engine import Engine, evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.stats import resampling as poisson
from calibview.core.stats import bootstrap, smooth_ece
from calibview.core.stats.metrics import binned_metrics, classwise_ece, sample_stats


def test_draws_are_poisson_one():
    c = poisson.poisson_scheme([200_000], 10, 1).counts(0, 20).numpy().ravel()     # 4M draws
    freq = np.bincount(c, minlength=8)[:8] / c.size
    pmf = np.array([math.exp(-1) / math.factorial(j) for j in range(8)])
    se = np.sqrt(pmf * (1 - pmf) / c.size)
    assert np.all(np.abs(freq - pmf) < 5 * se + 1e-9), (freq, pmf)


def test_any_range_of_resamples_and_any_shard_is_the_same_draw():
    s = poisson.poisson_scheme([1_001, 70_000, 5], 10, 3)          # row blocks of 65,536: the middle shard has two
    full = s.counts(0, 10)
    assert full.shape == (10, 71_006) and full.dtype == torch.uint8
    for a, b in ((3, 7), (1, 2), (9, 10)):
        assert torch.equal(s.counts(a, b), full[a:b])
    assert torch.equal(s.counts(2, 6, shard=1), full[2:6, 1_001:71_001])
    assert torch.equal(s.counts(0, 10, shard=2), full[:, 71_001:])
    assert not torch.equal(poisson.poisson_scheme([1_001, 70_000, 5], 10, 4).counts(0, 10), full)     # the seed counts
    # a shard's draws depend on its index and size, not on what comes before it
    assert torch.equal(poisson.poisson_scheme([9, 70_000], 10, 3).counts(0, 4, shard=1), full[:4, 1_001:71_001])


def test_groups_stay_inside_a_row_block_of_one_shard():
    s = poisson.poisson_scheme([100_000, 100_000], 1000, 0)
    units = s.units().numpy()
    assert units.shape == (200_000,) and s.n_units == units.max() + 1
    a, b = s.unit_range(1)
    assert set(np.unique(units[100_000:])) == set(range(a, b)) and units[:100_000].max() < a
    for lo, hi in ((0, 65_536), (65_536, 100_000), (100_000, 165_536)):
        sizes = np.bincount(units[lo:hi] - units[lo:hi].min())
        assert sizes.max() - sizes.min() <= 1              # a block's groups differ by one sample at most
    assert torch.equal(s.units(1) + a, s.units()[100_000:])


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("poisson") / "small.h5"
    for split, n in (("val", 800), ("test", 1200)):
        y = rng.integers(0, 6, n)
        z = rng.normal(size=(n, 6)) * 2.5
        z[np.arange(n), y] += rng.normal(1.5, 1.0, n)
        write_run(path, "net", "toy", split, logits=z.astype(np.float32), labels=y)
    return path


def _macro_auroc(p, y, k):
    present = [c for c in range(k) if 0 < (y == c).sum() < y.size]
    return np.mean([roc_auc_score(y == c, p[:, c]) for c in present])


@pytest.mark.parametrize("grouped", [False, True])
def test_every_metric_of_every_resample_is_the_metric_of_the_weighted_samples(small_file, monkeypatch, grouped):
    """Each resample's value equals the metric recomputed on the samples repeated by their Poisson weights
    (scikit-learn for the AUROC, relplot's SmoothECE algorithm for smECE); a resample's size is the sum of its
    weights, not N. ``grouped``: groups of samples as units (the large-split path, forced at N = 1,200), with the
    class-wise product taken a few resamples and a few sparse entries at a time, as at millions of rows."""
    if grouped:
        for name, value in (("UNIT_LIMIT", 500), ("MIN_UNITS", 300), ("MAX_UNITS", 300)):
            monkeypatch.setattr(poisson, name, value)
        monkeypatch.setattr(bootstrap, "_COUNT_PANEL", 3)
        monkeypatch.setattr(bootstrap, "ENTRY_BLOCK", 50)
    n_boot, seed = 7, 3
    req = EvalRequest(file=str(small_file), run="net/toy", calibrators=("none",), fit_split=None, n_boot=n_boot,
                      seed=seed, interval="percentile", bootstrap="poisson")
    res = Engine().evaluate(req).result("none")
    d = read_split(small_file, "net/toy", "test")
    z = torch.from_numpy(d.scores.copy()).double()
    y = torch.from_numpy(d.labels.copy())
    s = poisson.poisson_scheme([y.numel()], 6, seed)
    assert (s.groups is not None) == grouped and (not grouped or s.n_units == 300)
    counts = s.counts(0, n_boot).numpy().astype(int)
    if grouped:
        counts = counts[:, s.units().numpy()]              # each sample carries its group's weight
    assert len(set(counts.sum(1))) > 1                      # the sizes do vary
    values = {m: [] for m in ("accuracy", "nll", "brier", "ece", "rmsce", "mce", "classwise_ece", "smece", "tot",
                              "auroc")}
    for w in counts:
        idx = np.repeat(np.arange(w.size), w)
        lp = torch.log_softmax(z[idx], 1)
        st = sample_stats(lp, y[idx], n_bins=15)
        bm = binned_metrics(st.conf, st.correct, 15)
        values["accuracy"].append(st.correct.mean())
        values["nll"].append(st.nll.mean())
        values["brier"].append(st.brier.mean())
        for key in ("ece", "rmsce", "mce"):
            values[key].append(bm[key])
        values["classwise_ece"].append(classwise_ece(st)[0])
        values["smece"].append(smooth_ece.smece(st.conf, st.correct)[0])
        values["tot"].append(st.brier.mean())
        values["auroc"].append(_macro_auroc(lp.exp().numpy(), y[idx].numpy(), 6))
    for metric, v in values.items():
        lo, hi = np.percentile(np.sort(v), [2.5, 97.5])
        est = res.metrics[metric]
        lo, hi = min(lo, est.value), max(hi, est.value)     # widened to contain the estimate
        tol = 1e-5 if metric == "smece" else 1e-6
        assert est.lo == pytest.approx(lo, abs=tol), metric
        assert est.hi == pytest.approx(hi, abs=tol), metric


def test_the_intervals_do_not_depend_on_how_the_split_is_read(small_file):
    """In memory or streamed from disk in small chunks: the same draws, the same intervals (to rounding)."""
    base = dict(file=str(small_file), run="net/toy", calibrators=("none", "ts"), n_boot=50, seed=1,
                bootstrap="poisson")
    a = evaluate(EvalRequest(**base))
    b = evaluate(EvalRequest(**base, max_memory=20_000, chunk_rows=97))
    for name in ("none", "ts"):
        for m, est in a.result(name).metrics.items():
            other = b.result(name).metrics[m]
            np.testing.assert_allclose([est.value, est.lo, est.hi], [other.value, other.lo, other.hi],
                                       rtol=1e-9, atol=1e-12, err_msg=f"{name} {m}")


def test_poisson_and_multinomial_intervals_agree_in_distribution_not_in_value(small_file):
    base = dict(file=str(small_file), run="net/toy", calibrators=("none",), fit_split=None, n_boot=400, seed=0)
    m = evaluate(EvalRequest(**base)).result("none").metrics
    p = evaluate(EvalRequest(**base, bootstrap="poisson")).result("none").metrics
    assert m["accuracy"].lo != p["accuracy"].lo
    for key in ("accuracy", "nll", "ece", "auroc"):
        wm, wp = m[key].hi - m[key].lo, p[key].hi - p[key].lo
        assert 0.7 < wp / wm < 1.4, (key, wm, wp)


def test_an_unknown_scheme_is_refused_in_one_sentence(small_file):
    from calibview.core.errors import CalibviewError

    with pytest.raises(CalibviewError, match="Unknown bootstrap 'bayes'; choose multinomial or poisson."):
        evaluate(EvalRequest(file=str(small_file), run="net/toy", bootstrap="bayes"))
