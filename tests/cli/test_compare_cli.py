"""`calibview report --compare A,B [--reference B]` on the bundled demo (two losses of ResNet-110 on the same
CIFAR-10 test set): compare.csv's metric columns are those of a plain metrics run of each model, its deltas are the
differences to the reference, and runs on other samples are refused before any work."""

import csv
import json

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.reports.contrasts import compare_columns
from calibview.core.evaluation.toplabel.absent import BINARY_METRICS
from calibview.core.stats.metrics import METRIC_NAMES

BRIER, FLSD, C100 = "resnet110-brier/cifar10", "resnet110-flsd53/cifar10", "resnet110-brier/cifar100"
COMMON = ["--calibrators", "none,ts", "--n-boot", "60", "--quiet"]


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp")
    assert main(["report", "--compare", f"{BRIER},{FLSD}", "--reference", FLSD, *COMMON, "--no-diagram",
                 "--out", str(out)]) == 0
    with open(out / "compare.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == compare_columns()
        return out, list(reader)


def _number(text):
    return float("nan") if text == "" else float(text)


def test_metric_columns_equal_a_plain_metrics_run_of_each_model(compared, capsys):
    _, rows = compared
    assert [(r["model"], r["calibrator"]) for r in rows] == [
        ("resnet110-brier", "none"), ("resnet110-brier", "ts"), ("resnet110-flsd53", "none"), ("resnet110-flsd53", "ts")]
    for run in (BRIER, FLSD):
        assert main(["metrics", "--run", run, *COMMON, "--json"]) == 0
        plain = {r["calibrator"]: r for r in json.loads(capsys.readouterr().out)}
        for row in rows:
            if f"{row['model']}/{row['dataset']}" != run:
                continue
            want = plain[row["calibrator"]]
            for m in METRIC_NAMES:
                for col in (m, f"{m}_lo", f"{m}_hi"):
                    w = want[col] if want[col] is not None else float(want["nonfinite"].get(col, "nan"))
                    assert _number(row[col]) == pytest.approx(w, abs=1e-12, nan_ok=True), (run, col)


def test_deltas_are_differences_to_the_reference_and_marks_follow_the_intervals(compared):
    _, rows = compared
    by = {(f"{r['model']}/{r['dataset']}", r["calibrator"]): r for r in rows}
    assert all(r["reference"] == FLSD for r in rows)
    marked = 0
    for cal in ("none", "ts"):
        ref, other = by[(FLSD, cal)], by[(BRIER, cal)]
        for m in METRIC_NAMES:
            if m in BINARY_METRICS:                   # K = 10: absent, empty, no difference
                assert ref[m] == other[f"delta_{m}"] == ""
                continue
            assert float(ref[f"delta_{m}"]) == 0.0 and ref[f"delta_{m}_lo"] == "" and ref[f"significant_{m}"] == ""
            delta = _number(other[f"delta_{m}"])
            assert delta == pytest.approx(_number(other[m]) - _number(ref[m]), abs=1e-15, nan_ok=True), m
            lo, hi = _number(other[f"delta_{m}_lo"]), _number(other[f"delta_{m}_hi"])
            if np.isfinite(lo):
                assert lo <= hi and other[f"significant_{m}"] == ("true" if lo > 0 or hi < 0 else "false"), m
                marked += other[f"significant_{m}"] == "true"
            else:
                assert other[f"significant_{m}"] == "", m
    # uncalibrated, the Brier-loss model is the worse calibrated of the two (ECE 2.6 % against 1.9 %)
    assert _number(by[(BRIER, "none")]["delta_ece_lo"]) > 0 and by[(BRIER, "none")]["significant_ece"] == "true"
    assert marked >= 1


def test_the_report_says_which_differences_are_significant(tmp_path, capsys):
    assert main(["report", "--compare", f"{BRIER},{FLSD}", "--calibrators", "none", "--n-boot", "40", "--quiet",
                 "--no-diagram", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{FLSD} vs {BRIER} [none]: significant differences in" in out and "compare.csv" in out


@pytest.mark.parametrize("argv, words", [
    (["--compare", f"{BRIER},{C100}"], "paired differences need the same samples"),
    (["--compare", f"{BRIER},{FLSD}", "--reference", C100], "is not among the compared runs"),
    (["--compare", f"{BRIER},{FLSD}", "--run", BRIER], "leave out --run"),
    (["--compare", f"{BRIER},{FLSD}", "--bins", "10,15"], "one bins"),
    (["--compare", BRIER], "at least two runs"),
    (["--reference", BRIER], "give --compare too"),
])
def test_what_cannot_be_compared_is_refused_before_any_work(tmp_path, capsys, argv, words):
    out = tmp_path / "never"
    assert main(["report", *argv, "--n-boot", "10", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and not out.exists()


@pytest.mark.qt
def test_the_report_draws_the_comparison_as_a_panel_per_calibrator(tmp_path):
    from PySide6 import QtGui

    assert main(["report", "--compare", f"{BRIER},{FLSD}", "--calibrators", "none,ts", "--n-boot", "30",
                 "--quiet", "--out", str(tmp_path), "--format", "png,pdf", "--figure-width", "3.5in",
                 "--dpi", "200"]) == 0
    img = QtGui.QImage(str(tmp_path / "compare.png"))
    assert img.width() == 700 and "reference resnet110-brier/cifar10" in img.text("Title")
    assert (tmp_path / "compare.pdf").read_bytes().startswith(b"%PDF")
