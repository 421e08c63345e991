"""``calibview conformal``: its records against the sets computed here in numpy, its files, its bad input."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from calibview.cli.program import main
from calibview.core.evaluation.conformal import COLUMNS
from calibview.core.io.writer import write_splits

K = 5


def _split(n: int, seed: int):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, K)) * 1.5
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1).clip(0, K - 1)
    return z.astype(np.float32), y.astype(np.int64)


@pytest.fixture(scope="module")
def h5(tmp_path_factory):
    path = tmp_path_factory.mktemp("conformal") / "runs.h5"
    splits = {name: ("logits", *_split(n, seed)) for name, n, seed in
              (("fit", 400, 1), ("val", 600, 2), ("test", 800, 3), ("tiny", 12, 4))}
    site = {s: np.array(["a", "b"] * (splits[s][1].shape[0] // 2)) for s in splits}
    site["val"][:5] = "c"                          # a group of 5 calibration samples
    site["test"][:3] = "c"
    write_splits(path, "net", "toy", splits, meta={s: {"site": site[s]} for s in splits})
    return str(path)


def _run(args, capsys):
    rc = main(["conformal", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _probs(z):
    z = z.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def test_json_records_have_the_issues_keys_and_the_numbers_of_a_numpy_lac(h5, capsys):
    rc, out, _ = _run([h5, "--run", "net/toy", "--alpha", "0.1,0.05", "--score", "lac,aps", "--n-boot", "100",
                       "--json"], capsys)
    assert rc == 0
    records = json.loads(out)
    assert all(tuple(r) == COLUMNS for r in records)
    zc, yc = _split(600, 2)
    ze, ye = _split(800, 3)
    pc, pe = _probs(zc), _probs(ze)
    for alpha in (0.1, 0.05):
        scores = np.sort(1 - pc[np.arange(600), yc])
        q = scores[math.ceil(601 * (1 - alpha)) - 1]
        sets = (1 - pe) <= q
        rec = next(r for r in records if r["score"] == "lac" and r["alpha"] == alpha and r["group"] == "all")
        assert rec["qhat"] == pytest.approx(q, abs=1e-6)        # the file holds float32 logits
        assert rec["n"] == 800 and rec["coverage"] == pytest.approx(sets[np.arange(800), ye].mean(), abs=2e-3)
        assert rec["mean_set_size"] == pytest.approx(sets.sum(axis=1).mean(), abs=5e-3)
        assert rec["coverage_lo"] <= rec["coverage"] <= rec["coverage_hi"]
        assert rec["empty_frac"] == pytest.approx((sets.sum(axis=1) == 0).mean(), abs=2e-3)
        groups = {r["group"] for r in records if r["score"] == "lac" and r["alpha"] == alpha}
        assert {f"class={c}" for c in range(K)} <= groups and {"site=a", "site=b", "site=c"} <= groups
        by_size = [r for r in records if r["score"] == "lac" and r["alpha"] == alpha
                   and r["group"].startswith("size=")]
        assert sum(r["n"] for r in by_size) == 800
        for r in by_size:
            assert r["mean_set_size"] == int(r["group"][5:])
    # the same seed gives the same intervals
    rc, again, _ = _run([h5, "--run", "net/toy", "--alpha", "0.1,0.05", "--score", "lac,aps", "--n-boot", "100",
                         "--json"], capsys)
    assert again == out


def test_randomised_sets_are_reproducible_with_the_seed(h5, capsys):
    args = [h5, "--run", "net/toy", "--score", "aps,raps", "--randomized", "--n-boot", "0", "--json"]
    first = _run(args + ["--seed", "3"], capsys)[1]
    assert _run(args + ["--seed", "3"], capsys)[1] == first
    assert _run(args + ["--seed", "4"], capsys)[1] != first
    rec = json.loads(first)[0]
    assert rec["coverage_lo"] is None and rec["coverage_hi"] is None       # --n-boot 0: no interval


def test_out_writes_the_csv_with_the_same_columns(h5, tmp_path, capsys):
    rc, out, err = _run([h5, "--run", "net/toy", "--n-boot", "20", "--out", str(tmp_path / "o")], capsys)
    assert rc == 0 and "conformal.csv" in out
    with open(tmp_path / "o" / "conformal.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == COLUMNS and rows[0]["group"] == "all"
    assert {r["score"] for r in rows} == {"lac", "aps", "raps"}


@pytest.mark.qt
def test_out_draws_conformal_png(h5, tmp_path, capsys):
    rc, out, _ = _run([h5, "--run", "net/toy", "--alpha", "0.1,0.2", "--n-boot", "0", "--out", str(tmp_path)],
                      capsys)
    assert rc == 0
    assert (tmp_path / "conformal.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mondrian_by_class_and_by_column(h5, capsys):
    rc, out, err = _run([h5, "--run", "net/toy", "--score", "lac", "--mondrian", "class", "--n-boot", "0",
                         "--json"], capsys)
    assert rc == 0
    records = json.loads(out)
    zc, yc = _split(600, 2)
    pc = _probs(zc)
    for c in range(K):
        s = np.sort(1 - pc[yc == c, c])
        rec = next(r for r in records if r["group"] == f"class={c}")
        assert rec["qhat"] == pytest.approx(s[math.ceil((s.size + 1) * 0.9) - 1], abs=1e-6)
    assert next(r for r in records if r["group"] == "all")["qhat"] is None     # several quantiles apply
    # a group of 5 calibration samples at alpha 0.1 (which needs 9): a warning, and that group's sets are full
    rc, out, err = _run([h5, "--run", "net/toy", "--score", "lac", "--mondrian", "site", "--n-boot", "0",
                         "--json"], capsys)
    assert rc == 0 and "fewer than the 9 samples" in err and "site=c (n=5)" in err
    rec = next(r for r in json.loads(out) if r["group"] == "site=c")
    assert rec["qhat"] is None and rec["full_frac"] == 1.0 and rec["coverage"] == 1.0


def test_a_calibrator_is_fitted_on_the_fit_split_and_warned_about_on_the_calibration_split(h5, capsys):
    rc, out, err = _run([h5, "--run", "net/toy", "--calibrator", "none,ts", "--fit-split", "fit", "--n-boot", "0",
                         "--json"], capsys)
    assert rc == 0 and "warning" not in err
    assert {r["calibrator"] for r in json.loads(out)} == {"none", "ts"}
    rc, _, err = _run([h5, "--run", "net/toy", "--calibrator", "ts", "--fit-split", "val", "--n-boot", "0",
                       "--json"], capsys)
    assert rc == 0 and "fitted on the calibration split (val)" in err


@pytest.mark.parametrize("args, message", [
    (["--alpha", "1.5"], "--alpha must lie strictly between 0 and 1"),
    (["--alpha", "0"], "--alpha must lie strictly between 0 and 1"),
    (["--alpha", "ten"], "--alpha takes numbers in (0, 1)"),
    (["--calib-split", "tiny", "--alpha", "0.05"], "the quantile is +inf"),
    (["--calib-split", "test"], "must differ"),
    (["--score", "thr"], "--score 'thr' is not among the conformal scores"),
    (["--mondrian", "nosuch"], "no metadata column 'nosuch'"),
    (["--calibrator", "tss"], "Unknown calibrator 'tss'"),
    (["--raps-lambda", "-1"], "--raps-lambda must be a number >= 0"),
])
def test_bad_input_is_one_sentence_and_exit_2(h5, tmp_path, capsys, args, message):
    rc, out, err = _run([h5, "--run", "net/toy", "--n-boot", "0", "--out", str(tmp_path / "o"), *args], capsys)
    assert rc == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()                # nothing written when the command fails


def test_a_split_streamed_from_disk_gives_the_same_records(h5, capsys):
    args = [h5, "--run", "net/toy", "--calibrator", "ts", "--fit-split", "fit", "--n-boot", "30", "--json"]
    assert _run(args + ["--max-memory", "1K"], capsys)[1] == _run(args, capsys)[1]


def test_report_conformal_writes_the_commands_records(h5, tmp_path, capsys):
    rc, want, _ = _run([h5, "--run", "net/toy", "--calib-split", "fit", "--eval-split", "test", "--alpha",
                        "0.1,0.05", "--n-boot", "30", "--seed", "4", "--json"], capsys)
    assert rc == 0
    want = json.loads(want)
    out = tmp_path / "rep"
    rc = main(["report", h5, "--run", "net/toy", "--fit-split", "fit", "--eval-split", "test", "--calibrators",
               "none,ts", "--n-boot", "30", "--seed", "4", "--conformal", "0.1,0.05", "--no-diagram", "--quiet",
               "--out", str(out)])
    assert rc == 0
    with open(out / "conformal.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(want) and tuple(rows[0]) == COLUMNS
    for got, w in zip(rows, want):
        for key in COLUMNS:
            v = w[key]
            if isinstance(v, float) or (v is None and key != "group"):
                assert (math.nan if got[key] in ("", "nan") else float(got[key])) == pytest.approx(
                    math.nan if v is None else v, rel=1e-9, nan_ok=True), key
            else:
                assert got[key] == str(v), key
    manifest = json.loads((out / "manifest.json").read_text())
    assert "conformal.csv" in json.dumps(manifest)


@pytest.mark.qt
def test_report_conformal_draws_conformal_png(h5, tmp_path):
    rc = main(["report", h5, "--run", "net/toy", "--fit-split", "val", "--calibrators", "none", "--n-boot", "0",
               "--conformal", "0.1", "--quiet", "--out", str(tmp_path / "r")])
    assert rc == 0
    assert (tmp_path / "r" / "conformal.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_conformal_refuses_a_bad_alpha_before_writing(h5, tmp_path, capsys):
    rc = main(["report", h5, "--run", "net/toy", "--fit-split", "val", "--calibrators", "none", "--n-boot", "0",
               "--conformal", "10", "--quiet", "--out", str(tmp_path / "r")])
    assert rc == 2 and "give 0.1" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
