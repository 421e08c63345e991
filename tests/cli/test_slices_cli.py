"""``calibview slices``: JSON records with the documented keys, slices.csv written atomically, the table, and user
errors (one sentence, exit 2, nothing written)."""

import csv
import json

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.io.writer import write_run
from calibview.core.stats.metrics import METRIC_NAMES
from calibview.core.reports.tables import metric_columns

ARGS = ["--run", "net/toy", "--n-boot", "20", "--bins", "10", "--device", "cpu", "--quiet"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("cli") / "toy.h5"
    for split, m in (("val", 300), ("test", 400)):
        y = rng.integers(0, 3, m)
        z = rng.normal(size=(m, 3)) * 2
        z[np.arange(m), y] += 2.0
        write_run(path, "net", "toy", split, logits=z.astype(np.float32), labels=y,
                  meta={"site": np.array(["s1", "s2"])[np.arange(m) % 2], "rare": (np.arange(m) < 5) * 1})
    return path


def test_json_records(toy, capsys):
    assert main(["slices", str(toy), "--by", "site", "--calibrators", "none,ts", "--json"] + ARGS) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [(r["calibrator"], r["slice"]) for r in recs] == [
        ("none", None), ("none", "s1"), ("none", "s2"), ("ts", None), ("ts", "s1"), ("ts", "s2")]
    deltas = [f"delta_{m}{s}" for m in METRIC_NAMES for s in ("", "_lo", "_hi")]
    expected = [c for c in metric_columns()] + ["slice_column", "slice"] + deltas + ["flagged", "nonfinite"]
    for r in recs:
        assert list(r) == expected
        assert r["slice_column"] == "site" and isinstance(r["flagged"], bool)
    assert [r["n"] for r in recs[:3]] == [400, 200, 200]


def test_out_writes_slices_csv(toy, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["slices", str(toy), "--by", "class", "--calibrators", "ts", "--out", str(out)] + ARGS) == 0
    with open(out / "slices.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["slice"] for r in rows] == ["", "0", "1", "2"]
    assert rows[0]["flagged"] == "false" and float(rows[1]["ece"]) >= 0
    assert list(out.iterdir()) == [out / "slices.csv"]


def test_table_and_small_slice_warning(toy, capsys):
    assert main(["slices", str(toy), "--by", "rare", "--calibrators", "none"] + ARGS[:-1]) == 0   # not --quiet
    captured = capsys.readouterr()
    assert "(whole split)" in captured.out and "ECE %" in captured.out
    assert "1 (n=5)" in captured.err


@pytest.mark.parametrize("extra, message", [
    (["--by", "region"], "no metadata column 'region' (available: site, rare; or 'class' for the true label)"),
    (["--by", "site", "--min-slice", "1000"], "No slice of 'site' in net/toy/test reaches --min-slice 1000"),
    (["--by", "site", "--bins", "10,15"], "slices takes one --bins"),
    (["--by", "site", "--eval-split", "deploy"], "split 'deploy' not found"),
])
def test_user_errors_exit_2_and_write_nothing(toy, tmp_path, capsys, extra, message):
    out = tmp_path / "o"
    assert main(["slices", str(toy), "--calibrators", "none", "--out", str(out)] + ARGS + extra) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()
