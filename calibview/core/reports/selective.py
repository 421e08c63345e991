"""The selective-prediction files of ``calibview report``: ``selective.csv`` (risk-coverage points), ``audit.csv``
(the high-confidence audit) and, with a target precision, ``thresholds.csv`` (per-class thresholds chosen on the
fit split's calibrated scores, with what they achieve on the evaluation split). The row builders are public so
that the release and check commands write the same numbers.

selective.csv keeps at most ``MAX_CURVE_POINTS`` points per run x calibrator: tie-group ends evenly spaced in
coverage, the last included; each kept point is an exact point of the curve (no interpolation), its risk the
selective risk at that end and its threshold the confidence a sample needs to be accepted there.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from calibview.core.errors import ParameterError

# numpy / torch are imported inside the functions: the CLI's parser imports this module for DEFAULT_AUDIT

MAX_CURVE_POINTS = 1000
DEFAULT_AUDIT = (0.9, 0.95, 0.99)
IDENT = ("model", "dataset", "split", "calibrator")
SELECTIVE_COLUMNS = IDENT + ("coverage", "risk", "threshold", "n_accepted")
AUDIT_COLUMNS = IDENT + ("threshold", "n", "coverage", "mean_conf", "accuracy", "accuracy_lo", "accuracy_hi",
                         "level", "gap", "flagged")
THRESHOLD_COLUMNS = ("model", "dataset", "fit_split", "eval_split", "calibrator", "class", "class_name",
                     "target_precision", "threshold", "fit_n_pred", "fit_n_accepted", "fit_precision",
                     "eval_n_pred", "eval_n_accepted", "eval_precision", "eval_coverage")


def parse_thresholds(text: str, what: str = "audit") -> tuple[float, ...]:
    """``"0.9,0.95"`` -> (0.9, 0.95); every value in [0, 1]."""
    out = []
    for item in str(text).split(","):
        try:
            v = float(item)
        except ValueError:
            raise ParameterError(f"{what} takes comma-separated numbers in [0, 1], not {item.strip()!r}.",
                                 what) from None
        if not 0.0 <= v <= 1.0:
            raise ParameterError(f"{what} thresholds must lie in [0, 1], not {v:g}.", what)
        out.append(v)
    return tuple(dict.fromkeys(out))


def check_target(p: Optional[float]) -> None:
    """Refuse a target precision outside (0, 1]; None (no target) passes."""
    if p is not None and not 0.0 < p <= 1.0:
        raise ParameterError(f"target_precision must lie in (0, 1], not {p:g}.", "target_precision")


def _ident(ev, name: str) -> dict:
    return {"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split, "calibrator": name}


def selective_rows(ev, scored: dict, max_points: int = MAX_CURVE_POINTS, rank=None) -> list[dict]:
    """Risk-coverage points of every calibrator of one evaluation (``scored``: Engine.scored of its request).
    ``rank``: None (by each calibrator's confidence) or (N,) scores, higher accepted first, shared by every
    calibrator (minus the members' entropy or mutual information: the threshold is then the largest one
    accepted, in nats)."""
    from calibview.core.stats import selective as sel

    rows = []
    for r in ev.results:
        st = scored[r.name].stats
        rc = sel.RiskCoverage(st.conf if rank is None else rank, st.correct)
        sign = 1.0 if rank is None else -1.0
        for i in rc.downsampled(max_points):
            rows.append({**_ident(ev, r.name), "coverage": float(rc.coverage[i]), "risk": float(rc.risk[i]),
                         "threshold": sign * float(rc.threshold[i]), "n_accepted": int(rc.count[i])})
    return rows


def audit_rows(ev, scored: dict, thresholds: Sequence[float] = DEFAULT_AUDIT) -> list[dict]:
    """The high-confidence audit of every calibrator of one evaluation (``scored``: Engine.scored of its request):
    per threshold, the samples at or above it, their mean confidence and accuracy with its interval at the
    request's level, the gap and whether it is flagged."""
    from calibview.core.stats import selective as sel

    rows = []
    level = ev.request.level
    for r in ev.results:
        st = scored[r.name].stats
        for a in sel.audit(st.conf, st.correct, thresholds, level=level):
            rows.append({**_ident(ev, r.name), "threshold": a.threshold, "n": a.n, "coverage": a.coverage,
                         "mean_conf": a.mean_conf, "accuracy": a.accuracy, "accuracy_lo": a.lo,
                         "accuracy_hi": a.hi, "level": level, "gap": a.accuracy - a.mean_conf,
                         "flagged": a.flagged})
    return rows


def class_count(ev, fit_scored: dict, eval_scored: dict) -> int:
    """K of ``ev``; for a top-label run that does not say (K 0), the classes seen in either split's predictions
    and labels (each split's stats count 0 .. its largest index)."""
    from calibview.core.evaluation.toplabel.absent import class_count as toplabel_k     # report --help: no h5py

    return toplabel_k(ev.k, *(sc.stats.k for scored in (fit_scored, eval_scored) for sc in scored.values()))


def threshold_rows(ev, fit_scored: dict, eval_scored: dict, target: float) -> list[dict]:
    """Per calibrator and class: the threshold chosen on the fit split (None when the target is unreachable) and
    the precision and coverage it achieves on the fit and the evaluation split."""
    from calibview.core.stats import selective as sel

    rows, names, k = [], ev.run.class_names, class_count(ev, fit_scored, eval_scored)
    for r in ev.results:
        f, e = fit_scored[r.name].stats, eval_scored[r.name].stats
        t = sel.per_class_thresholds(f.conf, f.pred, f.correct, k, target)
        on_fit = sel.apply_thresholds(f.conf, f.pred, f.correct, t)
        on_eval = sel.apply_thresholds(e.conf, e.pred, e.correct, t)
        for c in range(k):
            rows.append({"model": ev.run.model, "dataset": ev.run.dataset, "fit_split": ev.request.fit_split,
                         "eval_split": ev.request.eval_split, "calibrator": r.name, "class": c,
                         "class_name": names[c] if names is not None and c < len(names) else "",
                         "target_precision": target, "threshold": t[c],
                         "fit_n_pred": on_fit[c].n_pred, "fit_n_accepted": on_fit[c].n_accepted,
                         "fit_precision": on_fit[c].precision, "eval_n_pred": on_eval[c].n_pred,
                         "eval_n_accepted": on_eval[c].n_accepted, "eval_precision": on_eval[c].precision,
                         "eval_coverage": on_eval[c].coverage})
    return rows


def _rank(ev, rank_by: str):
    """The (N,) ranking scores of ``rank_by`` for ``ev``, or None (rank by each calibrator's confidence)."""
    if rank_by == "confidence" or not ev.run.split(ev.request.eval_split).members:
        return None
    from calibview.core.evaluation.members import uncertainty

    return uncertainty.ranking_score(uncertainty.of_evaluation(ev), rank_by)


def rows_csv(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """selective.csv, audit.csv or thresholds.csv of ``rows`` in ``columns`` order (through ``table_csv``)."""
    from calibview.core.reports.tables import table_csv

    return table_csv(rows, columns)


def write_selective(engine, evaluations, out_dir: str | os.PathLike, audit: Sequence[float] = DEFAULT_AUDIT,
                    target_precision: Optional[float] = None,
                    rank_by: str = "confidence") -> tuple[list[Path], list[str]]:
    """selective.csv, audit.csv and (with ``target_precision``) thresholds.csv for the first setting of each run
    (the files do not depend on bins or bandwidth); returns (paths, messages for stderr). The scored splits come
    from ``engine``'s cache; the fit split is scored without resamples. ``rank_by`` ("confidence", "entropy",
    "mi") orders selective.csv of a run with members by the members' total entropy or mutual information
    (runs without members, and the audit, which compares confidence with accuracy, stay on confidence)."""
    from calibview.core.io.safe_io import atomic_write

    out = Path(out_dir)
    curve, aud, thr, messages = [], [], [], []
    seen = set()
    for ev in evaluations:
        key = (ev.run.file, ev.run.name, ev.request.fit_split, ev.request.eval_split)
        if key in seen:
            continue
        seen.add(key)
        scored = engine.scored(ev.request)
        curve += selective_rows(ev, scored, rank=_rank(ev, rank_by))
        aud += audit_rows(ev, scored, audit)
        if target_precision is None:
            continue
        if not ev.request.fit_split:
            messages.append(f"{ev.run.name}: no fit split, so no per-class thresholds")
            continue
        fit = engine.scored(replace(ev.request, eval_split=ev.request.fit_split, n_boot=0))
        rows = threshold_rows(ev, fit, scored, target_precision)
        thr += rows
        for r in ev.results:
            mine = [x for x in rows if x["calibrator"] == r.name]
            reached = sum(x["threshold"] is not None for x in mine)
            acc = sum(x["eval_n_accepted"] for x in mine)
            hits = sum(x["eval_precision"] * x["eval_n_accepted"] for x in mine if x["eval_n_accepted"])
            prec = f"precision {hits / acc:.4f}" if acc else "nothing accepted"
            messages.append(f"{ev.run.name} {r.name}: target precision {target_precision:g} reachable for "
                            f"{reached} of {class_count(ev, fit, scored)} classes on {ev.request.fit_split}; on {ev.request.eval_split} "
                            f"they accept {acc / ev.n_eval:.1%} of the samples at {prec}")
    paths = [out / "selective.csv", out / "audit.csv"]
    atomic_write(paths[0], rows_csv(curve, SELECTIVE_COLUMNS))
    atomic_write(paths[1], rows_csv(aud, AUDIT_COLUMNS))
    if target_precision is not None:
        paths.append(out / "thresholds.csv")
        atomic_write(paths[2], rows_csv(thr, THRESHOLD_COLUMNS))
    domains = len({row["split"] for row in aud}) > 1          # --eval-split test,deploy: say which split
    for row in aud:
        if row["flagged"]:
            where = f" [{row['split']}]" if domains else ""
            messages.append(f"{row['model']}/{row['dataset']}{where} {row['calibrator']}: confidence >= "
                            f"{row['threshold']:g} is right {row['accuracy']:.1%} of the time "
                            f"[{row['accuracy_lo']:.1%}, {row['accuracy_hi']:.1%}], mean confidence "
                            f"{row['mean_conf']:.1%} (n = {row['n']})")
    return paths, messages
