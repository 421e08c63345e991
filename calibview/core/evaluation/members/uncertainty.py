"""The per-sample uncertainty of a run with members, and its summaries.

Total predictive entropy H(mean_m p_m) = expected member entropy mean_m H(p_m) (aleatoric) + mutual information
(epistemic), in nats, per sample (:func:`calibview.core.io.members.read.decompose`, read member by member).
:func:`summary_rows` gives the rows of uncertainty.csv: per run, the mean and quantiles of the three, their
correlation with the ensemble's error, and the AURC of the risk-coverage curve ranked by each
(:func:`ranking_score`).
"""

from __future__ import annotations

import threading
from typing import Iterable, Optional

import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import shards
from calibview.core.io.members.read import Decomposition, decompose
from calibview.core.io.schema import RunInfo

RANKINGS = ("confidence", "entropy", "mi")
PARTS = ("total", "aleatoric", "epistemic")
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
UNCERTAINTY_COLUMNS = (("model", "dataset", "split", "kind", "members", "n", "error_rate")
                       + tuple(f"{p}_{s}" for p in PARTS
                               for s in ("mean",) + tuple(f"q{int(q * 100):02d}" for q in QUANTILES)
                               + ("corr_error",))
                       + tuple(f"aurc_{r}" for r in RANKINGS))


def of_split(file: str, run: RunInfo, split: str, cancel: Optional[threading.Event] = None
             ) -> Optional[Decomposition]:
    """The :class:`Decomposition` of split ``split`` of ``run`` (a file or in-memory arrays), or None when it has
    no members."""
    info = run.split(split)
    if not info.members:
        return None
    if shards.is_pattern(file):
        raise CalibviewError(f"{file}: the uncertainty decomposition reads one file; give the shard's file.")
    return decompose(file, info, cancel=cancel)


def of_evaluation(ev, cancel: Optional[threading.Event] = None) -> Optional[Decomposition]:
    """The per-sample decomposition of an Evaluation's eval split (None without members): ``.total``,
    ``.aleatoric``, ``.epistemic`` (the mutual information), ``.confidence``, ``.correct``, all (N,)."""
    return of_split(ev.request.file, ev.run, ev.request.eval_split, cancel)


def terciles(d: Decomposition) -> np.ndarray:
    """(N,) int8 epistemic tercile of each sample: 0 low, 1 mid, 2 high mutual information (by rank, so ties at
    a tercile edge go to the lower tercile)."""
    n = d.epistemic.shape[0]
    order = np.argsort(d.epistemic, kind="stable")
    out = np.empty(n, np.int8)
    out[order] = (np.arange(n) * 3 // max(n, 1)).astype(np.int8)
    return out


def ranking_score(d: Decomposition, rank_by: str) -> np.ndarray:
    """(N,) float64 score that ranks samples from most to least certain (higher accepted first): the ensemble's
    confidence, or minus the total entropy, or minus the mutual information."""
    if rank_by not in RANKINGS:
        raise CalibviewError(f"Unknown ranking {rank_by!r}; choose from {', '.join(RANKINGS)}.")
    if rank_by == "confidence":
        return np.asarray(d.confidence, np.float64)
    return -np.asarray(d.total if rank_by == "entropy" else d.epistemic, np.float64)


def aurc(score: np.ndarray, correct: np.ndarray) -> float:
    """Area under the risk-coverage curve of samples accepted by decreasing ``score`` (ties accepted together:
    the curve is evaluated at the end of each tie group and the area is the mean selective risk over the N
    coverages, each tied sample taking its group's risk)."""
    from calibview.core.stats.selective import risk_coverage

    return float(risk_coverage(np.asarray(score, np.float64), np.asarray(correct, np.float64)).aurc)


def _corr(x: np.ndarray, err: np.ndarray) -> float:
    if np.std(x) == 0 or np.std(err) == 0:
        return float("nan")
    return float(np.corrcoef(x, err)[0, 1])


def summary_row(ev, d: Decomposition) -> dict:
    """One row of uncertainty.csv (UNCERTAINTY_COLUMNS) for evaluation ``ev`` and its decomposition ``d``."""
    err = 1.0 - np.asarray(d.correct, np.float64)
    row = {"model": ev.run.model, "dataset": ev.run.dataset, "split": ev.request.eval_split, "kind": d.kind,
           "members": d.members, "n": int(err.shape[0]), "error_rate": float(err.mean())}
    for part in PARTS:
        v = getattr(d, part)
        row[f"{part}_mean"] = float(v.mean())
        for q, value in zip(QUANTILES, np.quantile(v, QUANTILES)):
            row[f"{part}_q{int(q * 100):02d}"] = float(value)
        row[f"{part}_corr_error"] = _corr(v, err)
    for r in RANKINGS:
        row[f"aurc_{r}"] = aurc(ranking_score(d, r), d.correct)
    return row


def summary_rows(evaluations: Iterable, cancel: Optional[threading.Event] = None) -> list[dict]:
    """uncertainty.csv's rows: one per run and eval split with members (the first evaluation of each)."""
    rows, seen = [], set()
    for ev in evaluations:
        key = (ev.run.file, ev.run.name, ev.request.eval_split)
        if key in seen or not ev.run.split(ev.request.eval_split).members:
            continue
        seen.add(key)
        rows.append(summary_row(ev, of_evaluation(ev, cancel)))
    return rows

