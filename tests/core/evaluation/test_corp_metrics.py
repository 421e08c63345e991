"""The bandwidth-free columns of an evaluation (CORP decomposition, calibration tests, refinement split) checked
against independent sources: scikit-learn's isotonic fit for MCB / DSC / UNC, scipy's one-dimensional
minimisation over the temperature for the refinement losses, the row's own scores for the identities; what a
bandwidth change recomputes (counters), and top-label runs."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax

from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.records import metrics_rows
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.discovery import find_run
from calibview.core.io.writer import write_run
from calibview.core.evaluation.toplabel.absent import BINARY_METRICS
from calibview.core.stats.corp.parts import CORP_METRICS, REFINEMENT_METRICS

CAL = ("none", "ts", "hb")


def _write(path, *, k=5, n=(1500, 2500), temp=1.6, seed=0):
    """A run whose test-split logits are ``temp`` times a calibrated model's (temp > 1: overconfident)."""
    rng = np.random.default_rng(seed)
    for split, m in zip(("val", "test"), n):
        z = rng.normal(size=(m, k)) * 1.5
        y = (rng.random(m)[:, None] > np.cumsum(softmax(z, 1), 1)).sum(1)     # y ~ softmax(z): calibrated
        write_run(path, "net", "toy", split, logits=(z * temp).astype(np.float32), labels=np.minimum(y, k - 1))
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("corp") / "toy.h5")


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("corp2") / "bin.h5", k=2, seed=3)


def _req(path, **kw):
    base = dict(file=str(path), run="net/toy", calibrators=CAL, n_boot=40, seed=1, device="cpu")
    base.update(kw)
    return EvalRequest(**base)


def _log_probs(path, fitted):
    data = read_split(str(path), find_run(str(path), "net/toy"), "test")
    lp = fitted.apply(torch.from_numpy(np.asarray(data.scores))).double().numpy()
    return lp, np.asarray(data.labels)


def _isotonic_mcb_dsc_unc(conf, correct, score):
    from sklearn.isotonic import IsotonicRegression

    r = IsotonicRegression(y_min=0.0, y_max=1.0).fit(conf, correct).predict(conf)
    a = correct.mean()

    def s(f):
        if score == "brier":
            return np.mean((f - correct) ** 2)
        f = np.clip(f, 1e-300, 1 - 1e-16)
        return -np.mean(np.where(correct > 0, np.log(f), np.log1p(-f)))

    return s(conf) - s(r), s(np.full_like(conf, a)) - s(r), s(np.full_like(conf, a))


@pytest.mark.parametrize("which,score", [("toy", "brier"), ("binary", "brier"), ("binary", "log")])
def test_the_decomposition_is_isotonic_and_adds_up_to_the_score(toy, binary, which, score):
    """brier_top = MCB - DSC + UNC for every run; for K = 2 also the log score's, whose sum is the NLL."""
    path = toy if which == "toy" else binary
    eng = Engine()
    ev = eng.evaluate(_req(path))
    scored = eng.scored(_req(path))
    names = ("corp_mcb", "corp_dsc", "corp_unc") if score == "brier" else BINARY_METRICS
    for r in ev.results:
        m = {k: e.value for k, e in r.metrics.items()}
        total = m["brier_top"] if score == "brier" else m["nll"]
        assert m[names[0]] - m[names[1]] + m[names[2]] == pytest.approx(total, abs=1e-12)
        st = scored[r.name].stats
        want = _isotonic_mcb_dsc_unc(st.conf, st.correct, score)
        assert tuple(m[x] for x in names) == pytest.approx(want, abs=1e-9)
        for x in names:
            e = r.metrics[x]
            assert np.isfinite(e.lo) and e.lo <= e.hi, (r.name, x)
    if which == "toy":                                     # K = 5: the log score's columns are null
        assert all(row[x] is None for row in metrics_rows([ev]) for x in BINARY_METRICS)


@pytest.mark.parametrize("which", ["toy", "binary"])
def test_the_refinement_losses_equal_scipys_temperature_fit_on_the_evaluation_split(toy, binary, which):
    path = toy if which == "toy" else binary
    ev = Engine().evaluate(_req(path))
    for r in ev.results:
        lp, y = _log_probs(path, r.fitted)
        n = y.size

        def nll(t):
            return -log_softmax(lp / t, 1)[np.arange(n), y].mean()

        def brier(t):
            p = softmax(lp / t, 1)
            p[np.arange(n), y] -= 1.0
            return (p * p).sum(1).mean()

        opts = {"xatol": 1e-12}
        fit = minimize_scalar(nll, bounds=(0.05, 20), method="bounded", options=opts)
        m = r.metrics
        assert m["nll_refinement"].value == pytest.approx(fit.fun, abs=1e-9), r.name
        # the Brier score at the NLL's temperature (its own minimum lies elsewhere, and is not what is reported)
        assert m["brier_refinement"].value == pytest.approx(brier(fit.x), abs=1e-8), r.name
        assert m["nll_calibration"].value == pytest.approx(m["nll"].value - fit.fun, abs=1e-9)
        assert m["brier_calibration"].value == pytest.approx(m["brier"].value - brier(fit.x), abs=1e-8)
        assert m["nll_calibration"].value >= 0
        for name in REFINEMENT_METRICS:
            assert np.isfinite(m[name].lo) and m[name].lo <= m[name].hi, (r.name, name)
    # the model is 1.6 times overconfident: temperature scaling on the split removes a clear part of its NLL
    none = ev.result("none").metrics
    assert none["nll_calibration"].lo > 0.01


def test_without_resamples_the_refinement_keeps_no_per_sample_coefficients_and_the_same_values(toy):
    """The (N, 8) coefficients serve the bootstrap only: n_boot 0 keeps none, and the point values are the same."""
    eng = Engine()
    bare, boot = _req(toy, n_boot=0), _req(toy)
    assert all(sc.refinement.coef is None for sc in eng.scored(bare).values())
    assert all(sc.refinement.coef.shape == (2500, 8) for sc in eng.scored(boot).values())
    for a, b in zip(eng.evaluate(bare).results, eng.evaluate(boot).results):
        for m in REFINEMENT_METRICS:
            assert a.metrics[m].value == b.metrics[m].value, (a.name, m)


def test_the_resampled_refinement_equals_a_refit_per_resample(toy):
    """Each resample's refinement NLL is that resample's own temperature fit (scipy), within the cubic's error."""
    eng = Engine()
    req = _req(toy, n_boot=5, calibrators=("none",))
    dist = eng.distributions(req)["none"]["nll_refinement"]
    counts, _ = eng.resamples(req)
    lp, y = _log_probs(toy, eng.fitted(req)["none"])
    n = y.size
    for r in range(5):
        w = counts[r].double().numpy()

        def nll(t):
            return -(w * log_softmax(lp / t, 1)[np.arange(n), y]).sum() / w.sum()

        ref = minimize_scalar(nll, bounds=(0.05, 20), method="bounded", options={"xatol": 1e-12}).fun
        assert dist[r] == pytest.approx(ref, abs=2e-6)


def test_p_values_are_seeded_never_zero_and_reject_an_overconfident_model(tmp_path):
    path = _write(tmp_path / "big.h5", k=4, n=(500, 10000), temp=1.5)
    ev = Engine().evaluate(_req(path, calibrators=("none", "ts"), n_boot=200))
    rows = {row["calibrator"]: row for row in metrics_rows([ev])}
    none = ev.result("none").metrics
    assert none["p_ece"].value < 0.01 and none["p_skce"].value < 0.01
    assert none["p_ece"].value >= 1 / 201
    assert rows["none"]["p_skce_method"] == "linear"              # 10,000 samples: above the quadratic budget
    assert math.isnan(none["p_ece"].lo) and rows["none"]["p_ece_lo"] is None        # no interval
    again = Engine().evaluate(_req(path, calibrators=("none", "ts"), n_boot=200))
    assert again.result("ts").metrics["p_ece"].value == ev.result("ts").metrics["p_ece"].value


def test_p_values_of_small_splits_use_the_quadratic_estimator_and_none_without_resamples(toy):
    eng = Engine()
    rows = metrics_rows([eng.evaluate(_req(toy))])
    assert {row["p_skce_method"] for row in rows} == {"quadratic"}
    assert all(0 < row["p_ece"] <= 1 and 0 < row["p_skce"] <= 1 for row in rows)
    bare = eng.evaluate(_req(toy, n_boot=0))
    for r in bare.results:
        assert math.isnan(r.metrics["p_ece"].value) and math.isnan(r.metrics["p_skce"].value)
        assert np.isfinite(r.metrics["corp_mcb"].value) and np.isfinite(r.metrics["nll_refinement"].value)
    assert {row["p_skce_method"] for row in metrics_rows([bare])} == {None}


def test_a_bandwidth_change_recomputes_nothing_of_corp_or_the_tests(toy):
    eng = Engine()
    first = eng.evaluate(_req(toy))
    assert any(p.endswith(":corp") for p in first.counters.resampled)
    assert any(":tests ece" in p for p in first.counters.resampled)
    assert any(":tests skce" in p for p in first.counters.resampled)
    ev = eng.evaluate(_req(toy, bandwidth=0.1))
    assert ev.counters.scored == () and ev.counters.fitted == ()
    assert ev.counters.resampled and all(":kernel" in p for p in ev.counters.resampled)
    for a, b in zip(first.results, ev.results):
        for m in CORP_METRICS + REFINEMENT_METRICS + ("p_ece", "p_skce"):
            np.testing.assert_array_equal([a.metrics[m].value, a.metrics[m].lo], [b.metrics[m].value,
                                                                                     b.metrics[m].lo])
    bins = eng.evaluate(_req(toy, bandwidth=0.1, bins=10))       # a new bin count: its own ECE test only
    assert [p for p in bins.counters.resampled if "tests" in p] == [f"{c}:tests ece 10" for c in CAL]


def test_a_top_label_run_has_corp_and_tests_but_no_refinement(tmp_path):
    from _toplabel_data import write_mixed

    path = tmp_path / "mixed.h5"
    write_mixed(path, seed=2, k=5, sizes={"val": 800, "test": 1200}, shift=1.5, scale=1.5)
    eng = Engine()
    top = eng.evaluate(EvalRequest(file=str(path), run="top/toy", calibrators=("none", "hb"), n_boot=30, seed=0,
                                   device="cpu"))
    full = eng.evaluate(EvalRequest(file=str(path), run="logit/toy", calibrators=("none",), n_boot=30, seed=0,
                                    device="cpu"))
    rows = {row["calibrator"]: row for row in metrics_rows([top])}
    for m in ("corp_mcb", "corp_dsc", "corp_unc", "p_ece"):    # the same confidences (stored as float32)
        assert rows["none"][m] == pytest.approx(full.result("none").metrics[m].value, abs=1e-6), m
    for m in REFINEMENT_METRICS:
        assert rows["none"][m] is None and rows["hb"][m] is None
    assert rows["hb"]["corp_mcb"] - rows["hb"]["corp_dsc"] + rows["hb"]["corp_unc"] == \
        pytest.approx(rows["hb"]["brier_top"], abs=1e-12)
