"""calibview.evaluate on a top-label run (confidence=, predictions=, labels=) against the file path: the same
vectors written as a top-label file (``write_toplabel``) and evaluated by ``calibview metrics --json`` are the
reference (every key, floats to 1e-12); the uncalibrated ECE and the accuracy are those of the logits the vectors
were derived from, evaluated through ``evaluate(logits, labels)``. Bad input: one sentence each."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

import calibview as cv
from calibview.cli import main
from calibview.core.errors import CalibviewError
from calibview.core.io.toplabel.write import from_scores, write_toplabel

CALIBRATORS = ["none", "hb", "ir"]
FULL_VECTOR = ("nll", "brier", "classwise_ece", "auroc")


@pytest.fixture(scope="module")
def cifar(shared_data):
    d = np.load(shared_data / "mukhoti_brier_cifar10_resnet110.npz")
    zf, yf, zt, yt = d["logits_val"], d["labels_val"], d["logits_test"], d["labels_test"]
    fit, test = (*from_scores(zf), yf.astype(np.int64)), (*from_scores(zt), yt.astype(np.int64))
    return {"logits": ((zt, yt), (zf, yf)), "toplabel": (test, fit)}


def _cli_rows(capsys, path, calibrators, *extra):
    capsys.readouterr()
    rc = main(["metrics", str(path), "--json", "--fit-split", "fit", "--eval-split", "test", "--calibrators",
               ",".join(calibrators), "--device", "cpu", "--quiet", *extra])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def _assert_rows_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for key in w:
            a, b = g[key], w[key]
            if isinstance(b, float) and isinstance(a, (int, float)):
                assert a == pytest.approx(b, rel=1e-12, abs=1e-12), key
            else:
                assert a == b, key          # None (JSON null) equal, strings, ints and the nonfinite dict


@pytest.mark.parametrize("num_classes", [10, None])
def test_cifar10_equals_the_file_path_and_the_logits(cifar, tmp_path, capsys, num_classes):
    test, fit = cifar["toplabel"]
    path = tmp_path / "top.h5"
    write_toplabel(path, "model", "data", {"fit": fit, "test": test}, num_classes=num_classes)
    want = _cli_rows(capsys, path, CALIBRATORS, "--n-boot", "20")
    conf, pred, labels = test
    res = cv.evaluate(confidence=conf, predictions=pred, labels=labels, fit=fit, num_classes=num_classes,
                      calibrators=CALIBRATORS, n_boot=20, device="cpu")
    assert [r["calibrator"] for r in res.rows] == CALIBRATORS
    _assert_rows_equal(res.rows, want)
    assert all(r["ece_lo"] is not None for r in res.rows)      # the intervals were compared too
    for r in res.rows:
        assert all(r[m] is None for m in FULL_VECTOR), r["calibrator"]

    logits = cv.evaluate(*cifar["logits"][0], calibrators=["none"], n_boot=0, device="cpu").rows[0]
    none = res.rows[0]
    assert none["ece"] == pytest.approx(logits["ece"], rel=1e-12, abs=1e-12)
    # a top-label calibrator maps the confidence and keeps the prediction: every row has the logits' accuracy
    for r in res.rows:
        assert r["accuracy"] == pytest.approx(logits["accuracy"], rel=1e-12, abs=1e-12)
    # the accuracy by a plain count, and the top-label ECE by a loop over 15 equal-width bins
    assert logits["accuracy"] == pytest.approx(float(np.mean(pred == labels)), abs=1e-12)
    ece = 0.0
    for b in range(15):
        lo, hi = b / 15, (b + 1) / 15
        inside = [i for i in range(len(conf)) if (lo < conf[i] <= hi) or (b == 0 and conf[i] == 0.0)]
        if inside:
            ece += len(inside) / len(conf) * abs(np.mean(pred[inside] == labels[inside]) - np.mean(conf[inside]))
    assert none["ece"] == pytest.approx(ece, abs=1e-9)


def test_torch_float32_vectors_equal_numpy(cifar):
    test, fit = cifar["toplabel"]
    a = cv.evaluate(confidence=test[0], predictions=test[1], labels=test[2], fit=fit, calibrators=["none", "hb"],
                    num_classes=10, n_boot=0, device="cpu").rows
    t = [torch.from_numpy(v) for v in test]
    b = cv.evaluate(confidence=t[0], predictions=t[1], labels=t[2], fit=tuple(torch.from_numpy(v) for v in fit),
                    calibrators=["none", "hb"], num_classes=10, n_boot=0, device="cpu").rows
    _assert_rows_equal(b, a)


def test_logit_calibrators_are_skipped_with_the_cli_note(cifar, caplog):
    test, fit = cifar["toplabel"]
    with caplog.at_level(logging.WARNING, logger="calibview"):
        res = cv.evaluate(confidence=test[0], predictions=test[1], labels=test[2], fit=fit,
                          calibrators=["none", "ts", "ir", "vs"], options={"ts": {}}, n_boot=0, device="cpu")
    assert [r["calibrator"] for r in res.rows] == ["none", "ir"]
    assert "run model/data is a top-label run: skipping ts, vs" in caplog.text
    with pytest.raises(CalibviewError, match=r"^ts, dirichlet need logits .*; choose from none, hb, ir, platt, "
                                             r"beta\.$"):
        cv.evaluate(confidence=test[0], predictions=test[1], labels=test[2], fit=fit,
                    calibrators=["ts", "dirichlet"], n_boot=0)


def _toy(n=50, k=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.3, 1.0, n), rng.integers(0, k, n), rng.integers(0, k, n)


def _one_sentence(excinfo):
    msg = str(excinfo.value)
    assert msg.endswith(".") and "\n" not in msg and "Traceback" not in msg
    assert ". " not in msg[:-1], msg
    return msg


@pytest.mark.parametrize("change, pattern", [
    (lambda c, p, y: (np.where(np.arange(len(c)) == 7, np.nan, c), p, y),
     r"^calibview\.evaluate: 1 of 50 confidences in confidence are NaN or outside \[0, 1\] \(for example nan at "
     r"row 7\)"),
    (lambda c, p, y: (np.where(np.arange(len(c)) == 3, np.inf, c), p, y), r"confidences in confidence are NaN or "
                                                                       r"outside \[0, 1\] \(for example inf at row 3"),
    (lambda c, p, y: (c + 0.5, p, y), r"confidences in confidence are NaN or outside \[0, 1\]"),
    (lambda c, p, y: (c, p + 4, y), r"^calibview\.evaluate: 50 of 50 predictions in predictions are outside "
                                    r"\[0, 4\)"),
    (lambda c, p, y: (c, p, y - 5), r"labels in labels are outside \[0, 4\)"),
    (lambda c, p, y: (c, p.astype(np.float64), y), r"^calibview\.evaluate: predictions has dtype float64 but "
                                                   r"predictions must be integer class indices"),
    (lambda c, p, y: ((c > 0.5).astype(np.int64), p, y), r"confidence has dtype int64 but the confidence must be "
                                                         r"floating point"),
    (lambda c, p, y: (c, p[:-1], y), r"^calibview\.evaluate: confidence, predictions and labels have different "
                                     r"lengths \(confidence 50, predictions 49, labels 50\)"),
    (lambda c, p, y: (c[:, None], p, y), r"^calibview\.evaluate: confidence has shape \(50, 1\) but confidence must "
                                         r"be 1-D"),
    (lambda c, p, y: (c[:0], p[:0], y[:0]), r"confidence is empty \(N = 0\)"),
])
def test_bad_vectors_one_sentence(change, pattern):
    c, p, y = change(*_toy())
    with pytest.raises(CalibviewError, match=pattern) as e:
        cv.evaluate(confidence=c, predictions=p, labels=y, num_classes=4, n_boot=0)
    _one_sentence(e)


def test_unknown_k_needs_only_nonnegative_classes():
    c, p, y = _toy()
    res = cv.evaluate(confidence=c, predictions=p + 10, labels=y + 10, n_boot=0, device="cpu")
    assert res.rows[0]["accuracy"] == pytest.approx(float(np.mean(p == y)), abs=1e-12)
    with pytest.raises(CalibviewError, match=r"labels in labels are outside \[0, inf\)"):
        cv.evaluate(confidence=c, predictions=p, labels=y - 1, n_boot=0)


def test_bad_fit_vectors_are_named_as_given():
    c, p, y = _toy()
    with pytest.raises(CalibviewError, match=r"^calibview\.evaluate: 50 of 50 predictions in fit\[1\] are outside"):
        cv.evaluate(confidence=c, predictions=p, labels=y, fit=(c, p + 4, y), num_classes=4, calibrators=["hb"],
                    n_boot=0)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(scores=np.zeros((50, 4))), r"^Give either scores \(logits or probabilities, with labels\) or confidence "
                                     r"and predictions \(a top-label run, with labels\), not both\.$"),
    (dict(members=np.zeros((2, 50, 4))), r"^members are \(M, N, K\) logits, which a top-label run does not have"),
    (dict(probs=True), r"^probs=True describes scores, but a top-label run's confidence is already"),
    (dict(predictions=None), r"^calibview\.evaluate: predictions is missing; a top-label run needs confidence, "
                             r"predictions and labels, one value per sample\.$"),
    (dict(labels=None), r"labels is missing; a top-label run needs"),
    (dict(fit=(np.zeros(5), np.zeros(5, int))), r"^fit must be a \(confidence, predictions, labels\) triple for a "
                                                r"top-label run: the arrays the calibrators are fitted on\.$"),
    (dict(fit=(np.zeros(5), None, np.zeros(5, int))), r"^calibview\.evaluate: fit\[1\] is missing; fit of a "
                                                      r"top-label run is a \(confidence, predictions, labels\) "
                                                      r"triple"),
    (dict(calibrators=["hb"]), r"^Calibrators other than 'none' \(hb\) need fit=\(confidence, predictions, "
                               r"labels\), the held-out vectors they are fitted on\.$"),
    (dict(num_classes=1), r"^calibview\.evaluate: num_classes must be one integer >= 2 \(the number of classes K\) "
                          r"but is 1\.$"),
    (dict(num_classes=4, class_names=["a", "b", "c"]), r"3 class names were given but num_classes is 4\.$"),
])
def test_mixed_or_missing_arguments_one_sentence(kwargs, pattern):
    c, p, y = _toy()
    args = dict(confidence=c, predictions=p, labels=y, n_boot=0)
    args.update(kwargs)
    with pytest.raises(CalibviewError, match=pattern) as e:
        cv.evaluate(**args)
    _one_sentence(e)


def test_num_classes_with_logits_is_refused():
    z = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(CalibviewError, match=r"^num_classes is for a top-label run \(confidence=, predictions=, "
                                             r"labels=\); scores give K as their number of columns\.$"):
        cv.evaluate(z, np.zeros(20, int), num_classes=3, n_boot=0)


def test_a_top_label_fit_applies_to_confidences_as_sklearn_does(cifar):
    """``result.calibrators["ir"]`` of a top-label run maps confidences as scikit-learn's isotonic regression of
    correctness on the fit split's confidence does, and refuses logits in one sentence; a logit fit refuses
    confidences."""
    from sklearn.isotonic import IsotonicRegression

    (conf, pred, y), (fconf, fpred, fy) = cifar["toplabel"]
    res = cv.evaluate(confidence=conf, predictions=pred, labels=y, fit=(fconf, fpred, fy), num_classes=10,
                      calibrators=["none", "ir"], n_boot=0)
    ir = res.calibrators["ir"]
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(fconf, (fpred == fy).astype(float))
    np.testing.assert_allclose(ir.predict_confidence(conf), iso.predict(conf), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(res.calibrators["none"].predict_confidence(conf), conf)
    with pytest.raises(CalibviewError, match="predict_confidence"):
        ir.predict_proba(cifar["logits"][0][0])
    logit_ir = cv.evaluate(*cifar["logits"][0], fit=cifar["logits"][1], calibrators=["ir"], n_boot=0).calibrators["ir"]
    with pytest.raises(CalibviewError, match="predict_proba"):
        logit_ir.predict_confidence(conf)
