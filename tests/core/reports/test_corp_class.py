"""One-vs-rest CORP for a chosen class, against independent sources: the forecasts p_c equal scipy's softmax of the
stored logits (and of the logits over the fitted temperature, and the mean of the members' softmaxes), the
decomposition equals model-diagnostics' of the one-vs-rest Brier score, the step curve scikit-learn's isotonic
fit; the pass is counted, and another bandwidth or a second look at the class reads nothing."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from scipy.special import softmax
from sklearn.isotonic import IsotonicRegression

from calibview.core.errors import CalibviewError
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.writer import write_run
from calibview.core.reports import corp_class as cc

RUN = "resnet110-brier/cifar100"


@pytest.fixture(scope="module")
def cifar100(demo_file):
    engine = Engine()
    req = EvalRequest(file=str(demo_file), run=RUN, calibrators=("none", "ts", "hb"), n_boot=20)
    with h5py.File(demo_file, "r") as f:
        z = f[f"{RUN}/test/logits"][()].astype(np.float64)
        y = f[f"{RUN}/test/labels"][()]
    return engine, engine.evaluate(req), z, y


@pytest.mark.parametrize("cls", [3, 97])
def test_the_forecasts_are_the_class_column_of_the_softmax(cifar100, cls):
    engine, ev, z, y = cifar100
    fc = cc.class_forecasts(engine, ev, cls)
    np.testing.assert_array_equal(fc.outcome, (y == cls).astype(float))
    np.testing.assert_allclose(fc.forecasts["none"], softmax(z, axis=1)[:, cls], rtol=0, atol=1e-12)
    t = engine.fitted(ev.request)["ts"].params["temperature"]
    np.testing.assert_allclose(fc.forecasts["ts"], softmax(z / t, axis=1)[:, cls], rtol=0, atol=1e-12)
    assert fc.name == ev.run.class_names[cls]


def test_the_decomposition_and_the_steps_equal_model_diagnostics_and_scikit_learn(cifar100):
    from model_diagnostics.scoring import SquaredError, decompose

    engine, ev, z, y = cifar100
    cls = 3
    fc = cc.class_forecasts(engine, ev, cls)
    cs = cc.class_corp_set(engine, ev, cls, bands=False, forecasts=fc)
    for name in ("none", "ts", "hb"):
        f, a = fc.forecasts[name], fc.outcome
        theirs = decompose(y_obs=a, y_pred=f, scoring_function=SquaredError()).row(0, named=True)
        d = cs.of(name).decomposition
        for ours, key in (("mcb", "miscalibration"), ("dsc", "discrimination"), ("unc", "uncertainty"),
                          ("score", "score")):
            assert d[ours] == pytest.approx(theirs[key], abs=1e-12), (name, ours)
        assert d["score"] == pytest.approx(np.mean((f - a) ** 2), abs=1e-15)
        iso = IsotonicRegression(y_min=0.0, y_max=1.0).fit(f, a)
        np.testing.assert_allclose(cs.of(name).at(f), iso.predict(f), rtol=0, atol=1e-12)


def test_one_pass_per_class_and_none_for_another_bandwidth(cifar100):
    engine, ev, z, y = cifar100
    cc.class_forecasts(engine, ev, 11)
    before = cc.COUNTERS["passes"]
    cc.class_forecasts(engine, ev, 11)                 # the same class again: cached
    wide = engine.evaluate(EvalRequest(file=ev.request.file, run=RUN, calibrators=("none", "ts", "hb"), n_boot=20,
                                       bandwidth=0.2))
    cc.class_forecasts(engine, wide, 11)               # another bandwidth: the same forecasts
    assert cc.COUNTERS["passes"] == before
    cc.class_forecasts(engine, ev, 12)                 # another class: one more read
    assert cc.COUNTERS["passes"] == before + 1
    cs = cc.class_corp_set(engine, ev, 12, bands=False)
    assert cs.key != cc.class_corp_set(engine, ev, 11, bands=False).key


def test_the_bands_of_a_class_are_probabilities_around_the_steps(cifar100):
    engine, ev, z, y = cifar100
    cs = cc.class_corp_set(engine, ev, 3, bands=True)
    c = cs.of("ts")
    inside = np.isfinite(c.cons_lo)
    assert inside.any() and c.n_resamples == 20
    assert np.all((c.cons_lo[inside] >= 0) & (c.cons_lo[inside] <= c.cons_hi[inside]) & (c.cons_hi[inside] <= 1))
    assert np.all(c.boot_lo[inside] <= c.boot_hi[inside])


def test_a_binary_run_reads_nothing_and_matches_the_softmax(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "bin.h5"
    data = {}
    for split, n in (("val", 800), ("test", 900)):
        y = rng.integers(0, 2, n)
        z = rng.normal(size=(n, 2)) * 1.5
        z[np.arange(n), y] += 1.0
        write_run(path, "m", "d", split, logits=z.astype(np.float32), labels=y)
        data[split] = (z.astype(np.float32).astype(np.float64), y)
    engine = Engine()
    ev = engine.evaluate(EvalRequest(file=str(path), run="m/d", calibrators=("none", "ts")))
    before = cc.COUNTERS["passes"]
    z, y = data["test"]
    for cls in (0, 1):
        fc = cc.class_forecasts(engine, ev, cls)
        np.testing.assert_allclose(fc.forecasts["none"], softmax(z, axis=1)[:, cls], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(fc.outcome, (y == cls).astype(float))
    assert cc.COUNTERS["passes"] == before
    # class 1 is the positive class the report's positive-class diagram shows
    from calibview.core.reports.corp import corp_set
    pos = corp_set(engine, ev, bands=False, positive=True)
    one = cc.class_corp_set(engine, ev, 1, bands=False)
    assert pos.key == one.key
    np.testing.assert_array_equal(pos.of("ts").y, one.of("ts").y)


def test_the_members_ensemble_is_the_mean_of_the_member_softmaxes(tmp_path):
    from calibview.core.io.members.write import write_members

    rng = np.random.default_rng(9)
    path = tmp_path / "ens.h5"
    splits = {}
    for split, n in (("val", 600), ("test", 700)):
        y = rng.integers(0, 5, n)
        m = rng.normal(size=(3, n, 5))
        m[:, np.arange(n), y] += 1.2
        splits[split] = (m.astype(np.float32), y)
    write_members(path, "e", "d", splits)
    engine = Engine()
    ev = engine.evaluate(EvalRequest(file=str(path), run="e/d", calibrators=("none",)))
    fc = cc.class_forecasts(engine, ev, 4)
    mean = softmax(splits["test"][0].astype(np.float64), axis=2).mean(axis=0)[:, 4]
    np.testing.assert_allclose(fc.forecasts["none"], mean, rtol=0, atol=1e-12)


def test_classes_are_named_by_index_or_name_and_others_are_refused(cifar100):
    engine, ev, z, y = cifar100
    assert cc.class_index(ev.run, "bear") == 3
    assert cc.class_index(ev.run, " 97 ") == 97
    for bad in ("100", "-1", "unicorn"):
        with pytest.raises(CalibviewError, match="no class") as e:
            cc.class_index(ev.run, bad)
        assert "\n" not in str(e.value)


def test_a_top_label_run_is_refused_in_one_sentence(tmp_path):
    from tests._toplabel_data import write_mixed

    path = tmp_path / "top.h5"
    write_mixed(path, seed=1, k=4, sizes={"val": 300, "test": 300}, shift=1.0)
    engine = Engine()
    ev = engine.evaluate(EvalRequest(file=str(path), run="top/toy", calibrators=("none",)))
    with pytest.raises(CalibviewError, match="top-label run") as e:
        cc.class_forecasts(engine, ev, 1)
    assert "\n" not in str(e.value)


def test_class_one_of_a_binary_run_is_the_positive_class_diagram(tmp_path):
    from calibview.core.stats.positive_class import positive_class

    rng = np.random.default_rng(2)
    path = tmp_path / "bin.h5"
    for split, n in (("val", 500), ("test", 600)):
        y = rng.integers(0, 2, n)
        z = rng.normal(size=(n, 2))
        z[np.arange(n), y] += 0.8
        write_run(path, "m", "d", split, logits=z.astype(np.float32), labels=y)
    engine = Engine()
    ev = engine.evaluate(EvalRequest(file=str(path), run="m/d", calibrators=("none", "ts")))
    ours = cc.class_diagrams(ev, cc.class_forecasts(engine, ev, 1))
    for r, d in zip(ev.results, ours):
        theirs = positive_class(r.name, r.label, engine.scored(ev.request)[r.name].stats)
        for field in ("count", "correct", "loss"):
            np.testing.assert_allclose(getattr(d.stats, field), getattr(theirs.stats, field), rtol=1e-12, atol=1e-12)


def test_the_class_tables_hold_the_curves_and_the_decomposition(cifar100):
    import csv
    import io

    engine, ev, z, y = cifar100
    fc = cc.class_forecasts(engine, ev, 3)
    cs = cc.class_corp_set(engine, ev, 3, bands=True, forecasts=fc)
    curves, scores = cc.class_tables([(ev, fc, cs)])
    rows = list(csv.DictReader(io.StringIO(scores)))
    assert [r["calibrator"] for r in rows] == ["none", "ts", "hb"]
    p = softmax(z, axis=1)[:, 3]
    a = (y == 3).astype(float)
    none = rows[0]
    assert (none["class"], none["class_name"], int(none["n_positive"])) == ("3", "bear", int(a.sum()))
    assert float(none["brier"]) == pytest.approx(np.mean((p - a) ** 2), abs=1e-12)
    assert float(none["brier"]) == pytest.approx(float(none["corp_mcb"]) - float(none["corp_dsc"])
                                                 + float(none["corp_unc"]), abs=1e-12)
    lines = list(csv.DictReader(io.StringIO(curves)))
    assert tuple(lines[0]) == cc.CLASS_CURVE_COLUMNS
    ts = [r for r in lines if r["calibrator"] == "ts" and r["corp"]]
    x = np.array([float(r["x"]) for r in ts])
    np.testing.assert_allclose([float(r["corp"]) for r in ts], cs.of("ts").at(x), rtol=0, atol=1e-9)
    lo = np.array([float(r["corp_cons_lo"]) for r in ts if r["corp_cons_lo"]])
    assert lo.size and np.all((lo >= 0) & (lo <= 1))
