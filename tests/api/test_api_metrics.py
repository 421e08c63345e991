"""The metric functions of the Python API against independent sources (scikit-learn, netcal, relplot, numpy loops)
on real CIFAR logits, and against the engine's values for the same arrays."""

import csv
import io

import numpy as np
import pytest
import relplot
import torch
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

import calibview as cv
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.reports.tables import curves_csv

DEMO = cv.demo_path()
RUNS = ["resnet110-brier/cifar10", "resnet110-flsd53/cifar10", "resnet110-brier/cifar100"]


def _split(run, split="test"):
    d = read_split(DEMO, run, split)
    return d.scores, d.labels


def _probs64(z):
    return torch.softmax(torch.from_numpy(np.asarray(z, np.float64)), dim=1).numpy()


# ------------------------------------------------------------------------------------ independent sources
@pytest.mark.parametrize("run", RUNS)
def test_scores_equal_scikit_learn_netcal_and_relplot_on_real_cifar(run):
    from netcal.metrics import ECE

    z, y = _split(run)
    p = _probs64(z)
    k = p.shape[1]
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(np.float64)
    assert cv.accuracy(p, y) == correct.mean()
    assert cv.nll(logits=z, labels=y) == pytest.approx(log_loss(y, p, labels=np.arange(k)), rel=1e-10)
    assert cv.brier(logits=z, labels=y) == pytest.approx(brier_score_loss(y, p, labels=np.arange(k)), rel=1e-10)
    assert cv.ece(logits=z, labels=y) == pytest.approx(ECE(bins=15).measure(p, y), abs=1e-9)
    assert cv.smece(logits=z, labels=y) == pytest.approx(relplot.smECE(conf, correct), abs=1e-9)
    assert cv.auroc(logits=z, labels=y) == pytest.approx(
        roc_auc_score(y, p, multi_class="ovr", average="macro"), abs=1e-12)
    # probabilities instead of logits: the same numbers up to the float64 rounding of log(softmax)
    assert cv.ece(p, y) == pytest.approx(cv.ece(logits=z, labels=y), abs=1e-12)
    assert cv.nll(p, y) == pytest.approx(log_loss(y, p, labels=np.arange(k)), rel=1e-10)


def _binned_loop(conf, correct, bins):
    """ECE, MCE, RMSCE by a loop over equal-width bins lo < conf <= hi (0 in the first bin)."""
    edges = np.linspace(0, 1, bins + 1)
    ece = mce = sq = 0.0
    for b in range(bins):
        inside = (conf > edges[b]) & (conf <= edges[b + 1]) | ((b == 0) & (conf == 0))
        if inside.any():
            gap = abs(correct[inside].mean() - conf[inside].mean())
            ece += inside.mean() * gap
            sq += inside.mean() * gap * gap
            mce = max(mce, gap)
    return ece, mce, np.sqrt(sq)


def _equal_mass_loop(conf, correct, bins):
    order = np.argsort(conf, kind="stable")
    ace = deb = 0.0
    for idx in np.array_split(order, bins):
        f, yb, w = conf[idx].mean(), correct[idx].mean(), len(idx) / len(conf)
        ace += w * abs(yb - f)
        deb += w * ((f - yb) ** 2 - yb * (1 - yb) / (len(idx) - 1))
    return ace, np.sqrt(max(deb, 0.0))


@pytest.mark.parametrize("bins", [10, 15])
def test_binned_errors_equal_numpy_loops(bins):
    z, y = _split("resnet110-flsd53/cifar10")
    p = _probs64(z)
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(np.float64)
    ece, mce, rmsce = _binned_loop(conf, correct, bins)
    assert cv.ece(p, y, bins=bins) == pytest.approx(ece, abs=1e-12)
    assert cv.mce(p, y, bins=bins) == pytest.approx(mce, abs=1e-12)
    assert cv.rmsce(p, y, bins=bins) == pytest.approx(rmsce, abs=1e-12)
    ace, deb = _equal_mass_loop(conf, correct, bins)
    assert cv.ace(p, y, bins=bins) == pytest.approx(ace, abs=1e-12)
    assert cv.ece(p, y, bins=bins, strategy="quantile") == cv.ace(p, y, bins=bins)
    assert cv.debiased_ece(p, y, bins=bins) == pytest.approx(deb, abs=1e-12)
    per_class = [_binned_loop(p[:, c], (y == c).astype(np.float64), bins)[0] for c in range(p.shape[1])]
    mean, values = cv.classwise_ece(p, y, bins=bins, per_class=True)
    np.testing.assert_allclose(values, per_class, atol=1e-12)
    assert mean == pytest.approx(np.mean(per_class), abs=1e-12)


def test_reliability_table_by_hand():
    # two bins: top-label confidences 0.4 (wrong), 0.5 (right) in [0, 0.5]; 0.8 (right), 1.0 (wrong) in (0.5, 1]
    probs = np.array([[0.4, 0.3, 0.3], [0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [0.0, 0.0, 1.0]])
    labels = np.array([1, 0, 1, 0])
    t = cv.reliability(probs, labels, bins=2)
    np.testing.assert_array_equal(t.edges, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(t.count, [2, 2])
    np.testing.assert_allclose(t.confidence, [0.45, 0.9], rtol=1e-14)
    np.testing.assert_allclose(t.accuracy, [0.5, 0.5])
    # Wilson 95 %: 1 of 2, z = 1.96
    zq = 1.959963984540054
    centre = (0.5 + zq * zq / 4) / (1 + zq * zq / 2)
    half = zq * np.sqrt(0.25 / 2 + zq * zq / 16) / (1 + zq * zq / 2)
    np.testing.assert_allclose(t.wilson_lo, centre - half)
    np.testing.assert_allclose(t.wilson_hi, centre + half)
    assert t.n == 4 and set(t.to_dict()) == {"bin_lo", "bin_hi", "count", "confidence", "accuracy", "wilson_lo",
                                             "wilson_hi"}


# ------------------------------------------------------------------------------------ the engine's values
@pytest.fixture(scope="module")
def engine_run():
    run = "resnet110-brier/cifar100"
    ev = evaluate(EvalRequest(str(DEMO), run, calibrators=("none",), n_boot=0, device="cpu"))
    return _split(run), ev


def test_every_metric_equals_the_engine(engine_run):
    (z, y), ev = engine_run
    ref = {k: v.value for k, v in ev.results[0].metrics.items()}
    ct = cv.cal_tot(logits=z, labels=y)
    ours = {"accuracy": cv.accuracy(logits=z, labels=y), "nll": cv.nll(logits=z, labels=y),
            "brier": cv.brier(logits=z, labels=y), "ece": cv.ece(logits=z, labels=y),
            "mce": cv.mce(logits=z, labels=y), "rmsce": cv.rmsce(logits=z, labels=y),
            "ace": cv.ace(logits=z, labels=y), "classwise_ece": cv.classwise_ece(logits=z, labels=y),
            "debiased_ece": cv.debiased_ece(logits=z, labels=y), "smece": cv.smece(logits=z, labels=y),
            "cal": ct.cal, "tot": ct.tot, "sharpness_gap": ct.sharpness_gap,
            "aurc": cv.aurc(logits=z, labels=y), "auroc": cv.auroc(logits=z, labels=y)}
    assert ours == {k: ref[k] for k in ours}
    assert cv.smece(logits=z, labels=y, return_width=True)[1] == ev.results[0].smece_sigma


def test_reliability_and_sharpness_curve_equal_the_engine_and_curves_csv(engine_run):
    (z, y), ev = engine_run
    r = ev.results[0]
    t = cv.reliability(logits=z, labels=y)
    np.testing.assert_array_equal(t.count, r.bins.count)
    np.testing.assert_array_equal(t.edges, np.linspace(0, 1, 16))
    np.testing.assert_array_equal(t.accuracy, r.bins.accuracy)
    np.testing.assert_array_equal(t.confidence, r.bins.confidence)
    np.testing.assert_array_equal(t.wilson_lo, r.bin_acc_lo)
    np.testing.assert_array_equal(t.wilson_hi, r.bin_acc_hi)
    c = cv.sharpness_curve(logits=z, labels=y)
    ref = r.curve(0.05, "gaussian")
    assert c.x.shape == (4096,)
    for name in ("x", "curve", "band_lo", "band_hi", "density", "valid"):
        np.testing.assert_array_equal(getattr(c, name), getattr(ref, name))
    rows = list(csv.DictReader(io.StringIO(curves_csv([ev]))))
    first = c.x.shape[0] - len(rows)                     # curves.csv starts at 1/K
    assert c.x[first] >= 1 / 100 > c.x[first - 1]
    for i, row in enumerate(rows):
        j = first + i
        assert float(row["x"]) == c.x[j] and float(row["density"]) == c.density[j]
        for name in ("curve", "band_lo", "band_hi"):
            assert (row[name] == "") if not c.valid[j] else float(row[name]) == getattr(c, name)[j]
    other = cv.sharpness_curve(logits=z, labels=y, bandwidth=0.1, kernel="epanechnikov")
    np.testing.assert_array_equal(other.curve, r.curve(0.1, "epanechnikov").curve)


def test_probabilities_equal_the_engine_on_a_probabilities_file(tmp_path):
    z, y = _split("resnet110-brier/cifar10")
    p = _probs64(z)
    write_run(tmp_path / "p.h5", "m", "d", "test", probs=p, labels=y)
    ev = evaluate(EvalRequest(str(tmp_path / "p.h5"), "m/d", calibrators=("none",), fit_split=None, n_boot=0,
                              device="cpu"))
    ref = ev.results[0].metrics
    assert cv.ece(p, y) == ref["ece"].value
    assert cv.nll(p, y) == ref["nll"].value
    assert cv.classwise_ece(p, y) == ref["classwise_ece"].value
    assert cv.auroc(p, y) == ref["auroc"].value


# ------------------------------------------------------------------------------------ input forms
def test_numpy_torch_and_half_precision_inputs_agree():
    z, y = _split("resnet110-brier/cifar10")
    ref = cv.ece(logits=z, labels=y)
    assert cv.ece(logits=torch.from_numpy(z).requires_grad_(), labels=torch.from_numpy(y)) == ref
    assert cv.ece(logits=z, labels=y.astype(np.int32)) == ref
    half = z.astype(np.float16)
    assert cv.ece(logits=half, labels=y) == cv.ece(logits=half.astype(np.float32), labels=y)
    assert cv.ece(logits=torch.from_numpy(z).to(torch.bfloat16), labels=y) == \
        cv.ece(logits=torch.from_numpy(z).to(torch.bfloat16).float(), labels=y)


def test_binary_one_dimensional_inputs():
    rng = np.random.default_rng(0)
    s = rng.normal(size=3000) * 2
    y = rng.random(3000) < 1 / (1 + np.exp(-1.5 * s))
    p1 = 1 / (1 + np.exp(-s))
    two = np.column_stack([1 - p1, p1])
    assert cv.ece(p1, y) == cv.ece(two, y.astype(int))
    assert cv.brier(p1, y) == pytest.approx(2 * brier_score_loss(y, p1), rel=1e-12)
    assert cv.auroc(p1, y) == pytest.approx(roc_auc_score(y, p1), abs=1e-12)
    assert cv.ece(logits=s, labels=y) == cv.ece(logits=np.column_stack([np.zeros_like(s), s]), labels=y)
    assert cv.nll(logits=s, labels=y) == pytest.approx(log_loss(y, p1), rel=1e-10)


def test_bins_auto_and_cal_tot_settings():
    z, y = _split("resnet110-brier/cifar10")
    assert cv.ece(logits=z, labels=y, bins="auto") == cv.ece(logits=z, labels=y, bins=15)     # N = 10,000
    a, b = cv.cal_tot(logits=z, labels=y, bandwidth=0.1, kernel="epanechnikov")
    assert b == cv.brier(logits=z, labels=y) and a != cv.cal_tot(logits=z, labels=y).cal


_Z = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
_P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
_Y = np.array([0, 2])


@pytest.mark.parametrize("call,words", [
    (lambda: cv.ece(_P, _Y, logits=_Z), "not both"),
    (lambda: cv.ece(labels=_Y), "probabilities"),
    (lambda: cv.ece(_P[None], _Y), "shape (1, 2, 3)"),
    (lambda: cv.ece(_P[:, :1], _Y), "K = 1"),
    (lambda: cv.ece(np.zeros((0, 3)), np.zeros(0, int)), "empty"),
    (lambda: cv.ece(np.array([[np.nan, 0.5, 0.5], [0.1, 0.8, 0.1]]), _Y), "NaN"),
    (lambda: cv.ece(np.array([[1.2, -0.2, 0.0], [0.1, 0.8, 0.1]]), _Y), "negative"),
    (lambda: cv.ece(np.array([[0.5, 0.2, 0.1], [0.1, 0.8, 0.1]]), _Y), "sum to 1"),
    (lambda: cv.ece(np.array([0.5, 1.5]), np.array([0, 1])), "outside [0, 1]"),
    (lambda: cv.ece(logits=np.array([[np.inf, 0.0, 0.0], [0.0, 1.0, 0.0]]), labels=_Y), "NaN or +inf"),
    (lambda: cv.ece(_P, _Y.astype(float)), "integer class indices"),
    (lambda: cv.ece(_P, np.array([0, 3])), "outside [0, 3)"),
    (lambda: cv.ece(_P, np.array([0, 1, 2])), "one label per row"),
    (lambda: cv.ece(_P, np.array(["a", "b"])), "strings"),
    (lambda: cv.ece(_P, _Y, bins=0), "bins"),
    (lambda: cv.ece(_P, _Y, strategy="equal"), "strategy"),
    (lambda: cv.cal_tot(_P, _Y, kernel="box"), "kernel"),
    (lambda: cv.sharpness_curve(_P, _Y, bandwidth=-1), "bandwidth"),
])
def test_bad_input_is_one_sentence(call, words):
    with pytest.raises(CalibviewError) as e:
        call()
    msg = str(e.value)
    assert words in msg and "\n" not in msg and msg.endswith("."), msg
