"""calibview.evaluate(members=(M, N, K)): the ensemble's rows against numpy, each member's rows, and the
per-sample entropy split on the result."""

from __future__ import annotations

import numpy as np
import pytest

import calibview as cv


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_evaluate_members_gives_the_ensemble_then_each_member():
    rng = np.random.default_rng(5)
    m, n, k = 3, 400, 5
    y, fy = rng.integers(0, k, n), rng.integers(0, k, 300)
    z, fz = rng.normal(size=(m, n, k)), rng.normal(size=(m, 300, k))
    res = cv.evaluate(members=z, labels=y, fit=(fz, fy), calibrators=["none", "ts"], n_boot=0)
    assert [(r["member"], r["calibrator"]) for r in res.rows] == [
        (mem, c) for mem in ("ensemble", "0", "1", "2") for c in ("none", "ts")]
    p = _softmax(z).mean(0)
    assert res["none"].nll == pytest.approx(-np.log(p[np.arange(n), y]).mean(), rel=1e-9)
    one = next(r for r in res.rows if r["member"] == "1" and r["calibrator"] == "none")
    assert one["nll"] == pytest.approx(-np.log(_softmax(z[1])[np.arange(n), y]).mean(), rel=1e-6)
    d = res.uncertainty
    pm = _softmax(z)
    mi = (pm * (np.log(pm) - np.log(p)[None])).sum(2).mean(0)
    np.testing.assert_allclose(d.epistemic, mi, rtol=1e-8, atol=1e-12)
    assert cv.evaluate(z[0], y, n_boot=0).uncertainty is None


def test_evaluate_refuses_one_member_and_other_labels():
    rng = np.random.default_rng(6)
    z, y = rng.normal(size=(1, 50, 3)), rng.integers(0, 3, 50)
    with pytest.raises(cv.CalibviewError, match="M = 1"):
        cv.evaluate(members=z, labels=y, n_boot=0)
    with pytest.raises(cv.CalibviewError, match="one label per sample"):
        cv.evaluate(members=np.concatenate([z, z]), labels=y[:-1], n_boot=0)
