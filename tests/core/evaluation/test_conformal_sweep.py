"""The alpha slider's sets (SetSweep, from one pass over each split) against the conformal command's records at
the same levels (which the MAPIE and brute-force tests check), and against a hand count of an LAC case."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibview.core.errors import CalibviewError
from calibview.core.evaluation.conformal import evaluate_conformal, sweeps
from calibview.core.evaluation.engine import Engine
from calibview.core.io.writer import write_splits
from calibview.core.stats.conformal_sweep import SetSweep

K = 7
ALPHAS = (0.02, 0.05, 0.1, 0.137, 0.2, 0.35, 0.5)


def _split(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, K)) * 2.0
    z[: n // 10, :2] = 3.0                       # exact ties between the top two classes
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(p, 1)).sum(1).clip(0, K - 1)
    return z.astype(np.float32), y.astype(np.int64)


@pytest.fixture(scope="module")
def h5(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "runs.h5"
    write_splits(path, "net", "toy", {s: ("logits", *_split(n, i)) for i, (s, n) in
                                      enumerate((("fit", 300), ("val", 500), ("test", 700)))})
    return str(path)


@pytest.mark.parametrize("randomized", [False, True])
def test_every_level_equals_the_commands_records(h5, randomized):
    engine = Engine()
    sw = sweeps(engine, h5, "net/toy", calib_split="val", eval_split="test", calibrators=("none", "ts"),
                fit_split="fit", randomized=randomized, seed=3)
    ev = evaluate_conformal(engine, h5, "net/toy", calib_split="val", eval_split="test", alphas=ALPHAS,
                            scores=("lac", "aps", "raps"), calibrators=("none", "ts"), fit_split="fit",
                            randomized=randomized, seed=3, n_boot=0)
    checked = 0
    for r in ev.records:
        point = sw[(r["calibrator"], r["score"])].at(r["alpha"])
        if r["group"] == "all":
            assert point.qhat == r["qhat"]
            assert point.coverage == pytest.approx(r["coverage"], abs=1e-15)
            assert point.mean_size == pytest.approx(r["mean_set_size"], abs=1e-12)
            assert point.empty_frac == pytest.approx(r["empty_frac"], abs=1e-15)
            assert point.full_frac == pytest.approx(r["full_frac"], abs=1e-15)
            assert point.worst_class == pytest.approx(ev.worst[(r["calibrator"], r["score"], r["alpha"])])
            checked += 1
        elif r["group"].startswith("class="):
            c = int(r["group"].split("=")[1])
            assert point.class_coverage[c] == pytest.approx(r["coverage"], abs=1e-15)
        elif r["group"].startswith("size="):
            s = int(r["group"].split("=")[1])
            assert point.size_fraction[s] == pytest.approx(r["n"] / 700, abs=1e-15)
    assert checked == 2 * 3 * len(ALPHAS)


def test_a_hand_counted_lac_case():
    probs = np.array([[0.7, 0.2, 0.1], [0.4, 0.35, 0.25], [0.5, 0.3, 0.2], [0.9, 0.05, 0.05]])
    labels = np.array([0, 1, 2, 0])
    ranked, label_scores = SetSweep.rows(probs, labels, "lac")
    cal = np.array([0.1, 0.3, 0.5, 0.6, 0.8])        # n = 5: alpha 0.2 takes the ceil(6 * 0.8) = 5th, 0.8
    sw = SetSweep(cal, ranked, label_scores, labels)
    pt = sw.at(0.2)
    assert pt.qhat == 0.8
    # classes with 1 - p <= 0.8 (p >= 0.2): sizes 2, 3, 3, 1; labels covered: yes, yes, yes, yes
    assert pt.mean_size == pytest.approx((2 + 3 + 3 + 1) / 4) and pt.coverage == 1.0
    pt = sw.at(0.5)                                  # ceil(6 * 0.5) = 3rd: 0.5, so p >= 0.5
    assert pt.qhat == 0.5 and pt.mean_size == pytest.approx((1 + 0 + 1 + 1) / 4)
    assert pt.empty_frac == 0.25 and pt.coverage == pytest.approx(2 / 4)
    np.testing.assert_array_equal(pt.class_n, [2, 1, 1])
    assert math.isinf(sw.at(0.1).qhat) and sw.at(0.1).full_frac == 1.0     # n = 5 < 1/0.1 - 1


def test_a_cache_over_the_memory_budget_is_refused_with_its_size(h5):
    with pytest.raises(CalibviewError, match="would cache .* of scores"):
        sweeps(Engine(), h5, "net/toy", calib_split="val", eval_split="test", max_memory=10_000)


@pytest.mark.parametrize("randomized", [False, True])
@pytest.mark.parametrize("mondrian", [None, "class"])
def test_the_top_window_path_gives_the_full_sorts_records(h5, monkeypatch, randomized, mondrian):
    """Many classes rank a top window per row (torch.topk) and fall back to a full sort where a set may reach past
    it; few classes sort every row at once. Both give the same records to the bit."""
    import calibview.core.stats.conformal as cf

    kw = dict(calib_split="val", eval_split="test", alphas=ALPHAS, scores=("lac", "aps", "raps"),
              calibrators=("none", "ts"), fit_split="fit", randomized=randomized, seed=3, n_boot=0,
              mondrian=mondrian)
    full = evaluate_conformal(Engine(), h5, "net/toy", **kw).records
    monkeypatch.setattr(cf, "FULL_SORT_K", 1)
    monkeypatch.setattr(cf, "WINDOW", 3)
    windowed = evaluate_conformal(Engine(), h5, "net/toy", **kw).records
    _assert_same_records(full, windowed)


@pytest.mark.parametrize("mondrian", [None, "class"])
def test_rows_ranked_on_several_threads_give_the_records_of_one(h5, monkeypatch, mondrian):
    """A chunk's rows are ranked in parts on a pool of threads; every row is its own, so one thread and three
    (uneven parts, more threads than this machine may have cores) give the same records to the bit."""
    import calibview.core.evaluation.conformal as ec

    kw = dict(calib_split="val", eval_split="test", alphas=ALPHAS, scores=("lac", "aps", "raps"),
              calibrators=("none", "ts"), fit_split="fit", randomized=True, seed=3, n_boot=0, mondrian=mondrian)
    monkeypatch.setattr(ec.torch, "get_num_threads", lambda: 1)
    one = evaluate_conformal(Engine(), h5, "net/toy", **kw).records
    monkeypatch.setattr(ec.torch, "get_num_threads", lambda: 3)
    three = evaluate_conformal(Engine(), h5, "net/toy", **kw).records
    _assert_same_records(one, three)


def _assert_same_records(xs, ys) -> None:
    """The same non-empty list of records, floats to the bit (NaN equal to NaN)."""
    assert len(xs) == len(ys) > 0

    def same(a, b):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))

    for a, b in zip(xs, ys):
        assert a.keys() == b.keys() and all(same(a[k], b[k]) for k in a), (a, b)
