"""Top-label runs on the command line: ``runs`` names their form, ``metrics --json`` leaves the full-vector
metrics null, and calibrators that need logits are skipped on them with a note (exit 0) in a file that holds both
kinds of run."""

from __future__ import annotations

import json

from calibview.cli.program import main
from _toplabel_data import write_mixed


def _mixed(tmp_path):
    path = tmp_path / "mixed.h5"
    write_mixed(path, seed=0, k=3, sizes={"val": 400, "test": 400}, shift=1.5)
    return path


def test_runs_lists_the_form(tmp_path, capsys):
    assert main(["runs", str(_mixed(tmp_path))]) == 0
    lines = capsys.readouterr().out.splitlines()
    top = next(line for line in lines if line.startswith("top/toy"))
    assert "K=?" in top and "top-label" in top
    assert "logits" in next(line for line in lines if line.startswith("logit/toy"))


def test_logit_calibrators_are_skipped_with_a_note(tmp_path, capsys):
    path = _mixed(tmp_path)
    capsys.readouterr()
    assert main(["metrics", str(path), "--calibrators", "none,ts,ir,platt", "--n-boot", "0", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    by_run = {}
    for r in rows:
        by_run.setdefault(r["model"], []).append(r["calibrator"])
    assert by_run["top"] == ["none", "ir", "platt"]
    assert by_run["logit"] == ["none", "ts", "ir"]          # platt: binary only, as before
    assert "run top/toy is a top-label run: skipping ts" in captured.err, captured.err
    for r in rows:
        if r["model"] == "top":
            assert r["nll"] is None and r["brier"] is None and r["classwise_ece"] is None and r["auroc"] is None
            assert r["ece"] is not None and "nll" not in r["nonfinite"]
        else:
            assert r["brier"] is not None and r["classwise_ece"] is not None


def test_metrics_table_says_n_a(tmp_path, capsys):
    assert main(["metrics", str(_mixed(tmp_path)), "--run", "top/toy", "--calibrators", "none", "--n-boot", "0",
                 "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "n/a" in out[1] and "nan" not in out[1]
