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

from calibview.core.calibrators.file import record_fields
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.request import Evaluation
from calibview.core.stats.metrics import METRIC_NAMES

ID_COLUMNS = ("model", "dataset", "split", "calibrator")
#: the settings that produced every row (metrics.csv columns and JSON keys, in this order, after the metrics)
SETTING_COLUMNS = ("fit_split", "eval_split", "n", "k", "bins", "bandwidth", "kernel", "n_boot", "seed", "level",
                   "options", "calibview_version")


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
    return cols + list(SETTING_COLUMNS)


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


_FLOAT_COLUMNS = frozenset(c for m in METRIC_NAMES for c in (m, f"{m}_lo", f"{m}_hi")) | {"bandwidth", "level"}


def _fmt(x: float) -> str:
    """Shortest round-tripping text; inf stays 'inf' (never clipped), a missing interval is empty."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return ""
    return repr(float(x))


def table_csv(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """The CSV of dict rows in ``columns`` order, one spelling of a cell in every file calibview writes: floats
    round-trip (``_fmt``: NaN and None empty, inf as 'inf'), booleans ``true``/``false``, the rest as text."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow(["" if row[c] is None else ("true" if row[c] else "false") if isinstance(row[c], bool) else
                    _fmt(row[c]) if isinstance(row[c], float) else row[c] for c in columns])
    return buf.getvalue()


def _run_groups(evaluations: Iterable[Evaluation]) -> list[list[Evaluation]]:
    """Evaluations grouped by run and splits (the settings of an ablation), in first-seen order."""
    groups: dict[tuple, list[Evaluation]] = {}
    for ev in evaluations:
        key = (ev.run.file, ev.run.name, ev.request.fit_split, ev.request.eval_split)
        groups.setdefault(key, []).append(ev)
    return list(groups.values())


def settings_of(ev: Evaluation, name: str) -> dict:
    """The settings that produced a calibrator's numbers, as metrics.csv and the JSON records carry them."""
    from calibview._version import __version__

    req = ev.request
    return {"fit_split": req.fit_split if name != "none" else (req.fit_split or ""), "eval_split": req.eval_split,
            "n": ev.n_eval, "k": ev.k, "bins": ev.n_bins, "bandwidth": float(req.bandwidth), "kernel": req.kernel,
            "n_boot": req.n_boot, "seed": req.seed, "level": float(req.level),
            "options": json.dumps(req.options_for(name), sort_keys=True, separators=(",", ":")),
            "calibview_version": __version__}


def metrics_rows(evaluations: Iterable[Evaluation]) -> list[dict]:
    """One dict per run x calibrator x setting: the identity, value/_lo/_hi per metric, then the settings."""
    rows = []
    for group in _run_groups(evaluations):
        for name in dict.fromkeys(r.name for ev in group for r in ev.results):
            for ev in group:
                r = next((r for r in ev.results if r.name == name), None)
                if r is None:
                    continue
                row = {"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                       "calibrator": r.name}
                for m in METRIC_NAMES:
                    est = r.metrics[m]
                    row[m], row[f"{m}_lo"], row[f"{m}_hi"] = est.value, est.lo, est.hi
                row.update(settings_of(ev, r.name))
                rows.append(row)
    return rows


def metrics_csv(rows: Sequence[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = metric_columns()
    w.writerow(cols)
    for row in rows:
        w.writerow([_fmt(row[c]) if c in _FLOAT_COLUMNS else row[c] for c in cols])
    return buf.getvalue()


def metrics_json(rows: Sequence[dict]) -> str:
    """JSON text: every non-finite number (estimate or bound) is null, and ``nonfinite`` names those keys with
    their value ("inf", "-inf" or "nan"), so every JSON parser accepts the file and nothing is lost."""
    out = []
    for row in rows:
        rec, nonfinite = {}, {}
        for key, v in row.items():
            if isinstance(v, float) and not np.isfinite(v):
                nonfinite[key] = "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
                v = None
            rec[key] = v
        rec["nonfinite"] = nonfinite
        out.append(rec)
    return json.dumps(out, indent=2) + "\n"


CURVE_COLUMNS = ("model", "dataset", "split", "calibrator", "bandwidth", "kernel", "x", "curve", "band_lo",
                 "band_hi", "density")


def curves_csv(evaluations: Iterable[Evaluation], bandwidth: float | None = None, kernel: str | None = None) -> str:
    """Long format: one row per grid point per calibrator and (bandwidth, kernel); curve/band are empty where the
    density is zero. Each evaluation is drawn at its own request's bandwidth and kernel unless both are given.
    Grid points below 1/K are left out (no top-label confidence lies there); the grid itself is unchanged, so
    the x values stay comparable across runs."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CURVE_COLUMNS)
    for group in _run_groups(evaluations):
        pairs = ([(bandwidth, kernel)] if bandwidth is not None and kernel is not None else
                 list(dict.fromkeys((ev.request.bandwidth, ev.request.kernel) for ev in group)))
        ev = group[0]
        for r in ev.results:
            for h, kern in pairs:
                c = r.curve(h, kern)
                ident = [ev.run.model, ev.run.dataset, ev.request.eval_split, r.name, repr(float(h)), kern]
                first = int(np.searchsorted(c.x, 1.0 / ev.k - 1e-9)) if ev.k > 1 else 0
                for i in range(first, c.x.shape[0]):
                    ok = bool(c.valid[i])
                    w.writerow(ident + [repr(float(c.x[i])),
                                        _fmt(c.curve[i]) if ok else "", _fmt(c.band_lo[i]) if ok else "",
                                        _fmt(c.band_hi[i]) if ok else "", repr(float(c.density[i]))])
    return buf.getvalue()


RANKING_COLUMNS = ("model", "dataset", "split", "bins", "bandwidth", "kernel", "calibrator", "rank_ece", "ece",
                   "rank_cal", "cal", "rank_brier", "brier", "note")
RANKED_BY = ("ece", "cal", "brier")


def rankings(evaluations: Iterable[Evaluation]) -> tuple[list[dict], list[str]]:
    """(rows of ranking.csv, messages): for each run and setting, the rank of every calibrator by ECE, CAL and
    Brier (1 = lowest; ties share the lower rank); a message per run and metric whose order of calibrators
    changes across the settings (does the conclusion depend on the bandwidth, kernel or bins?)."""
    rows, messages = [], []
    for group in _run_groups(evaluations):
        orders: dict[str, dict[tuple, tuple]] = {m: {} for m in RANKED_BY}
        per_setting = []
        for ev in group:
            setting = (ev.n_bins, float(ev.request.bandwidth), ev.request.kernel)
            values = {m: {r.name: r.metrics[m].value for r in ev.results} for m in RANKED_BY}
            ranks = {m: _ranks(values[m]) for m in RANKED_BY}
            for m in RANKED_BY:
                orders[m][setting] = tuple(sorted(values[m], key=lambda n: (ranks[m][n], n)))
            per_setting.append((ev, setting, values, ranks))
        changed = [m for m in RANKED_BY if len(set(orders[m].values())) > 1]
        ev0 = group[0]
        for m in changed:
            by_order: dict[tuple, list[str]] = {}
            for (b, h, k), o in orders[m].items():
                what = f"bins {b}" if m == "ece" else f"bandwidth {h:g} {k}"
                if what not in by_order.setdefault(o, []):
                    by_order[o].append(what)
            text = "; ".join(f"{' < '.join(o)} at {', '.join(w)}" for o, w in by_order.items())
            messages.append(f"{ev0.run.name}: the ranking by {m} changes across settings: {text}")
        for ev, (b, h, k), values, ranks in per_setting:
            for r in ev.results:
                note = ", ".join(f"the ranking by {m} changes across settings" for m in changed)
                rows.append({"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                             "bins": b, "bandwidth": h, "kernel": k, "calibrator": r.name,
                             **{f"rank_{m}": ranks[m][r.name] for m in RANKED_BY},
                             **{m: values[m][r.name] for m in RANKED_BY}, "note": note})
    return rows, messages


def _ranks(values: dict[str, float]) -> dict[str, int]:
    ordered = sorted(values.values(), key=lambda v: (np.isnan(v), v))
    return {name: 1 + ordered.index(v) for name, v in values.items()}


def ranking_csv(rows: Sequence[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(RANKING_COLUMNS)
    for row in rows:
        w.writerow([_fmt(row[c]) if c in RANKED_BY or c == "bandwidth" else row[c] for c in RANKING_COLUMNS])
    return buf.getvalue()


def calibrators_json(evaluations: Iterable[Evaluation]) -> str:
    out = []
    for ev in evaluations:
        for r in ev.results:
            out.append({**record_fields(ev.run), "model": ev.run.model, "dataset": ev.run.dataset,
                        "run": ev.run.name, "calibrator": r.name, "argmax_changed": r.argmax_changed,
                        **r.fitted.to_json()})
    return json.dumps(out, indent=2) + "\n"


def write_report(evaluations: Sequence[Evaluation], out_dir: str | os.PathLike) -> tuple[list[Path], list[str]]:
    """metrics.csv, curves.csv, calibrators.json and ranking.csv in ``out_dir``; returns the paths written and the
    ranking messages (the ranking of calibrators changing across the settings of an ablation)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CalibviewError(f"--out {out} exists and is not a directory; give a directory to write into.")
    # one entry per fitted calibrator: the evaluations of several eval splits (domains) share the fits
    firsts: dict[tuple, Evaluation] = {}
    for g in _run_groups(evaluations):
        firsts.setdefault((g[0].run.file, g[0].run.name, g[0].request.fit_split), g[0])
    ranking_rows, messages = rankings(evaluations)
    paths = [out / "metrics.csv", out / "curves.csv", out / "calibrators.json", out / "ranking.csv"]
    atomic_write(paths[0], metrics_csv(metrics_rows(evaluations)))
    atomic_write(paths[1], curves_csv(evaluations))
    atomic_write(paths[2], calibrators_json(list(firsts.values())))
    atomic_write(paths[3], ranking_csv(ranking_rows))
    return paths, messages
