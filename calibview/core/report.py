"""CSV / JSON writers shared by the CLI and the GUI. Every file is written atomically (temp file + rename)."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .errors import CalibviewError
from .evaluate import Evaluation
from .metrics import METRIC_NAMES

ID_COLUMNS = ("model", "dataset", "split", "calibrator")


#: where Linux (>= 4.7) shows the umask without changing it
PROC_STATUS = "/proc/self/status"
_UMASK_LOCK = threading.Lock()


def _current_umask() -> int:
    """The process umask, read from /proc where there is one; elsewhere POSIX only lets one read it by setting
    it, so it is set and restored at once (under a lock), at the time of a write and never on import."""
    try:
        with open(PROC_STATUS) as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def metric_columns() -> list[str]:
    cols = list(ID_COLUMNS)
    for m in METRIC_NAMES:
        cols += [m, f"{m}_lo", f"{m}_hi"]
    return cols


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half of one."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise CalibviewError(f"Cannot write {path}: {e.strerror or e}.") from None
    try:
        # mkstemp creates the file 0600: keep the mode of the file being replaced, or give a new one the
        # permissions a plain open() would (0666 minus the umask).
        try:
            mode = os.stat(path).st_mode & 0o777
        except OSError:
            mode = 0o666 & ~_current_umask()
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise CalibviewError(f"Cannot write {path}: {e.strerror or e}.") from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _fmt(x: float) -> str:
    """Shortest round-tripping text; inf stays 'inf' (never clipped), a missing interval is empty."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return ""
    return repr(float(x))


def metrics_rows(evaluations: Iterable[Evaluation]) -> list[dict]:
    """One dict per run x calibrator: model, dataset, split, calibrator, then value/_lo/_hi per metric."""
    rows = []
    for ev in evaluations:
        for r in ev.results:
            row = {"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                   "calibrator": r.name}
            for m in METRIC_NAMES:
                est = r.metrics[m]
                row[m], row[f"{m}_lo"], row[f"{m}_hi"] = est.value, est.lo, est.hi
            rows.append(row)
    return rows


def metrics_csv(rows: Sequence[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = metric_columns()
    w.writerow(cols)
    for row in rows:
        w.writerow([row[c] if c in ID_COLUMNS else _fmt(row[c]) for c in cols])
    return buf.getvalue()


def metrics_json(rows: Sequence[dict]) -> str:
    """JSON text; inf and NaN become the strings "inf" / null so every JSON parser accepts it."""
    def clean(v):
        if isinstance(v, float):
            if np.isnan(v):
                return None
            if np.isinf(v):
                return "inf" if v > 0 else "-inf"
        return v
    return json.dumps([{k: clean(v) for k, v in row.items()} for row in rows], indent=2) + "\n"


CURVE_COLUMNS = ("model", "dataset", "split", "calibrator", "bandwidth", "kernel", "x", "curve", "band_lo",
                 "band_hi", "density")


def curves_csv(evaluations: Iterable[Evaluation], bandwidth: float, kernel: str) -> str:
    """Long format: one row per grid point per calibrator; curve/band are empty where the density is zero."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CURVE_COLUMNS)
    for ev in evaluations:
        for r in ev.results:
            c = r.curve(bandwidth, kernel)
            ident = [ev.run.model, ev.run.dataset, ev.request.eval_split, r.name, repr(float(bandwidth)), kernel]
            for i in range(c.x.shape[0]):
                ok = bool(c.valid[i])
                w.writerow(ident + [repr(float(c.x[i])),
                                    _fmt(c.curve[i]) if ok else "", _fmt(c.band_lo[i]) if ok else "",
                                    _fmt(c.band_hi[i]) if ok else "", repr(float(c.density[i]))])
    return buf.getvalue()


def calibrators_json(evaluations: Iterable[Evaluation]) -> str:
    out = []
    for ev in evaluations:
        for r in ev.results:
            out.append({"model": ev.run.model, "dataset": ev.run.dataset, "run": ev.run.name,
                        "calibrator": r.name, "argmax_changed": r.argmax_changed, **r.fitted.to_json()})
    return json.dumps(out, indent=2) + "\n"


def write_report(evaluations: Sequence[Evaluation], out_dir: str | os.PathLike, *, bandwidth: float,
                 kernel: str) -> list[Path]:
    """metrics.csv, curves.csv and calibrators.json in ``out_dir``; returns the paths written."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CalibviewError(f"--out {out} exists and is not a directory; give a directory to write into.")
    paths = [out / "metrics.csv", out / "curves.csv", out / "calibrators.json"]
    atomic_write(paths[0], metrics_csv(metrics_rows(evaluations)))
    atomic_write(paths[1], curves_csv(evaluations, bandwidth, kernel))
    atomic_write(paths[2], calibrators_json(evaluations))
    return paths
