"""Outputs under kills, full disks and concurrent writers: report and release folders are swapped in whole, an
import never half-appends, leftovers of killed runs are removed by the next run, writers of one output take turns,
and a planted manifest cannot reach outside --out.

The kill tests run the command as a subprocess that kills itself (SIGKILL) at a named point
(CALIBVIEW_TEST_KILL_AT, calibview.core.io.durable.hooks), so they are deterministic."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from calibview.cli import main
from calibview.core.io import guard
from calibview.core.io.discovery import list_runs
from calibview.core.io.durable import hooks
from calibview.core.io.durable.locks import lock_path, output_lock
from calibview.core.io.durable.stale import STALE_AFTER
from calibview.core.io.writer import write_run
from calibview.core.reports.folder import MANIFEST

REPORT = ["--calibrators", "none", "--n-boot", "0", "--no-diagram"]


def two_runs(path: Path) -> Path:
    rng = np.random.default_rng(0)
    for model in ("a", "b"):
        for split in ("val", "test"):
            write_run(path, model, "d", split, rng.normal(size=(200, 3)).astype(np.float32), rng.integers(0, 3, 200))
    return path


def snapshot(folder: Path) -> dict:
    """Every file below ``folder``: relative name -> bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def complete(folder: Path) -> bool:
    """The folder is one run's output: its manifest lists exactly its files (besides the user's), hashes matching."""
    manifest = json.loads((folder / MANIFEST).read_text())
    return all(hashlib.sha256((folder / f["name"]).read_bytes()).hexdigest() == f["sha256"] for f in manifest["files"])


def calibview(*args, kill_at=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    e = dict(os.environ, **(env or {}))
    e.pop(hooks.KILL_AT, None)
    if kill_at:
        e[hooks.KILL_AT] = kill_at
    return subprocess.run([sys.executable, "-m", "calibview", *map(str, args)], capture_output=True, text=True,
                          env=e, timeout=timeout)


def leftovers(parent: Path) -> list[str]:
    return sorted(n for n in os.listdir(parent) if ".calibview-" in n or n.endswith(".tmp"))


def age(parent: Path) -> None:
    """Make every leftover in ``parent`` look older than the minute after which it counts as abandoned."""
    old = time.time() - STALE_AFTER - 5
    for n in leftovers(parent):
        os.utime(parent / n, (old, old), follow_symlinks=False)


def one_sentence(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("calibview: error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# ------------------------------------------------------------------------------------------- kills: report


@pytest.mark.parametrize("point,fallback", [("folder-staged", False), ("folder-linked", False),
                                            ("folder-swapped", False), ("swap-aside", True)])
def test_a_killed_report_leaves_the_old_folder_or_the_new_one(tmp_path, point, fallback):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    assert main(["report", str(data), *REPORT, "--run", "a/d", "-o", str(out), "--quiet"]) == 0
    (out / "mine.txt").write_text("the user's")
    before = snapshot(out)
    env = {hooks.NO_RENAME_EXCHANGE: "1"} if fallback else {}
    r = calibview("report", data, *REPORT, "-o", out, "--quiet", kill_at=point, env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    if point == "swap-aside":                     # the moment between the fallback's two renames: no folder
        assert not out.exists()
    elif point == "folder-swapped":               # the new report is in place, whole, the old one not yet removed
        assert complete(out) and snapshot(out) != before and (out / "mine.txt").read_text() == "the user's"
        assert "\nb,d," in (out / "metrics.csv").read_text()
    else:
        assert snapshot(out) == before
    assert leftovers(tmp_path)
    # the next run restores a folder moved aside at once, and removes leftovers older than a minute
    age(tmp_path)
    r = calibview("report", data, *REPORT, "-o", out, env=env)
    assert r.returncode == 0, r.stderr
    assert "interrupted calibview run" in r.stderr
    assert leftovers(tmp_path) == []
    assert complete(out) and (out / "mine.txt").read_text() == "the user's"


def test_a_fresh_leftover_is_left_alone(tmp_path):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    r = calibview("report", data, *REPORT, "-o", out, kill_at="folder-linked")
    assert r.returncode == -signal.SIGKILL and not out.exists()
    staged = [n for n in leftovers(tmp_path) if n != ".rep.calibview-lock"]       # the lock file is reused
    assert len(staged) == 1 and staged[0].startswith(".rep.calibview-staging-")
    assert main(["report", str(data), *REPORT, "-o", str(out), "--quiet"]) == 0
    assert leftovers(tmp_path) == staged           # under a minute old: perhaps not abandoned yet
    assert complete(out)


# ------------------------------------------------------------------------------------------ kills: release


@pytest.mark.parametrize("point", ["folder-linked", "folder-swapped"])
def test_a_killed_release_never_mixes_two_releases(tmp_path, point):
    from _release_data import RUN, write_toy

    toy3, toy5 = write_toy(tmp_path / "k3.h5"), write_toy(tmp_path / "k5.h5", k=5)
    out = tmp_path / "rel"
    args = ["--run", RUN, "--eval-split", "deploy", "--no-diagram", "--n-boot", "0", "--device", "cpu", "-o", out]
    assert calibview("release", toy3, *args).returncode == 0
    before = snapshot(out)
    r = calibview("release", toy5, *args, kill_at=point)
    assert r.returncode == -signal.SIGKILL, r.stderr
    k = len(json.loads((out / "inference_config.json").read_text())["class_names"])
    if point == "folder-linked":
        assert snapshot(out) == before and k == 3
    else:
        assert complete(out) and k == 5 and "c4" in (out / "per_class.csv").read_text()
    age(tmp_path)
    r = calibview("release", toy5, *args)
    assert r.returncode == 0, r.stderr
    assert leftovers(tmp_path) == [] and complete(out)


def test_release_refuses_a_folder_that_is_not_a_release(tmp_path, capsys):
    from _release_data import RUN, write_toy

    toy, out = write_toy(tmp_path / "toy.h5"), tmp_path / "rel"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    capsys.readouterr()
    assert main(["release", toy, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "--n-boot", "0",
                 "--device", "cpu", "-o", str(out), "--quiet"]) == 2
    assert "is not an earlier release" in one_sentence(capsys.readouterr().err)
    assert os.listdir(out) == ["thesis.tex"]


def test_release_replaces_a_release_of_an_earlier_version(tmp_path):
    from _release_data import RUN, write_toy

    toy, out = write_toy(tmp_path / "toy.h5"), tmp_path / "rel"
    args = ["release", toy, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "--n-boot", "0", "--device",
            "cpu", "-o", str(out), "--quiet"]
    assert main(args) == 0
    (out / MANIFEST).unlink()                      # as an earlier calibview left it
    (out / "diagram.png").write_bytes(b"an old diagram")
    assert main(args) == 0
    assert complete(out) and not (out / "diagram.png").exists()        # the old release's file went with it


# ------------------------------------------------------------------------------------------- kills: import


def npz(path: Path, n: int = 300, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    np.savez(path, logits=rng.normal(size=(n, 4)).astype(np.float32), labels=rng.integers(0, 4, n))
    return path


@pytest.mark.parametrize("point", ["hdf5-copied", "hdf5-written"])
def test_a_killed_import_leaves_the_file_and_the_next_import_removes_its_copy(tmp_path, point):
    out = tmp_path / "out.h5"
    assert main(["import", str(npz(tmp_path / "a.npz")), "-o", str(out), "--model", "a"]) == 0
    before = out.read_bytes()
    r = calibview("import", npz(tmp_path / "b.npz", seed=1), "-o", out, "--model", "b", kill_at=point)
    assert r.returncode == -signal.SIGKILL
    assert out.read_bytes() == before
    copies = [n for n in leftovers(tmp_path) if n.endswith(".tmp")]
    assert len(copies) == 1 and copies[0].startswith(".out.h5.")
    age(tmp_path)
    r = calibview("import", tmp_path / "b.npz", "-o", out, "--model", "b")
    assert r.returncode == 0, r.stderr
    assert f"removed {tmp_path / copies[0]}" in r.stderr
    assert leftovers(tmp_path) == [] and [i.name for i in list_runs(out)] == ["a/data", "b/data"]


# ------------------------------------------------------------------------------------------------ full disks


@pytest.mark.parametrize("command", ["report", "release", "import"])
def test_a_write_error_leaves_the_old_output_and_says_one_sentence(tmp_path, monkeypatch, capsys, command):
    from _release_data import RUN, write_toy

    toy, out = write_toy(tmp_path / "toy.h5"), tmp_path / "out"
    argv = {"report": ["report", toy, *REPORT, "-o", str(out), "--quiet"],
            "release": ["release", toy, "--run", RUN, "--eval-split", "deploy", "--no-diagram", "--n-boot", "0",
                        "--device", "cpu", "-o", str(out), "--quiet"],
            "import": ["import", str(npz(tmp_path / "a.npz")), "-o", str(tmp_path / "out.h5"), "--model", "m"]}[command]
    assert main(argv) == 0
    if command == "import":
        argv[argv.index("m")] = "n"
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    before_out = snapshot(out) if out.is_dir() else None
    monkeypatch.setenv(hooks.ENOSPC_AT, "hdf5-copied" if command == "import" else "atomic-write")
    capsys.readouterr()
    assert main(argv) == 2
    sentence = one_sentence(capsys.readouterr().err)
    assert "No space left on device" in sentence and "left as it was" in sentence
    assert ".calibview-staging-" not in sentence
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert (snapshot(out) if out.is_dir() else None) == before_out
    assert leftovers(tmp_path) == []


def _tmpfs_runner():
    """A command prefix that runs its command with a 4 MB tmpfs mounted at $CALIBVIEW_TMPFS, or the reason there
    is none."""
    if shutil.which("unshare") is None:
        return None, "unshare(1) is not installed"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt 2>&1 || "
                            "mount -t tmpfs -o size=1m tmpfs /tmp 2>&1"], capture_output=True, text=True)
    if probe.returncode != 0:
        return None, f"cannot mount a tmpfs in a user namespace ({(probe.stdout + probe.stderr).strip()})"
    return ["unshare", "-rm", "sh", "-c"], None


def test_a_full_disk_never_crashes_import_or_report(tmp_path):
    runner, reason = _tmpfs_runner()
    if runner is None:
        print(f"skipped: {reason}")
        pytest.skip(reason)
    disk = tmp_path / "disk"
    disk.mkdir()
    data = two_runs(tmp_path / "in.h5")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "small.npz", logits=rng.normal(size=(200, 100)).astype(np.float32),
             labels=rng.integers(0, 100, 200))
    np.savez(tmp_path / "big.npz", logits=rng.normal(size=(20000, 100)).astype(np.float32),
             labels=rng.integers(0, 100, 20000))
    py = f"{sys.executable} -m calibview"
    script = f"""
mount -t tmpfs -o size=6m tmpfs {disk} || exit 99
{py} import {tmp_path}/small.npz -o {disk}/out.h5 --model s || exit 98
{py} report {data} {' '.join(REPORT)} -o {disk}/rep --quiet || exit 97
sha256sum {disk}/out.h5 > {tmp_path}/before.txt; ls -a {disk} {disk}/rep >> {tmp_path}/before.txt
head -c 1500000 /dev/urandom > {disk}/filler
{py} import {tmp_path}/big.npz -o {disk}/out.h5 --model big 2> {tmp_path}/import.err; echo $? > {tmp_path}/import.rc
dd if=/dev/zero of={disk}/filler2 bs=4096 2>/dev/null
{py} report {data} {' '.join(REPORT)} -o {disk}/rep --quiet 2> {tmp_path}/report.err; echo $? > {tmp_path}/report.rc
sha256sum {disk}/out.h5 > {tmp_path}/after.txt; ls -a {disk} {disk}/rep | grep -v filler >> {tmp_path}/after.txt
"""
    r = subprocess.run(runner + [script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    for command in ("import", "report"):
        rc = int((tmp_path / f"{command}.rc").read_text())
        err = (tmp_path / f"{command}.err").read_text()
        assert rc == 2, (command, rc, err)                               # not 139 (a segfault)
        assert "no space left on device" in one_sentence(err).lower()
    before = (tmp_path / "before.txt").read_text().replace("filler\n", "")
    assert (tmp_path / "after.txt").read_text() == before              # the same file, no copy or staging left


# ------------------------------------------------------------------------------------------- concurrent writers


def test_two_concurrent_imports_keep_both_models(tmp_path):
    out = tmp_path / "out.h5"
    assert main(["import", str(npz(tmp_path / "a.npz")), "-o", str(out), "--model", "first"]) == 0
    sources = [npz(tmp_path / f"{m}.npz", n=20000, seed=i) for i, m in enumerate(("x", "y"))]
    procs = [subprocess.Popen([sys.executable, "-m", "calibview", "import", str(src), "-o", str(out), "--model",
                               src.stem], stderr=subprocess.PIPE, text=True) for src in sources]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    names = {i.name for i in list_runs(out)}
    for (rc, err), src in zip(results, sources):
        assert rc == 0 and f"{src.stem}/data" in names or rc == 2 and "being written by another" in err, err
    assert "first/data" in names


def test_two_concurrent_reports_end_with_one_whole_report(tmp_path):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    procs = [subprocess.Popen([sys.executable, "-m", "calibview", "report", str(data), *REPORT, *run, "-o", str(out),
                               "--quiet"], stderr=subprocess.PIPE, text=True) for run in (["--run", "a/d"], [])]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(rc == 0 or rc == 2 and "being written by another" in err for rc, err in results), results
    assert complete(out)
    names = set(os.listdir(out)) - {MANIFEST}
    assert names == {f["name"] for f in json.loads((out / MANIFEST).read_text())["files"]}


def test_a_second_writer_waits_then_names_the_holder(tmp_path, capsys):
    out = tmp_path / "out.h5"
    src = npz(tmp_path / "a.npz")
    with output_lock(out):
        assert lock_path(out).read_text().strip() == str(os.getpid())
        capsys.readouterr()
        t = time.monotonic()
        assert main(["import", str(src), "-o", str(out), "--lock-timeout", "0.5"]) == 2
        assert 0.5 <= time.monotonic() - t < 5
        sentence = one_sentence(capsys.readouterr().err)
        assert f"PID {os.getpid()}" in sentence and "--lock-timeout" in sentence
        assert not out.exists()
        rep = tmp_path / "rep"
        with output_lock(rep):
            assert main(["report", str(two_runs(tmp_path / "in.h5")), *REPORT, "-o", str(rep), "--quiet",
                         "--lock-timeout", "0"]) == 2
            assert not rep.exists() and leftovers(tmp_path) == [".out.h5.calibview-lock", ".rep.calibview-lock"]
    assert main(["import", str(src), "-o", str(out)]) == 0
    assert leftovers(tmp_path) == []                                   # a lock file lives as long as its writer


# ------------------------------------------------------------------------------------------- manifest paths


def test_a_manifest_entry_through_a_symbolic_link_outside_is_refused(tmp_path, capsys):
    data, out = two_runs(tmp_path / "in.h5"), tmp_path / "rep"
    assert main(["report", str(data), *REPORT, "-o", str(out), "--quiet"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.txt").write_text("x")
    os.symlink(elsewhere, out / "sub")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"].append({"name": "sub/victim.txt", "sha256": hashlib.sha256(b"x").hexdigest()})
    (out / MANIFEST).write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["report", str(data), *REPORT, "--run", "a/d", "-o", str(out), "--quiet"]) == 2
    sentence = one_sentence(capsys.readouterr().err)
    assert "'sub/victim.txt'" in sentence and str(elsewhere / "victim.txt") in sentence
    assert (elsewhere / "victim.txt").read_text() == "x" and (out / "sub").is_symlink()


# ------------------------------------------------------------------------------- import checks before writing


def test_import_refuses_what_it_would_refuse_to_read_before_changing_its_output(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out.h5"
    assert main(["import", str(npz(tmp_path / "a.npz")), "-o", str(out), "--model", "a"]) == 0
    before = out.read_bytes()
    np.savez(tmp_path / "flat.npz", logits=np.zeros((20000, 50), np.float32), labels=np.zeros(20000, np.int64))
    monkeypatch.setattr(guard, "SIZE_LIMIT", 1 << 20)     # a constant split "over 256 MB", at test scale
    capsys.readouterr()
    assert main(["import", str(tmp_path / "flat.npz"), "-o", str(out), "--model", "flat"]) == 2
    sentence = one_sentence(capsys.readouterr().err)
    assert "compression bomb" in sentence and f"nothing was written to {out}" in sentence and ".tmp" not in sentence
    assert out.read_bytes() == before and leftovers(tmp_path) == []
    assert main(["import", str(tmp_path / "flat.npz"), "-o", str(out), "--model", "flat", "--allow-sparse"]) == 0
    with guard.using(allow_sparse=True):
        assert [i.name for i in list_runs(out)] == ["a/data", "flat/data"]
