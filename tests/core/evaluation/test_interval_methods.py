"""The engine's intervals by method (EvalRequest.interval): every interval contains its point estimate, on the
bundled CIFAR-100 demo and on synthetic calibrated and miscalibrated runs, and the class-wise jackknife the
engine feeds BCa is the leave-one-out recomputation of class-wise ECE."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibview.core.evaluation.engine import Engine, evaluate
from calibview.core.evaluation.records import metrics_rows
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.stats import jackknife
from calibview.core.stats.metrics import classwise_ece, sample_stats

import torch


def _write(path, seed, n, k, temperature):
    """Labels drawn from softmax(z); the run stores z / temperature (1: calibrated, < 1: overconfident)."""
    rng = np.random.default_rng(seed)
    for split in ("val", "test"):
        z = rng.normal(size=(n, k)) * 2.0
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
        write_run(path, "net", "toy", split, logits=(z / temperature).astype(np.float32), labels=y)
    return str(path)


def _check_contained(ev):
    bad = [(r.name, m, e.value, e.lo, e.hi) for r in ev.results for m, e in r.metrics.items()
           if np.isfinite(e.lo) and not e.lo <= e.value <= e.hi]
    assert not bad, bad


@pytest.mark.parametrize("interval", ["auto", "percentile", "basic", "bca"])
def test_no_interval_excludes_its_estimate_on_the_demo(demo_file, interval):
    ev = evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", calibrators=("none", "ts", "hb"),
                              n_boot=200, interval=interval))
    _check_contained(ev)
    methods = {e.method for r in ev.results for e in r.metrics.values() if e.method}
    if interval == "auto":
        assert ev.result("ts").metrics["ece"].method.startswith("basic")
        assert ev.result("ts").metrics["accuracy"].method == "percentile"
    else:
        assert methods <= {interval, interval + "-widened", "percentile", "percentile-widened"}


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_no_interval_excludes_its_estimate_on_synthetic_runs(tmp_path, temperature):
    path = _write(tmp_path / "s.h5", 7, 400, 5, temperature)
    eng = Engine()
    for interval in ("auto", "percentile", "basic", "bca"):
        _check_contained(eng.evaluate(EvalRequest(file=path, run="net/toy", calibrators=("none", "ts"), n_boot=100,
                                                  interval=interval)))


def test_the_engines_classwise_jackknife_is_leave_one_out(tmp_path, monkeypatch):
    path = _write(tmp_path / "j.h5", 8, 150, 4, 0.7)
    seen = []
    real = jackknife.classwise_loo

    def spy(*a, **kw):
        seen.append(real(*a, **kw))
        return seen[-1]

    monkeypatch.setattr(jackknife, "classwise_loo", spy)
    ev = evaluate(EvalRequest(file=path, run="net/toy", calibrators=("none",), n_boot=20, bins=10))
    d = read_split(path, "net/toy", "test")
    z = torch.from_numpy(np.asarray(d.scores, dtype=np.float64))
    y = torch.from_numpy(d.labels.copy())
    lp = ev.result("none").fitted.apply(z)
    brute = []
    for i in range(150):                    # every row is in the subsample (JACKKNIFE_ROWS >= 150)
        keep = torch.from_numpy(np.arange(150) != i)
        brute.append(classwise_ece(sample_stats(lp[keep], y[keep], n_bins=10))[0])
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], brute, rtol=0, atol=1e-13)


def test_records_say_which_method_made_each_interval(demo_file):
    ev = evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", calibrators=("none",),
                              n_boot=50))
    row = metrics_rows([ev])[0]
    methods = json.loads(row["interval_method"])
    assert methods["ece"] in ("basic", "basic-widened") and methods["accuracy"].startswith("percentile")
    assert "auroc" not in methods or methods["auroc"].startswith("percentile")
    ev0 = evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", calibrators=("none",), n_boot=0))
    assert metrics_rows([ev0])[0]["interval_method"] == "{}"
