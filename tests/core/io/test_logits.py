"""The HDF5 logits format: discovery, validation (one test per user error), chunked reading, writing, the demo."""

from __future__ import annotations

import os
import re
import threading
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest

from calibview.core.errors import Cancelled, CalibviewError
from calibview.core.io.discovery import find_run, list_runs
from calibview.core.io.logits import iter_split, read_split
from calibview.core.io.schema import RunInfo
from calibview.core.io.writer import write_run, write_splits

RNG = np.random.default_rng(0)


def logits(n=40, k=5, dtype=np.float32):
    return (RNG.standard_normal((n, k)) * 2).astype(dtype)


def labels(n=40, k=5):
    return (np.arange(n) % k).astype(np.int64)


def raw(path: Path, datasets: dict, attrs: dict | None = None) -> Path:
    """Write datasets exactly as given (bypassing write_run's validation) to make malformed files."""
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f.create_dataset(name, data=value)
        for name, value in (attrs or {}).items():
            group_path, _, attr = name.rpartition("@")
            f.require_group(group_path or "/").attrs[attr] = value
    return path


def error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(CalibviewError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    # one sentence: ends with a full stop and holds no other sentence break
    assert message.endswith(".") and ". " not in message, message
    return message


def has(message: str, *parts) -> None:
    for part in parts:
        assert str(part) in message, f"{part!r} not in {message!r}"


# ------------------------------------------------------------------------------------------------- round trips


def test_write_then_list_and_read_round_trip(tmp_path):
    path = tmp_path / "runs.h5"
    zv, zt = logits(30, 4), logits(50, 4)
    write_run(path, "resnet", "cifar", "val", zv, labels(30, 4), class_names=list("abcd"),
              attrs={"attribution": "unit test"})
    write_run(path, "resnet", "cifar", "test", zt, labels(50, 4))
    (run,) = list_runs(path)
    assert (run.file, run.name, run.model, run.dataset, run.path, run.k) == (
        str(path), "resnet/cifar", "resnet", "cifar", "/resnet/cifar", 4)
    assert run.split_names == ("val", "test")  # file (creation) order, not alphabetical
    assert run.split("test").n == 50 and run.split("test").path == "/resnet/cifar/test"
    assert run.split("val").kind == "logits" and run.split("val").dtype == "float32"
    assert run.class_names == ("a", "b", "c", "d")
    assert dict(run.attrs) == {"attribution": "unit test"}
    hash(run)  # usable as a dict key

    data = read_split(path, "resnet/cifar", "test")
    np.testing.assert_array_equal(data.scores, zt)
    np.testing.assert_array_equal(data.labels, labels(50, 4))
    assert data.scores.dtype == np.float32 and data.labels.dtype == np.int64
    assert data.scores.flags.c_contiguous and not data.scores.flags.writeable
    assert data.kind == "logits" and data.info == run.split("test") and data.run == run
    assert read_split(None, run, "val").scores.shape == (30, 4)  # a RunInfo carries its file


def test_float16_is_widened_to_float32_and_float64_kept(tmp_path):
    path = tmp_path / "dtypes.h5"
    z16, z64 = logits(33, 3, np.float16), logits(33, 3, np.float64)
    write_run(path, "m", "half", "all", z16, labels(33, 3))
    write_run(path, "m", "double", "all", z64, labels(33, 3))
    half = read_split(path, "m/half", "all", chunk_rows=5)
    assert half.info.dtype == "float16" and half.scores.dtype == np.float32
    np.testing.assert_array_equal(half.scores, z16.astype(np.float32))
    double = read_split(path, "m/double", "all", chunk_rows=5)
    assert double.scores.dtype == np.float64
    np.testing.assert_array_equal(double.scores, z64)


@pytest.mark.parametrize("order", ["<", ">"])
def test_every_finite_float16_value_widens_bit_for_bit(tmp_path, order):
    """All 63,488 finite float16 bit patterns (subnormals and -0.0 included), stored little- and big-endian, read
    whole, streamed in chunks of rows and read in a column block: the float32 bits numpy's own cast gives."""
    from calibview.core.io.limits.blocks import widen, widened
    from calibview.core.io.stream import StreamedSplit

    bits = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    z = bits[np.isfinite(bits)].reshape(-1, 64)
    want = z.astype(np.float32).view(np.uint32)
    y = np.arange(z.shape[0]) % 64
    path = raw(tmp_path / "h.h5", {"m/d/test/logits": z.astype(order + "f2"), "m/d/test/labels": y})
    np.testing.assert_array_equal(read_split(path, "m/d", "test", chunk_rows=37).scores.view(np.uint32), want)
    streamed = StreamedSplit(str(path), find_run(path, "m/d"), "test", chunk_rows=37)
    got = np.concatenate([c.numpy() for _, c, _ in streamed.chunks()])
    np.testing.assert_array_equal(got.view(np.uint32), want)
    out = np.zeros((z.shape[0], 80), np.float32)
    widen(out[:, 8:72], z.astype(order + "f2"))          # a strided destination
    np.testing.assert_array_equal(out[:, 8:72].view(np.uint32), want)
    assert not out[:, :8].any() and not out[:, 72:].any()
    np.testing.assert_array_equal(widened(z.astype(order + "f2").T).view(np.uint32), want.T)   # arrays (the API)


def test_probs_with_exact_zeros_are_valid(tmp_path):
    p = np.array([[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.5, 0.25, 0.25]], np.float32)
    path = raw(tmp_path / "p.h5", {"m/d/test/probs": p, "m/d/test/labels": np.array([0, 1, 2])})
    data = read_split(path, "m/d", "test")
    assert data.kind == "probs" and list_runs(path)[0].split("test").kind == "probs"
    np.testing.assert_array_equal(data.scores, p)


@pytest.mark.parametrize("dtype, off, ok", [(np.float32, 5e-4, True), (np.float32, 2e-3, False),
                                            (np.float16, 5e-4, True), (np.float64, 5e-7, True),
                                            (np.float64, 5e-6, False)])
def test_probability_row_sum_tolerance_depends_on_stored_dtype(tmp_path, dtype, off, ok):
    p = np.array([[0.5, 0.5], [0.25, 0.75 + off]], dtype)
    path = raw(tmp_path / "tol.h5", {"r/s/probs": p, "r/s/labels": np.array([0, 1])})
    if ok:
        read_split(path, "r", "s")
    else:
        has(error_of(read_split, path, "r", "s"), "tol.h5", "/r/s/probs", "1 of 2 rows", "row 1")


def test_chunked_read_matches_and_reports_progress(tmp_path):
    path = tmp_path / "big.h5"
    z, y = logits(1003, 7), labels(1003, 7)
    write_run(path, "m", "d", "s", z, y)
    for rows in (1, 10, 333, 1003, 5000, None):
        np.testing.assert_array_equal(read_split(path, "m/d", "s", chunk_rows=rows).scores, z)
    calls = []
    read_split(path, "m/d", "s", chunk_rows=100, progress=lambda f, msg: calls.append((f, msg)))
    fractions = [f for f, _ in calls]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(calls) == 12
    assert all(isinstance(msg, str) and msg for _, msg in calls)


def test_cancel_between_chunks(tmp_path):
    path = tmp_path / "c.h5"
    write_run(path, "m", "d", "s", logits(100), labels(100))
    cancel = threading.Event()

    def progress(fraction, message):
        if fraction >= 0.5:
            cancel.set()

    with pytest.raises(Cancelled):
        read_split(path, "m/d", "s", chunk_rows=10, progress=progress, cancel=cancel)


def test_iter_split_yields_validated_chunks(tmp_path):
    path = tmp_path / "it.h5"
    z = logits(25, 3, np.float16)
    write_run(path, "m", "d", "s", z, labels(25, 3))
    chunks = list(iter_split(path, "m/d", "s", chunk_rows=10))
    assert [(s.shape, l.shape, o) for s, l, o in chunks] == [((10, 3), (10,), 0), ((10, 3), (10,), 10),
                                                             ((5, 3), (5,), 20)]
    assert chunks[0][0].dtype == np.float32 and chunks[0][1].dtype == np.int64
    np.testing.assert_array_equal(np.concatenate([c[0] for c in chunks]), z.astype(np.float32))

    bad = z.astype(np.float32)
    bad[[12, 14]] = np.nan
    raw(tmp_path / "itbad.h5", {"m/s/logits": bad, "m/s/labels": labels(25, 3)})
    it = iter_split(tmp_path / "itbad.h5", "m", "s", chunk_rows=10)
    next(it)  # the first chunk is clean
    has(error_of(next, it), "itbad.h5", "/m/s/logits", "2 of 10 rows (rows 10-19)", "row 12")
    # run and split problems surface when iter_split is called, not at the first next()
    has(error_of(iter_split, path, "m/d", "nope", chunk_rows=10), "'nope'", "available splits: s")


# -------------------------------------------------------------------------------------------------- discovery


def test_discovery_of_general_layouts(tmp_path):
    path = raw(tmp_path / "general.h5", {
        "a/b/c/val/logits": logits(), "a/b/c/val/labels": labels(),
        "m/test/logits": logits(), "m/test/labels": labels(),
    }, attrs={"@attribution": "root says", "m@source": "m says"})
    runs = {r.name: r for r in list_runs(path)}
    assert set(runs) == {"a/b/c", "m"}
    abc, m = runs["a/b/c"], runs["m"]
    assert (abc.model, abc.dataset, abc.path, abc.split_names) == ("a", "b/c", "/a/b/c", ("val",))
    assert (m.model, m.dataset, m.path, m.split_names) == ("m", "", "/m", ("test",))
    assert dict(abc.attrs) == {"attribution": "root says"}
    assert dict(m.attrs) == {"attribution": "root says", "source": "m says"}


def test_flat_file_is_one_run_named_after_the_file(tmp_path):
    path = raw(tmp_path / "flat_run.h5", {"logits": logits(12, 3), "labels": labels(12, 3)})
    (run,) = list_runs(path)
    assert (run.name, run.model, run.dataset, run.path, run.split_names) == (
        "flat_run", "flat_run", "", "/", ("all",))
    assert run.splits[0].path == "/"
    assert read_split(path, "flat_run", "all").scores.shape == (12, 3)


def test_hard_linked_group_is_listed_once(tmp_path):
    path = raw(tmp_path / "linked.h5", {"m/d/s/logits": logits(), "m/d/s/labels": labels()})
    with h5py.File(path, "a") as f:
        f["m/d/alias"] = f["m/d/s"]  # a second hard link to the same split group
        f["soft"] = h5py.SoftLink("/m")
    (run,) = list_runs(path)
    assert len(run.splits) == 1


def test_list_runs_reads_metadata_only_and_opens_read_only(tmp_path, monkeypatch):
    path = tmp_path / "meta.h5"
    write_run(path, "m", "d", "s", logits(), labels(), class_names=list("abcde"))
    before = path.read_bytes()
    modes = []

    class SpyFile(h5py.File):
        def __init__(self, name, mode="r", *args, **kwargs):
            modes.append(mode)
            super().__init__(name, mode, *args, **kwargs)

    def no_data(*args, **kwargs):
        raise AssertionError("list_runs read array data")

    monkeypatch.setattr(h5py, "File", SpyFile)
    monkeypatch.setattr(h5py.Dataset, "__getitem__", no_data)
    monkeypatch.setattr(h5py.Dataset, "read_direct", no_data)
    monkeypatch.setattr(h5py.Dataset, "__array__", no_data)
    (run,) = list_runs(path)
    assert run.k == 5 and modes == ["r"]
    monkeypatch.undo()
    read_split(path, run, "s")
    assert path.read_bytes() == before


def test_a_settled_file_is_walked_once_and_again_after_any_change(tmp_path, monkeypatch):
    """The runs of a file are remembered by the open file's identity: listing it again walks nothing; adding a run,
    replacing the file by another (a new inode) or a malformed file are all seen. A file changed within the last
    SETTLED_NS is walked every time (its times could still tick over unseen), so the first listings here, of a
    file just written, walk it each time."""
    from calibview.core.io import discovery

    path = tmp_path / "runs.h5"
    write_run(path, "m", "d", "s", logits(), labels())
    before = discovery.walks
    list_runs(path)
    list_runs(path)
    assert discovery.walks - before == 2            # just written: not settled
    monkeypatch.setattr(discovery, "SETTLED_NS", -1)
    list_runs(path)
    before = discovery.walks
    (run,) = list_runs(path)
    find_run(path, "m/d")
    read_split(path, run, "s")
    assert discovery.walks == before                # the listing, the lookup and the read walked nothing
    write_run(path, "m2", "d", "s", logits(), labels())
    assert [r.name for r in list_runs(path)] == ["m/d", "m2/d"]
    assert discovery.walks > before
    other = tmp_path / "other.h5"
    write_run(other, "x", "d", "s", logits(), labels())
    os.replace(other, path)
    assert [r.name for r in list_runs(path)] == ["x/d"]
    raw(tmp_path / "bad.h5", {"m/d/s/logits": logits()})      # no labels
    os.replace(tmp_path / "bad.h5", path)
    for _ in range(2):                              # refused each time: a failed listing is not remembered
        with pytest.raises(CalibviewError, match="no labels"):
            list_runs(path)


def test_find_run_by_name_model_or_suffix(tmp_path):
    path = tmp_path / "many.h5"
    for model, dataset in [("r-brier", "cifar10"), ("r-focal", "cifar10"), ("r-brier", "cifar100")]:
        write_run(path, model, dataset, "s", logits(), labels())
    runs = list_runs(path)
    assert find_run(path, "r-brier/cifar100").name == "r-brier/cifar100"
    assert find_run(runs, "r-focal").name == "r-focal/cifar10"  # unique model name
    assert find_run(runs, "cifar100").name == "r-brier/cifar100"  # unique suffix
    has(error_of(find_run, runs, "cifar10"), "many.h5", "matches 2 runs", "r-brier/cifar10", "r-focal/cifar10")
    has(error_of(find_run, path, "r-brier"), "matches 2 runs")
    has(error_of(read_split, path, "vgg/cifar10", "s"), "many.h5", "'vgg/cifar10' not found",
        "available runs: r-brier/cifar10, r-brier/cifar100, r-focal/cifar10")


def test_find_run_matches_whole_path_components_only(tmp_path):
    path = tmp_path / "parts.h5"
    for model, dataset in [("resnet110-brier", "cifar100"), ("resnet110", "svhn")]:
        write_run(path, model, dataset, "s", logits(), labels())
    runs = list_runs(path)
    assert find_run(runs, "cifar100").name == "resnet110-brier/cifar100"
    assert find_run(runs, "resnet110-brier/cifar100").name == "resnet110-brier/cifar100"
    assert find_run(runs, "/resnet110-brier/cifar100").name == "resnet110-brier/cifar100"  # the HDF5 group path
    assert find_run(runs, "resnet110").name == "resnet110/svhn"  # the model, not a prefix of "resnet110-brier"
    for partial in ("ar100", "0-brier/cifar100", "brier/cifar100", "vhn", "resnet11"):
        has(error_of(find_run, runs, partial), "parts.h5", f"'{partial}' not found",
            "available runs: resnet110-brier/cifar100, resnet110/svhn")


# ----------------------------------------------------------------------------------- validation, one per error


def test_missing_file(tmp_path):
    has(error_of(list_runs, tmp_path / "absent.h5"), "absent.h5", "does not exist")


def test_not_an_hdf5_file(tmp_path):
    path = tmp_path / "notes.h5"
    path.write_text("these are not logits\n")
    has(error_of(list_runs, path), "notes.h5", "not an HDF5 file")
    has(error_of(read_split, path, "x", "y"), "notes.h5", "not an HDF5 file")


def test_no_runs_in_file(tmp_path):
    path = raw(tmp_path / "empty.h5", {"weights/conv1": np.zeros((3, 3)), "scores": np.zeros((4, 2))})
    has(error_of(list_runs, path), "empty.h5", "no runs found in /", "'logits'", "'labels'")


def test_missing_labels(tmp_path):
    path = raw(tmp_path / "nolabels.h5", {"m/d/val/logits": logits()})
    has(error_of(list_runs, path), "nolabels.h5", "/m/d/val/logits", "/m/d/val/labels is missing")


def test_row_count_mismatch(tmp_path):
    path = raw(tmp_path / "mismatch.h5", {"m/d/val/logits": logits(40), "m/d/val/labels": labels(39)})
    has(error_of(list_runs, path), "mismatch.h5", "/m/d/val/logits has 40 rows", "/m/d/val/labels has 39")


def test_fewer_than_two_classes(tmp_path):
    path = raw(tmp_path / "k1.h5", {"m/d/val/logits": logits(10, 1), "m/d/val/labels": np.zeros(10, int)})
    has(error_of(list_runs, path), "k1.h5", "/m/d/val/logits", "K = 1")


def test_scores_not_2d(tmp_path):
    path = raw(tmp_path / "flat3d.h5", {"m/d/val/logits": np.zeros((4, 3, 2), np.float32),
                                        "m/d/val/labels": labels(4, 3)})
    has(error_of(list_runs, path), "flat3d.h5", "/m/d/val/logits", "shape (4, 3, 2)", "2-D")


def test_labels_not_1d(tmp_path):
    path = raw(tmp_path / "lab2d.h5", {"m/d/val/logits": logits(10), "m/d/val/labels": labels(10)[:, None]})
    has(error_of(list_runs, path), "lab2d.h5", "/m/d/val/labels", "shape (10, 1)", "1-D")


def test_labels_out_of_range(tmp_path):
    y = labels(40)
    y[[3, 8, 9]] = [5, -1, 17]
    path = raw(tmp_path / "range.h5", {"m/d/val/logits": logits(40), "m/d/val/labels": y})
    message = error_of(read_split, path, "m/d", "val")
    has(message, "range.h5", "/m/d/val/labels", "3 of 40 labels", "[0, 5)", "for example 5 at row 3")


def test_float_labels_are_rejected(tmp_path):
    path = raw(tmp_path / "floatlab.h5", {"m/d/val/logits": logits(), "m/d/val/labels": labels().astype(float)})
    has(error_of(list_runs, path), "floatlab.h5", "/m/d/val/labels", "float64", "integer")


def test_integer_scores_are_rejected(tmp_path):
    path = raw(tmp_path / "intlogits.h5", {"m/d/val/logits": np.ones((5, 3), np.int32),
                                           "m/d/val/labels": labels(5, 3)})
    has(error_of(list_runs, path), "intlogits.h5", "/m/d/val/logits", "int32", "floating point")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_logits_counted_across_chunks(tmp_path, bad):
    z = logits(100, 4)
    z[[2, 2, 55, 99], [0, 1, 3, 2]] = bad
    path = raw(tmp_path / "nan.h5", {"m/d/test/logits": z, "m/d/test/labels": labels(100, 4)})
    for rows in (None, 7):
        message = error_of(read_split, path, "m/d", "test", chunk_rows=rows)
        has(message, "nan.h5", "/m/d/test/logits", "3 of 100 rows", "NaN or Inf", "first at row 2")


def test_negative_probabilities(tmp_path):
    p = np.full((20, 4), 0.25, np.float32)
    p[[4, 11]] = [-0.1, 0.35, 0.5, 0.25]
    path = raw(tmp_path / "neg.h5", {"m/d/s/probs": p, "m/d/s/labels": labels(20, 4)})
    has(error_of(read_split, path, "m/d", "s", chunk_rows=6), "neg.h5", "/m/d/s/probs", "2 of 20 rows",
        "negative", "first at row 4")


def test_probability_rows_not_summing_to_one(tmp_path):
    p = np.full((20, 4), 0.25, np.float32)
    p[[0, 7, 19]] *= 1.2
    path = raw(tmp_path / "sum.h5", {"m/d/s/probs": p, "m/d/s/labels": labels(20, 4)})
    has(error_of(read_split, path, "m/d", "s"), "sum.h5", "/m/d/s/probs", "3 of 20 rows", "do not sum to 1",
        "within 0.001", "first at row 0, sum 1.2")


def test_empty_split(tmp_path):
    path = raw(tmp_path / "nosamples.h5", {"m/d/s/logits": np.zeros((0, 3), np.float32),
                                           "m/d/s/labels": np.zeros(0, np.int64)})
    has(error_of(list_runs, path), "nosamples.h5", "/m/d/s/logits", "empty (N = 0)")


def test_unknown_split_lists_available(tmp_path):
    path = tmp_path / "splits.h5"
    write_splits(path, "m", "d", {"val": ("logits", logits(), labels()), "test": ("logits", logits(), labels())})
    has(error_of(read_split, path, "m/d", "train"), "splits.h5", "'train'", "/m/d", "available splits: val, test")
    has(error_of(list_runs(path)[0].split, "calib"), "splits.h5", "'calib'", "available splits: val, test")


def test_unknown_run_lists_available(tmp_path):
    path = tmp_path / "onerun.h5"
    write_run(path, "m", "d", "s", logits(), labels())
    has(error_of(read_split, path, "other", "s"), "onerun.h5", "'other' not found", "available runs: m/d")


def test_class_names_of_wrong_length(tmp_path):
    path = raw(tmp_path / "names.h5", {"m/d/s/logits": logits(), "m/d/s/labels": labels()},
               attrs={"m/d@class_names": np.array(["a", "b"], dtype=h5py.string_dtype())})
    has(error_of(list_runs, path), "names.h5", "class_names", "/m/d", "K = 5")


def test_splits_of_a_run_must_share_k(tmp_path):
    path = raw(tmp_path / "mixedk.h5", {"m/d/a/logits": logits(10, 3), "m/d/a/labels": labels(10, 3),
                                        "m/d/b/logits": logits(10, 4), "m/d/b/labels": labels(10, 4)})
    has(error_of(list_runs, path), "mixedk.h5", "/m/d/a K = 3", "/m/d/b K = 4")


# ----------------------------------------------------------------------------------------------------- writing


def test_write_refuses_to_overwrite_a_split_unless_asked(tmp_path):
    path = tmp_path / "w.h5"
    write_run(path, "m", "d", "s", logits(), labels())
    has(error_of(write_run, path, "m", "d", "s", logits(), labels()), "w.h5", "/m/d/s already exists",
        "overwrite=True")
    z = logits()
    write_run(path, "m", "d", "s", z, labels(), overwrite=True)
    np.testing.assert_array_equal(read_split(path, "m/d", "s").scores, z)


def test_write_validates_before_creating_anything(tmp_path):
    path = tmp_path / "new.h5"
    z = logits(10, 3)
    z[4, 1] = np.nan
    has(error_of(write_run, path, "m", "d", "s", z, labels(10, 3)), "new.h5", "/m/d/s/logits", "1 of 10 rows")
    has(error_of(write_run, path, "m", "d", "s", logits(10, 3), labels(10, 3) + 1), "/m/d/s/labels",
        "3 of 10 labels", "for example 3 at row 2")
    has(error_of(write_run, path, "m", "d", "s", logits(10, 3), None), "new.h5", "exactly one of logits or probs")
    assert os.listdir(tmp_path) == []  # no file and no temporary left behind


def test_write_appends_probs_and_refuses_non_hdf5_output(tmp_path):
    path = tmp_path / "app.h5"
    write_run(path, "m", "d", "val", logits(10, 3), labels(10, 3))
    p = np.full((10, 3), 1 / 3)
    write_run(path, "m", "d", "test", probs=p, labels=labels(10, 3))
    (run,) = list_runs(path)
    assert [(s.name, s.kind) for s in run.splits] == [("val", "logits"), ("test", "probs")]
    has(error_of(write_run, path, "m", "d", "other", logits(10, 4), labels(10, 4)), "app.h5", "K = 3", "K = 4")
    text = tmp_path / "text.h5"
    text.write_text("keep me")
    has(error_of(write_run, text, "m", "d", "s", logits(), labels()), "text.h5", "not an HDF5 file")
    assert text.read_text() == "keep me"


def test_uncompressed_and_big_endian_writes(tmp_path):
    path = tmp_path / "plain.h5"
    z = logits(20, 3).astype(">f4")
    write_run(path, "m", "", "s", z, labels(20, 3).astype(np.uint8), compression=None)
    (run,) = list_runs(path)
    assert (run.name, run.path) == ("m", "/m")
    data = read_split(path, "m", "s", chunk_rows=6)
    np.testing.assert_array_equal(data.scores, z.astype(np.float32))


# -------------------------------------------------------------------------------------------------------- demo

DEMO = Path(__file__).resolve().parents[3] / "calibview" / "resources" / "demo.h5"
DEMO_RUNS = {"resnet110-brier/cifar10": 10, "resnet110-flsd53/cifar10": 10, "resnet110-brier/cifar100": 100,
             "resnet110-ensemble/cifar10": 10}


def test_demo_file_lists_the_three_runs_and_their_ensemble():
    runs = list_runs(DEMO)
    assert {r.name: r.k for r in runs} == DEMO_RUNS
    for run in runs:
        if run.model == "resnet110-ensemble":           # the members run: tests/core/io/test_members.py
            assert "Mukhoti et al. 2020" in run.attrs["attribution"]
            continue
        assert run.model in ("resnet110-brier", "resnet110-flsd53")
        assert [(s.name, s.n, s.k, s.kind, s.dtype) for s in run.splits] == [
            ("val", 5000, run.k, "logits", "float32"), ("test", 10000, run.k, "logits", "float32")]
        assert len(run.class_names) == run.k
        assert "Mukhoti et al. 2020" in run.attrs["attribution"]
        assert "MIT licence, Copyright (c) 2021 AIgen" in run.attrs["attribution"]
        assert "2e41ac939f23e5b20d2910000d887ba33c3af402" in run.attrs["attribution"]
    names = {r.dataset: r.class_names for r in runs}
    assert names["cifar10"][:3] == ("airplane", "automobile", "bird") and names["cifar10"][-1] == "truck"
    assert names["cifar100"][:2] == ("apple", "aquarium_fish") and names["cifar100"][-1] == "worm"
    assert names["cifar100"][49] == "mountain" and names["cifar100"][72] == "seal"
    assert DEMO.stat().st_size < 10e6
    data = read_split(DEMO, "resnet110-brier/cifar100", "test")
    assert data.scores.shape == (10000, 100) and data.labels.min() == 0 and data.labels.max() == 99


def test_demo_file_equals_its_sources(shared_data):
    sources = {"resnet110-brier/cifar10": "mukhoti_brier_cifar10_resnet110.npz",
               "resnet110-flsd53/cifar10": "mukhoti_flsd53_cifar10_resnet110.npz",
               "resnet110-brier/cifar100": "mukhoti_brier_cifar100_resnet110.npz"}
    for name, filename in sources.items():
        with np.load(shared_data / filename) as z:
            for split in ("val", "test"):
                data = read_split(DEMO, name, split)
                np.testing.assert_array_equal(data.scores, z[f"logits_{split}"])
                np.testing.assert_array_equal(data.labels, z[f"labels_{split}"])


def test_demo_build_is_deterministic_and_up_to_date(shared_data, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_demo", DEMO.parents[2] / "resources" / "build_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.build(shared_data, tmp_path / "demo.h5")
    assert out.read_bytes() == DEMO.read_bytes(), "calibview/resources/demo.h5 is stale: run resources/build_demo.py"
    assert re.fullmatch(r"[^/]+/[^/]+", list_runs(out)[0].name)
    assert isinstance(list_runs(out)[0], RunInfo)


@pytest.mark.parametrize("layout", ["plain", "float32", "read-only", "reversed rows", "every other column"])
def test_array_checks_find_the_same_bad_rows_in_every_layout(layout):
    """The row sums behind the score checks take a fast path for writable, forward-strided float arrays and
    numpy's sum otherwise; either way the bad rows are the ones a plain loop finds, with no warning."""
    from calibview.core.io.checks import validate_arrays
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(6), size=400)
    bad = [7, 150, 399]
    p[bad, 0] += 0.01
    if layout == "every other column":
        wide = np.zeros((400, 12))
        wide[:, ::2] = p
        p = wide[:, ::2]                                    # a strided view, not a copy
    elif layout == "float32":
        p = p.astype(np.float32)
    elif layout == "reversed rows":
        p, bad = p[::-1], sorted(399 - b for b in bad)
    elif layout == "read-only":
        p.flags.writeable = False
    loop = [i for i in range(p.shape[0]) if abs(sum(float(v) for v in p[i]) - 1.0) > 1e-6]
    assert loop == bad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CalibviewError, match=rf"{len(bad)} of 400 rows .*do not sum to 1.*first at row {bad[0]},"):
            validate_arrays("x.h5", "/m/d/test/probs", "/m/d/test/labels", "probs", p, np.zeros(400, np.int64))
