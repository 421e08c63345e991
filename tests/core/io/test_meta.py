"""Metadata columns in the file format: written, listed, read back and validated; never taken for a split; any split
name; imported from .npz ``meta_`` keys; listed by ``calibview runs``."""

import h5py
import numpy as np
import pytest

from calibview.cli import main
from calibview.core.evaluation.engine import Engine
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.importers import import_arrays
from calibview.core.io.discovery import list_runs
from calibview.core.io.logits import read_meta
from calibview.core.io.writer import write_run, write_splits
from calibview.core.evaluation.slices import evaluate_slices

N, K = 40, 3


def _arrays(n=N, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, K)).astype(np.float32), rng.integers(0, K, n)


@pytest.fixture()
def with_meta(tmp_path):
    z, y = _arrays()
    meta = {"region": np.array(["north", "south", "east", "west"] * 10), "age": np.linspace(20, 60, N),
            "site": np.arange(N) % 3, "ok": np.arange(N) % 2 == 0}
    path = tmp_path / "m.h5"
    write_run(path, "net", "toy", "val", z, y, meta=meta)
    return path, meta


def test_columns_are_listed_and_read_back(with_meta):
    path, meta = with_meta
    split = list_runs(path)[0].split("val")
    assert split.meta == ("region", "age", "site", "ok")
    for column, values in meta.items():
        got = read_meta(path, "net/toy", "val", column)
        np.testing.assert_array_equal(got, values.astype(object) if values.dtype.kind == "U" else values)
        assert not got.flags.writeable
    assert read_meta(path, "net/toy", "val", "site").dtype == np.int64


def test_a_meta_group_is_never_a_split(tmp_path):
    z, y = _arrays()
    path = tmp_path / "m.h5"
    # columns that look like a split's datasets: without the rule, /net/toy/val/meta would be a split
    write_run(path, "net", "toy", "val", z, y, meta={"logits": np.arange(N), "labels": np.arange(N) % K})
    (run,) = list_runs(path)
    assert run.split_names == ("val",) and run.split("val").meta == ("logits", "labels")


def test_any_split_name(tmp_path):
    z, y = _arrays(60)
    path = tmp_path / "m.h5"
    write_splits(path, "net", "toy", {"deploy": ("logits", z[:30], y[:30]),
                                      "shadow-2026-11": ("logits", z[30:], y[30:])},
                 meta={"shadow-2026-11": {"g": np.arange(30) % 2}})
    req = EvalRequest(file=str(path), run="net/toy", fit_split="deploy", eval_split="shadow-2026-11",
                      calibrators=("none", "ts"), n_boot=0, device="cpu")
    result = evaluate_slices(Engine(), req, "g", min_slice=10)
    assert [r["slice"] for r in result.records if r["calibrator"] == "ts"] == [None, "0", "1"]
    assert {r["split"] for r in result.records} == {"shadow-2026-11"}


@pytest.mark.parametrize("values, message", [
    (np.arange(N - 1), "has 39 values but the split has N = 40 samples"),
    (np.zeros((N, 2)), r"has shape \(40, 2\) but must be 1-D"),
    (np.array(["a", None] * (N // 2), dtype=object), "2 of 40 values|20 of 40 values of the categorical"),
    (np.r_[np.inf, np.zeros(N - 1)], "1 of 40 values of metadata column .* are infinite"),
])
def test_writing_a_bad_column_is_refused_with_one_sentence(tmp_path, values, message):
    z, y = _arrays()
    with pytest.raises(CalibviewError, match=message):
        write_run(tmp_path / "m.h5", "net", "toy", "val", z, y, meta={"c": values})
    assert not (tmp_path / "m.h5").exists()


def test_reading_a_bad_column_names_file_and_dataset(with_meta):
    path, _ = with_meta
    with h5py.File(path, "r+") as f:
        g = f["net/toy/val/meta"]
        g.create_dataset("short", data=np.arange(5))
        g.create_dataset("grid", data=np.zeros((N, 2)))
        codes = g.create_dataset("codes", data=np.r_[np.nan, np.ones(N - 1)])
        codes.attrs["categorical"] = True
        g.create_dataset("floatcodes", data=np.r_[2.0, np.ones(N - 1)]).attrs["categorical"] = True
    with pytest.raises(CalibviewError, match=rf"{path}: metadata column /net/toy/val/meta/short has 5 values"):
        read_meta(path, "net/toy", "val", "short")
    with pytest.raises(CalibviewError, match="grid has shape"):
        read_meta(path, "net/toy", "val", "grid")
    with pytest.raises(CalibviewError, match="1 of 40 values of the categorical metadata column .*codes are NaN"):
        read_meta(path, "net/toy", "val", "codes")
    assert read_meta(path, "net/toy", "val", "floatcodes").dtype == np.int64
    with pytest.raises(CalibviewError, match=r"no metadata column 'x' \(available: region, age, site, ok"):
        read_meta(path, "net/toy", "val", "x")


def test_class_is_a_reserved_column_name(tmp_path):
    z, y = _arrays()
    with pytest.raises(CalibviewError, match="may not be called 'class'"):
        write_run(tmp_path / "m.h5", "net", "toy", "val", z, y, meta={"class": y})


def test_import_npz_meta_keys(tmp_path):
    z, y = _arrays(50)
    np.savez(tmp_path / "s.npz", logits_val=z[:20], labels_val=y[:20], logits_deploy_a=z[20:],
             labels_deploy_a=y[20:], meta_age_group_val=np.arange(20) % 2,
             meta_region_deploy_a=np.array(["x", "y", "z"] * 10))
    (run,) = import_arrays(tmp_path / "s.npz", tmp_path / "o.h5")
    assert run.split("val").meta == ("age_group",) and run.split("deploy_a").meta == ("region",)
    assert list(read_meta(tmp_path / "o.h5", run, "deploy_a", "region")[:3]) == ["x", "y", "z"]
    np.savez(tmp_path / "u.npz", logits=z, labels=y, meta_site=np.arange(50) % 4)
    (run,) = import_arrays(tmp_path / "u.npz", tmp_path / "o2.h5", split="deploy")
    np.testing.assert_array_equal(read_meta(tmp_path / "o2.h5", run, "deploy", "site"), np.arange(50) % 4)
    np.savez(tmp_path / "b.npz", logits_val=z, labels_val=y, meta_site=np.arange(50))
    with pytest.raises(CalibviewError, match="meta_site does not end in the name of a split"):
        import_arrays(tmp_path / "b.npz", tmp_path / "o3.h5")
    np.savez(tmp_path / "c.npz", logits=z, labels=y, meta_site=np.arange(3))
    with pytest.raises(CalibviewError, match="c.npz: metadata column meta_site has 3 values"):
        import_arrays(tmp_path / "c.npz", tmp_path / "o3.h5")
    assert not (tmp_path / "o3.h5").exists()


def test_runs_lists_the_columns(with_meta, capsys):
    path, _ = with_meta
    assert main(["runs", str(path)]) == 0
    assert "meta: region age site ok" in capsys.readouterr().out
