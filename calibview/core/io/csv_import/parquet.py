"""Importing Parquet tables (with the optional pyarrow, ``pip install 'calibview[parquet]'``): the same column
layouts as a CSV table (:mod:`~calibview.core.io.csv_import.columns`), read one record batch at a time, so memory
stays one batch whatever the row count, and appended by the CSV importer's checks and writer
(:func:`~calibview.core.io.csv_import.stream.import_rows`)."""

from __future__ import annotations

from typing import Optional

from calibview.core.errors import CalibviewError, Progress
from calibview.core.io.csv_import.columns import guess
from calibview.core.io.csv_import.stream import CHUNK_ROWS, _source, import_rows
from calibview.core.io.schema import RunInfo, oneline

#: the suffixes read as Parquet
SUFFIXES = (".parquet", ".pq")


def _cell(v) -> str:
    # repr of a float is exact (it parses back to the same double), so nothing is lost on the way to the checks
    return "" if v is None else repr(v) if isinstance(v, float) else str(v)


def import_parquet(src, out, *, model: Optional[str] = None, dataset: Optional[str] = None,
                   split: Optional[str] = None, label_col: Optional[str] = None, pred_col: Optional[str] = None,
                   conf_col: Optional[str] = None, num_classes: Optional[int] = None, overwrite: bool = False,
                   progress: Optional[Progress] = None, chunk_rows: int = CHUNK_ROWS) -> list[RunInfo]:
    """Import the Parquet table ``src`` as :func:`calibview.core.io.csv_import.stream.import_csv` imports a CSV
    table (the same arguments, columns and checks; messages name a row by its number, the header being row 1 as
    in a CSV file). Without pyarrow: one sentence saying how to install it."""
    src_path = _source(src)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CalibviewError(f"{src_path}: reading Parquet needs pyarrow, which is not installed; install it with "
                             f"`pip install 'calibview[parquet]'`, or export the table as CSV.") from None
    try:
        pf = pq.ParquetFile(str(src_path))
        header = list(pf.schema_arrow.names)
    except Exception as e:           # pyarrow's errors have no common base but Exception
        raise CalibviewError(f"{src_path}: not a readable Parquet file ({oneline(e)}).") from None
    if not header:
        raise CalibviewError(f"{src_path}: the table has no columns.")
    layout = guess(str(src_path), header, label_col=label_col, pred_col=pred_col, conf_col=conf_col)
    used = sorted({i for i in (layout.label, layout.split, layout.pred, layout.conf, *layout.classes)
                   if i is not None and i >= 0})
    total = max(1, pf.metadata.num_rows)

    def chunks():
        line = 2
        try:
            for batch in pf.iter_batches(batch_size=chunk_rows, columns=[header[i] for i in used]):
                cols = {i: [_cell(v) for v in batch.column(j).to_pylist()] for j, i in enumerate(used)}
                width = 1 + max(used)
                rows = [[cols[i][r] if i in cols else "" for i in range(width)] for r in range(batch.num_rows)]
                yield rows, line, min(0.99, (line - 2 + batch.num_rows) / total)
                line += batch.num_rows
        except (OSError, ValueError) as e:
            raise CalibviewError(f"{src_path}: could not read rows from row {line} on ({oneline(e)}); the file may "
                                 f"be truncated or corrupt.") from None

    return import_rows(src_path, out, header, chunks(), model=model, dataset=dataset, split=split,
                       label_col=label_col, pred_col=pred_col, conf_col=conf_col, num_classes=num_classes,
                       overwrite=overwrite, progress=progress)
