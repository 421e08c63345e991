"""The top-label form of a split (confidence, predictions, labels): found by discovery beside logits runs, read
back exactly, and every malformed file refused in one sentence naming the dataset, on listing or on reading."""

from __future__ import annotations

import subprocess
import sys
import os

import h5py
import numpy as np
import pytest

from calibview.core.errors import CalibviewError
from calibview.core.io.discovery import list_runs
from calibview.core.io.toplabel.read import read_toplabel
from calibview.core.io.toplabel.write import from_scores, write_toplabel
from calibview.core.io.writer import write_run


def error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(CalibviewError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert message.endswith(".") and ". " not in message and "\n" not in message, message
    return message


def _raw(path, conf, pred, labels, k=None):
    with h5py.File(path, "w") as f:
        g = f.create_group("m/d")
        if k is not None:
            g.attrs["num_classes"] = k
        f["m/d/test/confidence"], f["m/d/test/predictions"], f["m/d/test/labels"] = conf, pred, labels
    return path


def test_round_trip_beside_a_logits_run(tmp_path):
    rng = np.random.default_rng(1)
    z = rng.normal(size=(50, 4))
    y = rng.integers(0, 4, 50)
    path = tmp_path / "both.h5"
    write_run(path, "logit", "toy", "test", logits=z.astype(np.float32), labels=y)
    conf, pred = from_scores(z)
    write_toplabel(path, "top", "toy", {"test": (conf, pred, y)}, num_classes=4, class_names=list("abcd"))
    runs = {r.name: r for r in list_runs(path)}
    assert runs["logit/toy"].splits[0].kind == "logits"
    top = runs["top/toy"]
    assert (top.k, top.class_names, top.splits[0].kind, top.splits[0].n) == (4, tuple("abcd"), "top-label", 50)
    data = read_toplabel(path, "top/toy", "test", chunk_rows=7)
    np.testing.assert_array_equal(data.confidence, conf)
    np.testing.assert_array_equal(data.predictions, z.argmax(1))
    np.testing.assert_array_equal(data.labels, y)
    p = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(conf, (p / p.sum(1, keepdims=True)).max(1), rtol=1e-14)
    assert not data.confidence.flags.writeable


def test_k_is_unknown_without_num_classes(tmp_path):
    path = _raw(tmp_path / "u.h5", np.array([0.5, 0.9]), np.array([7, 1]), np.array([7, 2]))
    run = list_runs(path)[0]
    assert run.k == 0
    assert read_toplabel(path, run, "test").k == 0


@pytest.mark.parametrize("conf,pred,labels,k,parts", [
    ([0.5, 1.5, 0.2], [0, 1, 1], [0, 1, 0], 3, ["1 of 3 confidences", "outside [0, 1]", "1.5", "row 1"]),
    ([0.5, np.nan, 0.2], [0, 1, 1], [0, 1, 0], 3, ["NaN or outside [0, 1]", "row 1"]),
    ([0.5, -0.1, 0.2], [0, 1, 1], [0, 1, 0], None, ["outside [0, 1]"]),
    ([0.5, 0.6, 0.2], [0, 3, 1], [0, 1, 0], 3, ["predictions", "outside [0, 3)", "3 at row 1"]),
    ([0.5, 0.6, 0.2], [0, 1, 1], [0, 1, 5], 3, ["labels", "outside [0, 3)", "5 at row 2"]),
    ([0.5, 0.6, 0.2], [0, -1, 1], [0, 1, 1], None, ["predictions", "outside [0, inf)"]),
])
def test_bad_values_are_refused_on_reading(tmp_path, conf, pred, labels, k, parts):
    path = _raw(tmp_path / "bad.h5", np.array(conf), np.array(pred), np.array(labels), k)
    message = error_of(read_toplabel, path, "m/d", "test")
    assert all(p in message for p in parts), message
    # the writer applies the same rules
    error_of(write_toplabel, tmp_path / "w.h5", "m", "d", {"test": (conf, pred, labels)}, num_classes=k)
    assert not (tmp_path / "w.h5").exists()


@pytest.mark.parametrize("conf,pred,labels,k,parts", [
    (np.array([0.5, 0.6, 0.2]), np.array([0, 1]), np.array([0, 1, 1]), None,
     ["different lengths", "confidence 3, predictions 2, labels 3"]),
    (np.array([1, 0, 1]), np.array([0, 1, 1]), np.array([0, 1, 1]), None, ["must be floating point"]),
    (np.array([0.5, 0.6]), np.array([0.0, 1.0]), np.array([0, 1]), None, ["predictions", "integer"]),
    (np.zeros((2, 2)), np.array([0, 1]), np.array([0, 1]), None, ["shape (2, 2)", "1-D"]),
    (np.array([0.5, 0.6]), np.array([0, 1]), np.array([0, 1]), 1, ["num_classes", "integer >= 2"]),
])
def test_bad_layouts_are_refused_on_listing(tmp_path, conf, pred, labels, k, parts):
    path = _raw(tmp_path / "bad.h5", conf, pred, labels, k)
    message = error_of(list_runs, path)
    assert all(p in message for p in parts), message


def test_missing_predictions_or_labels(tmp_path):
    path = tmp_path / "miss.h5"
    with h5py.File(path, "w") as f:
        f["m/d/test/confidence"] = np.array([0.5])
        f["m/d/test/labels"] = np.array([0])
    assert "m/d/test/predictions is missing" in error_of(list_runs, path)


def test_the_command_line_exits_2_with_one_sentence(tmp_path):
    path = _raw(tmp_path / "bad.h5", np.array([0.5, 2.0]), np.array([0, 1]), np.array([0, 1]), 2)
    r = subprocess.run([sys.executable, "-m", "calibview.cli.program", "metrics", str(path), "--eval-split", "test",
                        "--calibrators", "none", "--n-boot", "0"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert r.returncode == 2, r.stderr
    assert "outside [0, 1]" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
