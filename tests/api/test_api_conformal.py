"""calibview.conformal on arrays against the file path (``calibview conformal --json`` on the same arrays written to
an HDF5 file, every key and value), and its LAC coverage against the order statistic computed by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import calibview as cv
from calibview.cli import main
from calibview.core.errors import CalibviewError
from calibview.core.io.writer import write_run


def _split(rng, n, k=6):
    z = rng.normal(size=(n, k)) * 1.5
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in p])
    group = np.where(rng.random(n) < 0.5, "a", "b")
    return (2 * z).astype(np.float32), y, group


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    return {name: _split(rng, n) for name, n in (("fit", 300), ("calib", 500), ("test", 400))}


def _file(tmp_path, data):
    path = tmp_path / "run.h5"
    for split, (z, y, g) in data.items():
        write_run(path, "model", "data", split, logits=z, labels=y, meta={"group": g})
    return path


def _cli(capsys, path, *extra):
    capsys.readouterr()
    rc = main(["conformal", str(path), "--calib-split", "calib", "--eval-split", "test", "--json", "--device", "cpu",
               "--quiet", *extra])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def _equal(got, want):
    assert len(got) == len(want) and len(want) > 10
    for g, w in zip(got, want):
        assert list(g) == list(w)
        for key, b in w.items():
            a = g[key]
            if isinstance(b, float):
                assert a == pytest.approx(b, rel=1e-12, abs=1e-12), key
            else:
                assert a == b, key


def test_records_equal_the_command_on_a_file(tmp_path, capsys, data):
    path = _file(tmp_path, data)
    want = _cli(capsys, path, "--alpha", "0.1,0.2", "--score", "lac,aps,raps", "--calibrator", "none,ts",
                "--fit-split", "fit", "--n-boot", "40", "--seed", "2")
    z, y, g = data["test"]
    res = cv.conformal(z, y, calib=data["calib"][:2], fit=data["fit"][:2], alpha=[0.1, 0.2],
                       score="lac,aps,raps", calibrator=["none", "ts"], n_boot=40, seed=2, device="cpu",
                       meta={"group": g})
    assert any(r["group"] == "group=a" for r in res.rows)
    _equal(res.rows, want)


def test_mondrian_on_a_column_and_randomised_sets_equal_the_command(tmp_path, capsys, data):
    path = _file(tmp_path, data)
    want = _cli(capsys, path, "--alpha", "0.1", "--score", "aps", "--mondrian", "group", "--randomized",
                "--n-boot", "0")
    z, y, g = data["test"]
    res = cv.conformal(z, y, calib=data["calib"][:2], alpha=0.1, score="aps", mondrian="group", randomized=True,
                       n_boot=0, meta={"group": g}, calib_meta={"group": data["calib"][2]}, device="cpu")
    _equal(res.rows, want)


def test_lac_coverage_is_the_hand_computed_order_statistic(data):
    zc, yc, _ = data["calib"]
    zt, yt, _ = data["test"]
    res = cv.conformal(zt, yt, calib=(zc, yc), alpha=0.1, score="lac", n_boot=0)

    def probs(z):
        p = np.exp(z - z.max(1, keepdims=True))
        return p / p.sum(1, keepdims=True)

    s = np.sort(1 - probs(zc.astype(np.float64))[np.arange(len(yc)), yc])
    i = math.ceil((len(s) + 1) * 9 / 10)            # the ceil((n + 1)(1 - alpha))-th smallest, alpha = 1/10
    qhat = s[i - 1]
    sets = (1 - probs(zt.astype(np.float64))) <= qhat
    rec = res.overall("lac", 0.1)
    assert rec["qhat"] == pytest.approx(qhat, abs=1e-6)          # float32 logits: softmax rounding only
    assert rec["coverage"] == pytest.approx(sets[np.arange(len(yt)), yt].mean(), abs=1.5 / len(yt))
    assert rec["mean_set_size"] == pytest.approx(sets.sum(1).mean(), abs=1.5 / len(yt))
    assert res.to_pandas().shape[0] == len(res.rows)


def test_bad_calls_are_one_sentence(data):
    z, y, _ = data["test"]
    with pytest.raises(CalibviewError, match="calib=\\(scores, labels\\) is missing"):
        cv.conformal(z, y)
    with pytest.raises(CalibviewError, match="need fit=\\(scores, labels\\)"):
        cv.conformal(z, y, calib=data["calib"][:2], calibrator="ts")
    with pytest.raises(CalibviewError, match="strictly between 0 and 1"):
        cv.conformal(z, y, calib=data["calib"][:2], alpha=1.5)
    with pytest.raises(CalibviewError, match="calib must be a \\(scores, labels\\) pair"):
        cv.conformal(z, y, calib=z)
    with pytest.raises(CalibviewError, match="needs that column in both"):
        cv.conformal(z, y, calib=data["calib"][:2], mondrian="group")
