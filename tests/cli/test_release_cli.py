"""release, check, drift and apply-with-a-config end to end on small generated files: outputs, exit codes, and
user errors as one sentence with exit 2 and nothing written."""

import json

import h5py
import numpy as np
import pytest
import torch

from _release_data import RUN, ece_direct, write_toy
from calibview.cli import main
from calibview.core.release import config as rel
from calibview.core.io.logits import read_split

FAST = ["--n-boot", "20", "--device", "cpu", "--quiet"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy(tmp_path_factory.mktemp("toy") / "toy.h5")


@pytest.fixture(scope="module")
def shipped(toy, tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "rel"
    rc = main(["release", toy, "--run", RUN, "--calibrator", "ts", "--fit-split", "val", "--eval-split", "deploy",
               "--target-precision", "0.9", "--by", "region", "--no-diagram", "-o", str(out), *FAST])
    assert rc == 0
    return out


def _one_sentence_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("calibview: error: ") and "Traceback" not in err[0], err
    return err[0]


def _known_ece(toy, config_path, split="deploy"):
    fitted = rel.calibrator_of(rel.load_config(config_path))
    d = read_split(toy, RUN, split)
    return ece_direct(fitted.apply(torch.from_numpy(np.asarray(d.scores))).exp().numpy(), d.labels)


def test_release_writes_the_material(shipped):
    names = {p.name for p in shipped.iterdir()}
    assert {"inference_config.json", "report.html", "metrics.csv", "per_class.csv"} <= names
    assert not [n for n in names if n.endswith(".tmp")]
    cfg = rel.load_config(shipped / "inference_config.json")
    assert cfg["thresholds"]["target_precision"] == 0.9 and len(cfg["thresholds"]["per_class"]) == 3
    per_class = (shipped / "per_class.csv").read_text().splitlines()
    assert per_class[0].startswith("class_index,class_name,n,") and len(per_class) == 4
    html = (shipped / "report.html").read_text()
    assert "http://" not in html and "https://" not in html and "<svg" in html
    assert "Slices by region" in html and ">north<" in html and ">south<" in html


@pytest.mark.qt
def test_release_embeds_the_diagram_png(toy, tmp_path):
    out = tmp_path / "rel"
    assert main(["release", toy, "--run", RUN, "--eval-split", "deploy", "-o", str(out), *FAST]) == 0
    png = (out / "diagram.png").read_bytes()
    html = (out / "report.html").read_text()
    import base64

    assert base64.b64encode(png).decode() in html and len(html.encode()) < 3 << 20


def test_check_exit_codes_follow_limits_around_the_known_ece(toy, shipped, capsys):
    config = str(shipped / "inference_config.json")
    ece = _known_ece(toy, config)
    # the point estimate decides here (with 20 resamples, +-0.005 lies inside the interval: tests/cli/
    # test_check_verdicts.py covers the interval's three outcomes)
    loose = ["--max-class-ece", "1", "--max-high-conf-gap", "1", "--decide-on", "point"]
    assert main(["check", config, toy, "--max-ece", f"{ece + 0.005}", *loose, *FAST]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and f"{ece:.4f}" in out
    assert main(["check", config, toy, "--max-ece", f"{ece - 0.005}", *loose, *FAST]) == 1
    assert "FAIL: 1 of 10" in capsys.readouterr().out
    assert main(["check", config, toy, "--max-ece", f"{ece + 0.0001}", "--use-bound", "upper", *loose, *FAST]) == 1
    capsys.readouterr()
    assert main(["check", config, toy, "--json", "--max-ece", f"{ece - 0.005}", *loose, *FAST]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert all(set(r) == {"criterion", "value", "lo", "hi", "limit", "passed", "outcome", "decided_on", "note"}
               for r in rows)
    assert rows[0]["value"] == pytest.approx(ece, abs=1e-12) and rows[0]["passed"] is False


def test_check_on_the_fit_split_fails_the_independence_criterion(shipped, toy, capsys):
    rc = main(["check", str(shipped / "inference_config.json"), toy, "--split", "val", "--max-ece", "1",
               "--max-class-ece", "1", "--max-high-conf-gap", "1", "--json", *FAST])
    rows = {r["criterion"]: r for r in json.loads(capsys.readouterr().out)}
    assert rc == 1
    assert rows["calibrator fitted on another split than the one checked"]["passed"] is False


def test_thresholds_on_uncalibrated_scores_fail_the_check(shipped, toy, tmp_path, capsys):
    cfg = rel.load_config(shipped / "inference_config.json")
    cfg["calibrator"] = {"method": "none", "params": {}}
    cfg["config_sha256"] = rel.config_sha256(cfg)              # a consistent config from another tool
    path = tmp_path / "none.json"
    path.write_text(rel.config_text(cfg))
    rc = main(["check", str(path), toy, "--max-ece", "1", "--max-class-ece", "1", "--max-high-conf-gap", "1",
               "--json", *FAST])
    rows = {r["criterion"]: r for r in json.loads(capsys.readouterr().out)}
    assert rc == 1 and rows["thresholds only on calibrated scores"]["passed"] is False


def test_tampered_config_and_fit_data_exit_2_in_one_sentence(shipped, toy, tmp_path, capsys):
    cfg = json.loads((shipped / "inference_config.json").read_text())
    cfg["thresholds"]["global"] = 0.5
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(cfg))
    assert main(["check", str(bad), toy, *FAST]) == 2
    assert "modified after it was written" in _one_sentence_error(capsys)
    out = tmp_path / "refit"
    assert main(["drift", str(bad), toy, "--run", RUN, "--split", "shadow", "--refit-out", str(out), *FAST]) == 2
    _one_sentence_error(capsys)
    assert not out.exists()
    other = write_toy(tmp_path / "other.h5", val_seed=99)       # same run, other val data
    assert main(["check", str(shipped / "inference_config.json"), other, *FAST]) == 2
    assert "fit_sha256" in _one_sentence_error(capsys)


@pytest.mark.parametrize("case", ["run", "split", "classes", "none-threshold", "out-is-file", "check-split",
                                  "column"])
def test_bad_release_input_exits_2_and_writes_nothing(toy, shipped, tmp_path, capsys, case):
    out = tmp_path / "rel"
    args = ["release", toy, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "-o", str(out), *FAST]
    if case == "run":
        args[3] = "net/nope"
    elif case == "split":
        args[5] = "nope"
    elif case == "none-threshold":
        args += ["--calibrator", "none", "--threshold", "0.9"]
    elif case == "out-is-file":
        out.write_text("x")
    elif case == "column":
        args += ["--by", "nope"]
    if case == "classes":
        k4 = write_toy(tmp_path / "k4.h5", k=4)
        args = ["check", str(shipped / "inference_config.json"), k4, *FAST]
    elif case == "check-split":
        args = ["check", str(shipped / "inference_config.json"), toy, "--split", "nope", *FAST]
    assert main(args) == 2
    _one_sentence_error(capsys)
    assert (not out.exists()) or out.is_file()


def test_drift_flags_and_refits_with_a_parent_link(shipped, toy, tmp_path, capsys):
    config = str(shipped / "inference_config.json")
    assert main(["drift", config, toy, "--run", RUN, "--split", "shadow", "--max-ece-increase", "1", *FAST]) == 0
    assert "no drift" in capsys.readouterr().out
    out = tmp_path / "refit"
    assert main(["drift", config, toy, "--run", RUN, "--split", "shadow", "--max-ece-increase", "0",
                 "--refit-out", str(out), *FAST]) == 1
    assert "DRIFT" in capsys.readouterr().out
    new = rel.load_config(out / "inference_config.json")
    assert new["parent"] == rel.load_config(config)["config_sha256"]
    assert new["provenance"]["fit_rows"] == {"part": "fit", "seed": 0, "of": 600}
    assert (out / "metrics.csv").is_file()
    # checked by default on its verify half: held out from the fit half, so the independence criterion passes
    assert main(["check", str(out / "inference_config.json"), toy, "--json", "--max-ece", "1", "--max-class-ece",
                 "1", "--max-high-conf-gap", "1", *FAST]) == 0
    rows = {r["criterion"]: r for r in json.loads(capsys.readouterr().out)}
    independent = rows["calibrator fitted on another split than the one checked"]
    assert independent["passed"] and "(other half)" in independent["value"]
    assert rows["ECE on shadow (15 bins)"]["value"] == pytest.approx(new["metrics"]["ece"], abs=1e-12)
    assert main(["drift", config, toy, "--run", "net/other", "--split", "shadow", *FAST]) == 2
    _one_sentence_error(capsys)


def test_apply_with_the_inference_config_reproduces_apply_with_calibrators_json(shipped, toy, tmp_path, capsys):
    report = tmp_path / "report"
    assert main(["report", toy, "--run", RUN, "--calibrators", "none,ts", "--fit-split", "val", "--eval-split",
                 "deploy", "--no-diagram", "-o", str(report), *FAST]) == 0
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    assert main(["apply", str(report / "calibrators.json"), toy, "--run", RUN, "--split", "shadow", "-o", str(a)]) == 0
    assert main(["apply", str(shipped / "inference_config.json"), toy, "--run", RUN, "--split", "shadow",
                 "-o", str(b)]) == 0
    with h5py.File(a) as fa, h5py.File(b) as fb:
        pa, pb = fa["net+ts/toy/shadow/probs"][()], fb["net+ts/toy/shadow/probs"][()]
    np.testing.assert_array_equal(pa, pb)
    capsys.readouterr()
    assert main(["apply", str(shipped / "inference_config.json"), toy, "--run", "net/other", "--split", "shadow",
                 "-o", str(tmp_path / "c.h5")]) == 2
    _one_sentence_error(capsys)
    assert not (tmp_path / "c.h5").exists()
    cfg = json.loads((shipped / "inference_config.json").read_text())
    cfg["calibrator"]["params"]["temperature"] = 1.0
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(cfg))
    assert main(["apply", str(edited), toy, "--run", RUN, "--split", "shadow", "-o", str(tmp_path / "d.h5")]) == 2
    assert "modified after it was written" in _one_sentence_error(capsys)
    assert not (tmp_path / "d.h5").exists()
