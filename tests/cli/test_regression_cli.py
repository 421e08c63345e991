"""Regression runs on the command line: runs, metrics --json, report's metrics.csv, regression.csv and
calibrators.json on a file with both kinds, and import from .npz."""

from __future__ import annotations

import csv
import json

import h5py
import numpy as np

from calibview.cli.program import main
from calibview.core.reports.tables import metric_columns
from _regression_data import write_runs


def _mixed(tmp_path):
    path = tmp_path / "mixed.h5"
    write_runs(path, n_fit=200, n_eval=300)
    rng = np.random.default_rng(0)
    with h5py.File(path, "a") as f:
        for split in ("val", "test"):
            g = f.create_group(f"cls/toy/{split}")
            g["logits"] = rng.normal(size=(200, 3)).astype("f4")
            g["labels"] = rng.integers(0, 3, 200)
    return path


def test_runs_lists_the_regression_runs_with_their_form(tmp_path, capsys):
    assert main(["runs", str(_mixed(tmp_path))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cls/toy\tK=3")
    assert "gp/toy\tregression: var\ttest (N=300), val (N=200)" in out
    assert "qr/toy\tregression: quantiles (Q=19)\ttest (N=300), val (N=200)" in out


def test_metrics_json_has_both_kinds_with_the_other_kinds_columns_empty(tmp_path, capsys):
    path = _mixed(tmp_path)
    rc = main(["metrics", str(path), "--json", "--n-boot", "20", "--calibrators", "none,ts,var-scaling,isotonic-pit"])
    captured = capsys.readouterr()
    assert rc == 0
    rows = json.loads(captured.out)
    kinds = {(r["model"], r["calibrator"]) for r in rows}
    assert kinds == {("cls", "none"), ("cls", "ts"), ("gp", "none"), ("gp", "var-scaling"), ("gp", "isotonic-pit"),
                     ("qr", "none"), ("qr", "isotonic-pit")}
    assert len({tuple(r) for r in rows}) == 1                       # one set of keys for every row
    for r in rows:
        if r["model"] == "cls":
            assert r["ece"] is not None and r["rmse"] is None and r["k"] == 3
        else:
            assert r["ece"] is None and r["rmse"] is not None and r["k"] is None
            assert r["cal"] is not None and r["coverage_90_lo"] <= r["coverage_90"] <= r["coverage_90_hi"]
    qr = next(r for r in rows if r["model"] == "qr" and r["calibrator"] == "none")
    assert qr["nll_gaussian"] is None and qr["nonfinite"]["nll_gaussian"] == "nan" and qr["pinball"] > 0
    assert "skipping ts" in captured.err and "skipping var-scaling" in captured.err


def test_report_writes_regression_csv_and_the_rows(tmp_path, capsys):
    path, out = _mixed(tmp_path), tmp_path / "rep"
    assert main(["report", str(path), "--out", str(out), "--n-boot", "20", "--no-diagram",
                 "--calibrators", "none,ts,var-scaling"]) == 0
    with open(out / "metrics.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        cols = reader.fieldnames
    assert set(metric_columns()) < set(cols) and "rmse" in cols and "ence_hi" in cols
    assert cols.index("auroc_correct_hi") < cols.index("rmse") < cols.index("fit_split")
    gp = [r for r in rows if r["model"] == "gp"]
    assert [r["calibrator"] for r in gp] == ["none", "var-scaling"] and gp[0]["accuracy"] == "" and gp[0]["k"] == ""
    with open(out / "regression.csv", newline="") as f:
        cov = list(csv.DictReader(f))
    assert list(cov[0]) == ["model", "dataset", "split", "calibrator", "level", "nominal", "observed", "lo", "hi"]
    assert len([r for r in cov if r["model"] == "gp" and r["calibrator"] == "none"]) == 100
    records = json.loads((out / "calibrators.json").read_text())
    scaled = next(r for r in records if r.get("run") == "gp/toy" and r["calibrator"] == "var-scaling")
    assert scaled["kind"] == "regression" and scaled["params"]["s"] > 1


def test_import_npz_regression_keys(tmp_path, capsys):
    rng = np.random.default_rng(0)
    src, out = tmp_path / "preds.npz", tmp_path / "out.h5"
    np.savez(src, mean_val=rng.normal(size=30), targets_val=rng.normal(size=30), var_val=np.ones(30),
             mean_test=rng.normal(size=40), targets_test=rng.normal(size=40), var_test=np.ones(40))
    assert main(["import", str(src), "-o", str(out), "--model", "br", "--dataset", "diab"]) == 0
    assert "br/diab regression: var" in capsys.readouterr().out
    assert main(["runs", str(out)]) == 0
    # the splits in the .npz's order, as an import of logits keeps them
    assert "br/diab\tregression: var\tval (N=30), test (N=40)" in capsys.readouterr().out
    np.savez(src, mean=np.zeros(5), targets=np.zeros(5), var=-np.ones(5))
    assert main(["import", str(src), "-o", str(tmp_path / "bad.h5")]) == 2
    assert "zero or negative" in capsys.readouterr().err and not (tmp_path / "bad.h5").exists()


def test_report_draws_regression_png_per_run(tmp_path):
    """One figure per regression run (four panels a recalibrator), none without Qt's figures (--no-diagram)."""
    import pytest

    pytest.importorskip("pyqtgraph")
    from PySide6 import QtGui

    path = tmp_path / "reg.h5"
    write_runs(path)
    assert main(["report", str(path), "--out", str(tmp_path / "r"), "--n-boot", "20", "--quiet"]) == 0
    for run in ("gp_toy", "qr_toy"):
        png = tmp_path / "r" / f"regression_{run}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = QtGui.QImage(str(png))
        rows = 3 if run == "gp_toy" else 2            # none, var-scaling, isotonic-pit; quantiles: no var-scaling
        assert img.width() == 3000 and img.height() == 600 * rows
    assert main(["report", str(path), "--out", str(tmp_path / "q"), "--n-boot", "0", "--no-diagram",
                 "--quiet"]) == 0
    assert not list((tmp_path / "q").glob("regression*.png"))


def test_report_writes_the_regression_figure_in_every_figure_format(tmp_path):
    """With the figure options (--layout grid --format pdf,svg) each regression run's figure comes in each format,
    a recalibrator a row at the figure's width, and no regression.png beside them."""
    import pytest

    pytest.importorskip("pyqtgraph")
    path = tmp_path / "reg.h5"
    write_runs(path)
    out = tmp_path / "r"
    assert main(["report", str(path), "--out", str(out), "--n-boot", "20", "--layout", "grid", "--format",
                 "pdf,svg", "--figure-width", "6in", "--quiet"]) == 0
    for run in ("gp_toy", "qr_toy"):
        pdf = (out / f"regression_{run}.pdf").read_bytes()
        assert pdf[:5] == b"%PDF-" and len(pdf) > 10_000
        svg = (out / f"regression_{run}.svg").read_text()
        assert "<svg" in svg and "<path" in svg
    assert not list(out.glob("regression*.png"))
    assert not [p for p in out.rglob("*") if p.name.startswith(".") or p.suffix in (".tmp", ".part")]
