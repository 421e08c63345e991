"""A fit that cannot be trusted, end to end: a random forest's predict_proba (exact zeros) imported with
``calibview import``; its warning on stderr and in calibrators.json; ``release`` refuses it (exit 2, one sentence,
nothing written) unless ``--allow-warnings``, and ``check`` fails (exit 1) the config that carries it."""

import csv
import json

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.release import config as rel

RUN = "bc_rf/data"
FAST = ["--n-boot", "0", "--device", "cpu"]


@pytest.fixture(scope="module")
def forest_h5(tmp_path_factory):
    """bc_rf/data: splits fit and deploy of a random forest's probabilities on the breast-cancer data; a fit row
    gives its true class probability exactly 0 (the case that drove T to 1.8e19)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

    x, y = load_breast_cancer(return_X_y=True)
    x_tr, x_rest, y_tr, y_rest = train_test_split(x, y, test_size=0.6, random_state=0, stratify=y)
    x_dep, x_fit, y_dep, y_fit = train_test_split(x_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest)
    rf = RandomForestClassifier(n_estimators=100, random_state=0).fit(x_tr, y_tr)
    p_fit, p_dep = rf.predict_proba(x_fit), rf.predict_proba(x_dep)
    assert (p_fit[np.arange(len(y_fit)), y_fit] == 0).any()
    d = tmp_path_factory.mktemp("forest")
    np.savez(d / "bc_rf.npz", probs_fit=p_fit, labels_fit=y_fit, probs_deploy=p_dep, labels_deploy=y_dep)
    assert main(["import", str(d / "bc_rf.npz"), "-o", str(d / "own.h5")]) == 0
    errors = {"fit": float((p_fit.argmax(1) != y_fit).mean()), "deploy": float((p_dep.argmax(1) != y_dep).mean())}
    return d / "own.h5", int((p_fit == 0).any(axis=1).sum()), len(y_fit), errors


def test_report_warns_on_stderr_and_in_calibrators_json_and_keeps_the_error_rate(forest_h5, tmp_path, capsys):
    h5, zero_rows, n_fit, errors = forest_h5
    out = tmp_path / "r"
    assert main(["report", str(h5), "--run", RUN, "--calibrators", "none,ts,platt", "--fit-split", "fit",
                 "--eval-split", "deploy", "--out", str(out), "--no-diagram", *FAST]) == 0
    err = capsys.readouterr().err
    for name in ("ts", "platt"):
        assert f"warning: {RUN} {name}: {zero_rows} of the {n_fit} fit rows have an exact-zero probability" in err
    records = {r["calibrator"]: r for r in json.loads((out / "calibrators.json").read_text())}
    assert any("exact-zero" in w for w in records["ts"]["warnings"])
    assert 0.01 <= records["ts"]["params"]["temperature"] <= 100 and records["ts"]["argmax_changed"] == 0.0
    rows = {r["calibrator"]: r for r in csv.DictReader((out / "metrics.csv").open())}
    assert 1 - float(rows["ts"]["accuracy"]) == pytest.approx(errors["deploy"], abs=1e-12)


def test_release_refuses_a_warned_fit_unless_allowed_and_check_fails_its_config(forest_h5, tmp_path, capsys):
    h5, *_ = forest_h5
    out = tmp_path / "rel"
    args = ["release", str(h5), "--run", RUN, "--calibrator", "ts", "--fit-split", "fit", "--eval-split", "deploy",
            "--no-diagram", "-o", str(out), *FAST]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("calibview: error: ") and "--allow-warnings" in err[0], err
    assert "exact-zero probability" in err[0] and not out.exists()

    assert main([*args, "--allow-warnings"]) == 0
    captured = capsys.readouterr()
    assert "exact-zero probability" in captured.err               # the warning, not only in the file
    config = rel.load_config(out / "inference_config.json")
    assert any("exact-zero" in w for w in config["calibrator"]["warnings"])

    assert main(["check", str(out / "inference_config.json"), str(h5), "--device", "cpu", "--n-boot", "0"]) == 1
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("calibrator fitted without warnings"))
    assert line.rstrip().endswith("FAIL") and "1 warning(s)" in line
    assert "⚠ the shipped calibrator's fit: " in text and "exact-zero probability" in text
