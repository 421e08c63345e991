"""The read budget: hostile chunking, a metadata column far longer than its split, an .npz of many members, a
deflated .pt, each refused with one sentence and exit 2 before anything is read or written, or, under the budget,
read completely in bounded blocks; peak memory (VmHWM of the command) under 1 GiB and under 120 s either way."""

from __future__ import annotations

import io
import zipfile

import h5py
import numpy as np
import pytest

from _budget_files import (deflate_pt, deflated_pt_bomb, many_attributes, many_member_npz, meta_bomb, run_cli,
                           sparse_zeros, tiny_chunks)
from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io.discovery import MAX_ATTRS, list_runs
from calibview.core.io.importers import import_arrays
from calibview.core.io.limits import blocks, cost
from calibview.core.io.logits import iter_split, read_meta, read_split
from calibview.core.io.stream import StreamedSplit

PEAK = 1 << 30
SECONDS = 120


def one_sentence(err: str, *names: str) -> str:
    line = err.strip()
    assert line.startswith("calibview: error: ") and "\n" not in line and "Traceback" not in err, err
    assert line.rstrip(".").count(". ") == 0, f"more than one sentence: {line}"
    for name in names:
        assert name in line, line
    return line


# ------------------------------------------------------------------------------------------ hostile chunking

def test_many_tiny_chunks_above_the_budget_are_refused_before_reading(tmp_path):
    """100 x 1,000 logits in 1 x 1 chunks: 100,000 chunks, ~400 MB of HDF5 bookkeeping read at once, over a
    256 MB budget."""
    path = tmp_path / "chunks.h5"
    tiny_chunks(path, 100, 1_000)
    rc, err, seconds, rss = run_cli("metrics", str(path), "--calibrators", "none", "--n-boot", "0",
                                    "--max-memory", "256M")
    assert rc == 2, err
    line = one_sentence(err, "/m/d/", "100,000 HDF5 chunks", "--allow-large-read", "--max-memory")
    assert "409.6 MB" in line              # 100,000 x 4 KiB, the estimate
    assert seconds < SECONDS and rss < PEAK


def test_many_tiny_chunks_under_the_budget_are_read_completely_in_bounded_memory(tmp_path):
    """300 x 1,000 in 1 x 1 chunks (300,000 chunks): read whole at once HDF5 took ~1.2 GB for them; in blocks of
    1,024 chunks the whole command stays far below 1 GiB, and its accuracy is numpy's."""
    path = tmp_path / "chunks.h5"
    z = tiny_chunks(path, 300, 1_000)
    rc, err, seconds, rss = run_cli("metrics", str(path), "--calibrators", "none", "--n-boot", "0", "--json")
    assert rc == 0, err
    assert seconds < SECONDS and rss < PEAK, (seconds, rss)
    rc, err, _, rss_override = run_cli("metrics", str(path), "--calibrators", "none", "--n-boot", "0",
                                       "--max-memory", "256M", "--allow-large-read")
    assert rc == 0 and rss_override < PEAK, err
    data = read_split(path, "m/d", "test")
    np.testing.assert_array_equal(data.scores, z)
    assert float(np.mean(z.argmax(1) == np.arange(300) % 1_000)) == pytest.approx(
        float(np.mean(data.scores.argmax(1) == data.labels)))


@pytest.mark.parametrize("n, k, chunks, dtype", [(50, 3_000, (1, 1), "float32"),     # a row spans 3,000 chunks
                                                 (97, 40, (3, 7), "float16"),          # float16: staging
                                                 (64, 5, (64, 5), "float64"),          # one chunk
                                                 (2_100, 2, (1, 1), "float32")])       # 1,024 rows per block
def test_blocks_read_back_exactly_what_was_written(tmp_path, n, k, chunks, dtype):
    path = tmp_path / "b.h5"
    z = tiny_chunks(path, n, k, chunks=chunks, dtype=dtype)
    with h5py.File(path) as f:
        ds = f["m/d/test/logits"]
        seen = np.zeros((n, k), int)
        for r0, r1, c0, c1 in blocks.blocks(ds, 0, n):
            touched = -(-(r1 - r0) // chunks[0]) * -(-(c1 - c0) // chunks[1])
            assert touched <= cost.MAX_CHUNKS_PER_READ
            assert r0 % chunks[0] == 0 and c0 % chunks[1] == 0
            seen[r0:r1, c0:c1] += 1
        assert (seen == 1).all()
    data = read_split(path, "m/d", "test")
    np.testing.assert_array_equal(data.scores, z.astype(data.scores.dtype))
    parts = [s for s, _, _ in iter_split(path, "m/d", "test", chunk_rows=13)]
    np.testing.assert_array_equal(np.concatenate(parts), z.astype(data.scores.dtype))
    run = list_runs(path)[0]
    with StreamedSplit(str(path), run, "test", chunk_rows=11) as s:
        np.testing.assert_array_equal(s[5:40].numpy(), z[5:40].astype(data.scores.dtype))


def test_the_estimate_counts_chunks_filters_and_kept_values(tmp_path):
    path = tmp_path / "e.h5"
    with h5py.File(path, "w") as f:
        plain = f.create_dataset("plain", data=np.zeros((100, 10), np.float32), chunks=(1, 1))
        packed = f.create_dataset("packed", data=np.zeros((100, 10), np.float32), chunks=(10, 10),
                                  compression="gzip")
        flat = f.create_dataset("flat", data=np.zeros(1000, np.float32))
        assert cost.estimate(plain) == (1000 * cost.PER_CHUNK_BYTES, 1000)
        assert cost.estimate(packed, kept=5) == (10 * cost.PER_CHUNK_BYTES + 2 * 400 + 5, 10)
        assert cost.estimate(flat, kept=8000) == (8000, 0)


# ------------------------------------------------------------------------------------------ metadata columns

def test_a_metadata_column_longer_than_its_split_is_refused_by_its_length_before_reading(tmp_path):
    """2^31 gzip-compressed values declared for a split of 50 samples: read whole (with --allow-sparse, which
    lets the unwritten chunks through) it took 2.5 GB before its length was looked at."""
    path = tmp_path / "meta.h5"
    meta_bomb(path)
    rc, err, seconds, rss = run_cli("slices", str(path), "--by", "col", "--calibrators", "none", "--n-boot", "0",
                                    "--allow-sparse", "-o", str(tmp_path / "out"))
    assert rc == 2, err
    one_sentence(err, "/m/d/", "meta/col", "2147483648 values", "N = 50")
    assert seconds < SECONDS and rss < PEAK, (seconds, rss)
    assert not (tmp_path / "out").exists()
    with guard.using(allow_sparse=True), pytest.raises(CalibviewError, match="2147483648 values"):
        read_meta(path, "m/d", "test", "col")


def test_the_compression_ratio_rule_applies_to_metadata_columns(tmp_path):
    path = tmp_path / "ratio.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("col", shape=(300 << 20,), dtype="i1", chunks=(1 << 22,), compression="gzip")
        for a in range(0, 300 << 20, 1 << 22):
            ds[a:a + (1 << 22)] = 0
        with pytest.raises(CalibviewError, match="compression bomb"):
            guard.check_dataset(ds, str(path), ratio=True)
        guard.check_dataset(ds, str(path))                  # labels and others: no ratio rule


def test_a_long_metadata_column_is_refused_above_the_read_budget(tmp_path):
    path = tmp_path / "long.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("col", data=np.arange(1000))
        with guard.using(max_memory=1 << 20):
            cost.check_read_cost(ds, str(path), kept=8000)              # under the 256 MB floor
            with pytest.raises(CalibviewError, match="read budget"):
                cost.check_read_cost(ds, str(path), kept=300 << 20)
        with guard.using(allow_large_read=True):
            cost.check_read_cost(ds, str(path), kept=300 << 20)


# ------------------------------------------------------------------------------------------ archives

def test_an_npz_of_many_members_is_refused_by_their_sum_before_any_is_loaded(tmp_path):
    """16 splits of 20 MB zeros (each under the per-member 256 MB rule; 4.2 GB RSS and exit 0 at full size)."""
    src, out = tmp_path / "many.npz", tmp_path / "out.h5"
    many_member_npz(src)
    rc, err, seconds, rss = run_cli("import", str(src), "-o", str(out))
    assert rc == 2, err
    one_sentence(err, str(src), "32 arrays", "zip bomb", "before any is loaded")
    assert seconds < SECONDS and rss < PEAK, (seconds, rss)
    assert not out.exists()


def test_an_npz_of_many_small_members_under_the_budget_is_imported_completely(tmp_path):
    src, out = tmp_path / "fine.npz", tmp_path / "out.h5"
    rng = np.random.default_rng(1)
    arrays = {}
    for i in range(16):
        arrays[f"logits_s{i}"] = rng.normal(size=(30, 4)).astype(np.float32)
        arrays[f"labels_s{i}"] = rng.integers(0, 4, 30)
    np.savez_compressed(src, **arrays)
    runs = import_arrays(src, out)
    assert len(runs[0].splits) == 16
    np.testing.assert_array_equal(read_split(out, runs[0], "s7").scores, arrays["logits_s7"])


def test_a_deflated_pt_is_refused_by_its_declared_sizes_before_loading(tmp_path):
    """A .pt whose tensor record inflates 300 MB from 300 kB (1.9 GB from 1.9 MB at full size) was loaded whole,
    and the output written, before it was refused."""
    src, out = tmp_path / "bomb.pt", tmp_path / "out.h5"
    deflated_pt_bomb(src)
    rc, err, seconds, rss = run_cli("import", str(src), "-o", str(out))
    assert rc == 2, err
    one_sentence(err, str(src), "zip bomb")
    assert seconds < SECONDS and rss < PEAK, (seconds, rss)
    assert not out.exists()


def test_a_deflated_pt_under_the_budget_is_imported_completely(tmp_path):
    torch = pytest.importorskip("torch")
    src, out = tmp_path / "small.pt", tmp_path / "out.h5"
    z = torch.randn(20, 3)
    y = torch.arange(20) % 3
    buf = io.BytesIO()
    torch.save({"logits": z, "labels": y}, buf)
    src.write_bytes(deflate_pt(buf.getvalue()))
    with zipfile.ZipFile(src) as archive:
        assert any(i.compress_type == zipfile.ZIP_DEFLATED for i in archive.infolist())
    runs = import_arrays(src, out)
    np.testing.assert_array_equal(read_split(out, runs[0], "all").scores, z.numpy())


def test_the_sum_of_a_pt_archives_records_must_fit_the_read_budget(tmp_path):
    from calibview.core.io.limits import archives

    src = tmp_path / "big.pt"
    with zipfile.ZipFile(src, "w", zipfile.ZIP_STORED) as z:
        for i in range(3):
            z.writestr(f"archive/data/{i}", bytes(1 << 20))
    archives.check_torch(str(src))
    with guard.using(max_memory=1 << 20), pytest.raises(CalibviewError, match="3 records"):
        archives.check_total(str(src), "records", 300 << 20, 300 << 20, 3)


# ------------------------------------------------------------------------------------------ smaller findings

def test_thousands_of_attributes_are_read_up_to_a_limit(tmp_path):
    import time

    path = tmp_path / "attrs.h5"
    many_attributes(path, 3_000)
    t0 = time.perf_counter()
    runs = list_runs(path)
    assert time.perf_counter() - t0 < 5
    assert len(runs[0].attrs) == MAX_ATTRS


def test_scores_in_the_hole_of_a_sparse_file_are_refused(tmp_path):
    path = tmp_path / "sparse.h5"
    sparse_zeros(path)
    if path.stat().st_blocks * 512 > 64 << 20:
        pytest.skip("this file system stores the unwritten logits (no sparse files here)")
    rc, err, seconds, rss = run_cli("runs", str(path))
    assert rc == 2, err
    one_sentence(err, "/m/d/test/logits", "sparse file", "--allow-sparse")
    with guard.using(allow_sparse=True):
        assert list_runs(path)[0].splits[0].n == 70_000


@pytest.mark.parametrize("kind", ["btree", "deep"])
def test_a_corrupt_b_tree_or_deep_nesting_is_one_sentence_in_runs_and_report(tmp_path, kind):
    from _budget_files import corrupt_btree, deep_nesting

    path = tmp_path / f"{kind}.h5"
    (corrupt_btree if kind == "btree" else deep_nesting)(path)
    expected = ("/m/d/", "wrong B-tree signature") if kind == "btree" else ("nested more than 64 deep",)
    for args in (["runs", str(path)], ["report", str(path), "--calibrators", "none", "--n-boot", "0", "-o",
                                       str(tmp_path / "out")]):
        rc, err, seconds, rss = run_cli(*args)
        assert rc == 2, err
        one_sentence(err, str(path), *expected)
    assert not (tmp_path / "out").exists()
