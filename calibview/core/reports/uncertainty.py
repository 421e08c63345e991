"""uncertainty.csv of ``calibview report``: per run and eval split with members, the mean and quantiles of the
per-sample total entropy, its aleatoric part and the mutual information (nats), their correlation with the
ensemble's error, and the AURC ranked by confidence, entropy and mutual information
(:mod:`calibview.core.evaluation.members.uncertainty`). Runs without members write no file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def write_uncertainty(evaluations, out_dir: str | os.PathLike) -> Optional[Path]:
    """Write ``out_dir/uncertainty.csv`` when any evaluated run has members; returns its path, else None."""
    from calibview.core.evaluation.members.uncertainty import UNCERTAINTY_COLUMNS, summary_rows
    from calibview.core.io.safe_io import atomic_write
    from calibview.core.reports.tables import table_csv

    rows = summary_rows(evaluations)
    if not rows:
        return None
    path = Path(out_dir) / "uncertainty.csv"
    atomic_write(path, table_csv(rows, UNCERTAINTY_COLUMNS))
    return path
