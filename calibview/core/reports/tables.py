"""CSV / JSON writers shared by the CLI and the GUI. Every file is written atomically (temp file + rename)."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from calibview.core.calibrators.file import record_fields
from calibview.core.errors import ParameterError
from calibview.core.evaluation.records import (ID_COLUMNS, SETTING_COLUMNS, metric_columns,  # noqa: F401
                                               metrics_rows, run_groups)
from calibview.core.evaluation.results import Evaluation
from calibview.core.reports.corp import CORP_COLUMNS, corp_cells
from calibview.core.evaluation.toplabel.absent import absent_metrics
from calibview.core.io.safe_io import atomic_write
from calibview.core.stats.metrics import METRIC_NAMES

_FLOAT_COLUMNS = frozenset(c for m in METRIC_NAMES for c in (m, f"{m}_lo", f"{m}_hi")) | {"bandwidth", "level"}


def _fmt(x: float) -> str:
    """Shortest round-tripping text; inf stays 'inf' (never clipped), a missing interval is empty."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return ""
    return repr(float(x))


def table_csv(rows: Sequence[dict], columns: Sequence[str], floats: Iterable[str] = ()) -> str:
    """The CSV of dict rows in ``columns`` order, one spelling of a cell in every file calibview writes: floats
    round-trip (``_fmt``: NaN and None empty, inf as 'inf'), booleans ``true``/``false``, the rest as text, made
    inert where a spreadsheet would read it as a formula (:func:`inert_text`). Every CSV calibview writes goes
    through here.

    ``floats`` names columns whose numbers are written as floats whatever their type (numpy scalars, ints), so a
    column of metric values reads the same in every row."""
    floats = frozenset(floats)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([inert_text(str(c)) for c in columns])
    for row in rows:
        w.writerow([_fmt(row[c]) if c in floats else _cell(row[c]) for c in columns])
    return buf.getvalue()


def _cell(v) -> object:
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, float):
        return _fmt(v)
    if isinstance(v, (int, np.number)):
        return v
    return inert_text(str(v))


#: the first characters that make a spreadsheet read a cell as a formula (OWASP's list for CSV injection)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    """Whether ``text`` reads as a number as it stands (``-0.5``, ``+1e3``, ``inf``, ``-nan``; no blanks around)."""
    if text != text.strip():
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def inert_text(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates: a text that starts with ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return, and does not read as a number, gets a single quote in front (``=1+2`` -> ``'=1+2``);
    numbers such as ``-0.5`` and ``inf`` and every other text stay as they are."""
    if text.startswith(FORMULA_STARTS) and not _is_number(text):
        return "'" + text
    return text


def metrics_csv(rows: Sequence[dict]) -> str:
    """metrics.csv of :func:`metrics_rows` (or :func:`with_regression`): the columns of :func:`metric_columns`,
    with the regression-only metrics after the classification ones when there are regression rows; floats
    round-trip."""
    from calibview.core.regression.records import columns_with_regression, regression_only

    columns = metric_columns()
    if any("rmse" in row for row in rows):
        columns = columns_with_regression(columns, METRIC_NAMES)
    floats = _FLOAT_COLUMNS | {c for m in regression_only(METRIC_NAMES) for c in (m, f"{m}_lo", f"{m}_hi")}
    return table_csv(rows, columns, floats=floats)


def with_regression(rows: Sequence[dict], regression: Sequence = ()) -> list[dict]:
    """The classification ``rows`` followed by the rows of the regression evaluations, every row with every
    column of both kinds (None where its kind has none); ``rows`` unchanged without regression evaluations."""
    if not regression:
        return list(rows)
    from calibview.core.regression.records import columns_with_regression, merged, regression_rows

    return merged(rows, regression_rows(regression), columns_with_regression(metric_columns(), METRIC_NAMES))


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
                 "band_hi", "density", "curve_lo", "curve_hi") + CORP_COLUMNS


def curves_csv(evaluations: Iterable[Evaluation], bandwidth: float | None = None, kernel: str | None = None,
               corp: Optional[Mapping] = None) -> str:
    """Long format: one row per grid point per calibrator and (bandwidth, kernel); curve/band are empty where the
    density is zero. Each evaluation is drawn at its own request's bandwidth and kernel unless both are given.
    Grid points below 1/K are left out (no top-label confidence lies there); the grid itself is unchanged, so
    the x values stay comparable across runs. ``curve_lo``, ``curve_hi``: the curve's pointwise bootstrap
    confidence band (CalibratorResult.curve_band, interpolated to x), empty without resamples at that setting
    or where the curve is. ``corp``, CORP_COLUMNS: (run file, run name, eval split) -> CorpSet
    (core.reports.corp.corp_sets), the PAV step function and its consistency and bootstrap bands at x (they
    have no bandwidth: the same at every one), empty off the forecasts' range or without a CorpSet."""
    rows = []
    corp = corp or {}
    for group in run_groups(evaluations):
        pairs = ([(bandwidth, kernel)] if bandwidth is not None and kernel is not None else
                 list(dict.fromkeys((ev.request.bandwidth, ev.request.kernel) for ev in group)))
        ev = group[0]
        bands = {(r.curve_band.bandwidth, r.curve_band.kernel, r.name): r.curve_band for e in group for r in e.results
                 if r.curve_band is not None}
        for r in ev.results:
            for h, kern in pairs:
                c = r.curve(h, kern)
                band = bands.get((h, kern, r.name))
                if band is not None:
                    b_lo, b_hi = (np.interp(c.x, band.x, v, left=np.nan, right=np.nan) for v in (band.lo, band.hi))
                cs = corp.get((ev.run.file, ev.run.name, ev.request.eval_split))
                cells = corp_cells(cs.of(r.name) if cs is not None else None, c.x)
                ident = {"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                         "calibrator": r.name, "bandwidth": h, "kernel": kern}
                first = int(np.searchsorted(c.x, 1.0 / ev.k - 1e-9)) if ev.k > 1 else 0
                for i in range(first, c.x.shape[0]):
                    ok = bool(c.valid[i])
                    lo_i = b_lo[i] if band is not None and ok and np.isfinite(b_lo[i]) else None
                    hi_i = b_hi[i] if band is not None and ok and np.isfinite(b_hi[i]) else None
                    rows.append({**ident, "x": c.x[i], "curve": c.curve[i] if ok else None,
                                 "band_lo": c.band_lo[i] if ok else None, "band_hi": c.band_hi[i] if ok else None,
                                 "density": c.density[i], "curve_lo": lo_i, "curve_hi": hi_i,
                                 **{k: v[i] for k, v in cells.items()}})
    return table_csv(rows, CURVE_COLUMNS, floats=CURVE_COLUMNS[4:5] + CURVE_COLUMNS[6:])


RANKING_COLUMNS = ("model", "dataset", "split", "bins", "bandwidth", "kernel", "calibrator", "rank_ece", "ece",
                   "rank_cal", "cal", "rank_brier", "brier", "rank_corp_mcb", "corp_mcb", "note")
RANKED_BY = ("ece", "cal", "brier", "corp_mcb")
#: the bandwidth-free view held against the kernel one: the note says when their orders of calibrators differ
VIEWS = ("corp_mcb", "cal")


def rankings(evaluations: Iterable[Evaluation]) -> tuple[list[dict], list[str]]:
    """(rows of ranking.csv, messages): for each run and setting, the rank of every calibrator by ECE, CAL,
    Brier and CORP MCB (1 = lowest; ties share the lower rank); a message per run and metric whose order of
    calibrators changes across the settings (does the conclusion depend on the bandwidth, kernel or bins?), and
    per run and setting where the CORP MCB order differs from the CAL order (the bandwidth-free view against the
    kernel one), said in the note of that setting's rows."""
    rows, messages = [], []
    for group in run_groups(evaluations):
        orders: dict[str, dict[tuple, tuple]] = {m: {} for m in RANKED_BY}
        per_setting = []
        for ev in group:
            setting = (ev.n_bins, float(ev.request.bandwidth), ev.request.kernel)
            absent = absent_metrics(ev.run)            # a top-label run has no Brier score: no rank by it
            values = {m: {r.name: None if m in absent else r.metrics[m].value for r in ev.results}
                      for m in RANKED_BY}
            ranks = {m: ({n: None for n in values[m]} if m in absent else _ranks(values[m])) for m in RANKED_BY}
            for m in RANKED_BY:
                orders[m][setting] = tuple(sorted(values[m], key=lambda n: (ranks[m][n] or 0, n)))
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
            views = _views_differ(values, ranks)
            msg = f"{ev0.run.name}: at bandwidth {h:g} {k}, {views}"
            if views and msg not in messages:          # CAL has no bins: once per bandwidth and kernel
                messages.append(msg)
            for r in ev.results:
                note = ", ".join([f"the ranking by {m} changes across settings" for m in changed] +
                                 ([views] if views else []))
                rows.append({"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split,
                             "bins": b, "bandwidth": h, "kernel": k, "calibrator": r.name,
                             **{f"rank_{m}": ranks[m][r.name] for m in RANKED_BY},
                             **{m: values[m][r.name] for m in RANKED_BY}, "note": note})
    return rows, messages


def _views_differ(values: dict, ranks: dict) -> str:
    """"the CORP MCB ranking (a < b) differs from the CAL ranking (b < a)" when the two orders of the
    calibrators differ at one setting (ties in either are read as ties, not as a difference); "" otherwise."""
    a, b = VIEWS
    if any(v is None or not np.isfinite(v) for m in VIEWS for v in values[m].values()):
        return ""
    names = list(values[a])
    differ = any((ranks[a][x] - ranks[a][y]) * (ranks[b][x] - ranks[b][y]) < 0 for x in names for y in names)
    if not differ:
        return ""

    def order(m):
        return " < ".join(sorted(names, key=lambda n: (ranks[m][n], n)))

    return f"the CORP MCB ranking ({order(a)}) differs from the CAL ranking ({order(b)})"


def _ranks(values: dict[str, float]) -> dict[str, int]:
    ordered = sorted(values.values(), key=lambda v: (np.isnan(v), v))
    return {name: 1 + ordered.index(v) for name, v in values.items()}


def ranking_csv(rows: Sequence[dict]) -> str:
    """ranking.csv of :func:`rankings`' rows, in RANKING_COLUMNS order."""
    return table_csv(rows, RANKING_COLUMNS, floats=RANKED_BY + ("bandwidth",))


def calibrators_json(evaluations: Iterable[Evaluation], regression: Sequence = ()) -> str:
    """calibrators.json: one record per run and fitted calibrator (the run's identity, the fraction of arg-max
    changes, and the fitted calibrator as :meth:`Fitted.to_json` writes it), then one per regression run and
    recalibrator of the ``regression`` evaluations (``kind`` "regression")."""
    out = []
    if regression:
        from calibview.core.calibrators.file import SCHEMA
        from calibview.core.regression.records import calibrator_records

        regression = [{"schema": SCHEMA, **rec} for rec in calibrator_records(regression)]
    for ev in evaluations:
        for r in ev.results:
            out.append({**record_fields(ev.run), "model": ev.run.model, "dataset": ev.run.dataset,
                        "run": ev.run.name, "calibrator": r.name, "argmax_changed": r.argmax_changed,
                        **r.fitted.to_json()})
    return json.dumps(out + list(regression), indent=2) + "\n"


def write_report(evaluations: Sequence[Evaluation], out_dir: str | os.PathLike,
                 rows: Optional[Sequence[dict]] = None, regression: Sequence = (),
                 corp: Optional[Mapping] = None) -> tuple[list[Path], list[str]]:
    """metrics.csv, curves.csv, calibrators.json and ranking.csv in ``out_dir``, and with ``regression``
    evaluations (calibview.core.regression.evaluate) their rows in metrics.csv and calibrators.json and
    regression.csv; returns the paths written and the ranking messages (the ranking of calibrators changing
    across the settings of an ablation). ``rows``: the rows of metrics.csv when they are not
    ``metrics_rows(evaluations)`` (a run's member rows, which the other files leave out); ``corp``: the CORP
    curves of curves.csv (:func:`curves_csv`)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ParameterError(f"out_dir={out} exists and is not a directory; give a directory to write into.",
                             "out_dir")
    # one entry per fitted calibrator: the evaluations of several eval splits (domains) share the fits
    firsts: dict[tuple, Evaluation] = {}
    for g in run_groups(evaluations):
        firsts.setdefault((g[0].run.file, g[0].run.name, g[0].request.fit_split), g[0])
    ranking_rows, messages = rankings(evaluations)
    paths = [out / "metrics.csv", out / "curves.csv", out / "calibrators.json", out / "ranking.csv"]
    atomic_write(paths[0], metrics_csv(with_regression(metrics_rows(evaluations) if rows is None else rows,
                                                       regression)))
    atomic_write(paths[1], curves_csv(evaluations, corp=corp))
    atomic_write(paths[2], calibrators_json(list(firsts.values()), regression))
    atomic_write(paths[3], ranking_csv(ranking_rows))
    if regression:
        from calibview.core.regression.records import REGRESSION_COLUMNS, coverage_rows

        paths.append(out / "regression.csv")
        atomic_write(paths[-1], table_csv(coverage_rows(regression), REGRESSION_COLUMNS,
                                          floats=REGRESSION_COLUMNS[4:]))
    return paths, messages
