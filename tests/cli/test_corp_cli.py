"""The bandwidth-free columns on the command line: ``metrics --json`` prints them (with p_skce_method), the
identities hold in the printed numbers, and ranking.csv's note says when the CORP MCB and CAL rankings differ."""

import csv
import json
import math

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.io.writer import write_run
from calibview.core.reports.tables import _views_differ
from calibview.core.stats.corp.parts import CORP_METRICS, REFINEMENT_METRICS

NEW = CORP_METRICS + ("p_ece", "p_skce") + REFINEMENT_METRICS


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "small.h5"
    rng = np.random.default_rng(4)
    for split, n in (("val", 600), ("test", 900)):
        y = rng.integers(0, 2, n)
        z = rng.normal(size=(n, 2))
        z[np.arange(n), y] += 1.2
        write_run(path, "net", "bin", split, logits=(2.0 * z).astype(np.float32), labels=y)
    return path


def test_metrics_json_prints_the_new_columns(small, capsys):
    assert main(["metrics", str(small), "--calibrators", "none,ts,hb", "--n-boot", "50", "--json", "--quiet",
                 "--device", "cpu"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["calibrator"] for r in rows] == ["none", "ts", "hb"]
    for r in rows:
        for m in NEW:
            assert isinstance(r[m], float), (r["calibrator"], m)
        assert r["corp_mcb"] - r["corp_dsc"] + r["corp_unc"] == pytest.approx(r["brier_top"], abs=1e-12)
        assert r["corp_mcb_log"] - r["corp_dsc_log"] + r["corp_unc_log"] == pytest.approx(r["nll"], abs=1e-12)
        assert r["nll_calibration"] == pytest.approx(r["nll"] - r["nll_refinement"], abs=1e-12)
        assert r["p_skce_method"] == "quadratic" and r["p_ece"] >= 1 / 51
        assert r["p_ece_lo"] is None and r["p_skce_hi"] is None                 # p-values: no interval
        assert r["corp_mcb_lo"] <= r["corp_mcb_hi"] and r["nll_refinement_lo"] <= r["nll_refinement_hi"]
    # twice overconfident: temperature scaling on the split itself would remove a visible part of the NLL
    assert rows[0]["nll_calibration"] > 5 * rows[1]["nll_calibration"]


def test_without_resamples_the_p_values_are_null(small, capsys):
    assert main(["metrics", str(small), "--calibrators", "none", "--n-boot", "0", "--json", "--quiet",
                 "--device", "cpu"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["p_ece"] is None and row["p_skce"] is None and row["p_skce_method"] is None
    assert isinstance(row["corp_mcb"], float) and isinstance(row["nll_refinement"], float)


def test_the_views_differ_when_two_calibrators_swap_and_not_on_ties():
    names = ("none", "ts", "hb")
    values = {"corp_mcb": {"none": 0.03, "ts": 0.01, "hb": 0.02}, "cal": {"none": 0.03, "ts": 0.02, "hb": 0.01}}
    ranks = {"corp_mcb": {"none": 3, "ts": 1, "hb": 2}, "cal": {"none": 3, "ts": 2, "hb": 1}}
    assert _views_differ(values, ranks) == ("the CORP MCB ranking (ts < hb < none) differs from the CAL ranking "
                                            "(hb < ts < none)")
    same = {"corp_mcb": ranks["corp_mcb"], "cal": dict(ranks["corp_mcb"])}
    assert _views_differ(values, same) == ""
    tied = {"corp_mcb": ranks["corp_mcb"], "cal": {n: 1 for n in names}}
    assert _views_differ(values, tied) == ""
    values["cal"]["hb"] = math.nan
    assert _views_differ(values, ranks) == ""


def test_ranking_csv_ranks_by_corp_mcb_and_notes_a_disagreement_with_cal(small, tmp_path):
    out = tmp_path / "r"
    assert main(["report", str(small), "--calibrators", "none,ts,hb,ir", "--n-boot", "0", "--out", str(out),
                 "--no-diagram", "--quiet", "--device", "cpu"]) == 0
    with open(out / "ranking.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    mcb = {r["calibrator"]: float(r["corp_mcb"]) for r in rows}
    cal = {r["calibrator"]: float(r["cal"]) for r in rows}
    by_rank = {r["calibrator"]: int(r["rank_corp_mcb"]) for r in rows}
    assert sorted(by_rank, key=by_rank.get) == sorted(mcb, key=mcb.get)
    swapped = any((mcb[a] - mcb[b]) * (cal[a] - cal[b]) < 0 for a in mcb for b in mcb)
    assert all(("differs from the CAL ranking" in r["note"]) == swapped for r in rows)
