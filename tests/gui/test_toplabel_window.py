"""A top-label run in the window: the metrics that need every class probability read "n/a (top-label run)",
never 0 or nan, and the others are those of the command line."""

import csv

import numpy as np
import pytest

pytestmark = pytest.mark.window(n_boot=0)
WAIT_MS = 120_000


def test_toplabel_run_shows_na_for_full_vector_metrics(qtbot, window, tmp_path):
    from calibview.cli import main
    from calibview.core.evaluation.engine import evaluate
    from calibview.core.evaluation.request import EvalRequest
    from calibview.core.evaluation.toplabel.absent import ABSENT_TEXT, FULL_VECTOR_METRICS

    rng = np.random.default_rng(2)
    table = tmp_path / "preds.csv"
    with open(table, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["split", "true_label", "pred_label", "confidence"])
        for split, n in (("val", 800), ("test", 1200)):
            conf = rng.uniform(0.3, 1.0, n)
            pred = rng.integers(0, 10, n)
            right = rng.random(n) < conf ** 1.5                # over-confident
            label = np.where(right, pred, (pred + 1 + rng.integers(0, 9, n)) % 10)
            w.writerows([split, int(y), int(p), float(c)] for y, p, c in zip(label, pred, conf))
    out = tmp_path / "top.h5"
    assert main(["import", str(table), "-o", str(out), "--model", "zoo", "--dataset", "toy", "--num-classes",
                 "10", "--quiet"]) == 0
    window.open_files([out])
    qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None, timeout=WAIT_MS)
    model = window.table.metrics_model
    ev = window.session.evaluation
    cols = {model.metric_of(c): c for c in range(model.columnCount()) if model.metric_of(c)}
    for m in FULL_VECTOR_METRICS:
        if m in cols:
            assert model.data(model.index(0, cols[m])) == ABSENT_TEXT, m
    ref = evaluate(EvalRequest(file=str(out), run="zoo/toy", calibrators=("none",), n_boot=0))
    shown = model.data(model.index(0, cols["ece"]))
    assert ev.result("none").metrics["ece"].value == pytest.approx(ref.result("none").metrics["ece"].value)
    assert shown and shown != ABSENT_TEXT


def test_legend_names_the_top_label_brier(qtbot, window, tmp_path):
    """The diagram's loss is the top-label Brier term (confidence - correct)^2 on a top-label run, and the legend
    and an exported panel's title say so; on a logit run they say Brier."""
    from _toplabel_data import write_mixed

    path = tmp_path / "both.h5"
    splits = write_mixed(path, seed=4, k=4, sizes={"val": 600, "test": 600}, shift=1.5)
    window.open_files([path])
    for run, loss in (("top/toy", "top-label Brier"), ("logit/toy", "Brier")):
        window.session.select_run(str(path), run)
        qtbot.waitUntil(lambda: not window.session.busy and window.session.evaluation is not None
                        and window.session.evaluation.run.name == run, timeout=WAIT_MS)
        ev = window.session.evaluation
        # the top-label run's TOT is the mean of (confidence - correct)^2, computed here from the arrays
        if run == "top/toy":
            conf, pred, y = splits["test"]
            tot = float(np.mean((conf - (pred == y)) ** 2))
            assert ev.result("none").metrics["tot"].value == pytest.approx(tot, abs=1e-12)
        qtbot.waitUntil(lambda: f"TOT = {loss}, any h" in window.canvas.legend_box.textItem.toHtml(),
                        timeout=WAIT_MS)
        legend = window.canvas.legend_box.textItem.toHtml()
        assert ("top-label Brier" in legend) == (loss == "top-label Brier")
