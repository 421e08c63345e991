"""Outputs never touch inputs, and a report folder is always one run's report."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from calibview.cli import report as report_command
from calibview.cli import main
from calibview.core.errors import CalibviewError
from calibview.core.io.writer import write_run
from calibview.core.reports.folder import MANIFEST
from calibview.core.io.safe_io import atomic_hdf5, refuse_overwriting_inputs, same_file


def two_runs(path: Path) -> Path:
    rng = np.random.default_rng(0)
    for model in ("a", "b"):
        for split in ("val", "test"):
            write_run(path, model, "d", split, rng.normal(size=(200, 3)).astype(np.float32), rng.integers(0, 3, 200))
    return path


def fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), os.stat(path).st_mtime_ns


def refused(capsys, argv, *words) -> None:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("calibview: error: ") and "\n" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, err


# ------------------------------------------------------------------------------------------------- collisions


def test_same_file_is_by_device_and_inode(tmp_path):
    a = tmp_path / "a.h5"
    a.write_bytes(b"x")
    os.link(a, tmp_path / "hard.h5")
    os.symlink(a, tmp_path / "soft.h5")
    (tmp_path / "copy.h5").write_bytes(b"x")
    assert same_file(a, tmp_path / "hard.h5") and same_file(a, tmp_path / "soft.h5")
    assert same_file(a, tmp_path / "." / "a.h5")
    assert not same_file(a, tmp_path / "copy.h5") and not same_file(a, tmp_path / "missing.h5")
    with pytest.raises(CalibviewError, match="under another name"):
        refuse_overwriting_inputs([tmp_path / "hard.h5"], [a])


def test_import_refuses_its_input_as_output(tmp_path, capsys):
    src = tmp_path / "x.npz"
    np.savez(src, logits=np.zeros((5, 3), np.float32), labels=np.arange(5) % 3)
    os.link(src, tmp_path / "other_name.h5")
    before = fingerprint(src)
    for out in (src, tmp_path / "other_name.h5"):
        refused(capsys, ["import", str(src), "-o", str(out)], str(out), "one of the inputs being read")
        assert fingerprint(src) == before


@pytest.fixture
def fitted(tmp_path) -> tuple[Path, Path]:
    data = two_runs(tmp_path / "in.h5")
    assert main(["report", str(data), "--run", "a/d", "--calibrators", "ts", "--n-boot", "0", "--no-diagram",
                 "-o", str(tmp_path / "rep"), "--quiet"]) == 0
    return data, tmp_path / "rep" / "calibrators.json"


def test_apply_refuses_its_inputs_as_output(tmp_path, capsys, fitted):
    data, cal = fitted
    os.symlink(data, tmp_path / "alias.h5")
    before, before_cal = fingerprint(data), fingerprint(cal)
    for out in (data, tmp_path / "alias.h5", cal):
        refused(capsys, ["apply", str(cal), str(data), "--run", "a/d", "--split", "test", "-o", str(out)],
                "one of the inputs being read")
        assert fingerprint(data) == before and fingerprint(cal) == before_cal


def test_apply_appends_through_a_temporary_copy(tmp_path, fitted, monkeypatch):
    data, cal = fitted
    out = two_runs(tmp_path / "out.h5")
    before = fingerprint(out)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("calibview.core.io.writer._write_dataset", fail)
    assert main(["apply", str(cal), str(data), "--run", "a/d", "--split", "test", "-o", str(out)]) == 2
    assert fingerprint(out) == before                      # the failed append never touched OUT
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    monkeypatch.undo()
    assert main(["apply", str(cal), str(data), "--run", "a/d", "--split", "test", "-o", str(out)]) == 0


def test_atomic_hdf5_leaves_the_file_alone_on_error(tmp_path):
    path = tmp_path / "x.h5"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_hdf5(path) as tmp:
            Path(tmp).write_bytes(b"new")
            raise RuntimeError
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["x.h5"]


def test_report_refuses_to_write_over_its_input(tmp_path, capsys):
    out = tmp_path / "rep"
    out.mkdir()
    data = two_runs(out / "metrics.csv")                   # the input sits where the report writes
    before = fingerprint(data)
    refused(capsys, ["report", str(data), "--calibrators", "none", "--n-boot", "0", "--no-diagram", "-o", str(out),
                     "--force"], "metrics.csv", "one of the inputs being read")
    assert fingerprint(data) == before and sorted(os.listdir(out)) == ["metrics.csv"]


# --------------------------------------------------------------------------------------------- report folders


def report(data, out, *args) -> int:
    return main(["report", str(data), "--calibrators", "none", "--n-boot", "0", "-o", str(out), "--quiet", *args])


@pytest.mark.qt                     # the diagrams are drawn by the window's canvas
def test_rerun_removes_the_previous_reports_files_only(tmp_path):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    assert report(data, out) == 0
    assert {"diagram_a_d.png", "diagram_b_d.png", MANIFEST} <= set(os.listdir(out))
    (out / "notes.txt").write_text("mine")
    assert report(data, out, "--run", "a/d") == 0
    names = set(os.listdir(out))
    assert "diagram.png" in names and "notes.txt" in names
    assert not {"diagram_a_d.png", "diagram_b_d.png"} & names
    manifest = json.loads((out / MANIFEST).read_text())
    assert {f["name"] for f in manifest["files"]} == names - {MANIFEST, "notes.txt"}
    assert manifest["inputs"][0]["path"] == str(data) and manifest["settings"]["run"] == ["a/d"]


def test_manifest_lists_what_the_run_wrote(tmp_path):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    assert report(data, out, "--no-diagram") == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["schema"] == "calibview.report-manifest/1" and manifest["calibview_version"]
    listed = {f["name"]: f for f in manifest["files"]}
    assert set(listed) == set(os.listdir(out)) - {MANIFEST}
    assert {"metrics.csv", "curves.csv", "calibrators.json", "ranking.csv"} <= set(listed)
    assert listed["metrics.csv"]["bytes"] == (out / "metrics.csv").stat().st_size


def test_failed_run_leaves_the_previous_report_intact(tmp_path, monkeypatch):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    assert report(data, out, "--no-diagram") == 0
    before = {p.name: fingerprint(p) for p in out.iterdir()}

    def fail(*args, **kwargs):
        raise CalibviewError("the diagram could not be drawn.")

    monkeypatch.setattr(report_command, "write_diagrams", fail)
    assert report(data, out, "--run", "a/d") == 2
    assert {p.name: fingerprint(p) for p in out.iterdir()} == before


def test_failed_run_into_a_new_folder_leaves_nothing(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise CalibviewError("the diagram could not be drawn.")

    monkeypatch.setattr(report_command, "write_diagrams", fail)
    assert report(two_runs(tmp_path / "in.h5"), tmp_path / "new") == 2
    assert not (tmp_path / "new").exists()


def test_non_empty_folder_without_manifest_needs_force(tmp_path, capsys):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    out.mkdir()
    (out / "mine.csv").write_text("keep")
    refused(capsys, ["report", str(data), "--calibrators", "none", "--n-boot", "0", "--no-diagram", "-o", str(out)],
            str(out), "--force")
    assert os.listdir(out) == ["mine.csv"]
    assert report(data, out, "--no-diagram", "--force") == 0
    assert (out / "mine.csv").read_text() == "keep" and (out / MANIFEST).exists()


@pytest.mark.parametrize("entry", ["../victim.txt", "ABSOLUTE"])
def test_a_hostile_manifest_cannot_remove_files_outside(tmp_path, capsys, entry):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    assert report(data, out, "--no-diagram") == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("x")
    manifest = json.loads((out / MANIFEST).read_text())
    digest = hashlib.sha256(b"x").hexdigest()            # as if the previous report had written it
    manifest["files"] += [{"name": str(victim) if entry == "ABSOLUTE" else entry, "sha256": digest}]
    (out / MANIFEST).write_text(json.dumps(manifest))
    before = {p.name: fingerprint(p) for p in out.iterdir()}
    refused(capsys, ["report", str(data), "--calibrators", "none", "--n-boot", "0", "--no-diagram", "-o", str(out)],
            "a path outside", "refuses this manifest")
    assert victim.read_text() == "x" and data.exists()
    assert {p.name: fingerprint(p) for p in out.iterdir()} == before


def test_an_append_through_a_symbolic_link_replaces_its_target(tmp_path):
    real = two_runs(tmp_path / "real.h5")
    os.symlink(real, tmp_path / "link.h5")
    write_run(tmp_path / "link.h5", "c", "d", "test", np.zeros((4, 3), np.float32), np.arange(4) % 3)
    assert (tmp_path / "link.h5").is_symlink()
    from calibview.core.io.discovery import list_runs
    assert [r.name for r in list_runs(real)] == ["a/d", "b/d", "c/d"]


def test_release_refuses_to_write_over_its_input(tmp_path, capsys):
    from _release_data import RUN, write_toy

    out = tmp_path / "rel"
    out.mkdir()
    toy = write_toy(out / "metrics.csv")                   # the input sits where release writes metrics.csv
    before = fingerprint(Path(toy))
    refused(capsys, ["release", str(toy), "--run", RUN, "--eval-split", "deploy", "--no-diagram", "-o", str(out),
                     "--n-boot", "0", "--device", "cpu", "--quiet"], "metrics.csv", "one of the inputs being read")
    assert fingerprint(Path(toy)) == before and os.listdir(out) == ["metrics.csv"]


def test_drift_refit_refuses_to_replace_its_config(tmp_path, capsys):
    from _release_data import RUN, write_toy

    toy = write_toy(tmp_path / "toy.h5")
    rel = tmp_path / "rel"
    assert main(["release", str(toy), "--run", RUN, "--eval-split", "deploy", "--no-diagram", "-o", str(rel),
                 "--n-boot", "0", "--device", "cpu", "--quiet"]) == 0
    config = rel / "inference_config.json"
    before = fingerprint(config)
    refused(capsys, ["drift", str(config), str(toy), "--run", RUN, "--split", "deploy", "--refit-out", str(rel),
                     "--n-boot", "0", "--device", "cpu", "--quiet"], "inference_config.json",
            "one of the inputs being read")
    assert fingerprint(config) == before
