"""Hostile input files: external links, external raw storage, virtual datasets, datasets declared but
never written, compression bombs in HDF5 and in .npz. Each is refused with one sentence naming the dataset and exit
status 2, in bounded time and memory, and the file it points to is never opened: that target is a FIFO, whose
opening blocks until a writer comes, and the command runs under a timeout (HDF5 opens files from C, where a Python
audit hook cannot see it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

from calibview.core.io import guard
from calibview.core.errors import CalibviewError
from calibview.core.io.importers import import_arrays
from calibview.core.io.discovery import list_runs
from calibview.core.io.logits import read_split

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 60
MAX_RSS_BYTES = 1 << 30          # every bomb below inflates to more than this


#: the command line, reporting its own peak memory at exit: VmHWM of its address space (the rusage of a child
#: would not do: Linux carries the parent's RSS at fork into the child's ru_maxrss, so a test run that has grown
#: to 1 GB would fail every case here)
_CHILD = """
import atexit, os, sys
def _peak():
    with open("/proc/self/status") as f:
        kb = next(line for line in f if line.startswith("VmHWM")).split()[1]
    with open(os.environ["CALIBVIEW_TEST_PEAK"], "w") as f:
        f.write(kb)
atexit.register(_peak)
from calibview.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_cli(*args: str, cwd: Path = ROOT) -> tuple[int, str, float, int]:
    """(exit status, stderr, seconds, peak RSS in bytes) of the calibview command line with ARGS, killed after
    TIMEOUT_S (a blocked open of a FIFO would hang it)."""
    peak = Path(os.environ.get("TMPDIR", "/tmp")) / f"calibview-peak-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, OMP_NUM_THREADS="1", QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT),
               CALIBVIEW_TEST_PEAK=str(peak))
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > TIMEOUT_S:
            proc.kill()
            proc.wait()
            pytest.fail(f"calibview {' '.join(args)} hung for {TIMEOUT_S} s (did it open the FIFO?)")
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode()
    try:
        rss = int(peak.read_text()) * 1024
    finally:
        peak.unlink(missing_ok=True)
    return proc.returncode, err, time.monotonic() - t0, rss


def assert_refused(args, *names: str) -> str:
    rc, err, seconds, rss = run_cli(*args)
    assert rc == 2, err
    assert "Traceback" not in err
    line = err.strip()
    assert line.startswith("calibview: error: ") and "\n" not in line, err
    assert line.rstrip(".").count(". ") == 0, f"more than one sentence: {line}"
    for name in names:
        assert name in line, line
    assert seconds < TIMEOUT_S / 2 and rss < MAX_RSS_BYTES, (seconds, rss)
    return line


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "target.h5"
    os.mkfifo(path)
    return path


def split_group(path: Path, n: int = 10, k: int = 3, scores: bool = True) -> tuple[h5py.File, h5py.Group]:
    f = h5py.File(path, "w")
    g = f.create_group("m/d/test")
    if scores:
        g["logits"] = np.random.default_rng(0).normal(size=(n, k)).astype(np.float32)
    g["labels"] = np.arange(n) % k
    return f, g


# --------------------------------------------------------------------------------------------------- the kinds


def test_external_link_to_another_file_is_not_followed(tmp_path, fifo):
    path = tmp_path / "link.h5"
    f, g = split_group(path, scores=False)
    g["logits"] = h5py.ExternalLink(str(fifo), "/logits")
    f.close()
    line = assert_refused(["runs", str(path)], "/m/d/test/logits", "external link", str(fifo))
    assert "--allow-external" in line
    assert_refused(["report", str(path), "--calibrators", "none", "--n-boot", "0", "-o", str(tmp_path / "r")],
                   "/m/d/test/logits")
    assert not (tmp_path / "r").exists()


def test_soft_link_through_an_external_link_is_not_followed(tmp_path, fifo):
    path = tmp_path / "soft.h5"
    f, g = split_group(path, scores=False)
    f["elsewhere"] = h5py.ExternalLink(str(fifo), "/")
    g["logits"] = h5py.SoftLink("/elsewhere/logits")
    f.close()
    assert_refused(["runs", str(path)], "/elsewhere", str(fifo))


def test_external_raw_storage_is_not_read(tmp_path, fifo):
    path = tmp_path / "extstore.h5"
    f, g = split_group(path, scores=False)
    g.create_dataset("logits", shape=(10, 3), dtype="f4", external=[(str(fifo), 0, h5py.h5f.UNLIMITED)])
    f.close()
    assert_refused(["runs", str(path)], "/m/d/test/logits", "external raw file", str(fifo))


@pytest.mark.parametrize("unlimited", [False, True])
def test_virtual_dataset_is_not_followed(tmp_path, fifo, unlimited):
    path = tmp_path / "virtual.h5"
    f, g = split_group(path, scores=False)
    if unlimited:      # HDF5 sizes an unlimited mapping from its source when asked for the shape
        u = h5py.h5s.UNLIMITED
        layout = h5py.VirtualLayout(shape=(10, 3), maxshape=(None, 3), dtype="f4")
        layout[0:u, :] = h5py.VirtualSource(str(fifo), "logits", shape=(10, 3), maxshape=(None, 3))[0:u, :]
    else:
        layout = h5py.VirtualLayout(shape=(10, 3), dtype="f4")
        layout[:] = h5py.VirtualSource(str(fifo), "logits", shape=(10, 3))
    g.create_virtual_dataset("logits", layout)
    f.close()
    assert_refused(["runs", str(path)], "/m/d/test/logits", "virtual dataset", str(fifo))


def test_declared_but_never_written_huge_dataset(tmp_path):
    path = tmp_path / "sparse.h5"
    n, k = 10**12, 10
    with h5py.File(path, "w") as f:
        g = f.create_group("m/d/test")
        g.create_dataset("logits", shape=(n, k), dtype="f4", chunks=(4096, k), compression="gzip")
        g.create_dataset("labels", shape=(n,), dtype="i8", chunks=(65536,), compression="gzip")
        g["logits"][:4096] = 1.0                  # one chunk written, 2.4e8 declared
    assert os.path.getsize(path) < 1 << 20
    line = assert_refused(["runs", str(path)], "/m/d/test/logits", "38,146,972.7 MB", "of its 244,140,625 chunks")
    assert "--allow-sparse" in line
    assert_refused(["metrics", str(path), "--calibrators", "none", "--n-boot", "0"], "/m/d/test/logits")


def gzip_bomb(path: Path, n: int = 1 << 23, k: int = 40, rows: int = 1 << 14) -> None:
    """(n, k) float32 zeros, gzip-compressed about 1000x, written chunk by chunk from one compressed chunk."""
    with h5py.File(path, "w") as f:
        g = f.create_group("m/d/test")
        for name, shape, chunk, dtype in (("logits", (n, k), (rows, k), "f4"), ("labels", (n,), (rows * 8,), "i8")):
            ds = g.create_dataset(name, shape=shape, dtype=dtype, chunks=chunk, compression="gzip")
            block = zlib.compress(np.zeros(chunk, dtype).tobytes(), 9)
            for start in range(0, n, chunk[0]):
                ds.id.write_direct_chunk((start,) + (0,) * (len(shape) - 1), block, 0)


def test_gzip_zeros_at_1000x(tmp_path):
    path = tmp_path / "bomb.h5"
    gzip_bomb(path)
    declared = (1 << 23) * 40 * 4
    assert declared > MAX_RSS_BYTES and declared / os.path.getsize(path) > 900
    line = assert_refused(["runs", str(path)], "/m/d/test/logits", "1,280.0 MB", "compression bomb")
    assert "--allow-sparse" in line


def test_zip_bomb_in_npz(tmp_path):
    src = tmp_path / "bomb.npz"
    n, k = 1 << 23, 40
    with zipfile.ZipFile(src, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("logits.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": (n, k)})
            zeros = bytes(1 << 24)
            for _ in range(n * k * 4 // len(zeros)):
                member.write(zeros)
        with z.open("labels.npy", "w") as member:
            np.lib.format.write_array(member, np.zeros(n, np.int64))
    assert os.path.getsize(src) < 8 << 20
    out = tmp_path / "out.h5"
    line = assert_refused(["import", str(src), "-o", str(out)], "logits", "zip bomb", str(src))
    assert "--allow-sparse" in line
    assert not out.exists()


def test_a_virtual_dataset_whose_sources_cannot_be_listed(tmp_path, fifo):
    """Found by the fuzzer: h5py raises RuntimeError listing an unlimited mapping of a (1, 0) shape."""
    path = tmp_path / "empty_vds.h5"
    f, g = split_group(path, n=1, scores=False)
    u = h5py.h5s.UNLIMITED
    layout = h5py.VirtualLayout(shape=(1, 0), maxshape=(None, 0), dtype="f2")
    layout[0:u, :] = h5py.VirtualSource(str(fifo), "/data", shape=(1, 0), maxshape=(None, 0), dtype="f2")[0:u, :]
    g.create_virtual_dataset("logits", layout)
    f.close()
    with pytest.raises(CalibviewError, match="virtual dataset whose sources cannot be listed"):
        list_runs(path)


def test_a_soft_link_loop_is_one_sentence(tmp_path):
    path = tmp_path / "loop.h5"
    f, g = split_group(path, scores=False)
    f["a"] = h5py.SoftLink("/b/x")
    f["b"] = h5py.SoftLink("/a")
    g["logits"] = h5py.SoftLink("/a")
    f.close()
    with pytest.raises(CalibviewError, match="nested more than 16 deep"):
        list_runs(path)


# ------------------------------------------------------------------------------------------ what is still allowed


def test_allow_external_reads_only_the_named_file(tmp_path):
    target = tmp_path / "target.h5"
    with h5py.File(target, "w") as f:
        f["logits"] = np.eye(3, dtype=np.float32)[np.arange(10) % 3]
    path = tmp_path / "link.h5"
    f, g = split_group(path, scores=False)
    g["logits"] = h5py.ExternalLink("target.h5", "/logits")       # relative to the linking file's folder
    f.close()
    with pytest.raises(CalibviewError, match="external link"):
        list_runs(path)
    with guard.using(allow_external=[tmp_path / "other.h5"]):
        with pytest.raises(CalibviewError, match="external link"):
            list_runs(path)
    with guard.using(allow_external=[target]):
        assert read_split(path, "m/d", "test").scores.shape == (10, 3)
    rc, err, _, _ = run_cli("runs", str(path), "--allow-external", str(target))
    assert rc == 0, err


def test_allow_sparse_reads_fill_values(tmp_path):
    path = tmp_path / "unwritten.h5"
    f, g = split_group(path, scores=False)
    g.create_dataset("logits", shape=(10, 3), dtype="f4")      # contiguous, never written
    f.close()
    with pytest.raises(CalibviewError, match=r"/m/d/test/logits declares 120 bytes but none of it was ever written"):
        list_runs(path)
    with guard.using(allow_sparse=True):
        assert read_split(path, "m/d", "test").scores.sum() == 0


def test_hard_links_soft_links_and_real_compression_still_read(tmp_path):
    path = tmp_path / "fine.h5"
    f, g = split_group(path)
    f["alias"] = h5py.SoftLink("/m/d/test/logits")
    g2 = f.create_group("m/d/val")
    g2["logits"] = h5py.SoftLink("/alias")
    g2["labels"] = g["labels"]
    f.close()
    assert list_runs(path)[0].split_names == ("test", "val")
    assert read_split(path, "m/d", "val").scores.shape == (10, 3)


def test_npz_of_ordinary_size_imports(tmp_path):
    src = tmp_path / "fine.npz"
    np.savez_compressed(src, logits=np.zeros((100, 3), np.float32), labels=np.arange(100) % 3)
    (run,) = import_arrays(src, tmp_path / "out.h5")
    assert run.splits[0].n == 100


def test_the_command_line_policy_ends_with_the_command(tmp_path):
    from calibview.cli import main

    path = tmp_path / "unwritten.h5"
    f, g = split_group(path, scores=False)
    g.create_dataset("logits", shape=(10, 3), dtype="f4")
    f.close()
    assert main(["runs", str(path), "--allow-sparse"]) == 0
    assert guard.policy() == guard.Policy()
    with pytest.raises(CalibviewError):
        list_runs(path)


def test_allow_sparse_overrides_the_ratio_rule(tmp_path, monkeypatch):
    monkeypatch.setattr(guard, "SIZE_LIMIT", 1 << 20)      # the rule at a small scale, same code path
    path = tmp_path / "zeros.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("m/d/test")
        g.create_dataset("logits", data=np.zeros((1 << 16, 10), np.float32), chunks=(4096, 10), compression="gzip")
        g["labels"] = np.zeros(1 << 16, np.int64)
    with pytest.raises(CalibviewError, match=r"/m/d/test/logits declares 2.5 MB of scores but stores only"):
        list_runs(path)
    with guard.using(allow_sparse=True):
        assert read_split(path, "m/d", "test").scores.shape == (1 << 16, 10)


def test_allow_sparse_overrides_the_npz_rule(tmp_path, monkeypatch):
    monkeypatch.setattr(guard, "SIZE_LIMIT", 1 << 20)
    src = tmp_path / "zeros.npz"
    np.savez_compressed(src, logits=np.zeros((1 << 16, 10), np.float32), labels=np.zeros(1 << 16, np.int64))
    with pytest.raises(CalibviewError, match=r"the array logits declares 2.5 MB but stores only"):
        import_arrays(src, tmp_path / "a.h5")
    assert not (tmp_path / "a.h5").exists()
    with guard.using(allow_sparse=True):
        (run,) = import_arrays(src, tmp_path / "b.h5")
    assert run.splits[0].n == 1 << 16
