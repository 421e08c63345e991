"""Property-based fuzzing of the HDF5 reader: random valid and invalid runs (dtypes, shapes,
NaN/Inf placements, label ranges, attributes, metadata columns, links and storage that point elsewhere).

For every case: the core gives a result or raises CalibviewError with one sentence (never another exception), the
CLI exits 0 or 2 with at most one error line, no case takes longer than the per-case deadline (a true hang is ended
by faulthandler, its stacks on the terminal), the FIFO that every link and foreign storage points to is never
opened (a watcher process notices and releases any reader), and the input file is never written (hash and mtime).
A case built valid must read back exactly what was written.

Profiles (tests/conftest.py): ``ci`` (default, well under two minutes on two cores) and ``nightly`` (long), chosen
with ``--hypothesis-profile nightly`` or ``CALIBVIEW_FUZZ_PROFILE=nightly``. The case count and the longest case
are printed in the terminal summary.
"""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

import h5py  # noqa: E402

from calibview.cli.program import main  # noqa: E402
from calibview.core.errors import CalibviewError  # noqa: E402
from calibview.core.io.discovery import list_runs  # noqa: E402
from calibview.core.io.logits import iter_split, read_meta, read_split  # noqa: E402

HANG_S = 60                 # a case still running after this is a hang: dump the stacks and end the run
STORAGE = ("contiguous", "chunked", "gzip", "soft_link", "dangling_soft", "external_link", "virtual_fifo",
           "virtual_unlimited", "virtual_self", "external_storage", "unwritten", "huge_unwritten", "hard_alias")
VALID_STORAGE = ("contiguous", "chunked", "gzip", "soft_link", "hard_alias")
SCORE_DTYPES = ("float16", "float32", "float64", "int32", "uint8", "bool", "S4")
LABEL_DTYPES = ("int64", "int8", "uint16", "float32", "float64")
SPECIALS = (np.nan, np.inf, -np.inf, 1e38, -1e38, 0.0)


@dataclass
class SplitSpec:
    kind: str
    n: int
    k: int
    ndim: int
    dtype: str
    label_dtype: str
    label_shift: int                 # labels cover 0..K-1 shifted by this (0 keeps them valid)
    label_extra: int                 # labels has N + this rows
    specials: list = field(default_factory=list)  # (row, col, value)
    normalise: bool = True           # probs rows sum to 1
    storage: str = "contiguous"
    labels_storage: str = "contiguous"
    meta: Optional[str] = None       # None, "ok", "short", "nan_category", "2d"


@dataclass
class FileSpec:
    root_level: bool
    splits: dict
    class_names: Optional[str]       # None, "ok", "short", "ints", "bytes"
    attrs: dict


def _split_spec(k: int, valid: bool):
    """A split of K classes; ``valid`` keeps every field within the format (only values and layout vary)."""
    if valid:
        return st.builds(
            SplitSpec, kind=st.sampled_from(("logits", "logits", "probs")), n=st.integers(1, 40), k=st.just(k),
            ndim=st.just(2), dtype=st.sampled_from(SCORE_DTYPES[:3]), label_dtype=st.sampled_from(("int64", "int8")),
            label_shift=st.just(0), label_extra=st.just(0),
            specials=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.sampled_from((0.0, 50.0, -50.0))),
                              max_size=2),
            normalise=st.just(True), storage=st.sampled_from(VALID_STORAGE),
            labels_storage=st.sampled_from(VALID_STORAGE), meta=st.sampled_from((None, "ok")))
    return st.builds(
        SplitSpec,
        kind=st.sampled_from(("logits", "probs")),
        n=st.integers(0, 40) | st.just(1),
        k=st.just(k) | st.integers(0, 5),
        ndim=st.sampled_from((2, 2, 2, 2, 1, 3)),
        dtype=st.sampled_from(SCORE_DTYPES[:3] * 4 + SCORE_DTYPES[3:]),
        label_dtype=st.sampled_from(LABEL_DTYPES[:1] * 6 + LABEL_DTYPES[1:]),
        label_shift=st.sampled_from((0, 0, 0, 0, -1, 1, 1000)),
        label_extra=st.sampled_from((0, 0, 0, 0, 0, -1, 1)),
        specials=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.sampled_from(SPECIALS)), max_size=3)
        | st.just([]),
        normalise=st.booleans() | st.just(True),
        storage=st.sampled_from(VALID_STORAGE * 3 + STORAGE),
        labels_storage=st.sampled_from(VALID_STORAGE * 3 + STORAGE),
        meta=st.sampled_from((None, None, None, "ok", "short", "nan_category", "2d")),
    )


def _file_spec(k: int, valid: bool):
    return st.builds(
        FileSpec,
        root_level=st.sampled_from((False, False, False, True)),
        splits=st.dictionaries(st.sampled_from(("val", "test", "all", "train")), _split_spec(k, valid), min_size=1,
                               max_size=3),
        class_names=st.sampled_from((None, "ok", "bytes") if valid else (None, None, "ok", "short", "ints", "bytes")),
        attrs=st.dictionaries(st.sampled_from(("source", "attribution", "x" * 20)),
                              st.text(max_size=30) | st.binary(max_size=8) | st.integers() | st.floats(), max_size=2),
    )


# about a third of the cases valid by construction, the rest anything
file_specs = st.tuples(st.integers(2, 5), st.sampled_from((True, False, False))).flatmap(lambda a: _file_spec(*a))


def _scores(s: SplitSpec, rng: np.random.Generator) -> np.ndarray:
    shape = {1: (s.n,), 2: (s.n, s.k), 3: (s.n, s.k, 2)}[s.ndim]
    z = rng.normal(size=shape)
    if s.kind == "probs" and s.ndim == 2 and s.k > 0:
        z = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        if not s.normalise:
            z = z * 1.5
    if s.ndim == 2:
        for row, col, value in s.specials:
            if row < s.n and col < s.k:
                z[row, col] = value
    if s.dtype == "S4":
        return z.astype("S4")
    with np.errstate(all="ignore"):
        return z.astype(s.dtype)


def _put(group: h5py.Group, name: str, data: np.ndarray, storage: str, fifo: str) -> None:
    f = group.file
    if storage in ("contiguous", "hard_alias", "soft_link"):
        target = f.require_group("/_elsewhere") if storage != "contiguous" else group
        tname = f"{group.name.replace('/', '_')}_{name}" if storage != "contiguous" else name
        target.create_dataset(tname, data=data)
        if storage == "hard_alias":
            group[name] = target[tname]
        elif storage == "soft_link":
            group[name] = h5py.SoftLink(target[tname].name)
    elif storage in ("chunked", "gzip"):
        chunks = tuple(max(1, d // 2) for d in data.shape) if data.size else None
        group.create_dataset(name, data=data, chunks=chunks if data.size else None,
                             compression="gzip" if storage == "gzip" and data.size else None)
    elif storage == "dangling_soft":
        group[name] = h5py.SoftLink("/nowhere/at/all")
    elif storage == "external_link":
        group[name] = h5py.ExternalLink(fifo, "/data")
    elif storage in ("virtual_fifo", "virtual_self"):
        src_name = f"/_src{group.name.replace('/', '_')}_{name}"
        if storage == "virtual_self":
            f.create_dataset(src_name, data=data)
        layout = h5py.VirtualLayout(shape=data.shape, dtype=data.dtype)
        layout[...] = h5py.VirtualSource(fifo if storage == "virtual_fifo" else ".", src_name, shape=data.shape,
                                         dtype=data.dtype)
        group.create_virtual_dataset(name, layout)
    elif storage == "virtual_unlimited" and data.ndim >= 1 and data.shape[0] > 0:
        u, rest = h5py.h5s.UNLIMITED, data.shape[1:]
        layout = h5py.VirtualLayout(shape=data.shape, maxshape=(None,) + rest, dtype=data.dtype)
        source = h5py.VirtualSource(fifo, "/data", shape=data.shape, maxshape=(None,) + rest, dtype=data.dtype)
        layout[(slice(0, u),) + (slice(None),) * len(rest)] = source[(slice(0, u),) + (slice(None),) * len(rest)]
        group.create_virtual_dataset(name, layout)
    elif storage == "virtual_unlimited":
        _put(group, name, data, "virtual_fifo", fifo)
    elif storage == "external_storage":
        group.create_dataset(name, shape=data.shape, dtype=data.dtype, external=[(fifo, 0, h5py.h5f.UNLIMITED)])
    elif storage == "unwritten":
        group.create_dataset(name, shape=data.shape, dtype=data.dtype)
    elif storage == "huge_unwritten":
        shape = (10**11,) + data.shape[1:]
        group.create_dataset(name, shape=shape, dtype=data.dtype, chunks=(1024,) + data.shape[1:] if all(
            data.shape[1:]) else True, compression="gzip")


def build(spec: FileSpec, path: Path, fifo: str) -> tuple[bool, dict]:
    """Write the file; (True if it is valid by construction, i.e. the reader must accept it, {split: scores})."""
    rng = np.random.default_rng(0)
    valid, written = True, {}
    with h5py.File(path, "w") as f:
        run = f if spec.root_level else f.require_group("m/d")
        ks = set()
        for name, s in spec.splits.items():
            g = run if spec.root_level else run.create_group(name)
            scores = _scores(s, rng)
            written["all" if spec.root_level else name] = scores
            labels = (np.arange(max(0, s.n + s.label_extra)) % max(s.k, 1) + s.label_shift)
            with np.errstate(all="ignore"):
                labels = labels.astype(s.label_dtype)
            _put(g, s.kind, scores, s.storage, fifo)
            _put(g, "labels", labels, s.labels_storage, fifo)
            if s.meta:
                m = g.create_group("meta")
                values = {"ok": np.arange(s.n) % 3, "short": np.arange(max(0, s.n - 1)),
                          "nan_category": np.full(s.n, np.nan), "2d": np.zeros((s.n, 2))}[s.meta]
                m.create_dataset("col", data=values)
                if s.meta == "nan_category":
                    m["col"].attrs["categorical"] = True
            ks.add(s.k)
            bad_special = any(r < s.n and c < s.k and (s.kind == "probs" or not np.isfinite(v)
                                                        or (abs(v) > 6e4 and s.dtype == "float16"))
                              for r, c, v in s.specials)
            valid &= (s.ndim == 2 and s.n >= 1 and s.k >= 2 and s.dtype.startswith("float")
                      and s.label_dtype.startswith(("int", "uint")) and s.label_shift == 0 and s.label_extra == 0
                      and not bad_special and (s.kind == "logits" or s.normalise)
                      and s.storage in VALID_STORAGE and s.labels_storage in VALID_STORAGE
                      and s.meta in (None, "ok"))
            if spec.root_level:
                break                              # one split at the root
        valid &= len(ks) == 1
        k = next(iter(ks))
        if spec.class_names:
            names = {"ok": [f"c{i}" for i in range(k)], "short": ["a"], "ints": list(range(k)),
                     "bytes": [f"c{i}".encode() for i in range(k)]}[spec.class_names]
            run.attrs["class_names"] = names
            valid &= spec.class_names in ("ok", "bytes")
        for key, value in spec.attrs.items():
            try:
                run.attrs[key] = value
            except (TypeError, ValueError):
                pass
    return valid, written


def _digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


def _one_sentence(e: CalibviewError) -> None:
    text = str(e)
    assert text and "\n" not in text and "Traceback" not in text, text


def exercise(path: Path, valid: bool, written: dict) -> None:
    """The core and the CLI on one file: a result or one CalibviewError sentence."""
    try:
        runs = list_runs(path)
    except CalibviewError as e:
        _one_sentence(e)
        assert not valid, f"a valid file was refused: {e}"
        return
    for run in runs:
        for s in run.splits:
            try:
                data = read_split(path, run, s.name)
                for _ in iter_split(path, run, s.name, chunk_rows=7):
                    pass
                for column in s.meta:
                    read_meta(path, run, s.name, column)
            except CalibviewError as e:
                _one_sentence(e)
                assert not valid, f"a valid file was refused: {e}"
                continue
            if valid:
                np.testing.assert_array_equal(data.scores, written[s.name].astype(data.scores.dtype))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["metrics", str(path), "--calibrators", "none,ts", "--n-boot", "0", "--json", "--quiet",
                   "--device", "cpu"])
    errors = [line for line in err.getvalue().splitlines() if "error" in line]
    assert rc in (0, 2) and len(errors) == (rc == 2), err.getvalue()
    assert "Traceback" not in err.getvalue()


_WATCH = """
import os, sys, time
fifo, marker = sys.argv[1], sys.argv[2]
while os.path.exists(fifo):
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)   # succeeds only while a reader is blocked opening it
    except OSError:
        time.sleep(0.01)
        continue
    with open(marker, "a") as m:
        m.write("opened\\n")
    os.close(fd)                                        # the reader sees an empty file and fails instead of hanging
"""


@pytest.fixture(scope="session")
def fifo_watch(tmp_path_factory):
    """(the FIFO every link points to, the file a watcher process appends to whenever someone opens the FIFO).
    A process, not a thread: h5py holds the GIL while HDF5 blocks in open()."""
    folder = tmp_path_factory.mktemp("fifo")
    fifo, marker = folder / "target.h5", folder / "opened.txt"
    os.mkfifo(fifo)
    marker.write_text("")
    watcher = subprocess.Popen([sys.executable, "-c", _WATCH, str(fifo), str(marker)])
    yield fifo, marker
    fifo.unlink()
    watcher.kill()
    watcher.wait()


@pytest.fixture(scope="session")
def real_stderr(pytestconfig):
    """The terminal's stderr (pytest captures fd 2), for the hang report of faulthandler."""
    capman = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
        stream = os.fdopen(os.dup(2), "w")
    yield stream
    stream.close()


@given(spec=file_specs)
def test_random_runs_give_a_result_or_one_sentence(spec, pytestconfig, real_stderr, fifo_watch):
    stats = pytestconfig.__dict__.setdefault("calibview_fuzz", {"cases": 0, "longest": 0.0, "valid": 0})
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="calibview-fuzz-"))
    faulthandler.dump_traceback_later(HANG_S, exit=True, file=real_stderr)
    fifo, marker = fifo_watch
    try:
        path = tmp / "case.h5"
        valid, written = build(spec, path, str(fifo))
        before, listing, opened = _digest(path), sorted(os.listdir(tmp)), marker.stat().st_size
        try:
            exercise(path, valid, written)
        finally:
            assert marker.stat().st_size == opened, "calibview opened the file a link of the input points to"
        assert _digest(path) == before, "the input file was written"
        assert sorted(os.listdir(tmp)) == listing, "a file appeared next to the input"
    finally:
        faulthandler.cancel_dump_traceback_later()
        shutil.rmtree(tmp, ignore_errors=True)
        elapsed = time.monotonic() - t0
        stats["cases"] += 1
        stats["valid"] += int(locals().get("valid", False))
        stats["longest"] = max(stats["longest"], elapsed)


# the corpus: damaged or pathological files found by hand, each exercised like a generated case
def _corpus():
    import _budget_files as b
    return {"corrupt_btree": b.corrupt_btree, "deep_nesting": b.deep_nesting,
            "many_attributes": lambda p: b.many_attributes(p, 600),
            "tiny_chunks": lambda p: b.tiny_chunks(p, 30, 7, chunks=(1, 1))}


@pytest.mark.parametrize("name", sorted(_corpus()))
def test_corpus_files_give_a_result_or_one_sentence(name, tmp_path):
    path = tmp_path / f"{name}.h5"
    _corpus()[name](path)
    before = _digest(path)
    exercise(path, False, {})
    assert _digest(path) == before, "the input file was written"
