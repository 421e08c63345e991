"""Parquet import (pyarrow, a test dependency): a top-label table with a split column and a per-class probability
table round-trip exactly (the values read back equal the table's, float32 columns widened without loss), the
import equals the CSV import of the same table, a missing column and a file that is not Parquet are refused in
one sentence with nothing written, and the table is read in record batches, not whole."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibview.cli.program import main
from calibview.core.errors import CalibviewError
from calibview.core.io.csv_import import parquet as pqi
from calibview.core.io.csv_import.stream import import_csv
from calibview.core.io.logits import read_split
from calibview.core.io.toplabel.read import read_toplabel


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(CalibviewError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert message.endswith(".") and "\n" not in message, message
    return message


def _top_table(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    return {"true_label": rng.integers(0, 7, n), "pred_label": rng.integers(0, 7, n),
            "confidence": rng.random(n), "split": np.where(rng.random(n) < 0.4, "val", "test")}


def test_top_label_table_round_trips_and_equals_the_csv_import(tmp_path):
    t = _top_table()
    src = tmp_path / "preds.parquet"
    pq.write_table(pa.table(t), src, row_group_size=400)
    out = tmp_path / "out.h5"
    run = pqi.import_parquet(src, out, model="m", dataset="d", num_classes=7, chunk_rows=333)[0]
    assert (run.name, run.k, sorted(s.name for s in run.splits)) == ("m/d", 7, ["test", "val"])
    csv_src = tmp_path / "preds.csv"
    with open(csv_src, "w") as f:
        f.write("true_label,pred_label,confidence,split\n")
        for i in range(len(t["split"])):
            f.write(f"{t['true_label'][i]},{t['pred_label'][i]},{float(t['confidence'][i])!r},{t['split'][i]}\n")
    csv_out = tmp_path / "csv.h5"
    import_csv(csv_src, csv_out, model="m", dataset="d", num_classes=7)
    for name in ("val", "test"):
        keep = t["split"] == name
        got, ref = read_toplabel(out, "m/d", name), read_toplabel(csv_out, "m/d", name)
        np.testing.assert_array_equal(got.confidence, t["confidence"][keep])
        np.testing.assert_array_equal(got.predictions, t["pred_label"][keep])
        np.testing.assert_array_equal(got.labels, t["true_label"][keep])
        np.testing.assert_array_equal(got.confidence, ref.confidence)


def test_probability_columns_round_trip_float32(tmp_path):
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), 600).astype(np.float32)
    p /= p.sum(axis=1, keepdims=True)
    y = rng.integers(0, 4, 600)
    src = tmp_path / "probs.parquet"
    pq.write_table(pa.table({"label": y, **{f"p_{i}": p[:, i] for i in range(4)}}), src)
    out = tmp_path / "out.h5"
    assert main(["import", str(src), "-o", str(out), "--model", "m", "--dataset", "d", "--split", "test",
                 "--quiet"]) == 0
    data = read_split(out, "m/d", "test")
    assert data.kind == "probs" and data.scores.shape == (600, 4)
    np.testing.assert_array_equal(data.scores, p)            # float32 -> exact double -> float32 storage
    np.testing.assert_array_equal(data.labels, y)


def test_missing_column_and_not_parquet_are_one_sentence(tmp_path):
    src = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"y": [0, 1], "score": [0.5, 0.7]}), src)
    out = tmp_path / "out.h5"
    msg = _error(pqi.import_parquet, src, out)
    assert "y" in msg and "score" in msg, msg
    fake = tmp_path / "fake.parquet"
    fake.write_text("label,confidence\n0,0.5\n")
    msg = _error(pqi.import_parquet, fake, out)
    assert "not a readable Parquet file" in msg
    assert not out.exists()


def test_a_null_cell_is_refused_with_its_row(tmp_path):
    src = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"label": [0, 1, 2], "prediction": [0, 1, 1], "confidence": [0.9, None, 0.4]}), src)
    out = tmp_path / "out.h5"
    msg = _error(pqi.import_parquet, src, out)
    assert "line 3" in msg and "confidence" in msg, msg
    assert not out.exists()


def test_the_table_is_read_in_batches(tmp_path, monkeypatch):
    t = _top_table(n=2000)
    src = tmp_path / "preds.parquet"
    pq.write_table(pa.table(t), src, row_group_size=500)
    sizes = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in real(self, *args, **kwargs):
            sizes.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    pqi.import_parquet(src, tmp_path / "out.h5", chunk_rows=256)
    assert sum(sizes) == 2000 and max(sizes) <= 256
