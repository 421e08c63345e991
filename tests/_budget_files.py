"""Hostile but valid inputs for the read budget, small enough for the test suite and built to show the same
failure as their full-size versions: tiny HDF5 chunks, a metadata column far longer than its split, an .npz of
many members each under the per-member rule, a .pt whose records are deflated, a corrupt chunk B-tree, groups
nested 1,500 deep, thousands of attributes and a file whose scores lie in the hole of a sparse file."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import h5py
import numpy as np


def tiny_chunks(path: Path, n: int, k: int, chunks=(1, 1), dtype="float32", compression=None) -> np.ndarray:
    """m/d/test (and m/d/val, the same) of (n, k) logits in ``chunks``-sized HDF5 chunks; returns the logits."""
    z = np.random.default_rng(0).normal(size=(n, k)).astype(dtype)
    y = np.arange(n) % k
    with h5py.File(path, "w") as f:
        for split in ("val", "test"):
            g = f.create_group(f"m/d/{split}")
            g.create_dataset("logits", data=z, chunks=chunks, compression=compression)
            g.create_dataset("labels", data=y)
    return z


def meta_bomb(path: Path, n: int = 50, declared: int = 2 ** 31, chunk: int = 2 ** 22) -> None:
    """A split of n samples whose metadata column ``col`` declares ``declared`` gzip-compressed int8 values; only
    its first chunk is written (read with --allow-sparse, the rest inflates as fill values)."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for split in ("val", "test"):
            g = f.create_group(f"m/d/{split}")
            g["logits"] = rng.normal(size=(n, 3)).astype(np.float32)
            g["labels"] = np.arange(n) % 3
            m = g.create_group("meta")
            ds = m.create_dataset("col", shape=(declared,), dtype="i1", chunks=(chunk,), compression="gzip")
            ds[:chunk] = 1


def many_member_npz(path: Path, members: int = 16, n: int = 5_000, k: int = 1_000) -> None:
    """An .npz of ``members`` compressed splits of zeros, (n, k) float32 each: every member well under 256 MB,
    their sum over it (16 x 20 MB by default)."""
    zeros = np.zeros((n, k), np.float32)
    labels = np.arange(n) % k
    arrays = {}
    for i in range(members):
        arrays[f"logits_s{i}"] = zeros
        arrays[f"labels_s{i}"] = labels
    np.savez_compressed(path, **arrays)


def deflate_pt(data: bytes) -> bytes:
    """The torch.save archive ``data`` with every record deflated (torch writes them stored)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    return out.getvalue()


def deflated_pt_bomb(path: Path, record_bytes: int = 300 << 20) -> None:
    """A .pt (zip) archive whose tensor record declares ``record_bytes`` of zeros, deflated to a few hundred kB."""
    import torch

    buf = io.BytesIO()
    torch.save({"logits": torch.zeros(4, 2), "labels": torch.tensor([0, 1, 0, 1])}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.endswith("/data/0"):
                with dst.open(info.filename, "w", force_zip64=True) as member:
                    block = bytes(1 << 20)
                    for _ in range(record_bytes >> 20):
                        member.write(block)
            else:
                dst.writestr(info.filename, src.read(info.filename))


def corrupt_btree(path: Path) -> None:
    """m/d/test whose logits' chunk B-tree nodes have a wrong signature (HDF5: "wrong B-tree signature")."""
    with h5py.File(path, "w") as f:
        for split in ("val", "test"):
            g = f.create_group(f"m/d/{split}")
            g.create_dataset("logits", data=np.random.default_rng(0).normal(size=(400, 5)).astype(np.float32),
                             chunks=(4, 5))
            g.create_dataset("labels", data=np.arange(400) % 5)
    raw = bytearray(path.read_bytes())
    at = raw.find(b"TREE")
    while at >= 0:
        if raw[at + 4] == 1:                  # node type 1: a dataset's chunk index (0 is a group's)
            raw[at:at + 4] = b"XXXX"
        at = raw.find(b"TREE", at + 4)
    path.write_bytes(bytes(raw))


def deep_nesting(path: Path, depth: int = 1_500) -> None:
    """A split at the bottom of ``depth`` nested groups /g/g/.../g."""
    with h5py.File(path, "w") as f:
        g = f
        for _ in range(depth):
            g = g.create_group("g")
        g["logits"] = np.zeros((4, 2), np.float32)
        g["labels"] = np.array([0, 1, 0, 1])


def many_attributes(path: Path, count: int = 5_000) -> None:
    """m/d (val, test) whose run group carries ``count`` attributes."""
    with h5py.File(path, "w", libver="latest") as f:
        for split in ("val", "test"):
            g = f.create_group(f"m/d/{split}")
            g["logits"] = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
            g["labels"] = np.arange(40) % 3
        run = f["m/d"]
        for i in range(count):
            run.attrs[f"a{i}"] = i


def sparse_zeros(path: Path, n: int = 70_000, k: int = 1_000) -> None:
    """m/d/test whose (n, k) float32 logits (over 256 MB) are allocated in the file but never written: the file
    is extended over them, a hole of a sparse file that reads as zeros."""
    with h5py.File(path, "w") as f:
        g = f.create_group("m/d/test")
        space = h5py.h5s.create_simple((n, k))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        h5py.h5d.create(g.id, b"logits", h5py.h5t.IEEE_F32LE, space, dcpl=dcpl)
        g["labels"] = np.arange(n) % k


#: the command line in a subprocess that reports its own peak memory (VmHWM) at exit
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


def run_cli(*args: str, timeout: float = 120) -> tuple[int, str, float, int]:
    """(exit status, stderr, seconds, peak resident bytes) of ``calibview ARGS`` in a fresh process."""
    import os
    import subprocess
    import sys
    import tempfile
    import time

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        peak = Path(tmp) / "peak"
        env = dict(os.environ, OMP_NUM_THREADS="1", QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(root),
                   CALIBVIEW_TEST_PEAK=str(peak))
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", _CHILD, *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=timeout)
        seconds = time.monotonic() - t0
        rss = int(peak.read_text()) * 1024 if peak.exists() else 0
    return proc.returncode, proc.stderr, seconds, rss
