"""Top-label runs (confidence, predictions, labels) against the full-probability run they were derived from: the
shared CIFAR logits written in both forms, every top-label metric and interval equal, the full-vector metrics
absent (None, never 0 or NaN), the published test error and ECE reproduced from the top-label form alone, and the
top-label calibrators checked against scikit-learn and a numpy histogram binning."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibview.core.errors import CalibviewError
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.records import metrics_rows
from calibview.core.evaluation.request import EvalRequest
from calibview.core.evaluation.toplabel.absent import (BINARY_METRICS, FULL_VECTOR_METRICS, LOGIT_METRICS,
                                                       USABLE_CALIBRATORS)
from calibview.core.io import discovery
from calibview.core.io.toplabel.write import from_scores, write_toplabel
from calibview.core.io.writer import write_splits
from calibview.core.reports.tables import metrics_csv, metrics_json
from calibview.core.stats import smoothing
from calibview.core.stats.metrics import METRIC_NAMES

RUN = "resnet110/cifar10"
#: the metrics whose definition does not involve the loss of the diagram
SAME = [m for m in METRIC_NAMES if m not in FULL_VECTOR_METRICS + LOGIT_METRICS + BINARY_METRICS +
        ("tot", "sharpness_gap")]


def _both(tmp_path, npz, num_classes=10):
    d = np.load(npz)
    full, top = tmp_path / "full.h5", tmp_path / "top.h5"
    write_splits(full, "resnet110", "cifar10", {s: ("logits", d[f"logits_{s}"], d[f"labels_{s}"])
                                                for s in ("val", "test")})
    splits = {s: (*from_scores(d[f"logits_{s}"]), d[f"labels_{s}"]) for s in ("val", "test")}
    write_toplabel(top, "resnet110", "cifar10", splits, num_classes=num_classes)
    return full, top


def _req(file, calibrators=("none",), n_boot=0):
    return EvalRequest(file=str(file), run=RUN, eval_split="test", fit_split="val", calibrators=calibrators,
                       n_boot=n_boot, seed=3)


@pytest.fixture(scope="module")
def both(shared_data, tmp_path_factory):
    return _both(tmp_path_factory.mktemp("toplabel"), shared_data / "mukhoti_brier_cifar10_resnet110.npz")


def test_the_file_lists_a_top_label_run(both):
    run = discovery.find_run(both[1], RUN)
    assert run.k == 10 and [(s.name, s.n, s.kind) for s in run.splits] == [("val", 5000, "top-label"),
                                                                             ("test", 10000, "top-label")]


def test_every_top_label_metric_and_interval_equals_the_full_run(both):
    engine = Engine()
    full = engine.evaluate(_req(both[0], n_boot=60))
    top = engine.evaluate(_req(both[1], n_boot=60))
    f, t = full.result("none"), top.result("none")
    for m in SAME:
        for part in ("value", "lo", "hi"):
            a, b = getattr(f.metrics[m], part), getattr(t.metrics[m], part)
            assert a == pytest.approx(b, rel=1e-12, abs=1e-15, nan_ok=True), (m, part, a, b)   # p-values: no interval
    # the confidences are the engine's own, to the bit
    stats = engine.scored(_req(both[0]))["none"].stats
    tstats = engine.scored(_req(both[1]))["none"].stats
    np.testing.assert_array_equal(stats.conf, tstats.conf)
    np.testing.assert_array_equal(stats.correct, tstats.correct)
    # reliability bars, per-class accuracy and the calibration curve are the full run's
    for a in ("count", "sum_conf", "sum_correct", "lo", "hi"):
        np.testing.assert_allclose(getattr(f.bins, a), getattr(t.bins, a), rtol=1e-12)
    np.testing.assert_allclose(f.bin_acc_lo, t.bin_acc_lo, rtol=1e-12)
    np.testing.assert_array_equal(f.per_class_accuracy, t.per_class_accuracy)
    cf, ct = f.curve(0.05), t.curve(0.05)
    np.testing.assert_allclose(cf.curve[cf.valid], ct.curve[ct.valid], rtol=1e-10)
    # CAL, TOT and the sharpness gap (and the sharpness band) are on the top-label Brier: those of the full run's
    # confidences with (conf - correct)^2 as the loss
    top_loss = (stats.conf - stats.correct) ** 2
    cal, tot = smoothing.cal_tot(stats.conf, stats.correct, top_loss, 0.05, "gaussian")
    assert t.metrics["cal"].value == pytest.approx(cal, rel=1e-12)
    assert t.metrics["tot"].value == pytest.approx(tot, rel=1e-12) == pytest.approx(t.metrics["brier_top"].value)
    assert t.metrics["sharpness_gap"].value == pytest.approx(tot - cal, rel=1e-12)
    expected = smoothing.sharpness_curve(smoothing.bin_stats(stats.conf, stats.correct, top_loss), 0.05, "gaussian")
    np.testing.assert_allclose(ct.band_hi[ct.valid], expected.band_hi[expected.valid], rtol=1e-10)


def test_full_vector_metrics_are_absent_not_zero(both):
    ev = Engine().evaluate(_req(both[1], calibrators=("none", "ir"), n_boot=20))
    rows = metrics_rows([ev])
    for row in rows:
        for m in FULL_VECTOR_METRICS:
            assert row[m] is None and row[f"{m}_lo"] is None and row[f"{m}_hi"] is None, (m, row[m])
        for m in SAME:
            assert isinstance(row[m], float) and np.isfinite(row[m]), m
        for m in LOGIT_METRICS + BINARY_METRICS:           # no logits; K = 10
            assert row[m] is None and row[f"{m}_lo"] is None, m
        assert not set(json.loads(row["interval_method"])) & set(FULL_VECTOR_METRICS)
    records = json.loads(metrics_json(rows))
    assert all(rec[m] is None and m not in rec["nonfinite"] for rec in records for m in FULL_VECTOR_METRICS)
    header, first = metrics_csv(rows).splitlines()[:2]
    cells = dict(zip(header.split(","), first.split(",")))
    assert all(cells[m] == "" for m in FULL_VECTOR_METRICS) and cells["ece"] != ""
    assert not any("NLL" in w for r in ev.results for w in r.warnings)


PUBLISHED = [("mukhoti_brier_cifar10_resnet110", 10, "5.48", "2.56"),
             ("mukhoti_flsd53_cifar10_resnet110", 10, "5.42", "1.87"),
             ("mukhoti_brier_cifar100_resnet110", 100, "25.1", "7.88")]


@pytest.mark.parametrize("name,k,error,ece", PUBLISHED)
def test_published_error_and_ece_from_the_top_label_form_alone(shared_data, tmp_path, name, k, error, ece):
    d = np.load(shared_data / f"{name}.npz")
    conf, pred = from_scores(d["logits_test"])
    path = tmp_path / "top.h5"
    write_toplabel(path, "m", "d", {"test": (conf.astype(np.float32), pred, d["labels_test"])}, num_classes=k)
    del d, conf, pred                   # nothing but the file from here on
    ev = Engine().evaluate(EvalRequest(file=str(path), run="m/d", eval_split="test", fit_split=None,
                                       calibrators=("none",), n_boot=0, bins=15))
    row = metrics_rows([ev])[0]
    digits = len(error.split(".")[1])
    assert f"{100 * (1 - row['accuracy']):.{digits}f}" == error
    assert f"{100 * row['ece']:.2f}" == ece


def test_top_label_calibrators_match_scikit_learn_and_numpy(both, shared_data):
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    d = np.load(shared_data / "mukhoti_brier_cifar10_resnet110.npz")
    cv_, pv = from_scores(d["logits_val"])
    ct, _ = from_scores(d["logits_test"])
    yv = (pv == d["labels_val"]).astype(float)
    scored = Engine().scored(_req(both[1], calibrators=USABLE_CALIBRATORS))
    assert set(scored) == set(USABLE_CALIBRATORS)
    np.testing.assert_array_equal(scored["none"].stats.conf, ct)
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(cv_, yv)
    np.testing.assert_allclose(scored["ir"].stats.conf, iso.predict(ct), atol=1e-9)
    edges = np.linspace(0, 1, 16)
    bv, bt = (np.clip(np.searchsorted(edges, c, side="left") - 1, 0, 14) for c in (cv_, ct))
    count = np.bincount(bv, minlength=15)
    value = np.where(count > 0, np.bincount(bv, weights=yv, minlength=15) / np.maximum(count, 1),
                     (edges[:-1] + edges[1:]) / 2)
    np.testing.assert_allclose(scored["hb"].stats.conf, value[bt], atol=1e-12)
    s = lambda c: np.log(c) - np.log1p(-c)           # noqa: E731 (the log-odds Platt fits on)
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(np.clip(s(cv_), -1e4, 1e4)[:, None], yv)
    np.testing.assert_allclose(scored["platt"].stats.conf, lr.predict_proba(np.clip(s(ct), -1e4, 1e4)[:, None])[:, 1],
                               atol=1e-5)
    for name in USABLE_CALIBRATORS:       # the prediction never moves; the loss is the calibrated top-label Brier
        st = scored[name].stats
        np.testing.assert_array_equal(st.pred, scored["none"].stats.pred)
        np.testing.assert_allclose(st.brier, (st.conf - st.correct) ** 2)
        assert ((st.conf >= 0) & (st.conf <= 1)).all()


def test_calibrators_that_need_logits_are_refused_on_a_top_label_run(both):
    with pytest.raises(CalibviewError, match="top-label run.*Temperature scaling"):
        Engine().evaluate(_req(both[1], calibrators=("none", "ts")))


def test_unknown_k_gives_the_same_numbers(shared_data, tmp_path):
    full, top = _both(tmp_path, shared_data / "mukhoti_brier_cifar10_resnet110.npz", num_classes=None)
    assert discovery.find_run(top, RUN).k == 0
    a = metrics_rows([Engine().evaluate(_req(full))])[0]
    b = metrics_rows([Engine().evaluate(_req(top))])[0]
    assert all(a[m] == pytest.approx(b[m], rel=1e-12, nan_ok=True) for m in SAME)     # n_boot 0: no p-values
    assert b["k"] == 0


def test_the_calibrator_lists_agree():
    from calibview.core.calibrators import toplabel

    assert toplabel.USABLE == USABLE_CALIBRATORS


def test_hb_warning_counts_the_confidence_bins(tmp_path):
    """Histogram binning of a top-label run warns of the empty bins of the confidence's 15 equal-width bins,
    counted here by a loop over the bins, not of the 30 bins of both columns of the binary problem."""
    rng = np.random.default_rng(5)
    splits = {}
    for split in ("val", "test"):
        conf = rng.uniform(0.62, 0.97, 500)              # nothing below 0.62 nor above 0.97
        pred = rng.integers(0, 3, 500)
        labels = np.where(rng.random(500) < conf, pred, (pred + 1) % 3)
        splits[split] = (conf, pred, labels)
    path = tmp_path / "top.h5"
    write_toplabel(path, "top", "toy", splits, num_classes=3)
    ev = Engine().evaluate(EvalRequest(file=str(path), run="top/toy", calibrators=("none", "hb"), n_boot=0,
                                       fit_split="val", eval_split="test"))
    conf = splits["val"][0]
    empty = sum(1 for i in range(15) if not np.any((conf > i / 15) & (conf <= (i + 1) / 15)))
    assert empty >= 9
    warnings = ev.result("hb").fitted.warnings
    assert f"{empty} of the 15 confidence bins are empty in the fit split; they map to their bin centre." in warnings
    assert not any("class bins" in w for w in warnings)
