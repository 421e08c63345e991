"""The CLI end to end: published numbers on the demo, output files, and user errors without tracebacks."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from calibview.cli import main
from calibview.core import calibrators as calib
from calibview.core.io.logits import read_split
from calibview.core.reports.tables import metric_columns

# ../shared/data/SOURCES.md: Mukhoti et al. 2020, test split, 15 equal-width bins, in percent.
PUBLISHED = {
    "resnet110-brier/cifar10": dict(error=5.48, ece=2.56, ts_ece=1.25, t=1.2, nll_ts_ece=1.29, nll_t=1.171),
    "resnet110-flsd53/cifar10": dict(error=5.42, ece=1.87, ts_ece=1.07, t=1.1, nll_ts_ece=1.06, nll_t=1.105),
    "resnet110-brier/cifar100": dict(error=25.1, ece=7.88, ts_ece=4.65, t=1.2, nll_ts_ece=4.69, nll_t=1.080),
}


def _read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory, demo_file):
    out = tmp_path_factory.mktemp("report")
    rc = main(["report", str(demo_file), "--calibrators", "none,ts,ts-grid", "--n-boot", "200", "--out",
               str(out), "--quiet"])
    assert rc == 0
    return out


def test_report_reproduces_the_published_table(demo_report):
    rows = {(r["model"] + "/" + r["dataset"], r["calibrator"]): r for r in _read_csv(demo_report / "metrics.csv")}
    params = {(c["run"], c["calibrator"]): c for c in json.loads((demo_report / "calibrators.json").read_text())}
    for run, pub in PUBLISHED.items():
        none, grid, ts = rows[(run, "none")], rows[(run, "ts-grid")], rows[(run, "ts")]
        digits = 1 if run.endswith("cifar100") else 2
        assert round(100 * (1 - float(none["accuracy"])), digits) == pub["error"], run
        assert round(100 * float(none["ece"]), 2) == pub["ece"], run
        assert round(100 * float(grid["ece"]), 2) == pub["ts_ece"], run
        assert params[(run, "ts-grid")]["params"]["temperature"] == pub["t"]
        # T fitted by validation NLL instead (SOURCES.md, last paragraph)
        assert round(params[(run, "ts")]["params"]["temperature"], 3) == pub["nll_t"], run
        assert round(100 * float(ts["ece"]), 2) == pub["nll_ts_ece"], run


@pytest.mark.qt               # diagram.png is drawn by the window's canvas
def test_report_files_have_the_documented_shape(demo_report):
    with open(demo_report / "metrics.csv", newline="") as f:
        header = next(csv.reader(f))
    # the demo's two regression runs add the regression metrics' columns among the classification ones
    assert [c for c in header if c in metric_columns()] == metric_columns()
    assert "rmse" in header and "crps_gaussian_hi" in header
    assert header[:7] == ["model", "dataset", "split", "calibrator", "member", "accuracy", "accuracy_lo"]
    rows = _read_csv(demo_report / "metrics.csv")
    # of none, ts, ts-grid only none applies to a regression run: one row for each of the demo's two
    assert [(r["model"], r["calibrator"], r["ece"], r["k"]) for r in rows if r["dataset"] == "diabetes"] == [
        ("bayesian-ridge", "none", "", ""), ("gbr-quantile", "none", "", "")]
    rows = [r for r in rows if r["dataset"] != "diabetes"]
    assert len(rows) == 3 * 3 + 3 * 3          # every run x calibrator; the ensemble run: ensemble, member 0, 1
    assert [r["member"] for r in rows] == [""] * 9 + ["ensemble"] * 3 + ["0"] * 3 + ["1"] * 3
    for r in rows:
        for m in ("ece", "smece", "cal", "tot", "sharpness_gap", "classwise_ece"):
            v, lo, hi = float(r[m]), float(r[m + "_lo"]), float(r[m + "_hi"])
            assert 0 <= lo <= hi < 1 and 0 <= v < 1              # fractions, not percent
        assert float(r["tot"]) == pytest.approx(float(r["brier"]), abs=1e-15)
        assert float(r["sharpness_gap"]) == pytest.approx(float(r["tot"]) - float(r["cal"]), abs=1e-15)
    # one diagram per run, drawn offscreen by the GUI's canvas (several runs: named after the run)
    from PySide6 import QtGui
    for run in PUBLISHED:
        img = QtGui.QImage(str(demo_report / f"diagram_{run.replace('/', '_')}.png"))
        assert img.width() == 1800 and img.height() == 1400
    curves = _read_csv(demo_report / "curves.csv")
    assert {c["calibrator"] for c in curves} == {"none", "ts", "ts-grid"}
    for c in curves[:50]:
        assert 0.0 <= float(c["x"]) <= 1.0 and 0.0 <= float(c["density"]) <= 1.0


def test_calibrators_json_applies_to_new_logits(demo_report, demo_file):
    entries = json.loads((demo_report / "calibrators.json").read_text())
    entry = next(e for e in entries if e["run"] == "resnet110-brier/cifar100" and e["calibrator"] == "ts")
    fitted = calib.from_json(entry)
    z = torch.from_numpy(read_split(demo_file, "resnet110-brier/cifar100", "test").scores.copy())
    t = entry["params"]["temperature"]
    torch.testing.assert_close(fitted.apply(z), torch.log_softmax(z.double() / t, 1))


def test_metrics_json_prints_rows(capsys, demo_file):
    rc = main(["metrics", str(demo_file), "--run", "resnet110-flsd53/cifar10", "--calibrators", "none",
               "--n-boot", "20", "--json", "--quiet"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["calibrator"] == "none"
    assert round(100 * rows[0]["ece"], 2) == 1.87
    assert set(metric_columns()) | {"nonfinite"} == set(rows[0])


def test_runs_lists_metadata(capsys, demo_file):
    assert main(["runs", str(demo_file)]) == 0
    out = capsys.readouterr().out
    assert "resnet110-brier/cifar100\tK=100\tval (N=5000" in out


def test_import_then_report(tmp_path, capsys):
    rng = np.random.default_rng(1)
    src = tmp_path / "mine.npz"
    y = rng.integers(0, 4, 600)
    z = rng.normal(size=(600, 4)).astype(np.float32)
    np.savez(src, logits_val=z[:300], labels_val=y[:300], logits_test=z[300:], labels_test=y[300:])
    out = tmp_path / "mine.h5"
    assert main(["import", str(src), "-o", str(out)]) == 0
    assert main(["report", str(out), "--n-boot", "10", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    rows = _read_csv(tmp_path / "r" / "metrics.csv")
    assert [r["calibrator"] for r in rows] == ["none", "ts"]
    assert float(rows[0]["accuracy"]) == pytest.approx((z[300:].argmax(1) == y[300:]).mean())


def _malformed_files(tmp: Path):
    """(file, expected fragment of the message) for each malformed input of the format issue."""
    cases = []
    p = tmp / "not_hdf5.h5"
    p.write_text("hello")
    cases.append((p, "not an HDF5 file"))
    p = tmp / "nan.h5"
    z = np.zeros((10, 3), np.float32)
    z[2, 1] = np.nan
    z[5, 0] = np.inf
    with h5py.File(p, "w") as f:
        f["m/d/test/logits"] = z
        f["m/d/test/labels"] = np.zeros(10, np.int64)
    cases.append((p, "2 of 10 rows"))
    p = tmp / "labels_range.h5"
    with h5py.File(p, "w") as f:
        f["m/d/test/logits"] = np.zeros((10, 3), np.float32)
        f["m/d/test/labels"] = np.arange(10)
    cases.append((p, "outside [0, 3)"))
    p = tmp / "nolabels.h5"
    with h5py.File(p, "w") as f:
        f["m/d/test/logits"] = np.zeros((10, 3), np.float32)
    cases.append((p, "labels"))
    return cases


def test_malformed_inputs_exit_nonzero_with_one_sentence(tmp_path, capsys):
    for path, fragment in _malformed_files(tmp_path):
        rc = main(["report", str(path), "--calibrators", "none", "--n-boot", "0", "--out", str(tmp_path / "o"),
                   "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2, path
        assert fragment in err, (path, err)
        assert str(path) in err or path.name in err
        assert "Traceback" not in err


def test_user_errors_in_a_real_process_have_no_traceback(tmp_path, demo_file):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for args, fragment in [
        (["report", str(tmp_path / "missing.h5"), "--out", str(tmp_path / "o")], "missing.h5"),
        (["report", str(demo_file), "--run", "nosuchmodel", "--out", str(tmp_path / "o")], "nosuchmodel"),
        (["report", str(demo_file), "--eval-split", "train", "--out", str(tmp_path / "o")], "train"),
        (["metrics", str(demo_file), "--calibrators", "none,wizard", "--json"], "wizard"),
        (["metrics", str(demo_file), "--device", "tpu", "--json"], "tpu"),
    ]:
        r = subprocess.run([sys.executable, "-m", "calibview.cli.program", *args], capture_output=True, text=True, env=env)
        assert r.returncode == 2, (args, r.stderr)
        assert fragment in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr                   # one line


def test_report_never_writes_to_the_input_file(tmp_path, demo_file):
    import hashlib
    before = hashlib.sha256(demo_file.read_bytes()).hexdigest()
    main(["report", str(demo_file), "--run", "resnet110-flsd53/cifar10", "--n-boot", "5", "--out",
          str(tmp_path / "o"), "--quiet"])
    assert hashlib.sha256(demo_file.read_bytes()).hexdigest() == before


def test_single_split_file_reports_uncalibrated(tmp_path, capsys):
    path = tmp_path / "flat.h5"
    with h5py.File(path, "w") as f:
        f["logits"] = np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32)
        f["labels"] = np.random.default_rng(1).integers(0, 3, 200)
    assert main(["metrics", str(path), "--n-boot", "0", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert [r["calibrator"] for r in rows] == ["none"] and rows[0]["split"] == "all"
    assert "single split" in captured.err
    assert main(["metrics", str(path), "--n-boot", "0", "--json", "--quiet"]) == 0       # --quiet: errors only
    assert capsys.readouterr().err == ""


def test_apply_writes_calibrated_probabilities(demo_report, demo_file, tmp_path, capsys):
    out = tmp_path / "calibrated.h5"
    args = ["apply", str(demo_report / "calibrators.json"), str(demo_file), "--run", "resnet110-brier/cifar100",
            "--split", "test", "--use", "ts", "-o", str(out)]
    assert main(args) == 0
    d = read_split(out, "resnet110-brier+ts/cifar100", "test")
    assert d.kind == "probs"
    z = read_split(demo_file, "resnet110-brier/cifar100", "test").scores.astype(np.float64)
    entries = json.loads((demo_report / "calibrators.json").read_text())
    t = next(e for e in entries if e["run"] == "resnet110-brier/cifar100" and e["calibrator"] == "ts")["params"]
    np.testing.assert_allclose(d.scores, torch.softmax(torch.from_numpy(z) / t["temperature"], 1).numpy(),
                               rtol=1e-12, atol=1e-15)
    # a second apply to the same split refuses instead of silently replacing it
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err
    # a report's file with several calibrators for the run needs --use
    assert main(args[:-4] + ["-o", str(tmp_path / "x.h5")]) == 2
    assert "--use" in capsys.readouterr().err


def test_report_skips_binary_only_calibrators_on_multiclass_runs(tmp_path, demo_file, capsys):
    assert main(["metrics", str(demo_file), "--run", "resnet110-flsd53/cifar10", "--calibrators", "none,platt,beta",
                 "--n-boot", "0", "--json"]) == 0           # not --quiet: that leaves only errors on stderr
    captured = capsys.readouterr()
    assert [r["calibrator"] for r in json.loads(captured.out)] == ["none"]
    assert "skipping platt, beta" in captured.err


def test_report_files_get_ordinary_permissions(demo_report):
    import stat
    umask = os.umask(0o022)
    os.umask(umask)
    for name in ("metrics.csv", "curves.csv", "calibrators.json"):     # not mkstemp's 0600
        assert stat.S_IMODE(os.stat(demo_report / name).st_mode) == 0o666 & ~umask, name


def test_apply_error_names_the_missing_calibrator(demo_report, demo_file, tmp_path, capsys):
    rc = main(["apply", str(demo_report / "calibrators.json"), str(demo_file), "--run", "resnet110-brier/cifar100",
               "--split", "test", "--use", "tss", "-o", str(tmp_path / "a.h5")])
    err = capsys.readouterr().err
    assert rc == 2 and "no calibrator named 'tss'" in err and "ts-grid" in err


def test_calibrator_options_reach_the_fit(tmp_path, demo_file):
    out = tmp_path / "opt"
    assert main(["report", str(demo_file), "--run", "resnet110-brier/cifar10", "--calibrators", "none,hb,ms",
                 "--option", "hb.bins=5", "--option", "ms.penalty=l2", "--option", "ms.lam=0.5", "--n-boot", "0",
                 "--no-diagram", "--out", str(out), "--quiet"]) == 0
    fitted = {e["calibrator"]: e for e in json.loads((out / "calibrators.json").read_text())}
    assert fitted["hb"]["params"]["bins"] == 5
    assert fitted["ms"]["params"]["penalty"] == "l2" and fitted["ms"]["params"]["lam"] == 0.5


@pytest.mark.parametrize("option, fragment", [("hb.binz=5", "Unknown option hb.binz"),
                                              ("ms.lam=1", "not among --calibrators"),
                                              ("hb-bins", "CALIBRATOR.KEY=VALUE")])
def test_bad_calibrator_options_are_user_errors(tmp_path, demo_file, capsys, option, fragment):
    assert main(["metrics", str(demo_file), "--calibrators", "none,hb", "--option", option, "--json"]) == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize("option, fragments", [
    ("hb.bins=abc", ["Histogram binning", "hb.bins = 'abc'", "an int", "bins (int), strategy (str)"]),
    ("hb.foo=1", ["Histogram binning", "hb.foo", "bins (int), strategy (str)"]),
    ("ms.lam=abc", ["Matrix scaling", "ms.lam = 'abc'", "float or 'auto'", "penalty (", "rel_tol (float)"]),
])
def test_bad_option_keys_and_values_list_the_valid_keys(demo_file, capsys, option, fragments):
    """One sentence on stderr and exit 2, before any run is read."""
    assert main(["metrics", str(demo_file), "--calibrators", "none,hb,ms", "--option", option, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calibview: error: "), captured.err
    assert all(f in lines[0] for f in fragments), lines[0]


@pytest.mark.parametrize("args, fragment", [(["--calibrators", ""], "--calibrators is empty"),
                                            (["--level", "95"], "give 0.95")])
def test_option_mistakes_get_a_hint(demo_file, capsys, args, fragment):
    assert main(["metrics", str(demo_file), *args, "--json"]) == 2
    assert fragment in capsys.readouterr().err


def test_fitting_and_evaluating_on_one_split_warns_but_runs(demo_file, capsys):
    """The window's warning, on stderr."""
    args = ["metrics", str(demo_file), "--run", "resnet110-flsd53/cifar10", "--calibrators", "none,ts",
            "--n-boot", "0", "--json"]
    assert main([*args, "--fit-split", "test", "--eval-split", "test"]) == 0
    captured = capsys.readouterr()
    assert [r["calibrator"] for r in json.loads(captured.out)] == ["none", "ts"]
    warnings = [line for line in captured.err.splitlines() if line.startswith("calibview: warning: ")]
    assert len(warnings) == 1 and captured.err.strip() == warnings[0], captured.err
    # --quiet is --log-level error: the warning goes with the progress bar
    assert main([*args, "--fit-split", "test", "--eval-split", "test", "--quiet"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "fitted and evaluated on the same split (test)" in warnings[0] and "in-sample" in warnings[0]
    assert main([*args, "--fit-split", "val", "--eval-split", "test"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_mistyped_command_is_an_argparse_error_listing_the_commands(capsys, tmp_path):
    """A mistyped command: `calibview reprot f.h5 --out o` opened the window with "file does not exist" dialogs."""
    from calibview.cli.program import main, opens_window

    assert not opens_window(["reprot", "f.h5", "--out", "o"])
    with pytest.raises(SystemExit) as e:
        main(["reprot", "f.h5", "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'reprot'" in err and "report" in err and "metrics" in err
    assert not (tmp_path / "o").exists()


def test_files_and_options_still_open_the_window(tmp_path):
    from calibview.cli.program import opens_window

    existing = tmp_path / "logits"          # an existing file without a suffix
    existing.write_bytes(b"")
    assert opens_window([])
    assert opens_window(["--run", "resnet110-brier/cifar100"])
    assert opens_window(["-style", "fusion"])
    assert opens_window([str(existing)])
    assert opens_window(["missing.h5"])      # names a file: the window says it does not exist
    assert not opens_window(["report", "f.h5"])
    assert not opens_window(["--help"])
