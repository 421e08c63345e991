"""Regression runs in the file format: what discovery finds, and every bad input refused by the command line
with one sentence and exit 2 (nothing else on stderr)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from calibview.cli.program import main
from calibview.core.io import discovery
from calibview.core.io.regression.discovery import list_regression_runs
from calibview.core.io.regression.read import read_regression_split


def _write(path, **arrays) -> None:
    n = 50
    rng = np.random.default_rng(0)
    levels = arrays.pop("levels", None)
    with h5py.File(path, "w") as f:
        for split in ("val", "test"):
            g = f.create_group(f"m/d/{split}")
            g["mean"] = rng.normal(size=n)
            targets = rng.normal(size=n)
            if arrays.get("nan_targets"):
                targets[3] = np.nan
            g["targets"] = targets
            for k, v in arrays.items():
                if k != "nan_targets":
                    g[k] = v
            if levels is not None:
                g["quantiles"].attrs["levels"] = levels


def _q(n=50, rows_crossing=0):
    q = np.sort(np.random.default_rng(1).normal(size=(n, 3)), axis=1)
    q[:rows_crossing] = q[:rows_crossing, ::-1]
    return q


def test_a_regression_only_file_has_no_classification_runs_and_one_regression_run(tmp_path):
    path = tmp_path / "r.h5"
    _write(path, var=np.ones(50))
    assert discovery.list_runs(path) == []
    (run,) = list_regression_runs(path)
    assert (run.name, run.form, run.split_names, run.describe()) == ("m/d", "var", ("test", "val"), "var")


@pytest.mark.parametrize("arrays,expected", [
    (dict(var=np.r_[np.ones(49), 0.0]), "zero or negative"),
    (dict(var=np.r_[np.ones(49), -1.0]), "zero or negative"),
    (dict(quantiles=_q(), levels=np.array([0.1, 0.5, 0.5])), "strictly increasing"),
    (dict(quantiles=_q(), levels=np.array([0.9, 0.5, 0.1])), "strictly increasing"),
    (dict(quantiles=_q(), levels=np.array([0.0, 0.5, 0.9])), "strictly between 0 and 1"),
    (dict(quantiles=_q(), levels=np.array([0.1, 0.5, 1.2])), "strictly between 0 and 1"),
    (dict(quantiles=_q(rows_crossing=4), levels=np.array([0.1, 0.5, 0.9])), "in 4 of 50 rows"),
    (dict(var=np.ones(50), nan_targets=True), "NaN"),
    (dict(var=np.ones(50), quantiles=_q(), levels=np.array([0.1, 0.5, 0.9])), "both var and quantiles"),
])
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, capsys, arrays, expected):
    path = tmp_path / "bad.h5"
    _write(path, **arrays)
    rc = main(["metrics", str(path), "--n-boot", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert expected in err
    assert err.count("\n") == 0 and err.startswith("calibview: error:")
    assert err.rstrip(".").count(". ") == 0


def test_allow_crossing_sorts_the_rows_and_says_how_many(tmp_path, capsys):
    path = tmp_path / "cross.h5"
    _write(path, quantiles=_q(rows_crossing=4), levels=np.array([0.1, 0.5, 0.9]))
    (run,) = list_regression_runs(path)
    data = read_regression_split(run, "test", allow_crossing=True)
    assert data.sorted_rows == 4 and np.all(np.diff(data.quantiles, axis=1) >= 0)
    assert main(["metrics", str(path), "--n-boot", "0", "--allow-crossing"]) == 0
    assert "4 rows of crossing quantiles sorted" in capsys.readouterr().err


def test_the_writer_refuses_what_the_reader_would_and_leaves_the_output_as_it_was(tmp_path):
    from calibview.core.errors import CalibviewError
    from calibview.core.io.regression.write import write_regression

    path = tmp_path / "w.h5"
    rng = np.random.default_rng(3)
    mean, y = rng.normal(size=20), rng.normal(size=20)
    with pytest.raises(CalibviewError, match="zero or negative"):
        write_regression(path, "m", "d", {"val": {"mean": mean, "targets": y, "var": -np.ones(20)}})
    assert not path.exists()
    run = write_regression(path, "m", "d", {"val": {"mean": mean, "targets": y, "var": np.full(20, 2.0)}})
    assert (run.name, run.form, run.split_names, run.file) == ("m/d", "var", ("val",), str(path))
    before = path.read_bytes()
    q = np.sort(rng.normal(size=(20, 3)), axis=1)
    # a second split of another form: refused when the copy is read back, the file untouched
    with pytest.raises(CalibviewError, match="different predictive forms.*nothing was written"):
        write_regression(path, "m", "d", {"test": {"mean": mean, "targets": y, "quantiles": q,
                                                   "levels": [0.1, 0.5, 0.9]}})
    assert path.read_bytes() == before
    with pytest.raises(CalibviewError, match="already exists"):
        write_regression(path, "m", "d", {"val": {"mean": mean, "targets": y, "var": np.ones(20)}})
    crossing = q[:, ::-1]
    with pytest.raises(CalibviewError, match="cross"):
        write_regression(tmp_path / "q.h5", "m", "d", {"val": {"mean": mean, "targets": y, "quantiles": crossing,
                                                                "levels": [0.1, 0.5, 0.9]}})
    sorted_run = write_regression(tmp_path / "q.h5", "m", "d", {"val": {"mean": mean, "targets": y,
                                                                         "quantiles": crossing,
                                                                         "levels": [0.1, 0.5, 0.9]}}, crossing="sort")
    np.testing.assert_array_equal(read_regression_split(sorted_run, "val").quantiles, q)
    # no creation times: the same arrays give the same bytes
    for name in ("a.h5", "b.h5"):
        write_regression(tmp_path / name, "m", "d", {"val": {"mean": mean, "targets": y, "var": np.full(20, 2.0)}})
    assert (tmp_path / "a.h5").read_bytes() == (tmp_path / "b.h5").read_bytes()
