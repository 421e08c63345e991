"""Every metric per slice of the evaluation split, with paired bootstrap intervals and the difference to the
whole split (``calibview slices``).

A slice is the set of samples sharing a value of a metadata column (:mod:`calibview.core.io.meta`; floats are cut
into quantile groups), or of the true label (``by="class"``: the per-class view). Its numbers are computed by the
engine's own per-part functions (:func:`calibview.core.stats.points.compute_part`, ``resample_part``) on the slice's
samples alone, so a slice's point estimates are by construction those of the subset evaluated on its own (with
the whole split's bin count, so that slices and split are comparable when ``bins="auto"``). Its intervals use the
split's resamples restricted to the slice (paired: the same draws as every interval of the split), normalised by
each resample's own slice size; the difference to the whole split is computed per resample, and a slice is
*flagged* when the interval of its ECE difference excludes 0. Slices smaller than ``min_slice`` are reported with
their n and point estimates but get no interval and are never flagged. Binned ECE is biased upward on few
samples per bin, so on small slices (fewer than PER_BIN samples per bin) the ECE difference overstates
miscalibration; a note says so (on CIFAR-100's 100-sample classes, 97 of 100 classes are flagged after temperature
scaling by ECE, 22 by debiased ECE).

Cost: one pass over the split's (N, K) scores per calibrator for all slices together (class-wise sums, and the
class-wise resamples of each slice restricted to the classes that need the dense product, which for a class
slice is its own class), plus O(N) per resample block for the other metrics. A split larger than the memory
budget is streamed once for the class-wise sums of all slices, without class-wise intervals.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

import numpy as np
import torch

from calibview.core.stats import auroc as au
from calibview.core.stats import intervals
from calibview.core.io import arrays, discovery, memory, schema, shards, stream
from calibview.core.io import logits as lg
from calibview.core.stats.bootstrap import ClasswiseBootstrap, SampleBootstrap, mixed_classes
from calibview.core.stats.resampling import ResampleBlock
from calibview.core.stats.deltas import delta_columns, paired_difference
from calibview.core.errors import CalibviewError, ParameterError, check_cancel, report
from calibview.core.evaluation.defaults import MIN_SLICE, SLICE_BINS
from calibview.core.evaluation.records import setting_fields
from calibview.core.evaluation.request import EvalRequest, check_request
from calibview.core.evaluation.toplabel.absent import absent_metrics, blank, is_toplabel
from calibview.core.evaluation.toplabel.slicing import check_by, class_codes
from calibview.core.evaluation.tensors import resolve_device, scores_tensor
from calibview.core.stats.metrics import METRIC_NAMES, SampleStats, StatsAccumulator, chunk_rows, resolve_bins
from calibview.core.stats.points import compute_part, resample_part

log = logging.getLogger("calibview")

#: ``by`` value that slices by the true label
BY_CLASS = "class"
#: slice a members run by the tercile of each sample's mutual information between the members (epistemic)
BY_EPISTEMIC = "epistemic"
EPISTEMIC_SLICES = ("low MI", "mid MI", "high MI")
#: with more slices than this, SmoothECE / CAL / sharpness-gap intervals per slice are skipped by default
SMOOTH_SLICES = 16
SMOOTH_METRICS = ("smece", "cal", "sharpness_gap")
#: below this many samples per bin on average, a slice's binned ECE is noted as biased upward
PER_BIN = 50


@dataclass(frozen=True)
class Slice:
    """The samples of one slice: ``rows`` (n,) int64 increasing row indices into the evaluation split."""

    name: Optional[str]                  # None: the whole split
    rows: np.ndarray
    key: int = -1                        # position among the column's slices (-1: the whole split)

    @property
    def n(self) -> int:
        """The number of samples in the slice."""
        return int(self.rows.shape[0])


@dataclass(frozen=True)
class SliceEvaluation:
    """The result of :func:`evaluate_slices`: ``records`` are the flat dicts of ``calibview slices --json``."""

    request: EvalRequest
    run: schema.RunInfo
    column: str
    slices: tuple[Slice, ...]            # the slices of the column, without the whole split
    records: tuple[dict, ...]            # per calibrator: the whole split (slice None), then each slice
    small: tuple[str, ...]               # slices below min_slice (no interval, never flagged)
    notes: tuple[str, ...] = ()


def slice_codes(values, *, slice_bins: int = SLICE_BINS) -> tuple[tuple[str, ...], np.ndarray]:
    """(slice names, (N,) int64 slice of each sample) for a metadata column.

    Integers, booleans and strings are categories (sorted; the name is the value as text). Floats are cut at
    ``np.quantile(finite values, linspace(0, 1, slice_bins + 1))`` (repeated edges merged): the first group is
    ``[e0, e1]``, the others ``(e_i, e_i+1]``, named by those ranges; empty groups are dropped, and NaN (missing)
    samples form a last slice named ``missing``."""
    v = np.asarray(values)
    if v.ndim != 1:
        raise CalibviewError(f"A slice column must be 1-D, not of shape {v.shape}.")
    if not (isinstance(slice_bins, (int, np.integer)) and slice_bins >= 1):
        raise ParameterError(f"slice_bins must be a whole number >= 1, not {slice_bins!r}.", "slice_bins")
    if v.dtype.kind != "f":
        uniq, codes = np.unique(v.astype(str) if v.dtype.kind in "OSU" else v, return_inverse=True)
        return tuple(str(u) for u in uniq.tolist()), codes.astype(np.int64).reshape(-1)
    missing = np.isnan(v)
    finite = v[~missing]
    codes = np.full(v.shape[0], -1, dtype=np.int64)
    names: list[str] = []
    if finite.size:
        edges = np.unique(np.quantile(finite, np.linspace(0.0, 1.0, int(slice_bins) + 1)))
        if edges.size == 1:
            edges = np.array([edges[0], edges[0]])
        raw = np.searchsorted(edges[1:-1], finite, side="left")
        used = np.unique(raw)
        codes[~missing] = np.searchsorted(used, raw)
        text = _edge_texts(edges)
        names = [("[" if g == 0 else "(") + f"{text[g]}, {text[g + 1]}]" for g in used.tolist()]
    if missing.any():
        codes[missing] = len(names)
        names.append("missing")
    return tuple(names), codes


def _edge_texts(edges: np.ndarray) -> list[str]:
    """The shortest %g texts that keep distinct edges distinct."""
    for digits in range(4, 18):
        text = [f"{e:.{digits}g}" for e in edges.tolist()]
        if len(set(text)) == len(text):
            return text
    return [repr(float(e)) for e in edges.tolist()]


def evaluate_slices(engine, req: EvalRequest, by: str, *, slice_bins: int = SLICE_BINS, min_slice: int = MIN_SLICE,
                    smooth_intervals: Optional[bool] = None, progress=None,
                    cancel: Optional[threading.Event] = None) -> SliceEvaluation:
    """Every metric of every calibrator of ``req`` on each slice of metadata column ``by`` of the evaluation split
    (``by="class"``: of the true label), with paired bootstrap intervals and differences to the whole split.

    engine : :class:`calibview.core.evaluation.engine.Engine` (its fits, scores and resamples are reused and cached).
    smooth_intervals : intervals of the grid-based estimators (SmoothECE, CAL, sharpness gap) per slice. They cost
        a grid's work per resample whatever the slice's size (about 0.3 s per slice and calibrator for 1000
        resamples), so by default (None) only up to SMOOTH_SLICES slices get them (K = 100 classes do not; their
        point estimates are always computed, and a note says so).
    Raises CalibviewError for an unknown column (naming the available ones) or when no slice has ``min_slice``
    samples; slices below ``min_slice`` are named in a warning on the ``calibview`` logger."""
    check_request(req)
    if not (isinstance(min_slice, (int, np.integer)) and min_slice >= 1):
        raise ParameterError(f"min_slice must be a whole number >= 1, not {min_slice!r}.", "min_slice")
    run = discovery.find_run((shards if shards.is_pattern(req.file) else discovery).list_runs(req.file), req.run)
    info = run.split(req.eval_split)
    names = codes = None
    check_by(run, req.eval_split, by, BY_EPISTEMIC)
    if by == BY_EPISTEMIC and info.members:
        from calibview.core.evaluation.members.uncertainty import of_split, terciles
        names, codes = EPISTEMIC_SLICES, terciles(of_split(req.file, run, req.eval_split, cancel)).astype(np.int64)
    elif by != BY_CLASS:
        if by not in info.meta:
            have = ", ".join(info.meta) if info.meta else "none"
            raise CalibviewError(f"{req.file}: split {info.path} has no metadata column '{by}' (available: {have}; "
                                 f"or 'class' for the true label" + (", 'epistemic' for the mutual-information "
                                 "terciles" if info.members else "") + ").")
        names, codes = slice_codes(_read_column(req.file, run, req.eval_split, by), slice_bins=slice_bins)
    scored = engine.scored(req, progress=_span(progress, 0.0, 0.4), cancel=cancel)
    fitted = engine.fitted(req, cancel=cancel)
    first = next(iter(scored.values())).stats
    if names is None:
        names, codes = class_codes(run, first.labels)
    slices = _group(names, codes)
    small = tuple(s.name for s in slices if s.n < min_slice)
    if len(small) == len(slices):
        biggest = max(slices, key=lambda s: s.n)
        raise ParameterError(f"No slice of '{by}' in {run.name}/{req.eval_split} reaches min_slice={min_slice} "
                             f"samples (the largest, '{biggest.name}', has {biggest.n}); lower min_slice or "
                             f"use coarser slices.", "min_slice")
    if small:
        shown = ", ".join([f"{s.name} (n={s.n})" for s in slices if s.n < min_slice][:10])
        more = f" and {len(small) - 10} more" if len(small) > 10 else ""
        log.warning(f"warning: {run.name}/{req.eval_split} by {by}: {len(small)} slice(s) have fewer than "
                    f"{min_slice} samples and get no interval or flag: {shown}{more}.")
    n, k, b = first.n, run.k, resolve_bins(req.bins, first.n)
    device = resolve_device(req.device)
    counts, units = engine.resamples(req) if req.n_boot else (None, None)
    resampler = engine.resampler(req) if req.n_boot else None
    whole = Slice(None, np.arange(n, dtype=np.int64))
    every = (whole,) + slices
    active = [s for s in every if s.n >= min_slice or s.name is None] if req.n_boot else []
    report(progress, 0.4, "class-wise sums of the slices")
    cw, notes, aurocs = _classwise(req, run, info, fitted, scored, slices, b, counts, units, min_slice, device,
                                   cancel, _span(progress, 0.4, 0.6))
    notes = list(dict.fromkeys([n for sc in scored.values() for n in sc.notes] + notes))   # the whole split's
    stats = {(nm, s.key): _subset(sc.stats, s, cw.get((nm, s.key), (sc.classwise_sums.get(b), None))[0], b)
             for nm, sc in scored.items() for s in every}
    parts = [("common",), ("corp",), ("binned", b), ("kernel", req.bandwidth, req.kernel)]  # no refinement, tests
    values = {key: _points(st, b, parts) for key, st in stats.items()}
    for nm, sc in scored.items():          # auroc needs the probabilities: counted in the class-wise pass
        values[(nm, whole.key)]["auroc"] = sc.auroc
        for s in slices:
            if (nm, s.key) in aurocs and values[(nm, s.key)]:
                values[(nm, s.key)]["auroc"] = aurocs[(nm, s.key)][0]
    thin = [s for s in slices if min_slice <= s.n < PER_BIN * b]
    if thin:
        notes.append(f"{len(thin)} slice(s) have fewer than {PER_BIN} samples per bin ({PER_BIN * b} for {b} bins): "
                     f"binned ECE is biased upward on few samples, so their ECE difference and flag overstate "
                     f"miscalibration; read delta_debiased_ece, or use fewer --bins")
    smooth = len(slices) <= SMOOTH_SLICES if smooth_intervals is None else bool(smooth_intervals)
    if req.n_boot and not smooth:
        notes.append(f"no {', '.join(SMOOTH_METRICS)} or CORP intervals for the {len(slices)} slices (a grid's or "
                     f"PAV fit's work per resample and slice; ask for them with smooth_intervals / --smooth-intervals)")
    report(progress, 0.6, "bootstrap of the slices")
    dists = _resample(req, n, stats, active, parts, counts, units, device, cancel, _span(progress, 0.6, 1.0),
                      smooth, resampler)
    for nm, sc in scored.items():
        for s in every:
            d = dists.get((nm, s.key))
            if d is None:
                continue
            if "brier" in d:
                d["tot"] = d["brier"]            # as the engine: TOT is the Brier score, whatever the bandwidth
            dist = sc.classwise_dist.get(b) if s.name is None else cw.get((nm, s.key), (None, None))[1]
            if dist is not None:
                d["classwise_ece"] = dist
            dist = sc.auroc_dist if s.name is None else aurocs.get((nm, s.key), (None, None))[1]
            if dist is not None:
                d["auroc"] = dist
    records = [_record(req, run, by, nm, s, values, dists, k, b, min_slice) for nm in scored for s in every]
    report(progress, 1.0, "done")
    return SliceEvaluation(request=req, run=run, column=by, slices=slices, records=tuple(records), small=small,
                           notes=tuple(notes))


def _span(progress, lo: float, hi: float):
    return None if progress is None else (lambda f, msg: progress(lo + (hi - lo) * f, msg))


def _read_column(file: str, run: schema.RunInfo, split: str, column: str) -> np.ndarray:
    """The column of one file (or in-memory run), or of every shard of a pattern in order (each validated on its
    own)."""
    if arrays.is_memory(file):
        return arrays.read_meta(file, run, split, column)
    if not shards.is_pattern(file):
        return lg.read_meta(file, run, split, column)
    parts = [lg.read_meta(f, run.name, split, column) for f in shards.expand(file)]
    if len({p.dtype.kind for p in parts}) > 1:
        raise CalibviewError(f"The metadata column '{column}' of {run.name}/{split} has different types in the "
                             f"shards of {file}; store it with one type in every shard.")
    return np.concatenate(parts)


def _group(names, codes: np.ndarray) -> tuple[Slice, ...]:
    """One Slice per name, rows increasing: one stable sort, not one scan per slice."""
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1), side="left")
    return tuple(Slice(str(nm), order[bounds[i]:bounds[i + 1]].astype(np.int64), i) for i, nm in enumerate(names))


def _subset(stats: SampleStats, s: Slice, sums: Optional[np.ndarray], b: int) -> SampleStats:
    if s.name is None:
        return stats
    r = s.rows
    return SampleStats(conf=stats.conf[r], pred=stats.pred[r], correct=stats.correct[r], nll=stats.nll[r],
                       brier=stats.brier[r], labels=stats.labels[r], k=stats.k, classwise_sums=sums,
                       classwise_bins=b)


def _points(stats: SampleStats, b: int, parts: list) -> dict:
    if stats.n == 0:
        return {}
    values: dict = {}
    with np.errstate(all="ignore"):
        for part in parts:
            values.update(compute_part(stats, {b: stats.classwise_sums}, part)["values"])
    return values


def _classwise(req, run, info, fitted, scored, slices, b, counts, units, min_slice, device, cancel, progress):
    """({(calibrator, slice key): ((K, B) class-wise sums, (R,) class-wise ECE resamples or None)}, notes,
    {(calibrator, slice key): (auroc, (R,) auroc resamples or None)}).

    In memory: per slice, its own rows only (gathered chunk by chunk), through the engine's accumulators, and a
    second pass over the same chunks for the slice's AUROC (calibview.core.stats.auroc; its interval within the same
    work budget as the whole split's). Streamed: one pass over the disk for every slice's sums, no intervals,
    no per-slice AUROC."""
    k, names = run.k, list(scored)
    out: dict = {}
    if is_toplabel(run):          # no class probabilities: the class-wise sums stay NaN, no AUROC
        return out, [], {}
    if memory.memory_bytes(info) > (req.max_memory or memory.DEFAULT_MAX_MEMORY):
        split = stream.StreamedSplit(req.file, run, req.eval_split, device=device, chunk_rows=req.chunk_rows)
        try:
            sums, aurocs = _streamed_sums(split, fitted, names, slices, b, k, device, cancel)
        finally:
            split.close()
        for nm in names:
            for i, s in enumerate(slices):
                out[(nm, s.key)] = (sums[nm][i], None)
        note = ("no class-wise ECE or AUROC interval per slice: the split is streamed from disk" if req.n_boot
                else None)
        return out, [note] if note else [], aurocs
    source = shards if shards.is_pattern(req.file) else lg
    data = source.read_split(req.file, run, req.eval_split, chunk_rows=req.chunk_rows, cancel=cancel)
    scores, labels = scores_tensor(data, device), torch.from_numpy(data.labels).to(device)
    notes = []
    if req.n_boot and counts is None:
        notes.append("no class-wise ECE interval per slice: the resamples do not fit in memory")
    step = chunk_rows(k)
    aurocs: dict = {}
    boot_auroc = bool(req.n_boot) and counts is not None and au.boot_note(req.n_boot, info.n, k) is None
    for i, nm in enumerate(names):
        for j, s in enumerate(slices):
            check_cancel(cancel)
            report(progress, (i * len(slices) + j) / (len(names) * len(slices)),
                   f"class-wise sums of slice {s.name} ({nm})")
            acc = StatsAccumulator(s.n, k, b, device)
            cwb, totals = None, None
            if counts is not None and s.n >= min_slice:
                sub_counts, sub_units, totals = _restrict(counts, units, s.rows)
                sub = _subset(scored[nm].stats, s, None, b)
                cols = mixed_classes(sub, b) if units is None else None
                cwb = ClasswiseBootstrap(sub_counts, k, units=sub_units, device=device,
                                         columns=cols if cols is not None and len(cols) < k // 2 else None)
            rows = torch.from_numpy(s.rows).to(device)
            pos = torch.empty(s.n, dtype=torch.float64, device=device)

            def consume(start, lp, p, y, pos=pos, cwb=cwb):
                pos[start:start + p.shape[0]] = au.positives(p, y)
                if cwb is not None:
                    cwb.add(start, lp, p, y)

            with torch.inference_mode():
                for a in range(0, s.n, step):
                    r = rows[a:a + step]
                    acc.add(a, fitted[nm].apply(scores.index_select(0, r)), labels[r], consume)
                if s.n:
                    aurocs[(nm, s.key)] = _slice_auroc(fitted[nm], scores, labels, rows, pos, k, step,
                                                       counts, units, boot_auroc and s.n >= min_slice)
            sums = acc.classwise_sums(b) if s.n else np.zeros((k, b))
            out[(nm, s.key)] = (sums, cwb.distribution(acc, b, totals) if cwb is not None else None)
            if cwb is not None:
                cwb.release()
    return out, notes, aurocs


def _slice_auroc(fitted, scores, labels, rows, pos, k, step, counts, units, boot):
    """(auroc, resamples or None) of one slice: the counting pass over the slice's chunks (the same chunks as the
    scoring pass, so the same bits), and within the budget the slice's restricted resamples."""
    y = labels[rows].cpu().numpy()
    counter = au.AurocCounter(y, pos, k)
    kept = torch.empty((rows.numel(), k), dtype=torch.float64) if boot else None
    for a in range(0, rows.numel(), step):
        p = fitted.apply(scores.index_select(0, rows[a:a + step])).exp()
        counter.add(p, y[a:a + p.shape[0]], a)
        if kept is not None:
            kept[a:a + p.shape[0]] = p.cpu()
    if kept is None:
        return counter.value(), None
    sub_counts, sub_units, _ = _restrict(counts, units, rows.cpu().numpy())
    return counter.value(), au.resampled_auroc(kept.numpy(), y, sub_counts, sub_units)


def _streamed_sums(split, fitted, names, slices, b, k, device, cancel) -> tuple[dict, dict]:
    """({calibrator: (S, K, B) class-wise sums of every slice} in one pass over a streamed split, {(calibrator,
    slice key): (auroc, None)} from a second pass that counts against the positives kept in the first)."""
    code = np.empty(split.shape[0], dtype=np.int64)
    for i, s in enumerate(slices):
        code[s.rows] = i
    code_t = torch.from_numpy(code).to(device)
    edges = torch.from_numpy(np.linspace(0.0, 1.0, b + 1)).to(device)
    sums = {nm: torch.zeros(len(slices) * k * b, dtype=torch.float64, device=device) for nm in names}
    cls = torch.arange(k, device=device)[None, :]
    pos = {nm: torch.empty(split.shape[0], dtype=torch.float64, device=device) for nm in names}
    with torch.inference_mode():
        for start, z, y in split.chunks():
            check_cancel(cancel)
            c = code_t[start:start + z.shape[0]]
            for nm in names:
                p = fitted[nm].apply(z).exp()
                pos[nm][start:start + z.shape[0]] = au.positives(p, y)
                col = (torch.searchsorted(edges, p, side="left") - 1).clamp_(0, b - 1)
                p[torch.arange(p.shape[0], device=device), y] -= 1.0
                sums[nm].index_add_(0, ((c[:, None] * k + cls) * b + col).reshape(-1), p.reshape(-1))
        labels = split.labels.cpu().numpy()
        rows = {s.key: torch.from_numpy(s.rows).to(device) for s in slices if s.n}
        counters = {(nm, s.key): au.AurocCounter(labels[s.rows], pos[nm][rows[s.key]], k)
                    for nm in names for s in slices if s.n}
        for start, z, y in split.chunks():
            check_cancel(cancel)
            c = code_t[start:start + z.shape[0]]
            present = torch.unique(c).tolist()
            for nm in names:
                p = fitted[nm].apply(z).exp()
                for i in present:
                    counters[(nm, slices[i].key)].add(p[c == i])
    aurocs = {key: (counter.value(), None) for key, counter in counters.items()}
    return {nm: v.view(len(slices), k, b).cpu().numpy() for nm, v in sums.items()}, aurocs


def _restrict(counts: torch.Tensor, units: Optional[torch.Tensor], rows: np.ndarray):
    """The slice's paired resamples: (counts (R, m) uint8, (n,) unit of each slice sample or None, (R,) sizes)."""
    if units is None:
        sub = counts[:, torch.from_numpy(rows)]
        return sub, None, sub.sum(dim=1, dtype=torch.int64).double().numpy()
    uniq, inv = torch.unique(units[torch.from_numpy(rows)], return_inverse=True)
    sub = counts[:, uniq]
    sizes = torch.bincount(inv, minlength=uniq.numel()).double()
    totals = torch.cat([sub[a:a + 64].double() @ sizes for a in range(0, sub.shape[0], 64)])  # O(64 x units)
    return sub, inv, totals.numpy()


def _resample(req, n, stats, active, parts, counts, units, device, cancel, progress, smooth, resampler) -> dict:
    """{(calibrator, slice key): {metric: (R,) values}} over the split's resample blocks restricted to each
    active slice (the whole split included)."""
    if not active:
        return {}
    names = list(dict.fromkeys(nm for nm, _ in stats))
    prep = {}
    for s in active:
        if s.name is None:
            prep[s.key] = None
        elif units is None:
            prep[s.key] = (torch.from_numpy(s.rows).to(device), None, None)
        else:
            uniq, inv = torch.unique(units[torch.from_numpy(s.rows)], return_inverse=True)
            prep[s.key] = (uniq.to(device), inv, torch.bincount(inv, minlength=uniq.numel()).double())
    boots = {(nm, s.key): SampleBootstrap(stats[(nm, s.key)], device=device,
                                           units=units if s.name is None else prep[s.key][1],
                                           tick=lambda: check_cancel(cancel))
             for nm in names for s in active}
    values: dict = {key: {} for key in boots}
    for i, block in enumerate(resampler.blocks(counts)):
        for s in active:
            check_cancel(cancel)
            sub = block if s.name is None else _sub_block(block, *prep[s.key])
            for nm in names:
                with np.errstate(all="ignore"):
                    for part in parts:
                        # the whole split always gets every interval (its record is the metrics row)
                        full = smooth or s.name is None
                        if part[0] in ("kernel", "corp") and not full:
                            continue
                        out = resample_part(boots[(nm, s.key)], sub, part, smooth=full)
                        for metric, v in out.items():
                            values[(nm, s.key)].setdefault(metric, []).append(np.asarray(v, dtype=np.float64))
            del sub
        report(progress, (i + 1) / len(resampler), f"bootstrap of the slices {i + 1}/{len(resampler)}")
        del block
    for boot in boots.values():
        boot.release()
    return {key: {m: np.concatenate(v) for m, v in metrics.items()} for key, metrics in values.items()}


def _sub_block(block: ResampleBlock, cols: torch.Tensor, inv: Optional[torch.Tensor],
               sizes: Optional[torch.Tensor]) -> ResampleBlock:
    counts = block.counts[:, cols]
    if inv is None:
        return ResampleBlock(counts, None, counts.double().sum(dim=1).cpu().numpy())
    return ResampleBlock(counts, inv, (counts.double().cpu() @ sizes).numpy())


def _record(req, run, by, name, s: Slice, values, dists, k, b, min_slice) -> dict:
    """One flat record: the keys of ``metrics --json``, then slice_column, slice, delta_<metric>[_lo|_hi] and
    flagged."""
    own, base = values[(name, s.key)], values[(name, -1)]
    d_own, d_base = dists.get((name, s.key)), dists.get((name, -1))
    member = (req.member or "ensemble") if run.split(req.eval_split).members else None   # as metrics_rows
    rec = {"model": run.model, "dataset": run.dataset, "split": req.eval_split, "calibrator": name,
           "member": member}
    methods = {}
    with np.errstate(all="ignore"):
        for m in METRIC_NAMES:
            lo = hi = float("nan")
            if d_own is not None and m in d_own:
                lo, hi, methods[m] = _interval(d_own[m], float(own.get(m, np.nan)), req.level, req.interval, m)
            rec[m], rec[f"{m}_lo"], rec[f"{m}_hi"] = float(own.get(m, np.nan)), lo, hi
        deltas = delta_columns(own, base, d_own or {}, d_base or {},
                               lambda d, ref: paired_difference(d, ref, req.level), metrics=METRIC_NAMES)
    rec.update(setting_fields(SimpleNamespace(request=req, n_eval=s.n, k=k, n_bins=b), name))
    rec["interval_method"] = json.dumps({m: v for m, v in methods.items() if v}, sort_keys=True,
                                        separators=(",", ":"))
    rec["p_skce_method"] = None
    rec["slice_column"], rec["slice"] = by, s.name
    rec.update(deltas)
    lo, hi = rec["delta_ece_lo"], rec["delta_ece_hi"]
    rec["flagged"] = bool(s.name is not None and s.n >= min_slice and np.isfinite(lo) and np.isfinite(hi)
                          and (lo > 0 or hi < 0))
    return blank(rec, absent_metrics(run))          # as in metrics: None, not NaN


def _interval(values: np.ndarray, estimate: float, level: float, choice: str, metric: str
              ) -> tuple[float, float, str]:
    """(lo, hi, method) of a slice's interval by the request's method; slices have no jackknife, so BCa falls
    back to the percentile interval (calibview.core.stats.intervals.method_for), widened to contain the
    estimate ("" without an interval)."""
    if values.size == 0 or np.isnan(values).any():
        return float("nan"), float("nan"), ""
    iv, used = intervals.interval(values, estimate, level, intervals.method_for(metric, choice, False),
                                  nonnegative=metric in intervals.BIASED_METRICS)
    return iv.lo, iv.hi, used
