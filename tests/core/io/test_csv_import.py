"""CSV import: both column layouts round-trip (the values read back equal the table's), the split column and the
column flags, a missing column refused in one sentence naming the columns found, bad rows refused with their
line and nothing written, and 1,000,000 rows imported in constant memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from calibview.core.errors import CalibviewError
from calibview.core.io.csv_import.stream import import_csv
from calibview.core.io.logits import read_split
from calibview.core.io.toplabel.read import read_toplabel


def _write(path, header, rows):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            f.write(",".join(str(v) for v in r) + "\n")
    return path


def error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(CalibviewError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert message.endswith(".") and ". " not in message and "\n" not in message, message
    return message


def test_top_label_table_round_trips_with_a_split_column(tmp_path):
    rng = np.random.default_rng(0)
    n = 1000
    y, p, c = rng.integers(0, 5, n), rng.integers(0, 5, n), rng.random(n)
    split = np.where(rng.random(n) < 0.3, "val", "test")
    src = _write(tmp_path / "preds.csv", ["true_label", "pred_label", "conf", "split"],
                 [(y[i], p[i], repr(float(c[i])), split[i]) for i in range(n)])
    out = tmp_path / "out.h5"
    run = import_csv(src, out, model="m", dataset="d", num_classes=5, chunk_rows=97)[0]
    assert (run.name, run.k, [s.name for s in run.splits]) == ("m/d", 5, ["test", "val"])
    for name in ("val", "test"):
        data = read_toplabel(out, "m/d", name)
        keep = split == name
        np.testing.assert_array_equal(data.confidence, c[keep])           # repr round-trips float64 exactly
        np.testing.assert_array_equal(data.predictions, p[keep])
        np.testing.assert_array_equal(data.labels, y[keep])
    # --split selects one split of the column; the flags name columns the guess does not know
    src2 = _write(tmp_path / "other.csv", ["Truth", "Guess", "P", "split"],
                  [(y[i], p[i], repr(float(c[i])), split[i]) for i in range(n)])
    run = import_csv(src2, tmp_path / "o2.h5", split="val", label_col="Truth", pred_col="guess", conf_col="P")[0]
    assert [s.name for s in run.splits] == ["val"] and run.k == 0 and run.model == "other"


@pytest.mark.parametrize("prefix,names", [("p", None), ("prob", ("cat", "dog", "emu")), ("logit", ("a", "b", "c"))])
def test_per_class_table_round_trips(tmp_path, prefix, names):
    rng = np.random.default_rng(1)
    n, k = 500, 3
    z = rng.normal(size=(n, k))
    scores = z if prefix == "logit" else np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = rng.integers(0, k, n)
    cols = [f"{prefix}_{names[j] if names else j}" for j in range(k)]
    labels = [names[v] if names and i % 2 else v for i, v in enumerate(y)]   # class names or indices
    src = _write(tmp_path / "t.csv", ["label"] + cols,
                 [(labels[i], *(repr(float(v)) for v in scores[i])) for i in range(n)])
    run = import_csv(src, tmp_path / "o.h5", split="test", chunk_rows=64)[0]
    assert run.class_names == names and run.k == k
    data = read_split(tmp_path / "o.h5", run, "test")
    assert data.kind == ("logits" if prefix == "logit" else "probs")
    np.testing.assert_allclose(data.scores, scores, rtol=1e-6 if prefix != "logit" else 0)
    np.testing.assert_array_equal(data.labels, y)


def test_a_missing_column_is_one_sentence_naming_the_columns(tmp_path):
    src = _write(tmp_path / "t.csv", ["label", "prediction", "extra"], [(0, 1, 2)])
    message = error_of(import_csv, src, tmp_path / "o.h5")
    assert "no confidence column found" in message and "label, prediction, extra" in message
    assert "--conf-col" in message and not (tmp_path / "o.h5").exists()
    src = _write(tmp_path / "u.csv", ["truth", "pred", "conf"], [(0, 1, 0.5)])
    assert "no label column" in error_of(import_csv, src, tmp_path / "o.h5")
    assert "--label-col nope names no column" in error_of(import_csv, src, tmp_path / "o.h5", label_col="nope")


@pytest.mark.parametrize("header,rows,parts", [
    (["label", "pred", "conf"], [(0, 1, 0.5), (1, 1, 1.5)], ["line 3", "1.5", "outside [0, 1]"]),
    (["label", "pred", "conf"], [(0, 1, 0.5), (1, 1, "x")], ["line 3", "'x' is not a number"]),
    (["label", "pred", "conf"], [(0, 1.5, 0.5)], ["line 2", "'1.5' is not an integer"]),
    (["label", "pred", "conf"], [(0, 1, 0.5), (0, 4, 0.5)], ["line 3", "prediction 4 is outside [0, 3)"]),
    (["label", "p_0", "p_1"], [(0, 0.5, 0.7)], ["do not sum to 1"]),
    (["label", "p_0", "p_2"], [(0, 0.5, 0.5)], ["p_0 to p_1"]),
])
def test_bad_rows_are_refused_and_nothing_is_written(tmp_path, header, rows, parts):
    src = _write(tmp_path / "t.csv", header, rows)
    message = error_of(import_csv, src, tmp_path / "o.h5", num_classes=3 if "pred" in header else None)
    assert all(p in message for p in parts), message
    assert not (tmp_path / "o.h5").exists()


_MEMORY = textwrap.dedent("""
    import sys, tracemalloc
    from calibview.core.io.csv_import.stream import import_csv
    def status(key):
        return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1]) * 1024
    def reset():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                                                  # resets VmHWM to the current RSS
        return status("VmRSS")
    src, out = sys.argv[1], sys.argv[2]
    import_csv(src + ".small.csv", out + ".warm.h5")                      # every import done once before measuring
    base = reset()
    n = import_csv(src, out, num_classes=1000)[0].splits[0].n
    grown = status("VmHWM") - base
    peak = 0
    if sys.argv[3] == "trace":                                            # tracemalloc costs memory of its own
        tracemalloc.start()
        import_csv(src, out + ".traced.h5", num_classes=1000)
        peak = tracemalloc.get_traced_memory()[1]
    print(n, grown, peak)
""")


def _table(path, n, rng):
    with open(path, "w") as f:                       # written in blocks: the test itself stays small too
        f.write("label,prediction,confidence\n")
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            y, p, c = rng.integers(0, 1000, m), rng.integers(0, 1000, m), rng.random(m)
            f.write("".join(f"{a},{b},{v:.6f}\n" for a, b, v in zip(y, p, c)))
    _write(str(path) + ".small.csv", ["label", "prediction", "confidence"], [(0, 1, 0.5)] * 10)
    return path


def _measure(src, out, trace):
    r = subprocess.run([sys.executable, "-c", _MEMORY, str(src), str(out), "trace" if trace else "-"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert r.returncode == 0, r.stderr
    return [int(v) for v in r.stdout.split()]


def test_a_million_rows_import_in_constant_memory(tmp_path):
    rng = np.random.default_rng(2)
    small = _measure(_table(tmp_path / "small.csv", 100_000, rng), tmp_path / "small.h5", False)
    n, grown, peak = _measure(_table(tmp_path / "big.csv", 1_000_000, rng), tmp_path / "big.h5", True)
    assert (small[0], n) == (100_000, 1_000_000)
    # ten times the rows, the same memory: the peak resident size grows no more than for 100,000 rows (plus
    # noise), and Python's allocations peak at one chunk (~4 MB), where the 1,000,000 rows' three columns alone
    # would take 24 MB and their parsed text several times that
    assert grown < small[1] + 8e6, (grown, small[1])
    assert peak < 12e6, peak
    data = read_toplabel(tmp_path / "big.h5", "big/data", "all")
    assert data.confidence.shape == (n,) and data.k == 1000
