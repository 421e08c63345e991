"""The HDF5 logits format: discover runs in a file, validate them, read them in chunks, write them (docs/FORMAT.md).

A *split* is any group holding a ``logits`` (or ``probs``) dataset of shape (N, K) and a ``labels`` dataset of
shape (N,); its parent group is the *run*. The canonical layout is ``/<model>/<dataset>/<split>/{logits,labels}``.
Files are only ever opened read-only here, except by :func:`write_run`, which writes to its own output file.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Mapping, Optional, Sequence, Union

import h5py
import numpy as np

from calibview.core.io import guard
from calibview.core.io import meta as md
from calibview.core.io import safe_io
from calibview.core.errors import CalibviewError, Progress, check_cancel, report

PathLike = Union[str, "os.PathLike[str]"]

SCORE_KINDS = ("logits", "probs")  # a group holding one of these plus ``labels`` is a split; logits win if both
CHUNK_BYTES = 64 << 20  # default read chunk: about this many bytes of scores
WRITE_CHUNK_BYTES = 1 << 20  # HDF5 chunk size written by write_run
_MAX_ATTR_CHARS = 10_000


def _prob_tolerance(dtype: np.dtype) -> float:
    """Row sums of probabilities must be within this of 1 (absolute), by the *stored* dtype."""
    return 1e-6 if np.dtype(dtype).itemsize >= 8 else 1e-3


@dataclass(frozen=True)
class SplitInfo:
    """One split of a run: metadata only, no arrays."""

    name: str  # "val", "test", "all"
    path: str  # HDF5 group path of the split, e.g. "/resnet110/cifar10/val"
    n: int
    k: int
    kind: str  # "logits" or "probs"
    dtype: str  # stored dtype of the scores, e.g. "float32"
    meta: tuple[str, ...] = ()  # metadata columns under <split>/meta, in file order (names only)

    @property
    def scores_path(self) -> str:
        return _join(self.path, self.kind)

    @property
    def labels_path(self) -> str:
        return _join(self.path, "labels")


@dataclass(frozen=True)
class RunInfo:
    """One model evaluated on one dataset: its splits, class names and string attributes (metadata only)."""

    file: str  # absolute path of the HDF5 file
    name: str  # "model/dataset" (what the CLI's --run takes); "model" when dataset is ""
    model: str
    dataset: str
    path: str  # HDF5 group path of the run
    k: int
    splits: tuple[SplitInfo, ...]  # in file order
    class_names: Optional[tuple[str, ...]]
    attrs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    @property
    def split_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.splits)

    def split(self, name: str) -> SplitInfo:
        for s in self.splits:
            if s.name == name:
                return s
        raise CalibviewError(
            f"{self.file}: split '{name}' not found in run '{self.name}' ({self.path}); "
            f"available splits: {', '.join(self.split_names)}."
        )


@dataclass(frozen=True)
class SplitData:
    """The validated arrays of one split. ``scores`` (N, K) float32/float64 and ``labels`` (N,) int64 are read-only."""

    scores: np.ndarray
    labels: np.ndarray
    kind: str  # "logits" | "probs"
    info: SplitInfo
    run: RunInfo


# ----------------------------------------------------------------------------------------------------- discovery


def _abspath(path: PathLike) -> str:
    return os.path.abspath(os.fspath(path))


def _join(group: str, name: str) -> str:
    return group.rstrip("/") + "/" + name


def _open(file: str) -> h5py.File:
    """Open ``file`` read-only, turning every way that can fail into a one-sentence CalibviewError."""
    if not os.path.exists(file):
        raise CalibviewError(f"{file}: the file does not exist; check the path.")
    if os.path.isdir(file):
        raise CalibviewError(f"{file}: this is a directory, not an HDF5 logits file.")
    try:
        if not h5py.is_hdf5(file):
            raise CalibviewError(
                f"{file}: not an HDF5 file; convert .npz/.npy/.pt logits with `calibview import` first."
            )
        return h5py.File(file, "r")
    except OSError as e:
        raise CalibviewError(f"{file}: could not be opened as an HDF5 file ({_oneline(e)}).") from None


def _oneline(e: BaseException) -> str:
    return " ".join(str(e).split()).rstrip(".").replace(". ", "; ")


def list_runs(path: PathLike) -> list[RunInfo]:
    """All runs in the file, in file order. Reads metadata only (shapes, dtypes, attributes), never the arrays.

    Raises CalibviewError if the file is not HDF5, holds no runs, or any split's shapes or dtypes are invalid."""
    file = _abspath(path)
    with _open(file) as f:
        return _discover(f, file)


def _discover(f: h5py.File, file: str) -> list[RunInfo]:
    found: dict[str, list[SplitInfo]] = {}  # run path -> splits, both in file order
    seen: set = set()

    def walk(group: h5py.Group) -> None:
        if group.id in seen:  # the same group reached by two hard links
            return
        seen.add(group.id)
        split = _split_info(group, file)
        if split is not None:
            found.setdefault(_parent(group.name), []).append(split)
        for name in group:
            if split is not None and name == md.META_GROUP:   # a split's metadata columns, never a split
                continue
            if isinstance(group.get(name, getlink=True), h5py.HardLink):
                child = group.get(name)
                if isinstance(child, h5py.Group):
                    walk(child)

    walk(f)
    if not found:
        raise CalibviewError(
            f"{file}: no runs found in / (no group holds a 'logits' or 'probs' dataset next to a 'labels' "
            f"dataset); see docs/FORMAT.md for the layout."
        )
    root_attrs = _string_attrs(f)
    return [_run_info(f, file, path, splits, root_attrs) for path, splits in found.items()]


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


def _split_info(group: h5py.Group, file: str) -> Optional[SplitInfo]:
    """The split this group is, or None if it holds no scores; CalibviewError if its datasets are malformed."""
    found = {k: guard.child(group, k, file) for k in SCORE_KINDS}  # never follows a foreign link
    kind = next((k for k in SCORE_KINDS if isinstance(found.get(k), h5py.Dataset)), None)
    if kind is None:
        return None
    scores = found[kind]
    spath = _join(group.name, kind)
    lpath = _join(group.name, "labels")
    labels = guard.child(group, "labels", file)
    if not isinstance(labels, h5py.Dataset):
        raise CalibviewError(
            f"{file}: {spath} has no labels dataset next to it ({lpath} is missing); "
            f"add the (N,) integer class labels."
        )
    _check_stored(file, scores, labels)
    _check_meta(file, spath, scores.shape, scores.dtype, lpath, labels.shape, labels.dtype, kind)
    name = "all" if group.name == "/" else group.name.rsplit("/", 1)[1]
    n, k = scores.shape
    return SplitInfo(name=name, path=group.name, n=int(n), k=int(k), kind=kind, dtype=str(scores.dtype),
                     meta=_meta_names(group))


def _check_stored(file: str, scores: h5py.Dataset, labels: h5py.Dataset) -> None:
    """No foreign files, no unwritten chunks, no compression bombs (calibview.core.io.guard), before any read."""
    guard.check_dataset(scores, file, scores=True)
    guard.check_dataset(labels, file)


def _meta_names(group: h5py.Group) -> tuple[str, ...]:
    """The datasets of the split's ``meta`` group (hard links only); validated when read (:func:`read_meta`)."""
    if not isinstance(group.get(md.META_GROUP, getlink=True), h5py.HardLink):
        return ()
    sub = group[md.META_GROUP]
    if not isinstance(sub, h5py.Group):
        return ()
    return tuple(name for name in sub if isinstance(sub.get(name, getlink=True), h5py.HardLink)
                 and isinstance(sub.get(name), h5py.Dataset))


def _check_meta(file: str, spath: str, sshape: tuple, sdtype: np.dtype, lpath: str, lshape: tuple,
                ldtype: np.dtype, kind: str) -> None:
    """Shape and dtype rules shared by reading and writing; each failure is one sentence."""
    if len(sshape) != 2:
        raise CalibviewError(
            f"{file}: {spath} has shape {tuple(sshape)} but {kind} must be 2-D (N samples, K classes)."
        )
    if np.dtype(sdtype).kind != "f":
        raise CalibviewError(
            f"{file}: {spath} has dtype {np.dtype(sdtype)} but {kind} must be floating point (float16/32/64)."
        )
    if len(lshape) != 1:
        raise CalibviewError(f"{file}: {lpath} has shape {tuple(lshape)} but labels must be 1-D (N,).")
    if np.dtype(ldtype).kind not in "iu":
        raise CalibviewError(
            f"{file}: {lpath} has dtype {np.dtype(ldtype)} but labels must be integer class indices "
            f"0..K-1 (store them as int64, not as floats)."
        )
    n, k = sshape
    if n != lshape[0]:
        raise CalibviewError(
            f"{file}: {spath} has {n} rows but {lpath} has {lshape[0]}; there must be one label per row."
        )
    if n == 0:
        raise CalibviewError(f"{file}: {spath} is empty (N = 0); a split needs at least one sample.")
    if k < 2:
        raise CalibviewError(f"{file}: {spath} has K = {k} columns but a classifier needs at least 2 class columns.")


def _run_info(f: h5py.File, file: str, path: str, splits: list[SplitInfo], root_attrs: dict) -> RunInfo:
    if path == "/":
        model, dataset, name = Path(file).stem, "", Path(file).stem
    else:
        model, _, dataset = path.lstrip("/").partition("/")
        name = path.lstrip("/")
    ks = {s.k for s in splits}
    if len(ks) > 1:
        detail = ", ".join(f"{s.path} K = {s.k}" for s in splits)
        raise CalibviewError(f"{file}: the splits of run {path} have different class counts ({detail}).")
    k = splits[0].k
    group = f[path]
    class_names = _class_names(group, file, k)
    attrs = {**root_attrs, **_string_attrs(group)} if path != "/" else dict(root_attrs)
    return RunInfo(file=file, name=name, model=model, dataset=dataset, path=path, k=k, splits=tuple(splits),
                   class_names=class_names, attrs=MappingProxyType(attrs))


def _class_names(group: h5py.Group, file: str, k: int) -> Optional[tuple[str, ...]]:
    if "class_names" not in group.attrs:
        return None
    raw = np.asarray(group.attrs["class_names"])
    if raw.ndim != 1 or raw.dtype.kind not in "OSU" or len(raw) != k:
        raise CalibviewError(
            f"{file}: the class_names attribute of {group.name} must be a 1-D array of K = {k} strings "
            f"but has shape {raw.shape} and dtype {raw.dtype}."
        )
    return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw)


def _string_attrs(obj: h5py.HLObject) -> dict[str, str]:
    """Small scalar attributes (attribution, source, ...) as strings; arrays and class_names are skipped."""
    out = {}
    for key in obj.attrs:
        if key == "class_names":
            continue
        try:
            value = obj.attrs[key]
        except (OSError, TypeError, ValueError):  # a type h5py cannot read: not ours to interpret
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, np.generic):
            value = str(value.item())
        if isinstance(value, (str, int, float, bool)) and len(str(value)) <= _MAX_ATTR_CHARS:
            out[key] = str(value)
    return out


def find_run(path_or_runs: Union[PathLike, Sequence[RunInfo]], name: str) -> RunInfo:
    """The run called ``name`` ("model/dataset", or its group path "/model/dataset"); a unique model name or a
    unique trailing run of whole ``/``-separated components ("cifar100" for "resnet110/cifar100") also matches,
    never part of a component ("ar100")."""
    runs = list_runs(path_or_runs) if isinstance(path_or_runs, (str, os.PathLike)) else list(path_or_runs)
    if not runs:
        raise CalibviewError(f"There are no runs to choose '{name}' from.")
    file = runs[0].file
    key = name.strip("/") or name
    for match in ([r for r in runs if r.name == key], [r for r in runs if r.model == key],
                  [r for r in runs if r.name.endswith("/" + key)]):
        if len(match) == 1:
            return match[0]
        if len(match) > 1:
            raise CalibviewError(
                f"{file}: run '{name}' is ambiguous, it matches {len(match)} runs "
                f"({', '.join(r.name for r in match)}); give the full model/dataset name."
            )
    raise CalibviewError(f"{file}: run '{name}' not found; available runs: {', '.join(r.name for r in runs)}.")


# ------------------------------------------------------------------------------------------------------- reading


def _resolve(f: h5py.File, file: str, run: Union[str, RunInfo], split: str) -> tuple[RunInfo, SplitInfo]:
    """Find the run and split in the open file; a RunInfo is re-checked against the file's current metadata."""
    runs = _discover(f, file)
    name = run.name if isinstance(run, RunInfo) else run
    if isinstance(run, RunInfo):
        match = [r for r in runs if r.path == run.path]
        info = match[0] if match else find_run(runs, name)
    else:
        info = find_run(runs, name)
    return info, info.split(split)


def _out_dtype(stored: np.dtype) -> np.dtype:
    """float64 stays float64; everything narrower is widened (float16) or kept (float32) as native float32."""
    return np.dtype(np.float64) if np.dtype(stored).itemsize >= 8 else np.dtype(np.float32)


def _default_chunk_rows(ds: h5py.Dataset, out_dtype: np.dtype) -> int:
    n, k = ds.shape
    rows = max(1, CHUNK_BYTES // (k * out_dtype.itemsize))
    if ds.chunks:  # whole HDF5 chunks per read, so no compressed chunk is decompressed twice
        c = ds.chunks[0]
        rows = max(c, rows // c * c)
    return min(rows, n)


class _ScoreCheck:
    """Accumulates per-chunk validation of scores so that one error can report the total count of bad rows."""

    def __init__(self, file: str, path: str, kind: str, stored: np.dtype) -> None:
        self.file, self.path, self.kind = file, path, kind
        self.tol = _prob_tolerance(stored)
        self.bad = {"nonfinite": [0, -1, 0.0], "negative": [0, -1, 0.0], "sum": [0, -1, 0.0]}

    def _add(self, what: str, rows: np.ndarray, offset: int, values: Optional[np.ndarray] = None) -> None:
        idx = np.flatnonzero(rows)
        if idx.size:
            entry = self.bad[what]
            if entry[0] == 0:
                entry[1] = offset + int(idx[0])
                entry[2] = float(values[idx[0]]) if values is not None else 0.0
            entry[0] += idx.size

    def update(self, block: np.ndarray, offset: int) -> None:
        """Check rows ``offset .. offset + len(block)`` (block is (rows, K) in the output dtype)."""
        # Row sums by BLAS (matrix @ ones) are the cheapest full pass: NaN/Inf in a row makes its sum non-finite
        # (so can overflow of huge finite values, which the exact per-element test below then clears).
        with np.errstate(all="ignore"):
            sums = block @ np.ones(block.shape[1], block.dtype)
            nonfinite = ~np.isfinite(sums)
            if nonfinite.any():
                nonfinite[nonfinite] = ~np.isfinite(block[nonfinite]).all(axis=1)
                self._add("nonfinite", nonfinite, offset)
            if self.kind == "logits":
                return
            if not block.min() >= 0:  # negative or NaN: find the rows that hold a negative entry
                self._add("negative", (block < 0).any(axis=1), offset)
            self._add("sum", ~nonfinite & ~(np.abs(sums - 1.0) <= self.tol), offset, sums)

    def raise_if_bad(self, n_rows: int, scope: str = "") -> None:
        count, first, value = self.bad["nonfinite"]
        if count:
            raise CalibviewError(f"{self.file}: {count} of {n_rows} rows{scope} of {self.path} contain NaN or Inf "
                                 f"(first at row {first}); fix or drop those rows.")
        count, first, value = self.bad["negative"]
        if count:
            raise CalibviewError(f"{self.file}: {count} of {n_rows} rows{scope} of {self.path} contain negative "
                                 f"probabilities (first at row {first}).")
        count, first, value = self.bad["sum"]
        if count:
            raise CalibviewError(f"{self.file}: {count} of {n_rows} rows{scope} of {self.path} do not sum to 1 "
                                 f"within {self.tol:g} (first at row {first}, sum {value:.6g}); "
                                 f"store logits or normalised probabilities.")


def _check_labels(file: str, path: str, labels: np.ndarray, k: int, offset: int = 0, scope: str = "") -> None:
    bad = (labels < 0) | (labels >= k)
    count = int(np.count_nonzero(bad))
    if count:
        first = int(np.argmax(bad))
        raise CalibviewError(
            f"{file}: {count} of {len(labels)} labels{scope} in {path} are outside [0, {k}) "
            f"(for example {int(labels[first])} at row {offset + first}); labels must be class indices 0..K-1."
        )


def _read_rows(ds: h5py.Dataset, out: np.ndarray, start: int, stop: int, at: int,
               staging: Optional[np.ndarray], file: str) -> None:
    """Fill ``out[at : at + stop - start]`` from ``ds[start:stop]``, copying at most one chunk on the way."""
    rows = stop - start
    try:
        if staging is None:  # HDF5 writes straight into the output (and byte-swaps if needed)
            ds.read_direct(out, np.s_[start:stop], np.s_[at:at + rows])
        else:  # float16: HDF5's own conversion is slow, numpy's is fast
            part = staging[:rows]
            ds.read_direct(part, np.s_[start:stop], np.s_[0:rows])
            out[at:at + rows] = part
    except (OSError, ValueError) as e:
        raise CalibviewError(f"{file}: could not read rows {start}-{stop - 1} of {ds.name} ({_oneline(e)}); "
                             f"the file may be truncated or corrupt.") from None


def _read_labels(ds: h5py.Dataset, out: np.ndarray, start: int, stop: int, file: str) -> None:
    try:
        ds.read_direct(out, np.s_[start:stop])
    except (OSError, ValueError) as e:
        raise CalibviewError(f"{file}: could not read {ds.name} ({_oneline(e)}); "
                             f"the file may be truncated or corrupt.") from None


def _open_split(f: h5py.File, file: str, info: SplitInfo) -> tuple[h5py.Dataset, h5py.Dataset, np.dtype]:
    scores, labels = guard.resolve(f, info.scores_path, file), guard.resolve(f, info.labels_path, file)
    if not (isinstance(scores, h5py.Dataset) and isinstance(labels, h5py.Dataset)):
        raise CalibviewError(f"{file}: {info.scores_path} or {info.labels_path} is no longer a dataset; the file "
                             f"changed while it was read.")
    _check_stored(file, scores, labels)
    _check_meta(file, scores.name, scores.shape, scores.dtype, labels.name, labels.shape, labels.dtype, info.kind)
    out_dtype = _out_dtype(scores.dtype)
    return scores, labels, out_dtype


def read_split(path: Optional[PathLike], run: Union[str, RunInfo], split: str, *, chunk_rows: Optional[int] = None,
               progress: Optional[Progress] = None, cancel: Optional[threading.Event] = None) -> SplitData:
    """Read and validate one split: ``scores`` (N, K) float32/float64, ``labels`` (N,) int64, both read-only.

    The output is allocated once and filled chunk by chunk (default about 64 MB of rows, whole HDF5 chunks);
    each chunk is validated, then ``progress(fraction, message)`` is called and ``cancel`` is checked.
    ``path`` may be None when ``run`` is a RunInfo (its ``file`` is used)."""
    if chunk_rows is not None and chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    file = _abspath(path if path is not None else run.file)  # type: ignore[union-attr]
    with _open(file) as f:
        run_info, info = _resolve(f, file, run, split)
        sds, lds, out_dtype = _open_split(f, file, info)
        n, k = info.n, info.k
        report(progress, 0.0, f"Reading {info.scores_path} ({n} x {k})")
        labels = np.empty(n, np.int64)
        _read_labels(lds, labels, 0, n, file)
        _check_labels(file, lds.name, labels, k)
        scores = np.empty((n, k), out_dtype)
        rows = min(chunk_rows, n) if chunk_rows else _default_chunk_rows(sds, out_dtype)
        staging = np.empty((rows, k), sds.dtype) if sds.dtype.itemsize < 4 else None
        checker = _ScoreCheck(file, sds.name, info.kind, sds.dtype)
        for start in range(0, n, rows):
            check_cancel(cancel)
            stop = min(n, start + rows)
            _read_rows(sds, scores, start, stop, start, staging, file)
            checker.update(scores[start:stop], start)
            report(progress, stop / n, f"Read {stop} of {n} rows of {info.scores_path}")
        checker.raise_if_bad(n)
    scores.flags.writeable = False
    labels.flags.writeable = False
    return SplitData(scores=scores, labels=labels, kind=info.kind, info=info, run=run_info)


def read_meta(path: Optional[PathLike], run: Union[str, RunInfo], split: str, column: str) -> np.ndarray:
    """The metadata column ``/<run>/<split>/meta/<column>`` as a read-only (N,) array: int64, bool, str (object)
    or float64 (NaN = missing); see :mod:`calibview.core.io.meta`. Unknown columns, wrong lengths, non-1-D data and
    NaN in a categorical column are one-sentence CalibviewErrors naming the file and the dataset."""
    file = _abspath(path if path is not None else run.file)  # type: ignore[union-attr]
    with _open(file) as f:
        run_info, info = _resolve(f, file, run, split)
        if column not in info.meta:
            have = ", ".join(info.meta) if info.meta else "none"
            raise CalibviewError(f"{file}: split {info.path} has no metadata column '{column}' (available: {have}); "
                                 f"add it as {_join(info.path, md.META_GROUP)}/{column}.")
        ds = f[_join(_join(info.path, md.META_GROUP), column)]     # hard links only (_meta_names)
        guard.check_dataset(ds, file)
        try:
            values = ds[()]
        except (OSError, ValueError, TypeError) as e:
            raise CalibviewError(f"{file}: could not read {ds.name} ({_oneline(e)}).") from None
        categorical, name = bool(ds.attrs.get("categorical", False)), ds.name
    return md.validate(file, name, values, info.n, categorical=categorical)


def iter_split(path: Optional[PathLike], run: Union[str, RunInfo], split: str, *,
               chunk_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Yield ``(scores (rows, K), labels (rows,) int64, row offset)`` chunks, each validated before it is yielded.

    Run, split and shapes are checked when this is called; data errors surface at the chunk that holds them."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    file = _abspath(path if path is not None else run.file)  # type: ignore[union-attr]
    with _open(file) as f:
        _, info = _resolve(f, file, run, split)
        _open_split(f, file, info)
    return _iter_chunks(file, info, int(chunk_rows))


def _iter_chunks(file: str, info: SplitInfo, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    with _open(file) as f:
        sds, lds, out_dtype = _open_split(f, file, info)
        n, k = sds.shape
        staging = np.empty((min(rows, n), k), sds.dtype) if sds.dtype.itemsize < 4 else None
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            scope = f" (rows {start}-{stop - 1})"
            labels = np.empty(stop - start, np.int64)
            _read_labels(lds, labels, start, stop, file)
            _check_labels(file, lds.name, labels, k, start, scope)
            scores = np.empty((stop - start, k), out_dtype)
            _read_rows(sds, scores, start, stop, 0, staging, file)
            checker = _ScoreCheck(file, sds.name, info.kind, sds.dtype)
            checker.update(scores, start)
            checker.raise_if_bad(stop - start, scope)
            yield scores, labels, start


# ------------------------------------------------------------------------------------------------------- writing


def write_run(path: PathLike, model: str, dataset: str, split: str, logits=None, labels=None, *, probs=None,
              class_names: Optional[Sequence[str]] = None, attrs: Optional[Mapping[str, str]] = None,
              compression: Optional[str] = "gzip", overwrite: bool = False,
              meta: Optional[Mapping[str, object]] = None) -> None:
    """Write one split, ``logits`` (N, K) float (or ``probs``) and ``labels`` (N,) int, to
    ``/<model>/<dataset>/<split>`` of ``path``, with metadata columns ``meta={column: (N,) values}``; see
    :func:`write_splits` for the rules."""
    file = _abspath(path)
    if (logits is None) == (probs is None) or labels is None:
        raise CalibviewError(f"{file}: writing split '{split}' of run '{model}/{dataset}' needs labels and "
                             f"exactly one of logits or probs.")
    kind, scores = ("logits", logits) if logits is not None else ("probs", probs)
    write_splits(file, model, dataset, {split: (kind, scores, labels)}, class_names=class_names, attrs=attrs,
                 compression=compression, overwrite=overwrite, meta={split: meta} if meta else None)


def write_splits(path: PathLike, model: str, dataset: str, splits: Mapping[str, tuple[str, object, object]], *,
                 class_names: Optional[Sequence[str]] = None, attrs: Optional[Mapping[str, str]] = None,
                 compression: Optional[str] = "gzip", overwrite: bool = False,
                 meta: Optional[Mapping[str, Mapping[str, object]]] = None) -> None:
    """Write several splits ``{name: (kind, scores (N, K), labels (N,))}`` of one run, all validated first;
    ``meta={split: {column: (N,) values}}`` adds metadata columns (integers or strings: categories; floats).

    The file is written to a temporary name (a copy of an existing file, which is appended to) and moved into place
    only when complete (calibview.core.io.safe_io.atomic_hdf5); an existing split is replaced only with ``overwrite=True``. ``compression`` is "gzip" (with
    shuffle), "lzf" or None. ``class_names`` (K strings) and ``attrs`` (strings) go on the run group."""
    file = _abspath(path)
    run_path = _run_path(file, model, dataset, list(splits))
    checked = {name: (kind, *validate_arrays(file, _join(_join(run_path, name), kind),
                                             _join(_join(run_path, name), "labels"), kind, scores, labels))
               for name, (kind, scores, labels) in splits.items()}
    columns = _checked_meta(file, run_path, checked, meta or {})
    ks = sorted({scores.shape[1] for _, scores, _ in checked.values()})
    if len(ks) != 1:
        raise CalibviewError(f"{file}: the splits written to {run_path} have different class counts K = {ks}.")
    names = None if class_names is None else tuple(str(c) for c in class_names)
    if names is not None and len(names) != ks[0]:
        raise CalibviewError(f"{file}: {len(names)} class names were given for {run_path} but the scores have "
                             f"K = {ks[0]} columns.")
    if attrs and "class_names" in attrs:
        raise CalibviewError(f"{file}: pass class names for {run_path} as class_names, not as an attribute.")
    exists = os.path.exists(file)
    if exists and not h5py.is_hdf5(file):
        raise CalibviewError(f"{file}: the output exists and is not an HDF5 file; refusing to overwrite it.")
    try:           # an existing file is appended to in a copy, renamed into place only when complete
        with safe_io.atomic_hdf5(file) as tmp, h5py.File(tmp, "r+" if exists else "w", track_order=True) as f:
            if exists:
                _check_existing(f, file, run_path, checked, names, ks[0], overwrite)
            _write_into(f, run_path, checked, names, attrs, compression, columns)
    except OSError as e:
        raise CalibviewError(f"{file}: could not write {run_path} ({_oneline(e)}).") from None


def _run_path(file: str, model: str, dataset: str, split_names: list[str]) -> str:
    parts = [model] + (dataset.split("/") if dataset else [])
    if not isinstance(model, str) or not model or "/" in model or any(p in ("", ".", "..") for p in parts):
        raise CalibviewError(f"{file}: model '{model}' / dataset '{dataset}' is not a valid run name (the model must "
                             f"be non-empty without '/', the dataset may be '' or 'a/b').")
    for name in split_names:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name:
            raise CalibviewError(f"{file}: split name '{name}' is not valid (non-empty, no '/').")
    return "/" + "/".join(parts)


def validate_arrays(file: str, scores_path: str, labels_path: str, kind: str, scores, labels
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Apply the reading rules to in-memory arrays, naming ``file`` and the two paths in any error.

    Works in chunks, so a memory-mapped array is never copied whole; returns the arrays as numpy arrays."""
    if kind not in SCORE_KINDS:
        raise CalibviewError(f"{file}: {scores_path} has score kind '{kind}' but it must be 'logits' or 'probs'.")
    scores, labels = np.asarray(scores), np.asarray(labels)
    _check_meta(file, scores_path, scores.shape, scores.dtype, labels_path, labels.shape, labels.dtype, kind)
    n, k = scores.shape
    _check_labels(file, labels_path, labels, k)
    checker = _ScoreCheck(file, scores_path, kind, scores.dtype)
    rows = max(1, CHUNK_BYTES // (k * 8))
    for start in range(0, n, rows):
        block = scores[start:start + rows]
        checker.update(block.astype(np.float32) if block.dtype.itemsize < 4 else block, start)
    checker.raise_if_bad(n)
    return scores, labels


def _check_existing(f: h5py.File, file: str, run_path: str, checked: dict, names: Optional[tuple[str, ...]],
                    k: int, overwrite: bool) -> None:
    group = guard.resolve(f, run_path, file)
    if group is None:
        return
    if not isinstance(group, h5py.Group):
        raise CalibviewError(f"{file}: {run_path} exists and is not a group; choose another model or dataset name.")
    for name in group:
        child = guard.child(group, name, file)       # the output may be an untrusted file too
        if name in checked and not overwrite:
            raise CalibviewError(f"{file}: {child.name} already exists; pass overwrite=True (--overwrite on the command line) to replace it.")
        scores = next((d for d in (guard.child(child, s, file) for s in SCORE_KINDS if isinstance(child, h5py.Group))
                       if isinstance(d, h5py.Dataset)), None)
        if scores is not None and name not in checked and scores.ndim == 2 and scores.shape[1] != k:
            raise CalibviewError(f"{file}: {scores.name} has K = {scores.shape[1]} but the new splits of "
                                 f"{run_path} have K = {k}; a run's splits must share their classes.")
    if names is not None and "class_names" in group.attrs and not overwrite:
        old = tuple(v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(group.attrs["class_names"]))
        if old != names:
            raise CalibviewError(f"{file}: {run_path} already has different class_names; pass overwrite=True to "
                                 f"replace them.")


def _checked_meta(file: str, run_path: str, checked: dict, meta: Mapping) -> dict:
    """{split: {column: validated (N,) array}}, every column checked before anything is written."""
    out = {}
    for split, columns in meta.items():
        if split not in checked:
            raise CalibviewError(f"{file}: metadata was given for split '{split}' of {run_path}, which is not among "
                                 f"the splits written ({', '.join(checked)}).")
        n = checked[split][1].shape[0]
        where = _join(_join(run_path, split), md.META_GROUP)
        for column, values in (columns or {}).items():
            md.check_name(file, where, column)
            out.setdefault(split, {})[column] = md.validate(file, _join(where, column), values, n)
    return out


def _write_meta(split: h5py.Group, columns: Mapping[str, np.ndarray], compression: Optional[str]) -> None:
    group = split.create_group(md.META_GROUP, track_order=True)
    for column, values in columns.items():
        if values.dtype == object:                 # strings, stored as variable-length UTF-8
            group.create_dataset(column, data=values.astype(str).tolist(), dtype=h5py.string_dtype(),
                                 track_times=False)
        else:
            _write_dataset(group, column, values, compression)


def _write_into(f: h5py.File, run_path: str, checked: dict, names, attrs, compression,
                columns: Optional[Mapping] = None) -> None:
    group = f
    for part in run_path.strip("/").split("/"):
        exists = group.get(part, getlink=True) is not None         # a link's existence, without following it
        group = group[part] if exists else group.create_group(part, track_order=True)
    if names is not None:
        group.attrs["class_names"] = np.array(names, dtype=h5py.string_dtype())
    for key, value in (attrs or {}).items():
        group.attrs[str(key)] = str(value)
    for name, (kind, scores, labels) in checked.items():
        if group.get(name, getlink=True) is not None:
            del group[name]
        split = group.create_group(name, track_order=True)
        _write_dataset(split, kind, scores, compression)
        _write_dataset(split, "labels", labels, compression, dtype=np.dtype(np.int64))
        if (columns or {}).get(name):
            _write_meta(split, columns[name], compression)


def _write_dataset(group: h5py.Group, name: str, data: np.ndarray, compression: Optional[str],
                   dtype: Optional[np.dtype] = None) -> None:
    dtype = (dtype or data.dtype).newbyteorder("=")
    row_bytes = dtype.itemsize * (data.shape[1] if data.ndim == 2 else 1)
    n = data.shape[0]
    rows = int(min(n, max(1, WRITE_CHUNK_BYTES // row_bytes)))
    options = {"compression": compression, "shuffle": True, "chunks": (rows,) + data.shape[1:]} if compression else {}
    ds = group.create_dataset(name, shape=data.shape, dtype=dtype, track_times=False, **options)
    step = max(rows, CHUNK_BYTES // row_bytes // rows * rows)
    for start in range(0, n, step):
        ds[start:start + step] = np.asarray(data[start:start + step], dtype=dtype)
