"""The CSV of the evaluations that set numbers against a reference: compare.csv (runs against a reference run),
domains.csv (evaluation splits against the first) and slices.csv (slices against the whole split). The records
come from :mod:`calibview.core.evaluation` (compare, domains, slices); every file goes through
:func:`~calibview.core.reports.tables.table_csv`, so that a number is spelled the same in every CSV."""

from __future__ import annotations

from typing import Sequence

from calibview.core.stats.metrics import METRIC_NAMES
from calibview.core.evaluation.records import metric_columns
from calibview.core.reports.tables import table_csv

#: the identity and settings columns of domains.csv, before the metrics
DOMAIN_ID_COLUMNS = ("model", "dataset", "calibrator", "fit_split", "eval_split", "reference_split", "n",
                     "bins", "bandwidth", "kernel")


def compare_columns() -> list[str]:
    """compare.csv: the columns of metrics.csv, ``reference``, then per metric ``delta_<m>``, ``delta_<m>_lo``,
    ``delta_<m>_hi`` and ``significant_<m>``."""
    cols = metric_columns() + ["reference"]
    for m in METRIC_NAMES:
        cols += [f"delta_{m}", f"delta_{m}_lo", f"delta_{m}_hi", f"significant_{m}"]
    return cols


def compare_csv(rows: Sequence[dict]) -> str:
    """compare.csv of :func:`calibview.core.evaluation.compare.compare_rows`: floats round-trip (a missing interval
    is empty), marks are true/false (empty without an interval)."""
    return table_csv(rows, compare_columns())


def domain_columns() -> list[str]:
    """domains.csv: DOMAIN_ID_COLUMNS, then per metric its value, ``_lo``, ``_hi`` and ``delta_<m>`` with its
    ``_lo`` and ``_hi``."""
    cols = list(DOMAIN_ID_COLUMNS)
    for m in METRIC_NAMES:
        cols += [m, f"{m}_lo", f"{m}_hi", f"delta_{m}", f"delta_{m}_lo", f"delta_{m}_hi"]
    return cols


def domains_csv(rows: Sequence[dict]) -> str:
    """domains.csv of :func:`calibview.core.evaluation.domains.domain_rows`."""
    return table_csv(rows, domain_columns())


def slices_csv(records) -> str:
    """slices.csv of :attr:`SliceEvaluation.records <calibview.core.evaluation.slices.SliceEvaluation.records>`:
    the columns of the records in order (those of metrics.csv, then slice_column, slice, the deltas and flagged);
    floats round-trip, a missing interval is empty, the whole split's slice is empty."""
    return table_csv(records, list(records[0]) if records else [])
