"""check's p-value limits: --min-p-ece / --min-p-skce fail the release when the calibration test rejects at that
level and pass otherwise; a p-value is never inconclusive, and without resamples there is none (fail, said)."""

import json

import pytest

from _verdict_data import RUN, write_small
from calibview.cli import main

OPTS = ["--n-boot", "200", "--device", "cpu", "--quiet"]
LOOSE = ["--max-ece", "1", "--max-class-ece", "1", "--max-high-conf-gap", "1"]   # only the p-values can decide


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    small = write_small(tmp_path_factory.mktemp("small") / "small.h5")
    out = tmp_path_factory.mktemp("rel") / "rel"
    assert main(["release", small, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "-o", str(out),
                 *OPTS]) == 0
    return small, str(out / "inference_config.json")


def _check(capsys, config, *extra):
    small, cfg = config
    code = main(["check", cfg, small, "--json", *LOOSE, *OPTS, *extra])
    rows = json.loads(capsys.readouterr().out)
    return code, {r["criterion"].split(" p-value")[0]: r for r in rows if "p-value" in r["criterion"]}


def test_p_value_limits_pass_below_the_p_value_and_fail_above_it(config, capsys):
    code, rows = _check(capsys, config, "--min-p-ece", "0", "--min-p-skce", "0")
    assert code == 0 and set(rows) == {"ECE calibration test", "SKCE calibration test"}
    p_ece, p_skce = rows["ECE calibration test"]["value"], rows["SKCE calibration test"]["value"]
    assert 1 / 201 <= p_ece <= 1 and 0 < p_skce <= 1
    assert all(r["outcome"] == "pass" and r["decided_on"] == "point" and r["lo"] is None for r in rows.values())
    # a limit just above the p-value: the test rejects calibration at that level, the release fails (never
    # inconclusive), and each limit decides on its own
    code, rows = _check(capsys, config, "--min-p-ece", str(min(1.0, p_ece * 1.001 + 1e-9)))
    assert code == 1 and list(rows) == ["ECE calibration test"]
    assert rows["ECE calibration test"]["outcome"] == "fail" and "rejects calibration" in \
        rows["ECE calibration test"]["note"]
    code, rows = _check(capsys, config, "--min-p-skce", str(min(1.0, p_skce * 1.001 + 1e-9)))
    assert code == 1 and rows["SKCE calibration test"]["outcome"] == "fail"
    assert "estimator" in json.dumps(rows)


def test_a_p_value_limit_without_resamples_fails_and_says_why(config, capsys):
    small, cfg = config
    code = main(["check", cfg, small, "--json", *LOOSE, "--device", "cpu", "--quiet", "--n-boot", "0",
                 "--min-p-ece", "0.01"])
    rows = [r for r in json.loads(capsys.readouterr().out) if "p-value" in r["criterion"]]
    assert code == 1 and rows[0]["outcome"] == "fail" and "n_boot is 0" in rows[0]["note"]
