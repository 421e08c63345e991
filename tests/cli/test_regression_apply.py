"""``calibview apply`` on the demo's regression runs (diabetes: bayesian-ridge var, gbr-quantile quantiles): the
recalibrators of a report's calibrators.json written as regression runs, checked against a loop over the fit
split's rows and the coverage of the written quantiles; the input stays read-only and untouched, and a calibrator
of the other kind is refused in one sentence."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat

import h5py
import numpy as np
import pytest

from calibview.cli.program import main

VAR, QUANT = "bayesian-ridge/diabetes", "gbr-quantile/diabetes"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_file):
    """A read-only copy of the demo, and a report's calibrators.json on its two regression runs and one
    classification run."""
    folder = tmp_path_factory.mktemp("regapply")
    path = folder / "demo.h5"
    shutil.copyfile(demo_file, path)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    assert main(["report", str(path), "--run", VAR, "--run", QUANT, "--run", "resnet110-brier/cifar10",
                 "--calibrators", "none,ts,var-scaling,isotonic-pit", "--n-boot", "0", "--no-diagram", "--quiet",
                 "--out", str(folder / "rep")]) == 0
    return path, folder / "rep" / "calibrators.json"


def _split(path, group):
    with h5py.File(path, "r") as f:
        g = f[group]
        out = {k: g[k][()] for k in g}
        if "quantiles" in g:
            out["levels"] = g["quantiles"].attrs["levels"]
        return out, dict(f[group.rsplit("/", 1)[0]].attrs)


def _apply(calibrators, path, run, split, out, *extra):
    return main(["apply", str(calibrators), str(path), "--run", run, "--split", split, "-o", str(out), *extra])


def test_var_scaling_writes_s_times_the_variance_with_s_from_the_fit_split(demo, tmp_path, capsys):
    path, calibrators = demo
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    out = tmp_path / "out.h5"
    assert _apply(calibrators, path, VAR, "test", out, "--use", "var-scaling") == 0
    assert "bayesian-ridge+var-scaling/diabetes/test (N=130, regression: var, var-scaling)" in capsys.readouterr().out
    fit, _ = _split(path, f"{VAR}/val")
    s = 0.0                                             # mean(residual^2 / var) over the fit split, one row at a time
    for y, m, v in zip(fit["targets"], fit["mean"], fit["var"]):
        s += (y - m) ** 2 / v
    s /= fit["targets"].shape[0]
    given, _ = _split(path, f"{VAR}/test")
    got, attrs = _split(out, "bayesian-ridge+var-scaling/diabetes/test")
    assert set(got) == {"mean", "targets", "var"}
    np.testing.assert_allclose(got["var"], s * given["var"], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(got["mean"], given["mean"])
    np.testing.assert_array_equal(got["targets"], given["targets"])
    assert attrs["calibrator"] == "var-scaling" and attrs["calibrated_from"].endswith(f"/{VAR}/test")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before          # read only
    assert main(["metrics", str(out), "--n-boot", "0", "--json"]) == 0     # a valid regression run


@pytest.mark.parametrize("run, levels", [(QUANT, np.arange(1, 20) / 20), (VAR, np.arange(1, 100) / 100)])
def test_isotonic_pit_quantiles_cover_their_levels_on_the_fit_split(demo, tmp_path, run, levels):
    """Applied to its own fit split the recalibrated quantile at level t lies at the t-quantile of the PIT values,
    so the fraction of targets at or below it is t up to the step 1/N of an empirical CDF, except where targets lie
    beyond the run's own quantile function (extended linearly to levels 0 and 1: PIT 0 or 1 for them, which no
    monotone map can spread). A quantile run keeps its levels; a var run gets the default 0.01 ... 0.99."""
    path, calibrators = demo
    out = tmp_path / "iso.h5"
    assert _apply(calibrators, path, run, "val", out, "--use", "isotonic-pit") == 0
    model = run.split("/")[0]
    got, _ = _split(out, f"{model}+isotonic-pit/diabetes/val")
    assert set(got) == {"mean", "targets", "quantiles", "levels"}
    np.testing.assert_allclose(got["levels"], levels, atol=1e-12)
    q, y = got["quantiles"], got["targets"]
    assert q.shape == (130, levels.size) and np.all(np.diff(q, axis=1) >= 0)
    n = y.shape[0]
    given, _ = _split(path, f"{run}/val")
    low = high = 0                 # targets outside the given quantile function's support, one row at a time
    if "quantiles" in given:
        g, lv = given["quantiles"], given["levels"]
        for i in range(n):
            first = g[i, 0] - (g[i, 1] - g[i, 0]) / (lv[1] - lv[0]) * lv[0]
            last = g[i, -1] + (g[i, -1] - g[i, -2]) / (lv[-1] - lv[-2]) * (1 - lv[-1])
            low, high = low + (y[i] < first), high + (y[i] > last)
        assert low > 0.05 * n           # the too narrow boosted quantiles miss targets even when extended
    for j, t in enumerate(levels):
        below = sum(1 for i in range(n) if y[i] <= q[i, j])
        expected = min(max(t, low / n), 1 - high / n)
        assert abs(below / n - expected) <= 1.0 / n, (t, below, low, high)
    lo, hi = np.searchsorted(levels, 0.05 - 1e-9), np.searchsorted(levels, 0.95 - 1e-9)
    inside = np.mean((y >= q[:, lo]) & (y <= q[:, hi]))
    assert abs(inside - 0.9) <= (2.0 + max(0, low - 0.05 * n) + max(0, high - 0.05 * n)) / n
    if run == QUANT:                # the boosted quantiles were too narrow: 90 % coverage well below nominal
        assert np.mean((y >= given["quantiles"][:, 0]) & (y <= given["quantiles"][:, -1])) < 0.85


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("calibview: error: "), err
    return err[0]


def test_a_calibrator_of_the_other_kind_is_refused_in_one_sentence(demo, tmp_path, capsys):
    path, calibrators = demo
    records = json.loads(calibrators.read_text())
    classification = tmp_path / "ts.json"
    classification.write_text(json.dumps([r for r in records if r.get("kind") != "regression"]))
    regression = tmp_path / "reg.json"
    regression.write_text(json.dumps([r for r in records if r.get("kind") == "regression"]))
    out = tmp_path / "out.h5"
    assert _apply(classification, path, VAR, "test", out) == 2
    assert "classification runs (none, ts)" in _one_line_error(capsys)
    assert _apply(regression, path, "resnet110-brier/cifar10", "test", out) == 2
    assert "regression runs (none, var-scaling, isotonic-pit)" in _one_line_error(capsys)
    # a var run's var-scaling on a quantile run: no variance to scale
    single = tmp_path / "scaling.json"
    single.write_text(json.dumps(next(r for r in records if r.get("calibrator") == "var-scaling")))
    assert _apply(single, path, QUANT, "test", out, "--allow-other-run") == 2
    assert "fitted on a var run" in _one_line_error(capsys)
    assert not out.exists()


def test_the_mixed_calibrators_json_still_applies_to_the_classification_run(demo, tmp_path):
    """The report's file lists the regression recalibrators too; the classification run's apply ignores them."""
    path, calibrators = demo
    out = tmp_path / "ts.h5"
    assert _apply(calibrators, path, "resnet110-brier/cifar10", "test", out) == 0
    with h5py.File(out, "r") as f:
        probs = f["resnet110-brier+ts/cifar10/test/probs"][()]
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)


def test_damaged_params_are_one_sentence(demo, tmp_path, capsys):
    path, calibrators = demo
    record = next(r for r in json.loads(calibrators.read_text()) if r.get("calibrator") == "isotonic-pit"
                  and r["run"] == QUANT)
    record["params"]["levels"] = [0.5, 0.2]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(record))
    assert _apply(bad, path, QUANT, "test", tmp_path / "out.h5") == 2
    assert "strictly increasing" in _one_line_error(capsys)
