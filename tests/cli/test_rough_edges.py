"""The command line's rough edges a first-time user hit: --quiet leaves only errors on stderr, the slices table
shows whole slice names, a locked HDF5 file and string labels are one clear sentence, and the model weights are
recorded in the inference config by ``release --weights`` and verified by ``check --weights``."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os

import h5py
import numpy as np
import pytest

from _release_data import RUN, write_toy
from calibview.cli import main
from calibview.core.io.writer import write_run

FAST = ["--n-boot", "20", "--device", "cpu"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy(tmp_path_factory.mktemp("toy") / "toy.h5")


def _report(toy, out, *extra):
    return main(["report", toy, "--run", RUN, "--calibrators", "none,ts", "--fit-split", "val", "--eval-split",
                 "shadow", "--no-diagram", "-o", str(out), *FAST, *extra])


def test_quiet_leaves_only_errors_on_stderr(toy, tmp_path, capsys):
    assert _report(toy, tmp_path / "loud") == 0
    loud = capsys.readouterr()
    assert "is right" in loud.err                  # the over-confident shadow split: audit lines on stderr
    assert _report(toy, tmp_path / "quiet", "--quiet") == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out.splitlines()[0] == loud.out.splitlines()[0]
    assert _report(toy, tmp_path / "quiet", "--quiet", "--run", "nope/none") == 2     # errors still say so
    assert capsys.readouterr().err.startswith("calibview: error: ")


def test_slices_table_shows_whole_slice_names(tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = tmp_path / "long.h5"
    names = np.array(["household_electrical_devices", "people"])
    for split, m in (("val", 200), ("test", 300)):
        y = rng.integers(0, 3, m)
        z = rng.normal(size=(m, 3)) * 2
        z[np.arange(m), y] += 2.0
        write_run(path, "net", "toy", split, logits=z.astype(np.float32), labels=y,
                  meta={"superclass": names[np.arange(m) % 2]})
    args = ["slices", str(path), "--run", "net/toy", "--calibrators", "none", "--n-boot", "0", "--device", "cpu",
            "--quiet", "--by", "superclass"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if "household" in line)
    assert " household_electrical_devices " in row
    width = len("household_electrical_devices")
    start = lines[0].index("slice")
    assert lines[0][start:start + width + 1] == "slice".ljust(width + 1)          # the column fits the name
    assert row[start:start + width] == "household_electrical_devices"


def test_slices_table_keeps_its_layout_for_short_names(tmp_path, capsys):
    rng = np.random.default_rng(1)
    path = tmp_path / "short.h5"
    for split, m in (("val", 200), ("test", 300)):
        y = rng.integers(0, 3, m)
        write_run(path, "net", "toy", split, logits=rng.normal(size=(m, 3)).astype(np.float32), labels=y,
                  meta={"site": np.array(["s1", "s2"])[np.arange(m) % 2]})
    assert main(["slices", str(path), "--run", "net/toy", "--calibrators", "none", "--n-boot", "0", "--device",
                 "cpu", "--quiet", "--by", "site"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head == (f"{'run':24s} {'calibrator':10s} {'slice':22s} {'n':>7s} {'ECE %':>7s} {'interval':16s} "
                    f"{'delta %':>8s} {'interval':16s} flag")


def test_a_locked_hdf5_file_is_one_sentence(toy, capsys):
    fd = os.open(toy, os.O_RDWR)                 # what a program writing the file holds (HDF5's file lock)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["runs", toy]) == 2
    finally:
        os.close(fd)
    err = capsys.readouterr().err.strip()
    assert err.startswith("calibview: error: ") and "errno" not in err and "lock file" not in err, err
    assert "another program" in err and err.count(". ") == 0 and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("store", ["fixed", "vlen", "npz"])
def test_string_labels_get_a_clear_message(tmp_path, capsys, store):
    z = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
    names = np.array(["cat", "dog"] * 5)
    path = tmp_path / "s.h5"
    if store == "npz":
        np.savez(tmp_path / "s.npz", logits=z, labels=names)
        assert main(["import", str(tmp_path / "s.npz"), "-o", str(path)]) == 2
    else:
        with h5py.File(path, "w") as f:
            f["m/d/test/logits"] = z
            if store == "fixed":
                f["m/d/test/labels"] = names.astype("S3")
            else:
                f.create_dataset("m/d/test/labels", data=list(names), dtype=h5py.string_dtype())
        assert main(["metrics", str(path), "--calibrators", "none", "--n-boot", "0", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not as floats" not in err and "strings" in err and "class_names" in err, err


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_release_records_weights_and_check_verifies_them(toy, tmp_path, capsys):
    w1, w2 = tmp_path / "model.safetensors", tmp_path / "head.pt"
    w1.write_bytes(os.urandom(3000))
    w2.write_bytes(b"head weights")
    out = tmp_path / "rel"
    assert main(["release", toy, "--run", RUN, "--calibrator", "ts", "--fit-split", "val", "--eval-split", "deploy",
                 "--no-diagram", "-o", str(out), "--weights", str(w1), "--weights", str(w2), *FAST, "--quiet"]) == 0
    capsys.readouterr()
    config = json.loads((out / "inference_config.json").read_text())
    assert config["weights"] == [{"file": "model.safetensors", "sha256": _sha(w1), "size": 3000},
                                 {"file": "head.pt", "sha256": _sha(w2), "size": 12}]
    loose = ["--max-ece", "1", "--max-class-ece", "1", "--max-high-conf-gap", "1", *FAST, "--quiet"]
    cfg = str(out / "inference_config.json")
    assert main(["check", cfg, toy, "--weights", str(w1), "--weights", str(w2), *loose]) == 0
    assert "weights model.safetensors match the config" in capsys.readouterr().out
    w2.write_bytes(b"head weightz")                         # same size, other bytes
    assert main(["check", cfg, toy, "--weights", str(w1), "--weights", str(w2), *loose]) == 1
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "head.pt" in line)
    assert "FAIL" in row and "model.safetensors" not in row
    assert main(["check", cfg, toy, "--weights", str(w2), "--json", *loose]) == 1
    rows = {r["criterion"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["weights head.pt match the config"]["passed"] is False
    other = tmp_path / "other.bin"
    other.write_bytes(b"x")
    assert main(["check", cfg, toy, "--weights", str(other), *loose]) == 1
    assert "other.bin" in capsys.readouterr().out
    assert main(["check", cfg, toy, "--weights", str(tmp_path / "missing.pt"), *loose]) == 2
    assert "missing.pt" in capsys.readouterr().err
    assert main(["check", cfg, toy, *loose]) == 0             # without --weights: the weights are not checked


def test_check_weights_against_a_config_without_a_record(toy, tmp_path, capsys):
    out = tmp_path / "rel"
    assert main(["release", toy, "--run", RUN, "--calibrator", "ts", "--fit-split", "val", "--eval-split", "deploy",
                 "--no-diagram", "-o", str(out), *FAST, "--quiet"]) == 0
    assert "weights" not in json.loads((out / "inference_config.json").read_text())
    w = tmp_path / "model.pt"
    w.write_bytes(b"w")
    assert main(["check", str(out / "inference_config.json"), toy, "--weights", str(w), "--max-ece", "1",
                 "--max-class-ece", "1", "--max-high-conf-gap", "1", *FAST, "--quiet"]) == 1
    assert "model.pt" in capsys.readouterr().out


def test_release_refuses_missing_or_clashing_weights(toy, tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "model.pt").write_bytes(d.encode())
    base = ["release", toy, "--run", RUN, "--calibrator", "ts", "--fit-split", "val", "--eval-split", "deploy",
            "--no-diagram", *FAST, "--quiet"]
    assert main(base + ["-o", str(tmp_path / "r1"), "--weights", str(tmp_path / "nope.pt")]) == 2
    assert "nope.pt" in capsys.readouterr().err and not (tmp_path / "r1").exists()
    assert main(base + ["-o", str(tmp_path / "r2"), "--weights", str(tmp_path / "a" / "model.pt"), "--weights",
                        str(tmp_path / "b" / "model.pt")]) == 2
    assert "model.pt" in capsys.readouterr().err and not (tmp_path / "r2").exists()
