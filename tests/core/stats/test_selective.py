"""Selective prediction, the audit, per-class thresholds and the AUROCs, each against an independent computation:
direct O(N^2) loops and brute-force scans written here, torch-uncertainty's AURC, scipy's Wilson interval and
scikit-learn's roc_auc_score; bootstrap values against the same metrics of explicitly resampled data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

from calibview.core.stats import auroc as au
from calibview.core.stats import selective as sel


def _data(n=300, seed=0, ties=True):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.2, 1.0, n)
    if ties:
        conf = np.round(conf, 1)                     # large tie groups
    correct = (rng.uniform(size=n) < conf).astype(np.float64)
    return conf, correct


# --- direct definitions, written independently of the module -----------------------------------------------

def _risk_direct(conf, correct):
    """r(k) for k = 1..N by the definition: the tie group of the k-th sample enters whole."""
    n = len(conf)
    order = sorted(range(n), key=lambda i: -conf[i])
    r = []
    for k in range(1, n + 1):
        t = conf[order[k - 1]]
        members = [i for i in range(n) if conf[i] >= t]          # every sample up to the end of k's tie group
        r.append(sum(1 - correct[i] for i in members) / len(members))
    return r


def _aurc_direct(conf, correct):
    n = len(conf)
    c = int(sum(correct))
    aurc = sum(_risk_direct(conf, correct)) / n
    star = sum(max(0, k - c) / k for k in range(1, n + 1)) / n
    return aurc, star


def _acc_at_cov_direct(conf, correct, q):
    n = len(conf)
    need = math.ceil(round(q * n, 9))
    for t in sorted(set(conf.tolist()), reverse=True):
        m = conf >= t
        if m.sum() >= need:
            return correct[m].mean()


def _cov_at_acc_direct(conf, correct, a):
    best = 0.0
    for t in set(conf.tolist()):
        m = conf >= t
        if correct[m].mean() >= a - 1e-12:
            best = max(best, m.mean())
    return best


def _auroc_correct_direct(conf, correct):
    pos, neg = conf[correct == 1], conf[correct == 0]
    return np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])


def _torch_uncertainty_risk_coverage():
    """torch-uncertainty's risk_coverage.py loaded on its own: the package's __init__ imports lightning (its
    ``cpu`` extra, which also pulls torchvision and timm), while this file needs only torch, torchmetrics and
    matplotlib. torch-uncertainty itself (einops, seaborn) is a test extra; lightning is not."""
    import importlib.util
    import pathlib

    spec = importlib.util.find_spec("torch_uncertainty")       # finds the package without importing it
    assert spec is not None and spec.submodule_search_locations, "torch-uncertainty (a test extra) is missing"
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "metrics/classification/risk_coverage.py"
    mod_spec = importlib.util.spec_from_file_location("_tu_risk_coverage", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


# --- AURC and friends ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ties", [True, False])
def test_aurc_against_direct_loop(ties):
    conf, correct = _data(200, seed=1, ties=ties)
    rc = sel.RiskCoverage(conf, correct)
    aurc, star = _aurc_direct(conf, correct)
    assert rc.aurc == pytest.approx(aurc, abs=1e-12)
    assert rc.aurc_star == pytest.approx(star, abs=1e-12)
    assert rc.e_aurc == pytest.approx(aurc - star, abs=1e-12)
    # the curve holds r at each group end
    r = _risk_direct(conf, correct)
    assert np.allclose(rc.risk, [r[int(k) - 1] for k in rc.count])
    assert rc.coverage[-1] == 1.0


def test_aurc_against_torch_uncertainty():
    """torch-uncertainty's AURC integrates r(k/N) by the trapezoid rule over coverage 1/N..1 and rescales by
    1/(1 - 1/N), and breaks ties by argsort order instead of entering tie groups together. Without ties the two
    are related exactly: sum_k r(k) = (N - 1) AURC_tu + (r(1) + r(N)) / 2. With ties they differ."""
    tu = _torch_uncertainty_risk_coverage()
    rng = np.random.default_rng(3)
    n, k = 500, 5
    logits = rng.normal(size=(n, k)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = rng.integers(0, k, n)
    conf, correct = probs.max(1), (probs.argmax(1) == y).astype(float)
    assert len(np.unique(conf)) == n
    m = tu.AURC()
    m.update(torch.from_numpy(probs), torch.from_numpy(y))
    aurc_tu = float(m.compute())
    rc = sel.RiskCoverage(conf, correct)
    r = rc.risk
    # its coverage grid torch.arange(1, N + 1) / N is float32, hence 1e-8 rather than 1e-12
    assert rc.aurc == pytest.approx(((n - 1) * aurc_tu + (r[0] + r[-1]) / 2) / n, abs=1e-8)
    # with ties the conventions differ: a tie group enters whole here, one by one in argsort order there
    tied = np.round(probs, 1)
    m = tu.AURC()
    m.update(torch.from_numpy(tied), torch.from_numpy(y))
    rc = sel.RiskCoverage(tied.max(1), (tied.argmax(1) == y).astype(float))
    assert abs(rc.aurc - float(m.compute())) > 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_acc_at_cov_and_cov_at_acc_against_scans(seed):
    conf, correct = _data(150, seed=seed, ties=seed != 2)
    rc = sel.RiskCoverage(conf, correct)
    m = rc.metrics
    for name, q in sel.COVERAGES.items():
        assert m[name] == pytest.approx(_acc_at_cov_direct(conf, correct, q), abs=1e-12)
        assert rc.acc_at_coverage(q) == pytest.approx(m[name], abs=1e-12)
    for a in (0.5, 0.8, 0.95, 0.99, 1.0):
        assert rc.coverage_at_accuracy(a) == pytest.approx(_cov_at_acc_direct(conf, correct, a), abs=1e-12)
    for name, a in sel.ACCURACIES.items():
        assert m[name] == pytest.approx(_cov_at_acc_direct(conf, correct, a), abs=1e-12)
    assert m["auroc_correct"] == pytest.approx(_auroc_correct_direct(conf, correct), abs=1e-12)
    assert m["auroc_correct"] == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)


def test_small_cases_by_hand():
    # all correct: risk 0 everywhere, coverage at any accuracy 1, AUROC undefined
    m = sel.selective_metrics(np.array([0.9, 0.8, 0.8]), np.ones(3))
    assert m["aurc"] == 0 and m["e_aurc"] == 0 and m["cov_at_acc99"] == 1 and math.isnan(m["auroc_correct"])
    # one tie group holding everything: r(k) = error rate for every k
    m = sel.selective_metrics(np.full(4, 0.7), np.array([1, 0, 1, 1.0]))
    assert m["aurc"] == pytest.approx(0.25) and m["acc_at_cov80"] == pytest.approx(0.75)
    assert m["cov_at_acc95"] == 0.0
    # AURC* for C = 3 of N = 4: (0 + 0 + 0 + 1/4) / 4
    assert m["aurc"] - m["e_aurc"] == pytest.approx(1 / 16)
    m = sel.selective_metrics(np.full(4, 0.7), np.array([1, 0, 0, 1.0]))       # C = 2: (1/3 + 2/4) / 4
    assert m["aurc"] - m["e_aurc"] == pytest.approx((1 / 3 + 1 / 2) / 4)


def test_weighted_equals_repeated():
    conf, correct = _data(80, seed=4)
    w = np.random.default_rng(5).multinomial(80, np.full(80, 1 / 80))
    a = sel.RiskCoverage(conf, correct, weights=w).metrics
    b = sel.RiskCoverage(np.repeat(conf, w), np.repeat(correct, w)).metrics
    for m in a:
        assert a[m] == pytest.approx(b[m], abs=1e-12, nan_ok=True), m


def test_resampled_against_brute_force():
    """All resamples of a block at once (sorted once, cumulative sums) = each resample expanded by np.repeat."""
    conf, correct = _data(120, seed=6)
    rng = np.random.default_rng(7)
    counts = rng.multinomial(120, np.full(120, 1 / 120), size=9).astype(np.float32)
    ro = sel.rank_order(conf, correct)
    got = sel.resampled_metrics(ro, torch.from_numpy(counts), None, counts.sum(1))
    for r in range(9):
        w = counts[r].astype(int)
        ref = sel.selective_metrics(np.repeat(conf, w), np.repeat(correct, w))
        aurc, star = _aurc_direct(np.repeat(conf, w), np.repeat(correct, w))
        assert got["aurc"][r] == pytest.approx(aurc, abs=1e-12)
        assert got["e_aurc"][r] == pytest.approx(aurc - star, abs=1e-12)
        for m in sel.SELECTIVE_METRICS:
            assert got[m][r] == pytest.approx(ref[m], abs=1e-12), m
    # with units: a sample's weight is its unit's count
    units = torch.from_numpy(rng.integers(0, 30, 120))
    ucounts = rng.multinomial(30, np.full(30, 1 / 30), size=4).astype(np.float32)
    got = sel.resampled_metrics(ro, torch.from_numpy(ucounts), units)
    for r in range(4):
        w = ucounts[r][units.numpy()].astype(int)
        ref = sel.selective_metrics(np.repeat(conf, w), np.repeat(correct, w))
        for m in sel.SELECTIVE_METRICS:
            assert got[m][r] == pytest.approx(ref[m], abs=1e-12), m


def test_units_read_the_curve_at_merged_tie_groups(monkeypatch):
    """Large splits resample units and read the curve at UNIT_CURVE_POINTS group ends: exact when there are at
    least as many points as tie groups, close otherwise (neighbouring groups merged)."""
    conf, correct = _data(3000, seed=15, ties=False)
    rng = np.random.default_rng(16)
    units = torch.from_numpy(rng.permutation(np.arange(3000) % 200))
    counts = torch.from_numpy(rng.multinomial(200, np.full(200, 1 / 200), size=5).astype(np.float32))
    ro = sel.rank_order(conf, correct)
    merged = sel.resampled_metrics(ro, counts, units)                # 3000 groups <= 16384 points: exact
    monkeypatch.setattr(sel, "UNIT_CURVE_POINTS", 300)
    coarse = sel.resampled_metrics(ro, counts, units, store={})
    for r in range(5):
        w = counts[r].numpy()[units.numpy()].astype(int)
        ref = sel.selective_metrics(np.repeat(conf, w), np.repeat(correct, w))
        for m in sel.SELECTIVE_METRICS:
            assert merged[m][r] == pytest.approx(ref[m], abs=1e-12), m
            assert coarse[m][r] == pytest.approx(ref[m], abs=2e-2), m


def test_downsampled_points_are_curve_points():
    conf, correct = _data(5000, seed=8, ties=False)
    rc = sel.RiskCoverage(conf, correct)
    idx = rc.downsampled(1000)
    assert len(idx) <= 1001 and idx[-1] == len(rc.count) - 1 and np.all(np.diff(idx) > 0)


# --- audit and slider --------------------------------------------------------------------------------------------

def test_audit_wilson_against_scipy():
    conf, correct = _data(400, seed=9, ties=False)
    for level in (0.9, 0.95):
        for row in sel.audit(conf, correct, (0.5, 0.9, 0.95, 0.99), level=level):
            m = conf >= row.threshold
            assert row.n == m.sum()
            if row.n == 0:
                assert math.isnan(row.accuracy) and not row.flagged
                continue
            ci = binomtest(int(correct[m].sum()), int(m.sum())).proportion_ci(confidence_level=level,
                                                                                method="wilson")
            assert (row.lo, row.hi) == pytest.approx((ci.low, ci.high), abs=1e-12)
            assert row.mean_conf == pytest.approx(conf[m].mean(), abs=1e-12)
            assert row.accuracy == pytest.approx(correct[m].mean(), abs=1e-12)
            assert row.flagged == (not ci.low <= conf[m].mean() <= ci.high)


def test_audit_flags_the_seed_story():
    # a 0.95 bin that is right 70 % of the time
    conf = np.r_[np.full(100, 0.96), np.full(100, 0.5)]
    correct = np.r_[np.ones(70), np.zeros(30), np.ones(50), np.zeros(50)]
    row = sel.audit(conf, correct, (0.95,))[0]
    assert row.n == 100 and row.accuracy == pytest.approx(0.7) and row.flagged


def test_sorted_confidence_matches_masks():
    conf, correct = _data(300, seed=10)
    sc = sel.SortedConfidence(conf, correct)
    for t in (0.0, 0.3, 0.5, 0.55, 0.9, 1.0, 1.1):
        a = sc.at(t)
        m = conf >= t
        assert a.n == m.sum() and a.coverage == pytest.approx(m.mean())
        if m.any():
            assert a.accuracy == pytest.approx(correct[m].mean()) and a.mean_conf == pytest.approx(conf[m].mean())


# --- per-class thresholds ----------------------------------------------------------------------------------

def _thresholds_scan(conf, pred, correct, k, target):
    out = []
    for c in range(k):
        best = None
        for t in sorted(set(conf[pred == c].tolist())):
            m = (pred == c) & (conf >= t)
            if correct[m].mean() >= target - 1e-12:
                best = t
                break
        out.append(best)
    return out


@pytest.mark.parametrize("target", [0.6, 0.9, 0.99])
def test_per_class_thresholds_against_scan(target):
    rng = np.random.default_rng(11)
    n, k = 400, 6
    conf = np.round(rng.uniform(0.3, 1.0, n), 2)
    pred = rng.integers(0, k - 1, n)                  # class k-1 is never predicted
    correct = (rng.uniform(size=n) < conf ** 2).astype(float)
    got = sel.per_class_thresholds(conf, pred, correct, k, target)
    assert got == _thresholds_scan(conf, pred, correct, k, target)
    assert got[k - 1] is None
    applied = sel.apply_thresholds(conf, pred, correct, got)
    for c, row in enumerate(applied):
        m = (pred == c) & (conf >= (np.inf if got[c] is None else got[c]))
        assert row.n_accepted == m.sum() and row.n_pred == (pred == c).sum()
        if m.any():
            assert row.precision == pytest.approx(correct[m].mean()) and row.precision >= target - 1e-12


# --- AUROC of the class probabilities ------------------------------------------------------------------------

def _probs(n, k, seed, absent=()):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = rng.integers(0, k, n)
    for c in absent:
        y[y == c] = (c + 1) % k
    return p, y


@pytest.mark.parametrize("k", [2, 3, 7])
def test_auroc_against_sklearn(k):
    p, y = _probs(300, k, seed=k)
    ref = roc_auc_score(y, p[:, 1]) if k == 2 else roc_auc_score(y, p, multi_class="ovr", average="macro")
    assert au.auroc(p, y) == pytest.approx(ref, abs=1e-12)
    # ties (rounded probabilities) count one half, as in scikit-learn
    pr = np.round(p, 2)
    ref = roc_auc_score(y, pr[:, 1]) if k == 2 else np.mean([roc_auc_score(y == c, pr[:, c]) for c in range(k)])
    assert au.auroc(pr, y) == pytest.approx(ref, abs=1e-12)


def test_auroc_with_absent_classes_and_small_batches():
    p, y = _probs(400, 8, seed=12, absent=(2, 5))
    ref = np.mean([roc_auc_score(y == c, p[:, c]) for c in range(8) if c not in (2, 5)])
    assert au.auroc(p, y) == pytest.approx(ref, abs=1e-12)
    pt, yt = torch.from_numpy(p), torch.from_numpy(y)
    counter = au.AurocCounter(y, au.positives(pt, yt), 8)
    for a in range(0, 400, 64):                          # counted over chunks
        counter.add(pt[a:a + 64])
    assert counter.value() == pytest.approx(ref, abs=1e-12)


def test_resampled_auroc_against_repeat():
    p, y = _probs(60, 4, seed=13)
    p = np.round(p, 2)
    rng = np.random.default_rng(14)
    counts = rng.multinomial(60, np.full(60, 1 / 60), size=6)
    got = au.resampled_auroc(p, y, torch.from_numpy(counts.astype(np.uint8)))
    for r in range(6):
        pr, yr = np.repeat(p, counts[r], axis=0), np.repeat(y, counts[r])
        present = [c for c in range(4) if 0 < (yr == c).sum() < len(yr)]
        ref = np.mean([roc_auc_score(yr == c, pr[:, c]) for c in present])
        assert got[r] == pytest.approx(ref, abs=1e-12)


# --- through the engine ------------------------------------------------------------------------------------------

def _toy(path, n=(600, 700), k=5, seed=0):
    from calibview.core.io.writer import write_run

    rng = np.random.default_rng(seed)
    for split, m in zip(("val", "test"), n):
        y = rng.integers(0, k - 1, m)                 # class k-1 never occurs: auroc over the classes present
        z = rng.normal(size=(m, k)) * 2.0
        z[np.arange(m), y] += rng.normal(1.0, 1.0, m)
        write_run(path, "net", "toy", split, logits=z.astype(np.float32), labels=y)
    return path


def test_engine_columns_against_sklearn_and_selective(tmp_path, monkeypatch, caplog):
    from calibview.core.evaluation.engine import Engine
    from calibview.core.evaluation.request import EvalRequest
    from calibview.core.io.discovery import find_run
    from calibview.core.io.logits import read_split
    from calibview.core.stats.metrics import METRIC_NAMES
    from calibview.core.evaluation.toplabel.absent import absent_metrics

    path = _toy(tmp_path / "toy.h5")
    req = EvalRequest(file=str(path), run="net/toy", calibrators=("none", "ts", "hb"), n_boot=30, seed=2,
                      device="cpu")
    eng = Engine()
    ev = eng.evaluate(req)
    scored = eng.scored(req)
    data = read_split(str(path), find_run(str(path), "net/toy"), "test")
    z = torch.from_numpy(np.asarray(data.scores))
    for r in ev.results:
        probs = r.fitted.apply(z).exp().numpy()
        present = np.unique(data.labels)
        ref = np.mean([roc_auc_score(data.labels == c, probs[:, c]) for c in present])
        assert r.metrics["auroc"].value == pytest.approx(ref, abs=1e-12)
        st = scored[r.name].stats
        for m, v in sel.selective_metrics(st.conf, st.correct).items():
            assert r.metrics[m].value == v
        for m in METRIC_NAMES:                       # every column has an interval but the tests' p-values
            if m in ("p_ece", "p_skce") or m in absent_metrics(ev.run):          # and K = 2's log CORP
                continue
            e = r.metrics[m]
            assert np.isfinite(e.lo) and np.isfinite(e.hi), (r.name, m)
    # above the work budget: the point estimate, no interval, and a note saying why
    monkeypatch.setattr(au, "AUROC_BOOT_WORK", 10)
    with caplog.at_level("INFO", logger="calibview"):
        ev2 = Engine().evaluate(req)
    for r, r2 in zip(ev.results, ev2.results):
        assert r2.metrics["auroc"].value == r.metrics["auroc"].value and math.isnan(r2.metrics["auroc"].lo)
        assert not any("AUROC" in w for w in r2.warnings)          # routine: information, not a warning
        assert any(f"{r.name}: no AUROC interval" in m for m in caplog.messages)
        assert r2.metrics["aurc"] == r.metrics["aurc"]
    # a split streamed from disk gives the same AUROC (the second pass reads it again)
    ev3 = Engine().evaluate(replace_req(req, max_memory=1000, n_boot=0, calibrators=("none", "ts")))
    for r, r3 in zip(ev.results, ev3.results):
        assert r3.metrics["auroc"].value == pytest.approx(r.metrics["auroc"].value, abs=1e-12)


def replace_req(req, **kw):
    from dataclasses import replace

    return replace(req, **kw)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 5000])
@pytest.mark.parametrize("levels", [1, 3, 50, None])
def test_the_descending_order_turned_from_the_ascending_one_is_numpys_stable_descending_sort(n, levels):
    """The risk-coverage order reuses the stable ascending sort of the confidences (sorted once per calibrator):
    reversed, with every run of ties put back in ascending row order, it must be numpy's own stable sort of
    -conf, on values with no ties, a few levels (long runs), and one value only."""
    from calibview.core.stats.selective import descending

    rng = np.random.default_rng(n + (levels or 0))
    conf = rng.random(n) if levels is None else np.floor(rng.random(n) * levels) / levels
    got = descending(conf, np.argsort(conf, kind="stable"))
    assert np.array_equal(got, np.argsort(-conf, kind="stable"))
    ro = sel.rank_order(conf, conf > 0.5, np.argsort(conf, kind="stable"))
    assert np.array_equal(ro.order, sel.rank_order(conf, conf > 0.5).order)
