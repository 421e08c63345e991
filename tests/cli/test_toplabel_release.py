"""A release of a top-label run (with K given and unknown): the per-class thresholds are those a brute-force
scan finds on scikit-learn's isotonic calibration of the fit split's confidences, ``check`` passes on the
released data, ``drift`` refits on its halves and its new config passes too, ``apply`` takes the config, and a
logit calibrator is refused in one sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calibview.cli.program import main
from calibview.core.io.toplabel.write import from_scores, write_toplabel

P = 0.98


@pytest.fixture(scope="module")
def cifar(shared_data):
    d = np.load(shared_data / "mukhoti_brier_cifar10_resnet110.npz")
    return {s: (*from_scores(d[f"logits_{s}"]), d[f"labels_{s}"].astype(np.int64)) for s in ("val", "test")}


def _brute_thresholds(conf, pred, labels, k):
    out = []
    for c in range(k):
        sel = pred == c
        found = None
        for t in np.unique(conf[sel]):                   # ascending: the first that reaches P is the smallest
            keep = sel & (conf >= t)
            if np.mean(labels[keep] == c) >= P - 1e-12:
                found = float(t)
                break
        out.append(found)
    return out


@pytest.mark.parametrize("num_classes", [10, None])
def test_release_check_drift_apply(cifar, tmp_path, capsys, num_classes):
    path = tmp_path / "top.h5"
    write_toplabel(path, "top", "cifar10", cifar, num_classes=num_classes)
    rel = tmp_path / "rel"
    assert main(["release", str(path), "--run", "top/cifar10", "--calibrator", "ir", "--fit-split", "val",
                 "--eval-split", "test", "--target-precision", str(P), "--n-boot", "50", "-o", str(rel),
                 "--no-diagram", "--quiet"]) == 0
    config = json.loads((rel / "inference_config.json").read_text())
    assert config["calibrator"]["form"] == "top-label" and config["class_names"] == [str(i) for i in range(10)]
    conf, pred, y = cifar["val"]
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(conf, (pred == y).astype(float))
    want = _brute_thresholds(iso.predict(conf), pred, y, 10)
    got = config["thresholds"]["per_class"]
    assert [g is None for g in got] == [w is None for w in want]
    np.testing.assert_allclose([g for g in got if g is not None], [w for w in want if w is not None], atol=1e-9)
    assert config["metrics"]["nll"] is None and config["metrics"]["ece"] is not None

    capsys.readouterr()
    assert main(["check", str(rel / "inference_config.json"), str(path), "--split", "test", "--n-boot", "50"]) == 0
    assert "PASS: every criterion passes." in capsys.readouterr().out
    new = tmp_path / "new"
    main(["drift", str(rel / "inference_config.json"), str(path), "--run", "top/cifar10", "--split", "test",
          "--n-boot", "50", "--refit-out", str(new), "--quiet"])
    assert (new / "inference_config.json").exists()
    capsys.readouterr()
    assert main(["check", str(new / "inference_config.json"), str(path), "--split", "test", "--n-boot", "50"]) == 0
    out = tmp_path / "applied.h5"
    assert main(["apply", str(rel / "inference_config.json"), str(path), "--run", "top/cifar10", "--split", "test",
                 "-o", str(out)]) == 0


def test_a_logit_calibrator_is_refused(cifar, tmp_path, capsys):
    path = tmp_path / "top.h5"
    write_toplabel(path, "top", "cifar10", cifar)
    capsys.readouterr()
    assert main(["release", str(path), "--run", "top/cifar10", "--calibrator", "ts", "--eval-split", "test",
                 "-o", str(tmp_path / "rel")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "top-label run" in err and "use hb, ir, platt or beta" in err, err
    assert not (tmp_path / "rel").exists()
