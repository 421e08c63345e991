"""The kernel curve's bootstrap confidence band: the pointwise percentiles of the curves of explicitly
resampled data (a Nadaraya-Watson estimate written here), and its columns in curves.csv."""

from __future__ import annotations

import csv
import io

import numpy as np
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.reports.tables import curves_csv
from calibview.core.stats.resampling import Resampler


def _write(path, n=600, k=4, seed=11):
    rng = np.random.default_rng(seed)
    for split in ("val", "test"):
        z = rng.normal(size=(n, k)) * 2.0
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
        write_run(path, "net", "toy", split, logits=(z / 0.7).astype(np.float32), labels=y)
    return str(path)


def _nw(conf, correct, x, h):
    w = np.exp(-0.5 * ((x[:, None] - conf[None, :]) / h) ** 2)
    return (w * correct).sum(1) / w.sum(1)


def test_the_band_is_the_percentiles_of_the_resampled_curves(tmp_path):
    path = _write(tmp_path / "b.h5")
    ev = evaluate(EvalRequest(file=path, run="net/toy", calibrators=("none",), n_boot=60, seed=3, bandwidth=0.1))
    r = ev.result("none")
    x, lo, hi = r.curve_band.x, r.curve_band.lo, r.curve_band.hi
    d = read_split(path, "net/toy", "test")
    zz = np.asarray(d.scores, dtype=np.float64)
    p = np.exp(zz - zz.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    conf, correct = p.max(1), (p.argmax(1) == d.labels).astype(float)
    counts = np.concatenate([b.counts.numpy() for b in Resampler(conf.size, 60, 3).blocks()]).astype(int)
    inside = (x > conf.min() + 0.1) & (x < conf.max() - 0.1)        # away from the data's ends
    curves = np.array([_nw(np.repeat(conf, w), np.repeat(correct, w), x[inside], 0.1) for w in counts])
    ref_lo, ref_hi = np.percentile(curves, [2.5, 97.5], axis=0)
    # the engine smooths on a grid (linear binning, dx <= h / 50): agreement to the grid's error
    np.testing.assert_allclose(lo[inside], ref_lo, atol=2e-3)
    np.testing.assert_allclose(hi[inside], ref_hi, atol=2e-3)
    assert (hi[inside] - lo[inside] > 0.01).all()


def test_curves_csv_carries_the_band(tmp_path):
    path = _write(tmp_path / "c.h5")
    ev = evaluate(EvalRequest(file=path, run="net/toy", calibrators=("none", "ts"), n_boot=40))
    rows = list(csv.DictReader(io.StringIO(curves_csv([ev]))))
    cols = list(rows[0])            # the curve's band, then the bandwidth-free CORP columns
    assert cols[cols.index("curve_lo"):] == ["curve_lo", "curve_hi", "corp", "corp_cons_lo", "corp_cons_hi",
                                             "corp_lo", "corp_hi"]
    filled = [r for r in rows if r["curve_lo"] and r["curve"]]
    assert len(filled) > 100
    assert all(float(r["curve_lo"]) <= float(r["curve_hi"]) for r in filled)
    none = evaluate(EvalRequest(file=path, run="net/toy", calibrators=("none",), n_boot=0))
    assert none.result("none").curve_band is None
    assert all(r["curve_lo"] == "" for r in csv.DictReader(io.StringIO(curves_csv([none]))))
