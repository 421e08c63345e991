"""report's selective.csv, audit.csv and thresholds.csv and the new metric keys, checked against numpy on the
demo's stored logits (uncalibrated rows) and scipy's Wilson interval."""

import csv
import json

import numpy as np
import pytest
from scipy.stats import binomtest

from calibview.cli import main
from calibview.core.io.discovery import find_run
from calibview.core.io.logits import read_split
from calibview.core.stats.metrics import METRIC_NAMES

RUN = "resnet110-brier/cifar10"
NEW = ("aurc", "e_aurc", "acc_at_cov80", "acc_at_cov90", "acc_at_cov95", "cov_at_acc95", "cov_at_acc99", "auroc",
       "auroc_correct")


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _conf_correct(demo_file, split):
    data = read_split(str(demo_file), find_run(str(demo_file), RUN), split)
    z = np.asarray(data.scores, dtype=np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return p.max(1), (p.argmax(1) == data.labels).astype(float), p.argmax(1), p


@pytest.fixture(scope="module")
def report(tmp_path_factory, demo_file):
    out = tmp_path_factory.mktemp("selective")
    rc = main(["report", str(demo_file), "--run", RUN, "--calibrators", "none,ts", "--n-boot", "50", "--out",
               str(out), "--no-diagram", "--quiet", "--audit", "0.5,0.95,0.999", "--target-precision", "0.99"])
    assert rc == 0
    return out


def test_selective_csv_points_lie_on_the_curve(report, demo_file):
    rows = [r for r in _read(report / "selective.csv") if r["calibrator"] == "none"]
    conf, correct, _, _ = _conf_correct(demo_file, "test")
    assert 100 < len(rows) <= 1001
    assert float(rows[-1]["coverage"]) == 1.0
    for r in rows[::37] + rows[-1:]:
        m = conf >= float(r["threshold"]) - 1e-12      # numpy softmax vs the engine: last bit
        assert int(r["n_accepted"]) == m.sum()
        assert float(r["coverage"]) == pytest.approx(m.mean(), abs=1e-12)
        assert float(r["risk"]) == pytest.approx(1 - correct[m].mean(), abs=1e-9)


def test_audit_csv_against_masks_and_scipy(report, demo_file):
    rows = [r for r in _read(report / "audit.csv") if r["calibrator"] == "none"]
    conf, correct, _, _ = _conf_correct(demo_file, "test")
    assert [float(r["threshold"]) for r in rows] == [0.5, 0.95, 0.999]
    for r in rows:
        m = conf >= float(r["threshold"])
        assert int(r["n"]) == m.sum()
        if not m.any():
            assert r["accuracy"] == "" and r["flagged"] == "false"
            continue
        ci = binomtest(int(correct[m].sum()), int(m.sum())).proportion_ci(0.95, method="wilson")
        assert float(r["accuracy_lo"]) == pytest.approx(ci.low, abs=1e-9)
        assert float(r["accuracy_hi"]) == pytest.approx(ci.high, abs=1e-9)
        assert float(r["mean_conf"]) == pytest.approx(conf[m].mean(), abs=1e-9)
        assert (r["flagged"] == "true") == (not ci.low <= conf[m].mean() <= ci.high)


def test_thresholds_csv_against_a_scan(report, demo_file):
    rows = [r for r in _read(report / "thresholds.csv") if r["calibrator"] == "none"]
    conf, correct, pred, _ = _conf_correct(demo_file, "val")
    tconf, tcorrect, tpred, _ = _conf_correct(demo_file, "test")
    assert len(rows) == 10
    for r in rows:
        c = int(r["class"])
        best = None
        for t in np.unique(conf[pred == c]):
            m = (pred == c) & (conf >= t)
            if correct[m].mean() >= 0.99 - 1e-12:
                best = t
                break
        if best is None:
            assert r["threshold"] == ""
            continue
        assert float(r["threshold"]) == pytest.approx(best, abs=1e-12)
        m = (tpred == c) & (tconf >= float(r["threshold"]) - 1e-12)
        assert int(r["eval_n_accepted"]) == m.sum()
        if m.any():
            assert float(r["eval_precision"]) == pytest.approx(tcorrect[m].mean(), abs=1e-12)
        assert float(r["eval_coverage"]) == pytest.approx(m.sum() / (tpred == c).sum(), abs=1e-12)


def test_metrics_carry_the_new_columns_with_intervals(report, demo_file):
    from sklearn.metrics import roc_auc_score

    rows = _read(report / "metrics.csv")
    header = list(rows[0])
    assert header.index("sharpness_gap_hi") < header.index("aurc")       # appended: old positions unchanged
    at = METRIC_NAMES.index("aurc")                                       # a block after the first columns
    assert list(METRIC_NAMES[at:at + len(NEW)]) == list(NEW) and at == METRIC_NAMES.index("sharpness_gap") + 1
    none = next(r for r in rows if r["calibrator"] == "none")
    for m in NEW:
        assert float(none[m + "_lo"]) <= float(none[m + "_hi"]), m       # cifar10: within the AUROC budget
    _, _, _, p = _conf_correct(demo_file, "test")
    data = read_split(str(demo_file), find_run(str(demo_file), RUN), "test")
    ref = roc_auc_score(data.labels, p, multi_class="ovr", average="macro")
    assert float(none["auroc"]) == pytest.approx(ref, abs=1e-9)


def test_metrics_json_has_the_new_keys(capsys, demo_file):
    assert main(["metrics", str(demo_file), "--run", RUN, "--calibrators", "none", "--n-boot", "0", "--json",
                 "--quiet"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    for m in NEW:
        assert m in rec and f"{m}_lo" in rec and f"{m}_hi" in rec


@pytest.mark.parametrize("args, fragment", [(["--audit", "0.9,x"], "--audit"), (["--audit", "1.5"], "[0, 1]"),
                                            (["--target-precision", "0"], "--target-precision")])
def test_bad_selective_options_are_user_errors(tmp_path, demo_file, capsys, args, fragment):
    rc = main(["report", str(demo_file), "--run", RUN, "--out", str(tmp_path / "o"), "--quiet", *args])
    assert rc == 2 and fragment in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
