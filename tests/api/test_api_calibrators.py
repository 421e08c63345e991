"""The scikit-learn-style calibrators: the same fits as the engine and the CLI (temperature of calibview report,
probabilities of calibview apply), an independent optimum for T, scikit-learn's clone, options and JSON."""

import inspect
import json

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax
from sklearn.base import clone

import calibview as cv
from calibview.api.calibrators import CLASSES
from calibview.cli import main
from calibview.core.calibrators import registry
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.engine import Engine
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.logits import read_split
from calibview.core.io.writer import write_run
from calibview.core.stats.metrics import chunk_rows

DEMO = cv.demo_path()
RUN = "resnet110-flsd53/cifar10"
MULTICLASS = ["none", "ts", "ts-grid", "hb", "ir", "mrr", "vs", "ms", "dirichlet"]
OPTIONS = {"hb": {"bins": 20, "strategy": "quantile"}, "ms": {"penalty": "l2", "lam": 0.01}}


def _split(split, run=RUN):
    d = read_split(DEMO, run, split)
    return d.scores, d.labels


@pytest.fixture(scope="module")
def binary_file(tmp_path_factory):
    """A binary run (class 0 of CIFAR-10 against the rest: logits log p_0 and log(1 - p_0))."""
    path = tmp_path_factory.mktemp("binary") / "binary.h5"
    for split in ("val", "test"):
        z, y = _split(split)
        lp = log_softmax(z.astype(np.float64), axis=1)
        two = np.column_stack([np.log1p(-np.exp(lp[:, 0])), lp[:, 0]]).astype(np.float32)
        write_run(path, "m", "d", split, logits=two, labels=(y == 0).astype(np.int64))
    return path


def test_every_class_is_registered_with_the_registrys_options_and_defaults():
    assert set(registry.available()) <= set(CLASSES)
    for name, cls in CLASSES.items():
        assert cls.method == name and type(cv.calibrator(name)) is cls
        core = inspect.signature(type(registry.get(name)).__init__).parameters
        ours = inspect.signature(cls.__init__).parameters
        assert set(cls().get_params()) == set(registry.option_types(name)), name
        for key in registry.option_types(name):
            assert ours[key].default == core[key].default, (name, key)


def test_temperature_equals_the_cli_report(tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(DEMO), "--run", RUN, "--calibrators", "ts", "--n-boot", "0", "--no-diagram",
                 "--out", str(out), "--quiet"]) == 0
    records = json.loads((out / "calibrators.json").read_text())
    cli_t = next(r for r in records if r["calibrator"] == "ts")["params"]["temperature"]
    ts = cv.TemperatureScaling().fit(*_split("val"))
    assert ts.temperature_ == cli_t
    # and the report's record loads as a calibrator with that temperature
    assert cv.load_calibrator(out / "calibrators.json", run=RUN, use="ts").temperature_ == cli_t


def test_temperature_is_the_nll_optimum():
    # independent: a bounded scalar search of the float64 validation NLL
    z, y = _split("val")
    z = z.astype(np.float64)
    nll = lambda t: -log_softmax(z / t, axis=1)[np.arange(len(y)), y].mean()
    ref = minimize_scalar(nll, bounds=(0.05, 20), method="bounded", options={"xatol": 1e-10}).x
    assert cv.TemperatureScaling().fit(z, y).temperature_ == pytest.approx(ref, rel=1e-6)


@pytest.fixture(scope="module")
def engine_fits():
    req = EvalRequest(str(DEMO), RUN, calibrators=tuple(MULTICLASS), n_boot=0, device="cpu",
                      options=tuple((k, tuple(v.items())) for k, v in OPTIONS.items()))
    return Engine().fitted(req)


@pytest.mark.parametrize("name", MULTICLASS)
def test_fits_equal_the_engines(name, engine_fits):
    z, y = _split("val")
    ours = cv.calibrator(name, **OPTIONS.get(name, {})).fit(z, y)
    ref = engine_fits[name]
    if name != "none":                          # the engine does not fit the identity
        assert json.loads(json.dumps(ours.fitted_.to_json()["params"])) == ref.to_json()["params"]
    test = _split("test")[0]
    rows = chunk_rows(10)           # the chunks of the engine and of calibview apply (the last bits depend on them)
    with torch.inference_mode():
        expected = np.concatenate([ref.apply(torch.from_numpy(test[s:s + rows])).exp().numpy()
                                   for s in range(0, len(test), rows)])
    np.testing.assert_array_equal(ours.predict_proba(test), expected)


def _apply_cli(cal_json, data, run, out) -> np.ndarray:
    assert main(["apply", str(cal_json), str(data), "--run", run, "--split", "test", "-o", str(out)]) == 0
    return read_split(out, f"{run.split('/')[0]}+{json.loads(cal_json.read_text())['method']}/"
                           f"{run.split('/')[1]}", "test").scores


@pytest.mark.parametrize("name", ["ts", "ts-grid", "hb", "ir", "mrr", "vs", "ms", "dirichlet"])
def test_calibview_apply_gives_the_probabilities_of_predict_proba(name, tmp_path):
    z, y = _split("val")
    est = cv.calibrator(name, **OPTIONS.get(name, {})).fit(z, y)
    est.to_json(tmp_path / "calibrators.json")
    cli = _apply_cli(tmp_path / "calibrators.json", DEMO, RUN, tmp_path / "out.h5")
    np.testing.assert_array_equal(cli, est.predict_proba(_split("test")[0]))
    again = cv.load_calibrator(tmp_path / "calibrators.json")
    assert type(again) is type(est) and again.get_params() == est.get_params()
    np.testing.assert_array_equal(again.predict_proba(_split("test")[0]), cli)


@pytest.mark.parametrize("cls,options", [(cv.PlattScaling, {}), (cv.PlattScaling, {"smooth_targets": True}),
                                         (cv.BetaCalibration, {})])
def test_binary_calibrators_through_calibview_apply(cls, options, binary_file, tmp_path):
    z, y = read_split(binary_file, "m/d", "val").scores, read_split(binary_file, "m/d", "val").labels
    est = cls(**options).fit(z, y)
    assert est.a_ > 0 and np.isfinite(est.c_)
    (tmp_path / "c.json").write_text(est.to_json())
    cli = _apply_cli(tmp_path / "c.json", binary_file, "m/d", tmp_path / "out.h5")
    np.testing.assert_array_equal(cli, est.predict_proba(read_split(binary_file, "m/d", "test").scores))
    # (N,) binary logits: the columns (0, z_1 - z_0) give the same Platt fit of the log-odds
    if cls is cv.PlattScaling:
        one = cls(**options).fit(z[:, 1].astype(np.float64) - z[:, 0], y)
        assert one.a_ == pytest.approx(est.a_, rel=1e-6) and one.c_ == pytest.approx(est.c_, rel=1e-6, abs=1e-9)


def test_scikit_learn_clone_and_params():
    for cls in CLASSES.values():
        est = cls()
        twin = clone(est)
        assert type(twin) is cls and twin.get_params() == est.get_params() and twin is not est
    hb = cv.HistogramBinning(bins=20)
    assert clone(hb).get_params() == {"bins": 20, "strategy": "uniform"}
    assert repr(hb) == "HistogramBinning(bins=20)"
    assert hb.set_params(strategy="quantile") is hb and hb.strategy == "quantile"
    z, y = _split("val")
    fitted = cv.TemperatureScaling().fit(z, y)
    assert not hasattr(clone(fitted), "temperature_")       # clone copies parameters, not the fit
    assert list(fitted.classes_) == list(range(10)) and fitted.n_classes_ == 10


@pytest.mark.parametrize("call,words", [
    (lambda: cv.HistogramBinning(bins=2.5), "hb.bins"),
    (lambda: cv.HistogramBinning(strategy="equal"), "strategy"),
    (lambda: cv.MatrixScaling(lam=-1.0), "finite and >= 0"),
    (lambda: cv.calibrator("hb", bogus=1), "Unknown option 'bogus'"),
    (lambda: cv.calibrator("nope"), "Unknown calibrator"),
    (lambda: cv.TemperatureScaling().set_params(bins=3), "Unknown parameter"),
    (lambda: cv.TemperatureScaling().predict_proba(np.zeros((2, 3))), "not fitted"),
    (lambda: cv.TemperatureScaling().fit(np.zeros((2, 3)), np.array([0, 5])), "outside [0, 3)"),
    (lambda: cv.TemperatureScaling().fit(np.full((2, 3), np.nan), np.array([0, 1])), "NaN"),
    (lambda: cv.PlattScaling().fit(np.zeros((4, 3)), np.array([0, 1, 2, 0])), "binary"),
    (lambda: cv.load_calibrator('{"a": 1}'), "not a calibview calibrator"),
    (lambda: cv.load_calibrator("[]"), "not a calibview calibrators file"),
    (lambda: cv.load_calibrator("/nonexistent/calibrators.json"), "Cannot read"),
])
def test_bad_use_is_one_sentence(call, words):
    with pytest.raises(CalibviewError) as e:
        call()
    msg = str(e.value)
    assert words in msg and "\n" not in msg and msg.endswith("."), msg


def test_class_count_mismatch_and_tensors():
    z, y = _split("val")
    ts = cv.TemperatureScaling().fit(torch.from_numpy(z), torch.from_numpy(y))
    with pytest.raises(CalibviewError, match="K = 10"):
        ts.predict_proba(np.zeros((3, 4), np.float32))
    out = ts.predict_proba(torch.from_numpy(z[:7]))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_array_equal(out.numpy(), ts.predict_proba(z[:7]))
    np.testing.assert_allclose(ts.predict_proba(z[:7]).sum(1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(torch.from_numpy(ts.predict_logits(z[:7])).exp().numpy(), ts.predict_proba(z[:7]))
    assert ts.temperature_ == cv.TemperatureScaling().fit(z, y).temperature_


def test_load_calibrator_from_a_report_with_several_records(tmp_path):
    out = tmp_path / "r"
    assert main(["report", str(DEMO), "--calibrators", "none,ts,hb", "--option", "hb.bins=20", "--n-boot", "0",
                 "--no-diagram", "--out", str(out), "--quiet"]) == 0
    path = out / "calibrators.json"
    with pytest.raises(CalibviewError, match="pick one with run= and use="):
        cv.load_calibrator(path)
    hb = cv.load_calibrator(path, run=RUN, use="hb")
    assert isinstance(hb, cv.HistogramBinning) and hb.get_params() == {"bins": 20, "strategy": "uniform"}
    record = next(r for r in json.loads(path.read_text()) if r["run"] == RUN and r["calibrator"] == "hb")
    assert cv.load_calibrator(record).get_params() == hb.get_params()
    z, y = _split("val")
    np.testing.assert_array_equal(hb.predict_proba(z), cv.HistogramBinning(bins=20).fit(z, y).predict_proba(z))
    # lam chosen by the held-out rule reads back as "auto"
    record = cv.MatrixScaling().fit(z, y).fitted_.to_json()
    del record["fit"]                            # as the engine writes it: no options stored
    ms = cv.load_calibrator(record)
    assert ms.lam == "auto" and ms.mu is None
