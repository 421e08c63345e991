"""Split conformal prediction sets of a run (``calibview conformal``): coverage and set size on the evaluation
split, overall and by class, by set size and by metadata slice, with bootstrap intervals.

The calibration and evaluation splits are read through the engine's reader (files, shards, in-memory runs, or
streamed from disk above the memory budget); a calibrator other than ``none`` is fitted on the fit split by the
engine (cached) and applied to both. Per calibrator and score, the calibration split gives each sample's
label score (:mod:`calibview.core.stats.conformal`), hence qhat per alpha (per class or per group with
``mondrian``); the evaluation split then gives each sample's set size and whether its label is in its set, O(N)
per (calibrator, score, alpha), never an (N, K) array beyond one chunk.

Intervals are percentile intervals of the engine's seeded resamples of the evaluation split
(:class:`calibview.core.stats.resampling.Resampler`, in groups of samples for large splits as everywhere in
calibview), a group's coverage and mean size normalised by each resample's own group size; qhat is held fixed,
so they are conditional on the calibration split.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from calibview.core.errors import CalibviewError, ParameterError, check_cancel, report
from calibview.core.evaluation import defaults
from calibview.core.evaluation.job import Job
from calibview.core.evaluation.request import EvalRequest, check_request
from calibview.core.evaluation.slices import _read_column, slice_codes
from calibview.core.evaluation.toplabel.absent import NO_CONFORMAL_REASON
from calibview.core.io import stream
from calibview.core.io.toplabel.format import is_toplabel
from calibview.core.stats import conformal as cf
from calibview.core.stats.metrics import chunk_rows
from calibview.core.stats.resampling import Resampler, percentile_interval

log = logging.getLogger("calibview")

#: the keys of a record, in order (conformal --json, conformal.csv)
COLUMNS = ("model", "dataset", "calibrator", "score", "alpha", "group", "n", "coverage", "coverage_lo",
           "coverage_hi", "mean_set_size", "mean_set_size_lo", "mean_set_size_hi", "qhat", "empty_frac",
           "full_frac")
FLOAT_COLUMNS = ("alpha", "coverage", "coverage_lo", "coverage_hi", "mean_set_size", "mean_set_size_lo",
                 "mean_set_size_hi", "qhat", "empty_frac", "full_frac")
#: ``mondrian`` value for class-conditional quantiles
BY_CLASS = "class"
#: a metadata column with more values than this gets no per-value records (unless it is the Mondrian column)
MAX_SLICES = 50
#: a chunk is ranked in full at once when more of its rows than this would be
FULL_RANK = 0.1
#: threads that rank a chunk's rows (at most; fewer when torch is told to use fewer)
MAX_THREADS = 4


@dataclass(frozen=True)
class ConformalEvaluation:
    """The result of :func:`evaluate_conformal`: ``records`` (flat dicts with the keys of COLUMNS, per calibrator,
    score and alpha: group ``all``, then ``class=<c>``, ``size=<s>`` and ``<column>=<value>``), ``worst`` ((calibrator,
    score, alpha) -> the lowest coverage of a class present in the evaluation split), ``k`` and notes."""

    run: object
    records: tuple[dict, ...]
    worst: dict
    k: int
    notes: tuple[str, ...] = ()


def evaluate_conformal(engine, file: str, run: str, *, calib_split: str = "val", eval_split: str = "test",
                       alphas: Sequence[float] = (0.1,), scores: Sequence[str] = ("lac",),
                       calibrators: Sequence[str] = ("none",), fit_split: Optional[str] = None,
                       mondrian: Optional[str] = None, randomized: bool = False, seed: int = defaults.SEED,
                       lam: float = cf.RAPS_LAMBDA, kreg: int = cf.RAPS_KREG, n_boot: int = defaults.N_BOOT,
                       level: float = defaults.LEVEL, device: str = defaults.DEVICE,
                       max_memory: Optional[int] = None, progress=None,
                       cancel: Optional[threading.Event] = None) -> ConformalEvaluation:
    """Conformal sets of run ``run`` of ``file``: qhat from ``calib_split``, coverage and size on ``eval_split``.

    alphas : miscoverage levels, each in (0, 1). scores : among lac, aps, raps (``lam``, ``kreg``: RAPS's penalty).
    calibrators : applied before scoring; those other than ``none`` are fitted on ``fit_split`` (default: a split
        that is neither the calibration nor the evaluation split; a warning when it is the calibration split).
    mondrian : None, ``"class"`` (a quantile per class) or a categorical metadata column of both splits (a quantile
        per value). randomized : randomised aps / raps, one seeded uniform per sample (``seed``; also the
        bootstrap's). n_boot : resamples of the evaluation split for the intervals at ``level`` (0: none).
    Raises ParameterError / CalibviewError for a bad level, score or split, and when the calibration split is too
    small for an alpha (its quantile would be +inf: every set all K classes); a Mondrian group that small is a
    warning (that group's sets hold every class)."""
    alphas = list(dict.fromkeys(cf.check_alpha(a) for a in alphas))
    scores = list(dict.fromkeys(cf.check_score(s) for s in scores))
    if not alphas or not scores:
        raise ParameterError("Give at least one alpha and one score.", "alpha")
    for name, v in (("n_boot", n_boot), ("seed", seed), ("kreg", kreg)):
        if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0):
            raise ParameterError(f"{name} must be a whole number >= 0, not {v!r}.", name)
    if not (np.isfinite(lam) and lam >= 0):
        raise ParameterError(f"raps_lambda must be a number >= 0, not {lam!r}.", "raps_lambda")
    if calib_split == eval_split:
        raise ParameterError(f"The calibration and evaluation splits must differ (both are {calib_split!r}): "
                             f"coverage on the calibration samples themselves is not a test.", "calib_split")
    calibrators = tuple(dict.fromkeys(calibrators)) or ("none",)
    probe = Job(engine.cache, EvalRequest(file=str(file), run=run, eval_split=eval_split, fit_split=None,
                                          calibrators=("none",), device=device), [])
    info = probe.run_info
    if is_toplabel(info):
        raise CalibviewError(f"Run {info.name} is a top-label run: {NO_CONFORMAL_REASON}.")
    info.split(calib_split)
    needs_fit = any(c != "none" for c in calibrators)
    if needs_fit:
        fit_split = _fit_split(info, fit_split, calib_split, eval_split)
    req = EvalRequest(file=str(file), run=info.name, eval_split=eval_split, fit_split=fit_split if needs_fit else None,
                      calibrators=calibrators, n_boot=0, seed=int(seed), level=level, device=device,
                      max_memory=max_memory)
    check_request(req)
    n_cal = info.split(calib_split).n
    for a in alphas:
        if n_cal < cf.min_calibration(a):
            raise ParameterError(
                f"The calibration split {calib_split!r} of {info.name} has {n_cal} samples, fewer than the "
                f"{cf.min_calibration(a)} that alpha={a:g} needs: ceil((n + 1)(1 - alpha)) exceeds n, so the "
                f"quantile is +inf and every set would hold all {info.k} classes.", "alpha")
    job = Job(engine.cache, req, [])
    fitted = engine.fitted(req, cancel=cancel)
    k, notes = info.k, []
    names = tuple(info.class_names) if info.class_names else tuple(str(c) for c in range(k))
    groups_cal = groups_eval = group_names = None
    if mondrian is not None and mondrian != BY_CLASS:
        group_names, groups_cal, groups_eval = _mondrian_groups(job, info, calib_split, eval_split, mondrian)

    report(progress, 0.0, f"scoring {calib_split}")
    u_cal = cf.uniforms(seed, n_cal, 0) if randomized else None
    cal_labels, cal_scores = _pass(job, calib_split, calibrators, fitted, scores, lam, kreg, u_cal, cancel,
                                   calibration=True)
    qhats = {}                     # (calibrator, score, alpha) -> float, (K,) per class or (G,) per group
    for (c, s), t in cal_scores.items():
        for a in alphas:
            if mondrian is None:
                qhats[(c, s, a)] = cf.conformal_quantile(t, a)
            else:
                codes, labels = ((cal_labels, names) if mondrian == BY_CLASS else (groups_cal, group_names))
                q, sizes = cf.group_quantiles(t, codes, len(labels), a)
                qhats[(c, s, a)] = q
                if c == calibrators[0] and s == scores[0]:
                    _warn_small(info.name, calib_split, mondrian, labels, sizes, a, k)
    report(progress, 0.4, f"sets of {eval_split}")
    n_ev = info.split(eval_split).n
    u_ev = cf.uniforms(seed, n_ev, 1) if randomized else None
    ev_labels, outcomes = _pass(job, eval_split, calibrators, fitted, scores, lam, kreg, u_ev, cancel,
                                qhats=qhats, alphas=alphas, mondrian=mondrian, groups=groups_eval)
    slices = _slices(job, info, eval_split, mondrian, notes)
    report(progress, 0.7, "bootstrap")
    records, worst = _records(job, info, names, ev_labels, outcomes, qhats, slices, mondrian, group_names,
                              n_boot, level, cancel)
    report(progress, 1.0, "done")
    return ConformalEvaluation(run=info, records=tuple(records), worst=worst, k=k, notes=tuple(notes))


def _fit_split(info, fit_split, calib_split, eval_split) -> str:
    if fit_split is None:
        others = [s.name for s in info.splits if s.name not in (calib_split, eval_split)]
        if not others:
            raise ParameterError(
                f"Run {info.name} has no split besides {calib_split!r} and {eval_split!r} to fit the calibrator on; "
                f"name one with fit_split (fitting on the calibration split itself is allowed, with a warning).",
                "fit_split")
        fit_split = "val" if "val" in others else others[0]
    info.split(fit_split)
    if fit_split == calib_split:
        log.warning(f"warning: run {info.name}: the calibrator is fitted on the calibration split ({calib_split}): "
                    "its scores are then not exchangeable with the evaluation split's, and coverage may fall "
                    "below 1 - alpha.")
    elif fit_split == eval_split:
        log.warning(f"warning: run {info.name}: the calibrator is fitted on the evaluation split ({eval_split}): "
                    "these are in-sample numbers.")
    return fit_split


def _warn_small(run, split, by, labels, sizes, alpha, k) -> None:
    need = cf.min_calibration(alpha)
    small = [f"{labels[i]} (n={int(sizes[i])})" for i in np.flatnonzero(sizes < need)]
    if small:
        shown = ", ".join(small[:10]) + (f" and {len(small) - 10} more" if len(small) > 10 else "")
        log.warning(f"warning: run {run}: {len(small)} Mondrian group(s) of {by} in {split} have fewer than the "
                    f"{need} samples alpha={alpha:g} needs; their quantile is +inf (sets of all {k} classes): "
                    f"{shown}.")


def _mondrian_groups(job, info, calib_split, eval_split, column):
    for split in (calib_split, eval_split):
        if column not in info.split(split).meta:
            have = ", ".join(info.split(split).meta) or "none"
            raise CalibviewError(f"Split {split} of {info.name} has no metadata column '{column}' to group the "
                                 f"quantile by (available: {have}; or 'class').")
    cal = _read_column(job.req.file, info, calib_split, column)
    ev = _read_column(job.req.file, info, eval_split, column)
    if cal.dtype.kind == "f" or ev.dtype.kind == "f":
        raise CalibviewError(f"The metadata column '{column}' holds floats, which form no groups for a Mondrian "
                             "quantile; store its groups as integers or strings.")
    values = [np.asarray(v).astype(str) if np.asarray(v).dtype.kind in "OSU" else np.asarray(v) for v in (cal, ev)]
    uniq, codes = np.unique(np.concatenate(values), return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    names = tuple(f"{column}={u}" for u in uniq.tolist())
    return names, codes[:cal.shape[0]], codes[cal.shape[0]:]


def _chunks(job, split, cancel):
    opened: list = []
    try:
        with torch.inference_mode():
            scores, labels = job.open_split(split, (0.0, 0.0), opened)
            source = (scores.chunks() if stream.is_streamed(scores) else
                      stream.tensor_chunks(scores, labels, chunk_rows(job.k)))
            for start, z, y in source:
                check_cancel(cancel)
                yield start, z, y
    finally:
        for s in opened:
            s.close()


def _pass(job, split, calibrators, fitted, scores, lam, kreg, u, cancel, *, calibration=False, qhats=None,
          alphas=(), mondrian=None, groups=None):
    """One pass over ``split``: (labels (N,) int64, {(calibrator, score): (N,) label scores}) for the calibration
    split, or (labels, {(calibrator, score, alpha): ((N,) sizes, (N,) covered)}) for the evaluation split.

    Each chunk's rows are ranked, scored and turned into sets in parts on a pool of threads (numpy's sorts and
    ufuncs, most of the time here, run on one core and release the GIL; every row is its own, so the parts give
    the same bits as the whole)."""
    n = job.run_info.split(split).n
    labels = np.empty(n, dtype=np.int64)
    out: dict = {}
    for c in calibrators:
        for s in scores:
            if calibration:
                out[(c, s)] = np.empty(n)
            for a in () if calibration else alphas:
                out[(c, s, a)] = (np.empty(n, dtype=np.int64), np.empty(n, dtype=bool))
    workers = max(1, min(torch.get_num_threads(), MAX_THREADS))
    with ThreadPoolExecutor(workers) as pool:
        for start, z, y in _chunks(job, split, cancel):
            stop = start + z.shape[0]
            labels[start:stop] = y.cpu().numpy()
            for c in calibrators:
                p = _probabilities(fitted[c], z)
                edges = np.linspace(0, p.shape[0], workers + 1).astype(int)
                parts = [(start + a, p[a:b]) for a, b in zip(edges[:-1], edges[1:]) if b > a]
                args = (c, labels, scores, lam, kreg, u, out, calibration, qhats, alphas, mondrian, groups)
                list(pool.map(lambda part: _rows(*part, *args), parts))      # each writes its rows; re-raises
    return labels, out


def _rows(start, p, c, labels, scores, lam, kreg, u, out, calibration, qhats, alphas, mondrian, groups) -> None:
    """Write the rows ``start`` .. of ``out`` (see :func:`_pass`) from their (rows, K) probabilities ``p`` under
    calibrator ``c``."""
    rows = slice(start, start + p.shape[0])
    ranked = _ranked(p, labels[rows], scores, calibration, qhats, c, mondrian == BY_CLASS)
    uu = None if u is None else u[rows]
    # computed once per part for every level: the label's rank and each score's ranked values
    full = ranked is not None and ranked.values.shape[1] == p.shape[1]
    at = cf.label_ranks(ranked, labels[rows], p) if full and not calibration else None
    # raps's scores are aps's plus a penalty (the same operations): the aps matrix is made once for both
    base = cf.ranked_scores(ranked, "aps", u=uu) if full and not calibration and set(scores) - {"lac"} else None
    for s in scores:
        if calibration:
            out[(c, s)][rows] = cf.true_scores(p, labels[rows], s, lam=lam, kreg=kreg, u=uu, ranked=ranked)
            continue
        sc = (None if base is None or s == "lac" else base if s == "aps" else
              cf.add_raps_penalty(ranked, base.copy(), lam, kreg))
        for a in alphas:
            q = qhats[(c, s, a)]
            kw = ({"qhat": q} if mondrian is None else {"class_qhat": q} if mondrian == BY_CLASS
                  else {"qhat": q[groups[rows]]})
            sz, cov = cf.set_stats(p, labels[rows], s, lam=lam, kreg=kreg, u=uu, ranked=ranked, scores=sc,
                                   label_rank=at, **kw)
            out[(c, s, a)][0][rows], out[(c, s, a)][1][rows] = sz, cov


def _probabilities(fitted, z) -> np.ndarray:
    """(rows, K) float64 numpy probabilities of calibrator ``fitted`` on the chunk ``z``: its log-probabilities
    exponentiated in place (a fresh (rows, K) float64 temporary per chunk costs page faults), unless the
    calibrator handed back the chunk itself."""
    lp = fitted.apply(z)
    return (lp.exp() if lp.data_ptr() == z.data_ptr() else lp.exp_()).cpu().numpy()


def _ranked(p, y, scores, calibration, qhats, calibrator, by_class=False):
    """The ranking of a chunk shared by its aps / raps scores and levels. Up to FULL_SORT_K classes: every class
    (a full sort is the cheaper there), of the values alone unless ``by_class`` thresholds need the classes.
    Above: the top WINDOW classes, or every class when more than FULL_RANK of the rows would need a full sort
    anyway (one sort instead of one per score and level)."""
    if all(s == "lac" for s in scores):
        return None
    if p.shape[1] <= cf.FULL_SORT_K:
        # which class sits where is needed only for class-conditional thresholds of the evaluation sets
        return cf.rank(p, with_classes=by_class and not calibration)
    r = cf.rank(p, cf.WINDOW)
    if r.values.shape[1] == p.shape[1]:
        return r
    if calibration:
        need = r.open | ~(r.classes == y[:, None]).any(axis=1)
    else:
        q = [np.max(v) for (c, s, _), v in qhats.items() if c == calibrator and s != "lac"]
        need = r.open | (r.prefix[:, -1] <= max(q))
    return cf.rank(p) if need.mean() > FULL_RANK else r


def _slices(job, info, split, mondrian, notes) -> list:
    """[(column, names, (N,) codes)] of the evaluation split's metadata columns (floats in quantile groups)."""
    out = []
    for column in info.split(split).meta:
        names, codes = slice_codes(_read_column(job.req.file, info, split, column))
        if len(names) > MAX_SLICES and column != mondrian:
            notes.append(f"no per-value records for the metadata column '{column}': {len(names)} values "
                         f"(more than {MAX_SLICES})")
            continue
        out.append((column, names, codes))
    return out


def _records(job, info, names, labels, outcomes, qhats, slices, mondrian, group_names, n_boot, level, cancel):
    """The flat records and the worst-class coverage of every (calibrator, score, alpha), the intervals from one
    sweep of resample blocks shared by all of them."""
    n, k = labels.shape[0], info.k
    plans = {}
    for key, (sizes, covered) in outcomes.items():
        present = np.unique(sizes)
        size_code = np.searchsorted(present, sizes)
        # group columns: 0 all, 1..K classes, then set sizes, then each slice column's values
        member = [np.zeros(n, dtype=np.int64), 1 + labels, 1 + k + size_code]
        gnames = ["all"] + [f"class={c}" for c in names] + [f"size={int(s)}" for s in present]
        offset = 1 + k + present.size
        for column, snames, codes in slices:
            member.append(offset + codes)
            gnames += [f"{column}={v}" for v in snames]
            offset += len(snames)
        plans[key] = (np.stack(member), gnames, sizes, covered)
    boots = _bootstrap(job, plans, n, n_boot, cancel) if n_boot else {}
    records, worst = [], {}
    for key, (member, gnames, sizes, covered) in plans.items():
        c, s, a = key
        q = qhats[key]
        ng = len(gnames)

        def per_group(weights) -> np.ndarray:
            return sum(np.bincount(row, weights=weights, minlength=ng) for row in member)

        count, cov = per_group(np.ones(n)), per_group(covered.astype(np.float64))
        tot, empty = per_group(sizes.astype(np.float64)), per_group((sizes == 0).astype(np.float64))
        full = per_group((sizes == k).astype(np.float64))
        dist = boots.get(key)
        for i, gname in enumerate(gnames):
            if count[i] == 0:
                continue
            lo = hi = slo = shi = float("nan")
            if dist is not None:
                lo, hi = _interval(dist[0][i], dist[2][i], level)
                slo, shi = _interval(dist[1][i], dist[2][i], level)
            records.append({"model": info.model, "dataset": info.dataset, "calibrator": c, "score": s,
                            "alpha": float(a), "group": gname, "n": int(count[i]),
                            "coverage": float(cov[i] / count[i]), "coverage_lo": lo, "coverage_hi": hi,
                            "mean_set_size": float(tot[i] / count[i]), "mean_set_size_lo": slo,
                            "mean_set_size_hi": shi, "qhat": _qhat_of(q, gname, mondrian, names, group_names),
                            "empty_frac": float(empty[i] / count[i]), "full_frac": float(full[i] / count[i])})
        present = count[1:1 + k] > 0
        worst[key] = float((cov[1:1 + k][present] / count[1:1 + k][present]).min()) if present.any() else \
            float("nan")
    return records, worst


def _qhat_of(q, gname: str, mondrian, names, group_names) -> float:
    """The quantile that applies to every sample of the group, or NaN when several do."""
    if mondrian is None:
        return float(q)
    if mondrian == BY_CLASS:
        if gname.startswith("class="):
            return float(q[names.index(gname[len("class="):])])
        return float("nan")
    if gname in group_names:
        return float(q[group_names.index(gname)])
    return float("nan")


def _interval(num: np.ndarray, den: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile interval of num / den over the resamples that drew the group (NaN when half of them miss it)."""
    ok = den > 0
    if ok.sum() < max(1, ok.size // 2):
        return float("nan"), float("nan")
    iv = percentile_interval(num[ok] / den[ok], level)
    return iv.lo, iv.hi


def _bootstrap(job, plans, n, n_boot, cancel) -> dict:
    """{(calibrator, score, alpha): ((G, R) covered sums, (G, R) size sums, (G, R) counts)} over the engine's
    seeded resamples of the evaluation split: per block one sparse (3G, units) x (units, R) product per key."""
    units = job.units()
    unit = torch.arange(n) if units is None else units
    m = n if units is None else int(units.max()) + 1
    ops = {}
    for key, (member, gnames, sizes, covered) in plans.items():
        g = len(gnames)
        cols = torch.from_numpy(member.reshape(-1))
        rows_u = unit.repeat(member.shape[0])
        vals = [torch.from_numpy(np.tile(v.astype(np.float64), member.shape[0]))
                for v in (covered, sizes, np.ones(n))]
        idx = torch.cat([torch.stack([cols + j * g, rows_u]) for j in range(3)], dim=1)
        ops[key] = (torch.sparse_coo_tensor(idx, torch.cat(vals), (3 * g, m), check_invariants=False).coalesce(), g)
    parts: dict = {key: [] for key in plans}
    resampler = Resampler(n, n_boot, job.req.seed, units=units,
                          poisson=job.poisson() if job.req.bootstrap == "poisson" else None)
    for block in resampler.blocks():
        check_cancel(cancel)
        w = block.counts.T.to(torch.float64).contiguous()
        for key, (op, g) in ops.items():
            parts[key].append(torch.sparse.mm(op, w).numpy())
        del block, w
    out = {}
    for key, chunks in parts.items():
        g = ops[key][1]
        full = np.concatenate(chunks, axis=1)
        out[key] = (full[:g], full[g:2 * g], full[2 * g:])
    return out



def sweeps(engine, file: str, run: str, *, calib_split: str, eval_split: str, calibrators: Sequence[str] = ("none",),
           scores: Sequence[str] = cf.SCORES, fit_split: Optional[str] = None, randomized: bool = False,
           seed: int = defaults.SEED, lam: float = cf.RAPS_LAMBDA, kreg: int = cf.RAPS_KREG,
           device: str = defaults.DEVICE, max_memory: Optional[int] = None, progress=None,
           cancel: Optional[threading.Event] = None) -> dict:
    """{(calibrator, score): :class:`~calibview.core.stats.conformal_sweep.SetSweep`} of run ``run``: one pass
    over each split, after which any alpha costs O(N log K) (the window's slider). The splits, calibrators and
    randomisation are those of :func:`evaluate_conformal`. The cache holds (N, K) float64 per calibrator and score;
    above ``max_memory`` (default 2 GiB) it is refused with a sentence giving the size."""
    from calibview.core.io.memory import DEFAULT_MAX_MEMORY, human
    from calibview.core.stats.conformal_sweep import SetSweep

    scores = list(dict.fromkeys(cf.check_score(s) for s in scores))
    calibrators = tuple(dict.fromkeys(calibrators)) or ("none",)
    if calib_split == eval_split:
        raise ParameterError(f"The calibration and evaluation splits must differ (both are {calib_split!r}).",
                             "calib_split")
    probe = Job(engine.cache, EvalRequest(file=str(file), run=run, eval_split=eval_split, fit_split=None,
                                          calibrators=("none",), device=device), [])
    info = probe.run_info
    n_cal, n_ev, k = info.split(calib_split).n, info.split(eval_split).n, info.k
    need = n_ev * k * 8 * len(calibrators) * len(scores)
    budget = max_memory or DEFAULT_MAX_MEMORY
    if need > budget:
        raise CalibviewError(f"The conformal sets of {info.name} would cache {human(need)} of scores ({n_ev:,} x "
                             f"{k:,} per calibrator and score), more than {human(budget)}; use `calibview "
                             f"conformal`, or fewer calibrators and scores.")
    needs_fit = any(c != "none" for c in calibrators)
    if needs_fit:
        fit_split = _fit_split(info, fit_split, calib_split, eval_split)
    req = EvalRequest(file=str(file), run=info.name, eval_split=eval_split, fit_split=fit_split if needs_fit else None,
                      calibrators=calibrators, n_boot=0, seed=int(seed), device=device, max_memory=max_memory)
    check_request(req)
    job = Job(engine.cache, req, [])
    fitted = engine.fitted(req, cancel=cancel)
    report(progress, 0.0, f"scoring {calib_split}")
    u_cal = cf.uniforms(seed, n_cal, 0) if randomized else None
    _, cal_scores = _pass(job, calib_split, calibrators, fitted, scores, lam, kreg, u_cal, cancel, calibration=True)
    report(progress, 0.4, f"ranking {eval_split}")
    u_ev = cf.uniforms(seed, n_ev, 1) if randomized else None
    labels = np.empty(n_ev, dtype=np.int64)
    ranked = {(c, s): np.empty((n_ev, k)) for c in calibrators for s in scores}
    label_scores = {key: np.empty(n_ev) for key in ranked}
    for start, z, y in _chunks(job, eval_split, cancel):
        rows = slice(start, start + z.shape[0])
        labels[rows] = y.cpu().numpy()
        for c in calibrators:
            p = _probabilities(fitted[c], z)
            for s in scores:
                ranked[(c, s)][rows], label_scores[(c, s)][rows] = SetSweep.rows(
                    p, labels[rows], s, lam=lam, kreg=kreg, u=None if u_ev is None else u_ev[rows])
        report(progress, 0.4 + 0.6 * min(1.0, (start + z.shape[0]) / max(n_ev, 1)), f"ranking {eval_split}")
    return {key: SetSweep(cal_scores[key], ranked[key], label_scores[key], labels) for key in ranked}
