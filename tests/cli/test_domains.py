"""Domains: `--eval-split test,deploy` evaluates the same fitted calibrators on several splits."""

import csv
import json

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.reports.contrasts import domain_columns
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.stats.metrics import METRIC_NAMES


def domains_file(path, n=600, k=5, seed=0):
    """val and test from one domain; deploy label-shifted (class 0 dominant) and sharper: over-confident."""
    rng = np.random.default_rng(seed)
    from calibview.core.io.writer import write_run

    for split, scale, prior in (("val", 2.0, None), ("test", 2.0, None), ("deploy", 3.5, [0.6] + [0.1] * 4)):
        y = rng.choice(k, size=n, p=prior)
        z = rng.normal(size=(n, k))
        z[np.arange(n), y] += 1.2
        write_run(path, "net", "toy", split, logits=(scale * z).astype(np.float32), labels=y)
    return path


@pytest.fixture(scope="module")
def dfile(tmp_path_factory):
    return domains_file(tmp_path_factory.mktemp("dom") / "domains.h5")


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_rows_equal_separate_single_split_runs(dfile, capsys):
    base = ["metrics", str(dfile), "--calibrators", "none,ts,hb", "--n-boot", "50", "--json", "--quiet"]
    both = _json(capsys, base + ["--eval-split", "test,deploy"])
    assert [(r["eval_split"], r["calibrator"]) for r in both] == [
        (s, c) for s in ("test", "deploy") for c in ("none", "ts", "hb")]
    assert all(r["split"] == r["eval_split"] and r["fit_split"] in ("val", "") for r in both)
    for split in ("test", "deploy"):
        alone = _json(capsys, base + ["--eval-split", split])
        mine = [r for r in both if r["eval_split"] == split]
        assert len(alone) == len(mine) == 3
        for a, b in zip(alone, mine):
            assert a["calibrator"] == b["calibrator"]
            for m in METRIC_NAMES:
                for key in (m, f"{m}_lo", f"{m}_hi"):
                    if a[key] is None:                # absent (K > 2's log CORP) or no interval (p-values)
                        assert b[key] is None, key
                        continue
                    assert b[key] == pytest.approx(a[key], abs=1e-12, rel=0), (split, a["calibrator"], key)


def test_the_command_line_fits_once_for_every_domain(dfile):
    from calibview.cli.options import evaluate_all
    from calibview.cli.program import build_parser

    args = build_parser().parse_args(["metrics", str(dfile), "--calibrators", "none,ts,hb", "--eval-split",
                                      "test,deploy,val", "--fit-split", "val", "--bandwidth", "0.05,0.1",
                                      "--n-boot", "10", "--quiet"])
    evs = evaluate_all(args)
    assert len(evs) == 3 * 2                                   # splits x settings
    # the settings of one split share one request's counters: count each request once
    per_request = [ev.counters for ev in evs if ev.request.bandwidth == 0.05]
    assert [f for c in per_request for f in c.fitted] == ["ts", "hb"]          # one fit each, for everything
    assert [r for c in per_request for r in c.reused] == ["ts", "hb"] * 2


def test_the_engine_fits_once_for_every_domain(dfile):
    engine = Engine()
    evs = [engine.evaluate(EvalRequest(file=str(dfile), run="net/toy", eval_split=s, calibrators=("none", "ts", "hb"),
                                       n_boot=20, device="cpu")) for s in ("test", "deploy")]
    assert evs[0].counters.fitted == ("ts", "hb") and evs[0].counters.reused == ()
    assert evs[1].counters.fitted == () and evs[1].counters.reused == ("ts", "hb")
    assert [s for _, s in evs[1].counters.scored] == ["deploy"] * 3
    assert evs[0].result("ts").fitted is evs[1].result("ts").fitted


def test_report_writes_domains_csv(dfile, tmp_path, caplog):
    out = tmp_path / "rep"
    assert main(["report", str(dfile), "--calibrators", "none,ts", "--eval-split", "test,deploy", "--n-boot", "100",
                 "--out", str(out), "--quiet", "--no-diagram"]) == 0
    with open(out / "domains.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == domain_columns()
        rows = list(reader)
    for m in ("ece", "accuracy", "nll"):
        assert {f"{m}", f"{m}_lo", f"{m}_hi", f"delta_{m}", f"delta_{m}_lo", f"delta_{m}_hi"} <= set(rows[0])
    assert [(r["calibrator"], r["eval_split"]) for r in rows] == [
        ("none", "test"), ("none", "deploy"), ("ts", "test"), ("ts", "deploy")]
    assert all(r["reference_split"] == "test" for r in rows)
    with open(out / "metrics.csv", newline="") as f:
        metrics = {(r["calibrator"], r["eval_split"]): r for r in csv.DictReader(f)}
    for r in rows:
        mine, ref = metrics[(r["calibrator"], r["eval_split"])], metrics[(r["calibrator"], "test")]
        assert r["ece"] == mine["ece"] and r["n"] == mine["n"]
        if r["eval_split"] == "test":
            assert float(r["delta_ece"]) == 0.0 and r["delta_ece_lo"] == ""
        else:
            delta = float(mine["ece"]) - float(ref["ece"])
            assert float(r["delta_ece"]) == pytest.approx(delta, abs=1e-15)
            lo, hi = float(r["delta_ece_lo"]), float(r["delta_ece_hi"])
            assert lo <= hi and lo < delta + 0.05 and hi > delta - 0.05
    # the deployment split is over-confident: its ECE rises and the interval of the rise excludes 0
    deploy_none = next(r for r in rows if r["calibrator"] == "none" and r["eval_split"] == "deploy")
    assert float(deploy_none["delta_ece_lo"]) > 0
    # one calibrators.json entry per fitted calibrator, not one per domain
    cals = json.loads((out / "calibrators.json").read_text())
    assert [c["calibrator"] for c in cals] == ["none", "ts"]


def test_no_domains_csv_for_a_single_split(dfile, tmp_path):
    out = tmp_path / "one"
    assert main(["report", str(dfile), "--calibrators", "none,ts", "--n-boot", "0", "--out", str(out), "--quiet",
                 "--no-diagram"]) == 0
    assert not (out / "domains.csv").exists()


def test_warns_once_per_calibrator_evaluated_on_its_fit_split(dfile, capsys):
    assert main(["metrics", str(dfile), "--calibrators", "none,ts,hb", "--eval-split", "val,deploy",
                 "--fit-split", "val", "--n-boot", "0", "--json"]) == 0
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if line.startswith("calibview: warning: ")]
    assert len(warnings) == 2 and all("same split (val)" in w and "in-sample" in w for w in warnings), err
    assert "ts was fitted" in warnings[0] and "hb was fitted" in warnings[1]


def test_default_fit_split_is_not_an_evaluated_one(dfile, capsys):
    rows = _json(capsys, ["metrics", str(dfile), "--calibrators", "none,ts", "--eval-split", "deploy,test",
                          "--n-boot", "0", "--json", "--quiet"])
    assert {r["fit_split"] for r in rows if r["calibrator"] == "ts"} == {"val"}
    assert [r["eval_split"] for r in rows] == ["deploy", "deploy", "test", "test"]


def test_a_missing_split_is_refused_before_any_work(dfile, tmp_path, capsys):
    out = tmp_path / "no"
    assert main(["report", str(dfile), "--eval-split", "test,shadow", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "shadow" in err and "not found" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.qt               # diagram.png is drawn by the window's canvas
def test_report_draws_one_diagram_per_split(dfile, tmp_path):
    out = tmp_path / "dia"
    assert main(["report", str(dfile), "--calibrators", "none,ts", "--eval-split", "test,deploy", "--n-boot", "0",
                 "--out", str(out), "--quiet"]) == 0
    assert {p.name for p in out.glob("diagram*.png")} == {"diagram_test.png", "diagram_deploy.png"}


def test_slices_per_domain(tmp_path, capsys):
    """`slices --eval-split test,deploy`: the records of each split (the table says which)."""
    from calibview.core.io.writer import write_run

    rng = np.random.default_rng(1)
    path = tmp_path / "m.h5"
    for split in ("val", "test", "deploy"):
        y = rng.integers(0, 3, 300)
        write_run(path, "m", "d", split, logits=rng.normal(size=(300, 3)).astype(np.float32), labels=y,
                  meta={"site": rng.choice(["a", "b"], 300)})
    rows = _json(capsys, ["slices", str(path), "--by", "site", "--calibrators", "none,ts", "--eval-split",
                          "test,deploy", "--n-boot", "0", "--json", "--quiet"])
    assert [(r["split"], r["calibrator"], r["slice"]) for r in rows] == [
        (s, c, x) for s in ("test", "deploy") for c in ("none", "ts") for x in (None, "a", "b")]
    assert main(["slices", str(path), "--by", "site", "--eval-split", "test,deploy", "--n-boot", "0",
                 "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["run", "split"] and {ln.split()[1] for ln in lines[1:]} == {"test", "deploy"}
