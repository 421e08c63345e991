"""No CSV cell calibview writes can become a spreadsheet formula: model, dataset, split, class and metadata values
that start with =, +, -, @, a tab or a carriage return are written with a single quote in front (OWASP), while
numbers such as -0.5 and inf stay as they are."""

import csv
import io

import numpy as np
import pytest

from _release_data import toy_logits
from calibview.cli import main
from calibview.core.io import writer
from calibview.core.reports.tables import FORMULA_STARTS, inert_text, table_csv

MODEL, DATASET = "=1+2", "@SUM(A1)"
RUN = f"{MODEL}/{DATASET}"
CLASSES = ("=cmd|' /C calc'!A0", "-0.5", "\tTAB")
REGION = ("=HYPERLINK(\"http://x\")", "-inf", "+north")
FAST = ["--n-boot", "10", "--device", "cpu", "--quiet"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "hostile.h5"
    splits = {"val": ("logits",) + toy_logits(300, 1), "+deploy": ("logits",) + toy_logits(300, 2),
              "-test": ("logits",) + toy_logits(300, 3)}
    meta = {s: {"region": np.array(REGION)[np.arange(len(y)) % 3]} for s, (_, _, y) in splits.items()}
    writer.write_splits(path, MODEL, DATASET, splits, class_names=CLASSES, meta=meta)
    return str(path)


def _cells(path):
    with open(path, newline="") as f:
        return [cell for row in csv.reader(f) for cell in row]


def _number(text):
    try:
        float(text)
        return text == text.strip()
    except ValueError:
        return False


def _assert_inert(path):
    cells = _cells(path)
    dangerous = [c for c in cells if c.startswith(FORMULA_STARTS) and not _number(c)]
    assert not dangerous, (path, dangerous[:5])
    return cells


def test_report_domains_thresholds_and_slices_write_inert_cells(hostile, tmp_path):
    out = tmp_path / "report"
    assert main(["report", hostile, "--run", RUN, "--fit-split", "val", "--eval-split", "+deploy,-test",
                 "--target-precision", "0.8", "--no-diagram", "-o", str(out), *FAST]) == 0
    written = sorted(p.name for p in out.glob("*.csv"))
    assert {"metrics.csv", "domains.csv", "thresholds.csv", "audit.csv", "curves.csv"} <= set(written), written
    for name in written:
        _assert_inert(out / name)
    metrics = _cells(out / "metrics.csv")
    assert "'=1+2" in metrics and "'@SUM(A1)" in metrics and "'+deploy" in metrics and "'-test" in metrics
    thresholds = _cells(out / "thresholds.csv")
    assert "'=cmd|' /C calc'!A0" in thresholds and "-0.5" in thresholds and "'\tTAB" in thresholds
    sl = tmp_path / "slices"
    assert main(["slices", hostile, "--run", RUN, "--eval-split", "+deploy", "--by", "region", "-o", str(sl),
                 *FAST]) == 0
    cells = _assert_inert(sl / "slices.csv")
    assert "'=HYPERLINK(\"http://x\")" in cells and "-inf" in cells and "'+north" in cells


def test_release_per_class_and_metrics_write_inert_cells(hostile, tmp_path):
    out = tmp_path / "rel"
    assert main(["release", hostile, "--run", RUN, "--fit-split", "val", "--eval-split", "+deploy",
                 "--target-precision", "0.8", "--no-diagram", "--allow-warnings", "-o", str(out), *FAST]) == 0
    per_class = _assert_inert(out / "per_class.csv")
    assert "'=cmd|' /C calc'!A0" in per_class and "-0.5" in per_class
    assert "'=1+2" in _assert_inert(out / "metrics.csv")


@pytest.mark.parametrize("text,cell", [("=1+2", "'=1+2"), ("+1+2", "'+1+2"), ("-1+2", "'-1+2"), ("@A1", "'@A1"),
                                       ("\t=1", "'\t=1"), ("\r=1", "'\r=1"), ("-0.5", "-0.5"), ("inf", "inf"),
                                       ("-inf", "-inf"), ("+1e3", "+1e3"), ("- 1", "'- 1"), ("\t1", "'\t1"),
                                       ("a=b", "a=b"), ("", "")])
def test_inert_text(text, cell):
    assert inert_text(text) == cell


def test_table_csv_reads_back_with_the_quote_and_keeps_numbers():
    text = table_csv([{"name": "=1+2", "x": -0.5, "n": -3, "flag": True, "none": None}],
                     ["name", "x", "n", "flag", "none"])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [["name", "x", "n", "flag", "none"], ["'=1+2", "-0.5", "-3", "true", ""]]
