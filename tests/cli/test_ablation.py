"""Ablations from the command line (lists of bins, bandwidths and kernels), the settings every row carries, JSON
without non-finite numbers, ranking.csv, the one-line log of what the engine did, and requests refused before
any work."""

import csv
import json
import re

import pytest

from calibview.cli import main
from calibview.core.reports.tables import SETTING_COLUMNS

RUN = "resnet110-brier/cifar10"
LOG = re.compile(r"^calibview: evaluated (\S+) fit=(\S+) eval=(\S+): fitted (\d+), reused (\d+), scored (\d+), "
                 r"(\d+\.\d\d) s$")


def _json(capsys, *args):
    capsys.readouterr()
    assert main(["metrics", "--run", RUN, "--json", "--quiet", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_ablation_gives_one_row_per_calibrator_and_setting_equal_to_separate_runs(capsys):
    common = ["--calibrators", "none,ts,hb", "--n-boot", "50"]
    rows = _json(capsys, *common, "--bins", "10,20", "--bandwidth", "0.03,0.1", "--kernel",
                 "gaussian,epanechnikov")
    assert len(rows) == 3 * 2 * 2 * 2
    assert [r["calibrator"] for r in rows[:8]] == ["none"] * 8        # run x calibrator x setting
    for b in (10, 20):
        for h in (0.03, 0.1):
            for k in ("gaussian", "epanechnikov"):
                single = _json(capsys, *common, "--bins", str(b), "--bandwidth", str(h), "--kernel", k)
                mine = [r for r in rows if (r["bins"], r["bandwidth"], r["kernel"]) == (b, h, k)]
                assert len(mine) == 3
                for a, s in zip(mine, single):
                    assert a.keys() == s.keys()
                    for key, v in a.items():
                        if isinstance(v, float):
                            assert v == pytest.approx(s[key], abs=1e-12, rel=0), (b, h, k, key)
                        else:
                            assert v == s[key], key


def test_every_record_carries_its_settings_and_json_has_no_non_finite_number(capsys):
    rows = _json(capsys, "--calibrators", "none,hb", "--n-boot", "20", "--seed", "3", "--level", "0.9",
                 "--option", "hb.bins=10")
    for key in SETTING_COLUMNS + ("split", "nonfinite"):
        assert key in rows[0], key
    none, hb = rows
    assert (none["fit_split"], none["eval_split"], none["split"], none["n"], none["k"]) == ("val", "test", "test",
                                                                                         10000, 10)
    assert (hb["bins"], hb["bandwidth"], hb["kernel"], hb["n_boot"], hb["seed"], hb["level"]) == \
        (15, 0.05, "gaussian", 20, 3, 0.9)
    assert json.loads(hb["options"]) == {"bins": 10} and none["options"] == "{}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", hb["calibview_version"])
    # histogram binning gives some true classes probability 0: NLL is infinite, and says so
    assert hb["nll"] is None and hb["nonfinite"]["nll"] == "inf"
    assert none["nonfinite"] == {} and isinstance(none["nll"], float)


def test_report_writes_ranking_csv_and_says_when_the_ranking_changes(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["report", "--run", "resnet110-brier/cifar100", "--calibrators", "none,ts,hb", "--n-boot", "0",
                 "--bandwidth", "0.05,0.1", "--out", str(out), "--no-diagram"]) == 0
    err = capsys.readouterr().err
    with open(out / "ranking.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 3
    by = {(r["bandwidth"], r["calibrator"]): r for r in rows}
    # CAL on the CIFAR-100 demo: hb beats none at bandwidth 0.1 but not at 0.05 (computed independently here)
    for h in ("0.05", "0.1"):
        cal = {c: float(by[(h, c)]["cal"]) for c in ("none", "ts", "hb")}
        order = sorted(cal, key=cal.get)
        assert [int(by[(h, c)]["rank_cal"]) for c in order] == [1, 2, 3]
    if by[("0.05", "hb")]["rank_cal"] != by[("0.1", "hb")]["rank_cal"]:
        assert "the ranking by cal changes across settings" in err
        assert all("cal" in r["note"] for r in rows)
    with open(out / "curves.csv", newline="") as f:
        pairs = {(r["bandwidth"], r["kernel"]) for r in csv.DictReader(f)}
    assert pairs == {("0.05", "gaussian"), ("0.1", "gaussian")}


def test_log_level_info_prints_one_line_per_request_in_the_documented_format(capsys):
    assert main(["metrics", "--run", RUN, "--calibrators", "none,ts", "--n-boot", "10", "--bins", "10,15",
                 "--log-level", "info"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("calibview: evaluated")]
    assert len(lines) == 1
    m = LOG.match(lines[0])
    assert m, lines[0]
    assert m.groups()[:6] == (RUN, "val", "test", "1", "0", "2")


def test_quiet_and_default_levels_print_no_log_line(capsys):
    assert main(["metrics", "--run", RUN, "--calibrators", "none", "--n-boot", "0"]) == 0
    assert "evaluated" not in capsys.readouterr().err


@pytest.mark.parametrize("args, words", [
    (["--bandwidth", "0.05,0.0003"], "bandwidth 0.0003"),
    (["--bandwidth", "0.05,abc"], "--bandwidth takes a number"),
    (["--kernel", "gaussian,box"], "Unknown kernel 'box'"),
    (["--bins", "10,zero"], "bins must be a positive integer"),
    (["--seed", "-1"], "seed must be 0 or more"),
])
def test_a_bad_setting_is_refused_before_any_work(tmp_path, capsys, args, words):
    out = tmp_path / "never"
    assert main(["report", "--run", RUN, "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert not out.exists()
