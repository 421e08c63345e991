"""apply checks that a calibrators file fits its target (K, class names, run), and its smaller checks."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.calibrators.file import SCHEMA
from calibview.core.io.writer import write_run


def runs(path: Path, names=None) -> Path:
    rng = np.random.default_rng(1)
    for model, k in (("a", 3), ("b", 3), ("c", 4)):
        for split in ("val", "test"):
            write_run(path, model, "d", split, rng.normal(size=(100, k)).astype(np.float32), rng.integers(0, k, 100),
                      class_names=[f"{model}{i}" if names else f"class{i}" for i in range(k)])
    return path


@pytest.fixture
def fitted(tmp_path) -> tuple[Path, Path]:
    data = runs(tmp_path / "in.h5")
    assert main(["report", str(data), "--run", "a/d", "--calibrators", "none,ts", "--n-boot", "0", "--no-diagram",
                 "-o", str(tmp_path / "rep"), "--quiet"]) == 0
    return data, tmp_path / "rep" / "calibrators.json"


def apply(cal, data, run, out, *extra) -> int:
    return main(["apply", str(cal), str(data), "--run", run, "--split", "test", "-o", str(out), *extra])


def last_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1] if err else ""


def test_calibrators_json_carries_the_schema_and_class_names(fitted):
    records = json.loads(fitted[1].read_text())
    assert {r["schema"] for r in records} == {SCHEMA}
    assert records[0]["class_names"] == ["class0", "class1", "class2"]


def test_a_calibrator_of_another_run_is_refused_unless_allowed(tmp_path, fitted, capsys, caplog):
    data, cal = fitted
    assert apply(cal, data, "b/d", tmp_path / "o.h5") == 2
    err = last_error(capsys)
    assert str(cal) in err and "run b/d" in err and "--allow-other-run" in err
    assert not (tmp_path / "o.h5").exists()
    caplog.set_level(logging.WARNING, logger="calibview")       # apply has no --quiet; an earlier test's lingers
    assert apply(cal, data, "b/d", tmp_path / "o.h5", "--allow-other-run") == 0
    assert "fitted on run a/d, not b/d" in caplog.text


def test_other_k_is_an_error_even_with_allow_other_run(tmp_path, fitted, capsys):
    data, cal = fitted
    assert apply(cal, data, "c/d", tmp_path / "o.h5", "--allow-other-run") == 2
    err = last_error(capsys)
    assert str(cal) in err and "K = 3" in err and "K = 4" in err


def test_other_class_names_are_an_error(tmp_path, fitted, capsys):
    _, cal = fitted
    other = runs(tmp_path / "named.h5", names=True)
    assert apply(cal, other, "b/d", tmp_path / "o.h5", "--allow-other-run") == 2
    err = last_error(capsys)
    assert str(cal) in err and "class names" in err and "'class0'" in err


def test_a_file_without_schema_is_read_with_a_warning(tmp_path, fitted, caplog):
    data, cal = fitted
    old = [{k: v for k, v in r.items() if k not in ("schema", "class_names")} for r in json.loads(cal.read_text())]
    cal.write_text(json.dumps(old))
    caplog.set_level(logging.WARNING, logger="calibview")
    assert apply(cal, data, "a/d", tmp_path / "o.h5") == 0
    assert "has no schema" in caplog.text


def test_an_unknown_schema_is_refused(tmp_path, fitted, capsys):
    data, cal = fitted
    cal.write_text(json.dumps([{**r, "schema": "calibview.calibrators/9"} for r in json.loads(cal.read_text())]))
    assert apply(cal, data, "a/d", tmp_path / "o.h5") == 2
    assert "calibview.calibrators/9" in last_error(capsys)


@pytest.mark.parametrize("content", [b"\x89HDF\r\n\x1a\n" + bytes(100), b"\xff\xfe\x00binary", b"{not json", b"42"])
def test_not_a_calibrators_json_is_one_sentence_naming_the_file(tmp_path, fitted, capsys, content):
    data, _ = fitted
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert apply(bad, data, "a/d", tmp_path / "o.h5") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "codec" not in err and "Traceback" not in err


def test_the_hdf5_file_given_as_the_json(tmp_path, fitted, capsys):
    data, _ = fitted
    assert apply(data, data, "a/d", tmp_path / "o.h5") == 2
    assert "is an HDF5 file, not a calibrators JSON or inference config" in last_error(capsys)


@pytest.mark.parametrize("command", ["check", "drift"])
def test_the_hdf5_file_given_as_the_inference_config(tmp_path, fitted, capsys, command):
    data, _ = fitted
    extra = ["--run", "a/d", "--split", "test"] if command == "drift" else []
    assert main([command, str(data), str(data), *extra, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is an HDF5 file, not an inference config" in err and "codec" not in err


def separable(path: Path) -> Path:
    rng = np.random.default_rng(2)
    for split in ("val", "test"):
        z = rng.normal(size=(200, 3)).astype(np.float32)
        write_run(path, "s", "d", split, z, z.argmax(1))
    return path


def test_metrics_prints_the_calibrator_warnings_of_report(tmp_path, capsys, caplog):
    data = separable(tmp_path / "sep.h5")
    args = [str(data), "--calibrators", "none,ts", "--n-boot", "0"]

    def warnings() -> list[str]:
        out = [r.getMessage() for r in caplog.records if r.getMessage().startswith("warning: s/d ts")]
        caplog.clear()
        return out

    assert main(["report", *args, "--no-diagram", "-o", str(tmp_path / "r")]) == 0
    report_warnings = warnings()
    capsys.readouterr()
    assert report_warnings and "temperature scaling" in report_warnings[0]
    assert main(["metrics", *args, "--json"]) == 0
    assert warnings() == report_warnings
    assert json.loads(capsys.readouterr().out)
    assert main(["metrics", *args, "--json", "--quiet"]) == 0
    assert warnings() == []


@pytest.mark.parametrize("command", ["metrics", "report", "slices"])
def test_a_negative_seed_is_one_sentence_before_any_work(tmp_path, command, capsys):
    extra = {"report": ["-o", str(tmp_path / "never")], "slices": ["--by", "class"], "metrics": []}[command]
    assert main([command, "--run", "resnet110-brier/cifar10", "--seed", "-1", *extra]) == 2
    err = capsys.readouterr().err
    assert err == "calibview: error: The bootstrap seed must be 0 or more, not -1.\n"
    assert not (tmp_path / "never").exists()
