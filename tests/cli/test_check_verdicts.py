"""check's three outcomes: a criterion passes when its whole interval is within the limit, fails when the whole
interval is beyond it, and is inconclusive otherwise; exit 0 only when every criterion passes. ``--decide-on point``
compares the point estimate, as check did before intervals decided."""

import json

import numpy as np
import pytest
import torch

from _release_data import ece_direct
from _verdict_data import N_DEPLOY, RUN, write_small
from calibview.cli import main
from calibview.core.io.logits import read_split
from calibview.core.release import config as rel

OPTS = ["--n-boot", "200", "--device", "cpu", "--quiet"]
LOOSE = ["--max-class-ece", "1", "--max-high-conf-gap", "1"]        # only the ECE criterion can decide


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_small(tmp_path_factory.mktemp("small") / "small.h5")


@pytest.fixture(scope="module")
def config(small, tmp_path_factory):
    out = tmp_path_factory.mktemp("rel") / "rel"
    assert main(["release", small, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "-o", str(out),
                 *OPTS]) == 0
    return str(out / "inference_config.json")


def _rows(capsys):
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def ece_row(small, config):
    """The ECE row of the checklist, read with a limit no interval reaches."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["check", config, small, "--json", "--max-ece", "1", *LOOSE, *OPTS]) == 0
    return json.loads(buf.getvalue())[0]


def test_the_split_is_small_and_its_ece_is_the_direct_one(small, config, ece_row):
    fitted = rel.calibrator_of(rel.load_config(config))
    d = read_split(small, RUN, "deploy")
    p = fitted.apply(torch.from_numpy(np.asarray(d.scores))).exp().numpy()
    assert len(d.labels) == N_DEPLOY
    assert ece_row["value"] == pytest.approx(ece_direct(p, d.labels), abs=1e-12)
    # the premise: the point estimate is within the default 3 % limit, its interval is not
    assert ece_row["value"] <= 0.03 and ece_row["lo"] < 0.03 < ece_row["hi"]


def test_an_interval_straddling_the_default_limit_is_inconclusive_and_exits_1(small, config, ece_row, capsys):
    assert main(["check", config, small, *LOOSE, *OPTS]) == 1
    out = capsys.readouterr().out
    ece_line = next(line for line in out.splitlines() if line.startswith("ECE on deploy"))
    assert ece_line.split()[-1] == "inconclusive"
    assert f"[{ece_row['lo']:.4f}, {ece_row['hi']:.4f}]" in ece_line         # the interval is shown
    last = out.strip().splitlines()[-1]
    assert last.startswith("INCONCLUSIVE: 1 of 10 criteria inconclusive")
    assert "ECE on deploy (15 bins)" in last and f"N={N_DEPLOY} too small to decide" in last
    assert main(["check", config, small, "--json", *LOOSE, *OPTS]) == 1
    rows = _rows(capsys)
    assert rows[0]["outcome"] == "inconclusive" and rows[0]["passed"] is False
    assert rows[0]["decided_on"] == "interval"
    assert all(r["outcome"] == "pass" for r in rows[1:])


def test_pass_and_fail_by_interval(small, config, ece_row, capsys):
    lo, hi, value = ece_row["lo"], ece_row["hi"], ece_row["value"]
    assert main(["check", config, small, "--max-ece", f"{hi + 1e-4}", *LOOSE, *OPTS]) == 0
    assert capsys.readouterr().out.strip().endswith("PASS: every criterion passes.")
    below = min(lo, value) - 1e-4
    assert main(["check", config, small, "--max-ece", f"{below}", *LOOSE, *OPTS]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "FAIL: 1 of 10 criteria fail: ECE on deploy (15 bins)."
    # just inside either end: the interval still straddles
    for limit in (lo + 1e-4, hi - 1e-4):
        assert main(["check", config, small, "--max-ece", f"{limit}", "--json", *LOOSE, *OPTS]) == 1
        assert _rows(capsys)[0]["outcome"] == "inconclusive"


def test_decide_on_point_gives_the_point_estimates_verdict(small, config, ece_row, capsys):
    """Before intervals decided, check compared the point estimate: pass at the default 3 % limit here."""
    assert main(["check", config, small, "--decide-on", "point", *LOOSE, *OPTS]) == 0
    out = capsys.readouterr().out
    assert "PASS: every criterion passes." in out and "inconclusive" not in out
    value = ece_row["value"]
    assert main(["check", config, small, "--decide-on", "point", "--max-ece", f"{value - 1e-4}", *LOOSE,
                 *OPTS]) == 1
    assert "FAIL: 1 of 10 criteria fail" in capsys.readouterr().out
    # every bounded row, at the default limits: passed exactly when value <= limit
    assert main(["check", config, small, "--decide-on", "point", "--json", *OPTS]) in (0, 1)
    for r in _rows(capsys)[:3]:
        if r["value"] is not None:
            assert r["passed"] is (r["value"] <= r["limit"]) and r["decided_on"] == "point"


def test_use_bound_upper_keeps_its_two_outcomes(small, config, ece_row, capsys):
    assert main(["check", config, small, "--use-bound", "upper", "--json", *LOOSE, *OPTS]) == 1
    row = _rows(capsys)[0]
    assert row["outcome"] == "fail" and row["decided_on"] == "upper"


def test_without_an_interval_the_point_decides_and_says_so(small, config, ece_row, capsys):
    assert main(["check", config, small, "--n-boot", "0", *LOOSE, "--device", "cpu", "--quiet"]) == 0
    out = capsys.readouterr().out
    ece_line = next(line for line in out.splitlines() if line.startswith("ECE on deploy"))
    assert ece_line.endswith("pass (point)")
    assert "note: ECE on deploy (15 bins): n_boot 0: decided on the point estimate" in out
    assert main(["check", config, small, "--n-boot", "0", "--json", *LOOSE, "--device", "cpu", "--quiet"]) == 0
    row = _rows(capsys)[0]
    assert row["decided_on"] == "point" and row["lo"] is None and "decided on the point estimate" in row["note"]


def test_bad_decide_on_is_bad_input(small, config, capsys):
    with pytest.raises(SystemExit) as e:
        main(["check", config, small, "--decide-on", "median", *OPTS])
    assert e.value.code == 2


def test_release_reports_the_inconclusive_criterion(small, tmp_path, capsys):
    out = tmp_path / "rel"
    assert main(["release", small, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "-o", str(out),
                 *OPTS]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("checklist"))
    assert line.startswith(f"checklist (default limits): inconclusive (N={N_DEPLOY} too small to decide): ECE on")
    html = (out / "report.html").read_text()
    assert '<span class="inconclusive">inconclusive: N too small to decide</span>' in html
    point = tmp_path / "point"
    assert main(["release", small, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "--decide-on", "point",
                 "-o", str(point), *OPTS]) == 0
    assert "inconclusive: N too small" not in (point / "report.html").read_text()
