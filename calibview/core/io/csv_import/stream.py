"""Streaming a CSV table into the HDF5 format: :func:`import_csv` reads the rows in chunks of
:data:`CHUNK_ROWS`, checks each chunk (numbers that parse, confidences in [0, 1], class indices, probability rows
that sum to 1) and appends it to growing datasets of its split, in a temporary copy of the output that replaces
it only when the whole table was read (:func:`calibview.core.io.safe_io.atomic_hdf5`). Memory is one chunk,
whatever the row count. A top-label table becomes top-label splits (:mod:`calibview.core.io.toplabel`), a
per-class table ``probs`` (float32) or ``logits`` (float64) splits."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Iterable, Optional

import h5py
import numpy as np

from calibview.core.errors import CalibviewError, Progress, report
from calibview.core.io import safe_io
from calibview.core.io.checks import ScoreCheck
from calibview.core.io.csv_import.columns import Layout, guess
from calibview.core.io.discovery import find_run, list_runs
from calibview.core.io.schema import RunInfo, abspath, join, oneline
from calibview.core.io.toplabel import format as tf
from calibview.core.io.toplabel.write import run_group, run_path, set_run_attrs

#: rows parsed, checked and appended at a time
CHUNK_ROWS = 16_384
#: rows per HDF5 chunk of the datasets written (the rows of one read chunk)
H5_CHUNK = CHUNK_ROWS


def _numbers(file: str, cells: list[str], first_line: int, what: str, dtype) -> np.ndarray:
    try:
        return np.array(cells, dtype=np.float64).astype(dtype, copy=False)
    except ValueError:
        for i, c in enumerate(cells):
            try:
                float(c)
            except ValueError:
                raise CalibviewError(f"{file}: line {first_line + i}: the {what} {c.strip()!r} is not a number.") \
                    from None
        raise


def _indices(file: str, cells: list[str], first_line: int, what: str, names: Optional[dict]) -> np.ndarray:
    """(rows,) int64 class indices of ``cells``: integers, or with ``names`` a class name or an integer."""
    if names is None:
        try:
            return np.array(cells, dtype=np.int64)        # the common case, parsed by numpy
        except (ValueError, OverflowError):
            pass
    out = np.empty(len(cells), np.int64)
    for i, c in enumerate(cells):
        c = c.strip()
        if names is not None and c in names:
            out[i] = names[c]
            continue
        try:
            v = float(c)
        except ValueError:
            v = float("nan")
        if not (np.isfinite(v) and v.is_integer()):
            known = "a class name or " if names is not None else ""
            raise CalibviewError(f"{file}: line {first_line + i}: the {what} {c!r} is not {known}an integer "
                                 f"class index.")
        out[i] = int(v)
    return out


class _Split:
    """One split's growing datasets in the open output file."""

    def __init__(self, group: h5py.Group, name: str, layout: Layout, k: int) -> None:
        self.n, self.name, self.layout = 0, name, layout
        self.path = join(group.name, name)
        self.group = group.create_group(name, track_order=True)
        # Uncompressed, whole chunks per append and no chunk cache (the file is opened with rdcc_nbytes=0): with
        # HDF5's chunk cache, or deflate (whose freed buffers HDF5 keeps on a free list per size until the file
        # closes), the memory of an import grew with its rows, 30 MB a million.
        options = {"chunks": (H5_CHUNK,), "maxshape": (None,)}
        self.ds = {"labels": self.group.create_dataset("labels", (0,), np.int64, track_times=False, **options)}
        if layout.form == tf.KIND:
            self.ds[tf.PREDICTIONS] = self.group.create_dataset(tf.PREDICTIONS, (0,), np.int64, track_times=False,
                                                                **options)
            self.ds[tf.CONFIDENCE] = self.group.create_dataset(tf.CONFIDENCE, (0,), np.float64, track_times=False,
                                                               **options)
        else:
            dtype = np.float32 if layout.kind == "probs" else np.float64
            rows = max(1, min(H5_CHUNK, (1 << 20) // (k * np.dtype(dtype).itemsize)))
            self.ds[layout.kind] = self.group.create_dataset(
                layout.kind, (0, k), dtype, chunks=(rows, k), maxshape=(None, k), track_times=False)

    def append(self, arrays: dict) -> None:
        m = len(arrays["labels"])
        for key, value in arrays.items():
            ds = self.ds[key]
            ds.resize(self.n + m, axis=0)
            ds[self.n:self.n + m] = value
        self.n += m


class _Importer:
    """The state of one table's import: its layout, K, the splits met so far and their datasets."""

    def __init__(self, src: str, layout: Layout, group: h5py.Group, k: int, split: Optional[str], overwrite: bool):
        self.src, self.layout, self.group, self.k = src, layout, group, k
        self.only, self.overwrite, self.default = split, overwrite, split or "all"
        self.splits: dict[str, _Split] = {}
        self.names = {n: i for i, n in enumerate(layout.class_names)} if layout.class_names else None
        self.check = ScoreCheck(src, "the class columns", layout.kind or "logits", np.float32)
        self.rows_seen = 0

    def split_of(self, name: str) -> _Split:
        if name not in self.splits:
            if not name or "/" in name or name in (".", ".."):
                raise CalibviewError(f"{self.src}: the split {name!r} of the split column is not a valid split name.")
            if self.group.get(name, getlink=True) is not None:
                if not self.overwrite:
                    raise CalibviewError(f"{self.src}: {join(self.group.name, name)} already exists in the output; "
                                         f"pass --overwrite to replace it.")
                del self.group[name]
            self.splits[name] = _Split(self.group, name, self.layout, self.k)
        return self.splits[name]

    def chunk(self, rows: list[list[str]], first_line: int) -> None:
        lay = self.layout
        width = 1 + max((lay.label, lay.split or 0, lay.pred, lay.conf) + lay.classes)
        for i, r in enumerate(rows):
            if len(r) < width:
                raise CalibviewError(f"{self.src}: line {first_line + i} has {len(r)} cells but the header names at "
                                     f"least {width} columns.")
        labels = _indices(self.src, [r[lay.label] for r in rows], first_line, "label", self.names)
        if lay.form == tf.KIND:
            pred = _indices(self.src, [r[lay.pred] for r in rows], first_line, "prediction", None)
            conf = _numbers(self.src, [r[lay.conf] for r in rows], first_line, "confidence", np.float64)
            self._values(conf, pred, labels, first_line)
            arrays = {"labels": labels, tf.PREDICTIONS: pred, tf.CONFIDENCE: conf}
        else:
            scores = _numbers(self.src, [c for r in rows for c in (r[j] for j in lay.classes)], first_line,
                              "class score", np.float64).reshape(len(rows), len(lay.classes))
            self._values(None, None, labels, first_line)
            self.check.update(scores, first_line - 2)
            self.check.raise_if_bad(self.rows_seen + len(rows))
            arrays = {"labels": labels, lay.kind: scores}
        self.rows_seen += len(rows)
        if lay.split is None:
            self.split_of(self.default).append(arrays)
            return
        names = np.array([r[lay.split].strip() for r in rows])
        for name in dict.fromkeys(names.tolist()):
            if self.only is not None and name != self.only:
                continue
            keep = names == name
            self.split_of(name).append({k: v[keep] for k, v in arrays.items()})

    def _values(self, conf, pred, labels, first_line: int) -> None:
        bad = None
        if conf is not None and not ((conf >= 0) & (conf <= 1)).all():
            i = int(np.argmax(~((conf >= 0) & (conf <= 1))))
            bad = f"the confidence {conf[i]!r} is NaN or outside [0, 1]"
        for what, v in (("prediction", pred), ("label", labels)):
            if bad is None and v is not None:
                out = (v < 0) | (v >= self.k) if self.k else v < 0
                if out.any():
                    i = int(np.argmax(out))
                    bad = f"the {what} {int(v[i])} is outside [0, {self.k if self.k else 'inf'})"
        if bad is not None:
            raise CalibviewError(f"{self.src}: line {first_line + i}: {bad}; class indices run 0..K-1 and the "
                                 f"confidence is the probability of the predicted class.")


def import_csv(src, out, *, model: Optional[str] = None, dataset: Optional[str] = None, split: Optional[str] = None,
               label_col: Optional[str] = None, pred_col: Optional[str] = None, conf_col: Optional[str] = None,
               num_classes: Optional[int] = None, overwrite: bool = False, progress: Optional[Progress] = None,
               chunk_rows: int = CHUNK_ROWS) -> list[RunInfo]:
    """Import the CSV table ``src`` as run ``<model>/<dataset>`` (default: the file's stem and "data") of the HDF5
    file ``out`` (created or appended to) and return that run, re-read from ``out``, as a one-item list.

    Rows go to split ``split`` (default "all"), or by the table's ``split`` column, of which ``split`` then
    selects one. K is ``num_classes`` or the class columns' count (a top-label table without it: unknown).
    Nothing is written when any row is refused (one sentence naming the line)."""
    src_path = _source(src)
    size = max(1, os.path.getsize(src_path))
    with open(src_path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")
        reader = csv.reader(text)
        header = next(reader, None)
        if not header:
            raise CalibviewError(f"{src_path}: the table is empty; its first line must name the columns.")

        def chunks():
            line, rows = 2, []
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue                                  # blank lines, as csv readers skip them
                if not rows:
                    line = reader.line_num
                rows.append(row)
                if len(rows) == chunk_rows:
                    yield rows, line, min(0.99, raw.tell() / size)
                    rows = []
            if rows:
                yield rows, line, 0.99

        try:
            return import_rows(src_path, out, header, chunks(), model=model, dataset=dataset, split=split,
                               label_col=label_col, pred_col=pred_col, conf_col=conf_col, num_classes=num_classes,
                               overwrite=overwrite, progress=progress)
        except csv.Error as e:
            raise CalibviewError(f"{src_path}: line {reader.line_num} is not valid CSV ({oneline(e)}).") from None


def _source(src) -> Path:
    src_path = Path(abspath(src))
    if not src_path.is_file():
        raise CalibviewError(f"{src_path}: the file does not exist; check the path.")
    return src_path


def import_rows(src_path: Path, out, header: list[str], chunks: Iterable[tuple[list[list[str]], int, float]], *,
                model: Optional[str] = None, dataset: Optional[str] = None, split: Optional[str] = None,
                label_col: Optional[str] = None, pred_col: Optional[str] = None, conf_col: Optional[str] = None,
                num_classes: Optional[int] = None, overwrite: bool = False, progress: Optional[Progress] = None
                ) -> list[RunInfo]:
    """The import of any table read in chunks: ``header`` names its columns, ``chunks`` yields (rows, the line
    (or row) number of the first, the fraction of the source read) with each row a list of cells as text. The
    layout is guessed from the header; the rows are checked and appended chunk by chunk to ``out`` (replaced
    only when every chunk was read, :func:`import_csv`)."""
    file = abspath(out)
    safe_io.refuse_overwriting_inputs([Path(file)], [src_path])
    if num_classes is not None and int(num_classes) < 2:
        raise CalibviewError(f"--num-classes must be at least 2, not {num_classes}.")
    model = model or src_path.stem
    dataset = "data" if dataset is None else dataset
    rpath = run_path(file, model, dataset)
    exists = os.path.exists(file)
    if exists and not h5py.is_hdf5(file):
        raise CalibviewError(f"{file}: the output exists and is not an HDF5 file; refusing to overwrite it.")
    layout = guess(str(src_path), header, label_col=label_col, pred_col=pred_col, conf_col=conf_col)
    k = len(layout.classes) if layout.form == "classes" else int(num_classes or 0)
    if layout.form == "classes" and num_classes and int(num_classes) != k:
        raise CalibviewError(f"{src_path}: --num-classes {num_classes} but the table has {k} class columns.")
    try:
        with safe_io.atomic_hdf5(file) as tmp, h5py.File(tmp, "r+" if exists else "w", track_order=True,
                                                         rdcc_nbytes=0) as f:     # see _Split
            group = run_group(f, file, rpath)
            imp = _Importer(str(src_path), layout, group, k, split, overwrite)
            for rows, line, fraction in chunks:
                imp.chunk(rows, line)
                report(progress, fraction, f"Read {imp.rows_seen:,} rows of {src_path.name}")
            if not imp.splits:
                which = f" of split {split!r}" if split and layout.split is not None else ""
                raise CalibviewError(f"{src_path}: the table has no rows{which} to import.")
            set_run_attrs(group, k if layout.form == tf.KIND and k else None, layout.class_names, None)
    except OSError as e:
        raise CalibviewError(f"{file}: could not write {rpath} ({oneline(e)}).") from None
    report(progress, 1.0, f"Imported {imp.rows_seen:,} rows of {src_path.name}")
    return [find_run(list_runs(file), rpath)]
