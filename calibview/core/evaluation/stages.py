"""The engine's stages, each a function of a :class:`~calibview.core.evaluation.job.Job` (the request, its resolved
inputs and what earlier stages produced), so that another engine (e.g. one that farms chunks out) can call them or
replace one:

```
fit_stage(job)        fit split (N_fit, K)   -> job.fitted[name]: calibrators.Fitted       cache "fit"
score_stage(job)      eval split (N, K)      -> job.scored[name]: results.Scored           cache "score"
                        scoring_pass: per-sample vectors, class-wise sums and resamples, positives for the AUROC
                        rank_pass:    the AUROC counts (and resamples), and the class-wise resamples of a large
                                      in-memory split restricted to its mixed classes
resample_stage(job)   job.scored             -> job.dists[(name, part)]: metric -> (n_boot,) float64   cache "dist"
assemble(job)         all of the above       -> one results.Evaluation per setting (points cached under "point")
```

Every calibrator is applied to each chunk of the evaluation split twice, never more: once in the scoring pass,
which computes everything that is a sum over samples, and once in the rank pass, for the two statistics that
cannot be counted before the whole split has been scored. The AUROC of class c compares every entry of column c
with the positives of class c, which are known only at the end of the first pass (each depends on its row's
normalisation), and the class-wise resamples of a large split are a dense (n_boot x N x K) product that is
restricted to the classes whose first-bin sum can change sign, again known only at the end. The rank pass applies
the calibrator to each chunk and counts; it reads no file (in memory) or the same chunks (streamed).

:func:`run` chains them. The keys are those of :mod:`calibview.core.evaluation.job`. Progress runs 0-0.3 while
fitting, 0.3-0.6 while scoring and 0.6-0.99 while resampling.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from types import MappingProxyType
from typing import Optional

import numpy as np
import torch

from calibview.core import calibrators as calib
from calibview.core.io import memory
from calibview.core.io import stream
from calibview.core.io.toplabel.format import is_toplabel
from calibview.core.stats import auroc as au
from calibview.core.stats.bootstrap import ClasswiseBootstrap, SampleBootstrap, mixed_classes
from calibview.core.stats import jackknife
from calibview.core.stats.corp import parts as corp_parts
from calibview.core.stats.corp.refinement import Refinement
from calibview.core.stats.resampling import PARALLEL_MAX_ENTRIES, for_each, resample_sizes
from calibview.core.stats.metrics import StatsAccumulator, chunk_rows
from calibview.core.stats.rowwise import row_argmax
from calibview.core.stats.points import resample_part
from calibview.core.errors import check_cancel, report
from calibview.core.evaluation.job import Job
from calibview.core.evaluation.request import Setting
from calibview.core.evaluation.estimates import curve_band, estimates
from calibview.core.evaluation.results import CalibratorResult, Counters, Evaluation, Scored

log = logging.getLogger("calibview")

#: class-wise accumulators of the calibrators scored in one pass ((n_boot or units, K) float32 each)
CLASSWISE_BUDGET = 1 << 30
#: a (n_boot x N x K) dense class-wise product above this many multiply-adds is restricted to the classes that
#: need it, at the cost of a second pass over the (in-memory) evaluation split
TWO_PASS_FLOPS = 2_000_000_000


def run(job: Job) -> list[Evaluation]:
    """Every stage in turn (resampling only with ``n_boot``): one complete Evaluation per setting of ``job``; a
    bootstrap whose distributions would not fit the memory budget is refused before any work."""
    job.check_bootstrap()
    fit_stage(job)
    score_stage(job)
    if job.req.n_boot:
        resample_stage(job)
    report(job.progress, 1.0, "done")
    return assemble(job, pending=False)


# --- fit -----------------------------------------------------------------------------------------------------------

def fit_stage(job: Job, sharded=None) -> None:
    """Fill ``job.fitted``: each calibrator from the cache (key ``job.fit_key``), as given, or fitted on the fit
    split (read once for all of them; counted in ``job.counters["fitted"]``, reuses in ``["reused"]``).
    ``sharded``: a callable returning the fit split as a :class:`calibview.core.distributed.fit.ShardedSplit`, for
    the methods that stream (their passes then run where the shards are); the others read the split here."""
    todo = []
    for name in job.names:
        hit = job.cache.get(job.fit_key(name))
        if name in job.given and name != "none":
            job.fitted[name] = job.given[name]
        elif name == "none":
            job.fitted[name] = hit or job.cache.put(job.fit_key(name), calib.Fitted(method="none", k=job.k, params={}))
        elif hit is not None:
            job.fitted[name] = hit
            job.counters["reused"].append(name)
        else:
            todo.append(name)
    if not todo:
        return
    opened: list = []
    t1 = time.perf_counter()
    spread = [nm for nm in todo if sharded is not None and calib.get(nm).streams]
    try:
        with torch.inference_mode():
            if spread:
                split = sharded()
                opened.append(split)
                _fit_each(job, spread, split, split.labels, todo)
            rest = [nm for nm in todo if nm not in spread]
            if rest:
                scores, labels = job.open_split(job.req.fit_split, (0.0, 0.05), opened)
                _fit_each(job, rest, scores, labels, todo)
    finally:
        for split in opened:
            split.close()
    job.timings["fit"] = time.perf_counter() - t1


def _fit_each(job: Job, names: list, scores, labels, todo: list) -> None:
    """Fit each of ``names`` on the fit split's ``scores`` and ``labels`` (progress counted over ``todo``)."""
    n_fit = int(scores.shape[0])
    for name in names:
        i = todo.index(name)
        check_cancel(job.cancel)
        report(job.progress, 0.05 + 0.25 * i / len(todo), f"fitting {calib.get(name).label} ({i + 1} of {len(todo)})")
        t2 = time.perf_counter()
        fitted = calib.fit(name, scores, labels, options=job.req.options_for(name),
                           progress=job.sub_progress(0.05 + 0.25 * i / len(todo), 0.05 + 0.25 * (i + 1) / len(todo)),
                           cancel=job.cancel,
                           fit_info={"file": str(job.req.file), "run": job.run_info.name, "split": job.req.fit_split,
                                     "n": n_fit})
        job.timings[f"fit:{name}"] = time.perf_counter() - t2
        job.fitted[name] = job.cache.put(job.fit_key(name), fitted)
        job.counters["fitted"].append(name)


# --- score ---------------------------------------------------------------------------------------------------------

def score_stage(job: Job) -> None:
    """Fill ``job.scored`` (needs ``job.fitted``): each calibrator from the cache (key ``job.score_key``) when it
    holds every bin count of the settings, else scored on the evaluation split: one :func:`scoring_pass` per
    calibrator in memory, one for all of them when the split is streamed from disk. Emits a partial result after
    each calibrator."""
    todo = []
    for name in job.names:
        hit = job.cache.get(job.score_key(name))
        if hit is not None and set(job.all_bins) <= set(hit.bins):
            job.scored[name] = hit
        else:
            todo.append((name, () if hit is None else hit.bins))
    if not todo:
        emit_partial(job)
        return
    opened: list = []
    t1 = time.perf_counter()
    try:
        with torch.inference_mode():
            scores, labels = job.open_split(job.req.eval_split, (0.3, 0.35), opened)
            counts, units, note = job.resamples()
            if stream.is_streamed(scores):          # one pass over the disk for all of them
                scoring_pass(job, scores, labels, todo, counts, units, note, (0.35, 0.6))
            else:
                for i, item in enumerate(todo):
                    span = (0.35 + 0.25 * i / len(todo), 0.35 + 0.25 * (i + 1) / len(todo))
                    scoring_pass(job, scores, labels, [item], counts, units, note, span)
            del scores
    finally:
        for split in opened:
            split.close()
    stream.trim_heap()
    job.timings["score"] = time.perf_counter() - t1


def scoring_pass(job: Job, scores, labels, items, counts, units, note, span) -> None:
    """One pass over the evaluation split for the calibrators in ``items`` ((name, bin counts scored before)):
    ``scores`` (N, K) tensor or StreamedSplit and (N,) ``labels`` from ``job.open_split``; ``counts``, ``units``
    and ``note`` from ``job.resamples()``; ``span`` the progress range. Stores a :class:`Scored` per calibrator in
    ``job.scored`` and the cache, with the class-wise ECE resamples of every bin count (in this pass, or in the
    :func:`rank_pass` when the dense product would exceed TWO_PASS_FLOPS) and the AUROC (:func:`rank_pass`)."""
    n, k, r = job.n, job.k, job.req
    names = [name for name, _ in items]
    bins = {name: tuple(sorted(set(job.all_bins) | set(old))) for name, old in items}
    label = ", ".join(calib.get(nm).label for nm in names)
    report(job.progress, span[0], f"scoring {label}")
    accs = {nm: StatsAccumulator(n, k, bins[nm], job.device) for nm in names}
    cw_note = classwise_note(job, counts, units, len(names)) or note
    # Poisson resamples are accumulated shard by shard (segments), over every class, as calibview.core.distributed
    # merges them: never restricted to a second pass's columns, so both engines add the same sums
    poisson = r.bootstrap == "poisson"
    segments = job.poisson().starts if poisson and counts is not None else None
    two_pass = (counts is not None and cw_note is None and units is None and not stream.is_streamed(scores)
                and r.n_boot * n * k > TWO_PASS_FLOPS and not poisson)
    cws = {nm: (ClasswiseBootstrap(counts, k, units=units, device=job.device, segments=segments)
                if counts is not None and cw_note is None and not two_pass else None) for nm in names}
    base_pred = torch.empty(n, dtype=torch.int64, device=job.device)
    pos = {nm: torch.empty(n, dtype=torch.float64, device=job.device) for nm in names}
    refs = {nm: Refinement(n, k, r.seed, resampled=bool(r.n_boot)) for nm in names}
    for start, z, y in split_chunks(job, scores, labels):
        check_cancel(job.cancel)
        stream.trim_heap()          # the previous chunk's temporaries: see stream.trim_heap (in memory too)
        base_pred[start:start + z.shape[0]] = row_argmax(z)
        for nm in names:
            score_chunk(accs[nm], job.fitted[nm], start, z, y, pos[nm], cws[nm], refs[nm])
        stop = start + z.shape[0]
        report(job.progress, span[0] + (span[1] - span[0]) * stop / n * 0.5,
               f"scoring {label}: {stop:,} of {n:,} rows")
    base_pred = base_pred.cpu().numpy()
    stats = {}
    for nm in names:
        check_cancel(job.cancel)
        stats[nm] = accs[nm].result(labels)
    for nm in names:
        check_cancel(job.cancel)
        refs[nm].nodes()
    if two_pass:
        cws = {nm: restricted_classwise(job, counts, stats[nm], bins[nm]) for nm in names}
    # the class-wise jackknife (BCa's acceleration) reads the final class-wise sums, so it runs in the rank pass
    jk = {nm: (jackknife.subsample_rows(n, r.seed), {b: accs[nm].classwise_sums(b) for b in bins[nm]})
          for nm in names} if r.n_boot else {}
    aurocs, loos = rank_pass(job, scores, labels, names, pos, counts, units, span, cws if two_pass else {}, jk,
                             refs)
    for nm in names:
        check_cancel(job.cancel)
        dists, notes = {}, []
        if counts is not None and cw_note is None:
            cw = cws[nm]
            totals = classwise_totals(job, counts, units)
            for b in bins[nm]:
                check_cancel(job.cancel)
                dists[b] = cw.distribution(accs[nm], b, totals, tick=lambda: check_cancel(job.cancel))
            cw.release()
        elif r.n_boot:
            notes.append(cw_note)
            dists = {b: None for b in bins[nm]}
        auroc, auroc_dist, auroc_note = aurocs[nm]
        refinement = refs[nm].result(bool(np.isfinite(stats[nm].nll).all()))
        refs[nm] = None
        if refinement.note:
            notes.append(refinement.note)
        if auroc_note:      # routine above the work budget (documented), so information, not a warning
            log.info("%s %s: %s", job.run_info.name, nm, auroc_note)
        scored = Scored(stats=stats[nm], bins=bins[nm],
                        classwise_sums=MappingProxyType({b: accs[nm].classwise_sums(b) for b in bins[nm]}),
                        classwise_loo=MappingProxyType(loos.get(nm, {})),
                        classwise_dist=MappingProxyType(dists),
                        argmax_changed=float((stats[nm].pred != base_pred).mean()),
                        notes=tuple(notes),
                        auroc=auroc, auroc_dist=auroc_dist, refinement=refinement)
        job.scored[nm] = job.cache.put(job.score_key(nm), scored)
        job.counters["scored"].append((nm, r.eval_split))
        accs[nm] = cws[nm] = None
        emit_partial(job)


def classwise_totals(job: Job, counts, units) -> np.ndarray:
    """(n_boot,) float64 samples in each of the request's resamples (``counts`` (n_boot, units), ``units`` (N,) or
    None): N for multinomial draws of the samples, else the counts weighted by the units' sizes."""
    sizes = None if units is None else torch.bincount(units, minlength=counts.shape[1]).double()
    return resample_sizes(counts, sizes, job.n if job.req.bootstrap == "multinomial" else None)


def classwise_note(job: Job, counts, units, calibrators: int) -> Optional[str]:
    """Why the class-wise ECE gets no interval when its accumulators for ``calibrators`` calibrators would
    exceed CLASSWISE_BUDGET (None when they fit, or when there are no resample ``counts``)."""
    per_pass = ClasswiseBootstrap.nbytes(job.req.n_boot, 0 if units is None else int(units.max()) + 1, job.k,
                                         units is not None)
    if counts is not None and per_pass * calibrators > CLASSWISE_BUDGET:
        return (f"no class-wise ECE interval: its resamples would take {memory.human(per_pass)} per calibrator; "
                "lower --n-boot")
    return None


def split_chunks(job: Job, scores, labels):
    """(start row, (rows, K) scores, (rows,) labels) of the scoring pass, in order; the AUROC pass must see the
    same rows together (same bits)."""
    return (scores.chunks() if stream.is_streamed(scores) else
            stream.tensor_chunks(scores, labels, chunk_rows(job.k)))


def rank_pass(job: Job, scores, labels, names, pos, counts, units, span, classwise: dict,
              jk: dict, refs: Optional[dict] = None) -> tuple[dict, dict]:
    """(name -> (auroc, (n_boot,) resampled auroc or None, note or None), name -> B -> (m,) class-wise ECE
    without each row of the jackknife subsample): the second application of each calibrator to the chunks
    counts every probability against the (N,) positives ``pos[name]`` collected while scoring
    (:mod:`calibview.core.stats.auroc`), feeds ``classwise[name]`` (a restricted :class:`ClasswiseBootstrap`,
    when the scoring pass left it out) and ``jk[name]`` ((sorted subsample rows, B -> (K, B) class-wise sums),
    :mod:`calibview.core.stats.jackknife`) and ``refs[name]`` (the refinement split's exact derivatives at its
    first temperatures, :mod:`calibview.core.stats.corp.refinement`); when the AUROC interval is affordable the
    (N, K) float64 probability matrix is kept for it."""
    refs = refs or {}
    r, n, k = job.req, job.n, job.k
    note = au.boot_note(r.n_boot, n, k) if r.n_boot else None
    if r.n_boot and note is None and counts is None:
        note = "no AUROC interval: the resample counts were not kept (see the class-wise ECE note)"
    keep = bool(r.n_boot) and note is None
    y_np = labels.cpu().numpy()
    counters = {}
    for nm in names:            # building one sorts the split's positives: a second at millions of rows
        check_cancel(job.cancel)
        counters[nm] = au.AurocCounter(y_np, pos[nm], k, tick=lambda: check_cancel(job.cancel))
    kept = {nm: torch.empty((n, k), dtype=torch.float64) for nm in names} if keep else {}
    loo: dict = {nm: {} for nm in jk}
    label = ", ".join(job.fitted[nm].label for nm in names)
    t1 = time.perf_counter()
    for start, z, y in split_chunks(job, scores, labels):
        check_cancel(job.cancel)
        stream.trim_heap()
        stop = start + z.shape[0]
        y_chunk = y.cpu().numpy()
        for nm in names:
            lp = job.fitted[nm].apply(z)
            if nm in refs:
                refs[nm].add_node(start, lp, y)
            p = lp.exp_()                              # in place: the log-probabilities are not needed after
            counters[nm].add(p, y_chunk, start)
            if nm in jk:
                jackknife.add_chunk(loo[nm], *jk[nm], start, p, y, n)
            if keep:
                kept[nm][start:start + z.shape[0]] = p.cpu()
            if classwise.get(nm) is not None:
                classwise[nm].add(start, None, p, y)        # last: it overwrites p
        report(job.progress, span[0] + (span[1] - span[0]) * (0.5 + 0.5 * stop / n),
               f"AUROC of {label}: {stop:,} of {n:,} rows")
    out = {}
    for nm in names:
        dist = au.resampled_auroc(kept[nm].numpy(), y_np, counts, units) if keep else None
        out[nm] = (counters[nm].value(), dist, note)
    job.timings["auroc"] = job.timings.get("auroc", 0.0) + time.perf_counter() - t1
    return out, {nm: {b: np.concatenate(v) for b, v in per.items()} for nm, per in loo.items()}


def restricted_classwise(job: Job, counts, stats, bins) -> ClasswiseBootstrap:
    """The class-wise accumulator of a calibrator on a large in-memory split, restricted to the classes that need
    the dense product (:func:`mixed_classes` for the smallest bin count, which covers every larger one);
    ``stats`` is its SampleStats from the scoring pass. Fed by :func:`rank_pass`."""
    cols = mixed_classes(stats, bins[0])
    return ClasswiseBootstrap(counts, job.k, columns=cols if len(cols) < job.k // 2 else None, device=job.device)


def score_chunk(acc: StatsAccumulator, fitted: calib.Fitted, start: int, z: torch.Tensor, y: torch.Tensor,
                pos: torch.Tensor, cw: Optional[ClasswiseBootstrap] = None,
                ref: Optional[Refinement] = None) -> None:
    """The scoring pass's work on one chunk for one calibrator: ``fitted`` applied to ``z`` (rows, K) scores from
    row ``start`` (labels ``y`` (rows,) int64), its per-sample vectors and class-wise sums into ``acc``, each row's
    label probability into ``pos`` (N,) float64, and the class-wise resamples ``cw`` and refinement split ``ref``
    fed. Public so that an engine scoring shards elsewhere (calibview.core.distributed) does the same per chunk."""
    acc.add(start, fitted.apply(z), y, _on_chunk(pos, cw, ref))


def _on_chunk(pos: torch.Tensor, cw: Optional[ClasswiseBootstrap], ref: Optional[Refinement] = None):
    """The scoring pass's per-chunk consumer: keep each row's label probability for the AUROC and feed the
    refinement split (both before the class-wise accumulator, which overwrites the probabilities)."""
    def consume(start, lp, p, y):
        pos[start:start + p.shape[0]] = au.positives(p, y)
        if ref is not None:
            ref.add(start, lp, p, y)
        if cw is not None:
            cw.add(start, lp, p, y)
    return consume


# --- resample ------------------------------------------------------------------------------------------------------

def resample_stage(job: Job) -> None:
    """Fill ``job.dists`` (needs ``job.scored``): for each calibrator and metric part (``job.parts()``) not in the
    cache (key ``job.dist_key``), metric -> (n_boot,) float64 over the request's resamples, drawn block by block
    (:class:`~calibview.core.stats.resampling.Resampler`), a block's calibrators side by side in threads
    (:func:`~calibview.core.stats.resampling.for_each`); counted in ``job.counters["resampled"]``. The calibration
    tests (:func:`test_stage`) first."""
    todo = {nm: [p for p in job.parts() if job.cache.get(job.dist_key(nm, p)) is None] for nm in job.names}
    test_stage(job)
    todo = {nm: parts for nm, parts in todo.items() if parts}
    if not todo:
        return
    t1 = time.perf_counter()
    r = job.req
    units = job.units()
    counts = job.cache.get(job.counts_key())
    resampler = job.resampler(units)
    boots = {nm: SampleBootstrap(job.scored[nm].stats, device=job.device, units=units,
                                 tick=lambda: check_cancel(job.cancel), refinement=job.scored[nm].refinement)
             for nm in todo}
    values: dict = {(nm, p): {} for nm, parts in todo.items() for p in parts}
    # Blocks outer (each drawn once) for samples; calibrators outer for groups of a large split, where a block
    # is cheap and one calibrator's O(N) helpers at a time keep the memory down.
    order = ([list(todo)] if units is None else [[nm] for nm in todo])
    total, done = len(resampler) * len(order), 0
    for group in order:
        for block in resampler.blocks(counts):
            check_cancel(job.cancel)

            def resample(nm, block=block):        # one calibrator's parts; each writes only its own lists
                for p in todo[nm]:
                    check_cancel(job.cancel)
                    for metric, v in resample_part(boots[nm], block, p).items():
                        v = np.asarray(v, dtype=np.float32 if metric == "curve" else np.float64)
                        values[(nm, p)].setdefault(metric, []).append(v)
            for_each(resample, group, parallel=job.device.type == "cpu"
                     and job.n * job.k <= PARALLEL_MAX_ENTRIES)
            done += 1
            stop = min(r.n_boot, (done % len(resampler) or len(resampler)) * resampler.block)
            report(job.progress, 0.6 + 0.39 * done / total, f"bootstrap {stop}/{r.n_boot}")
            del block
            # a block's per-sample panels of a large split are ~128 MB each; without a trim between blocks the
            # freed space stayed resident in some runs (a 2,000,000 x 1,000 report grew 122 MB per block, to 4.8 GB)
            stream.trim_heap()
        for nm in group:
            boots[nm].release()
        stream.trim_heap()
    for (nm, p), metrics in values.items():
        job.dists[(nm, p)] = job.cache.put(job.dist_key(nm, p), {m: np.concatenate(v) for m, v in metrics.items()})
        job.counters["resampled"].append(f"{nm}:{' '.join(str(x) for x in p)}")
    job.timings["bootstrap"] = time.perf_counter() - t1


def test_stage(job: Job) -> None:
    """The calibration tests of every calibrator not in the cache (keys ``job.test_key``): the p-value of the ECE
    at each bin count of the settings and the SKCE test, ``n_boot`` redraws with the request's seed
    (:mod:`calibview.core.stats.corp.parts`); counted in ``job.counters["resampled"]`` as "name:tests ece B" and
    "name:tests skce"."""
    r = job.req
    for nm in job.names:
        st = job.scored[nm].stats
        for b in job.all_bins:
            if job.test(nm, "ece", b) is None:
                check_cancel(job.cancel)
                key = job.test_key(nm, "ece", b)
                job.tests[key] = job.cache.put(key, corp_parts.p_ece(st.conf, st.correct, b, r.n_boot, r.seed))
                job.counters["resampled"].append(f"{nm}:tests ece {b}")
        if job.test(nm, "skce") is None:
            check_cancel(job.cancel)
            key = job.test_key(nm, "skce")
            job.tests[key] = job.cache.put(key, corp_parts.skce_test(st.conf, st.correct, r.n_boot, r.seed))
            job.counters["resampled"].append(f"{nm}:tests skce")


# --- results -------------------------------------------------------------------------------------------------------

def emit_partial(job: Job) -> None:
    """Hand ``job.on_partial`` the results so far (intervals pending), when the caller asked for them."""
    if job.on_partial is not None:
        job.on_partial(assemble(job, pending=True))


def assemble(job: Job, pending: bool) -> list[Evaluation]:
    """One :class:`Evaluation` per setting of ``job``, from the calibrators scored so far; ``pending``: a partial
    result (intervals NaN until the resample stage ran)."""
    counters = Counters(tuple(job.counters["fitted"]), tuple(job.counters["reused"]),
                        tuple(job.counters["scored"]), tuple(job.counters["resampled"]))
    out = []
    for s in job.settings:
        b = job.bins_of[s]
        req = replace(job.req, bins=s.bins, bandwidth=s.bandwidth, kernel=s.kernel)
        results = tuple(calibrator_result(job, nm, b, s, pending) for nm in job.names if nm in job.scored)
        out.append(Evaluation(request=req, run=job.run_info, n_eval=job.n,
                              n_fit=job.n_fit(), k=job.k, n_bins=b, device=str(job.device),
                              results=results, elapsed_s=time.perf_counter() - job.t0,
                              timings=MappingProxyType(dict(job.timings)), counters=counters,
                              pending=pending))
    return out


def calibrator_result(job: Job, name: str, b: int, s: Setting, pending: bool) -> CalibratorResult:
    """The result of calibrator ``name`` at bin count ``b`` and setting ``s``: point estimates (``job.point``),
    intervals at the request's level and by its method when resampled (:mod:`.estimates`), tables and
    warnings."""
    sc, fitted = job.scored[name], job.fitted[name]
    common, binned = job.point(name, ("common",)), job.point(name, ("binned", b))
    kern = job.point(name, ("kernel", s.bandwidth, s.kernel))
    skce = job.test(name, "skce") or {}
    p_ece = job.test(name, "ece", b)
    values = {**common["values"], **job.point(name, ("corp",))["values"], **binned["values"], **kern["values"],
              "auroc": sc.auroc, "p_ece": float("nan") if p_ece is None else p_ece,
              "p_skce": skce.get("p_skce", float("nan"))}
    dists = job.distributions(name, b, s) if job.req.n_boot else {}
    metrics = estimates(values, dists, sc, b, job.req.level, job.req.interval)
    key = job.dist_key(name, ("kernel", s.bandwidth, s.kernel)) + ("band", job.req.level)
    band = job.cache.get_or_build(key, lambda: curve_band(dists.get("curve"), job.req.level, s.bandwidth,
                                                          s.kernel)) \
        if "curve" in dists else None
    warnings = list(fitted.warnings) + list(sc.notes)
    if not np.isfinite(values["nll"]):
        n_zero = int((~np.isfinite(sc.stats.nll)).sum())
        warnings.append(f"NLL is infinite: {fitted.label} gives probability 0 to the true class of "
                        f"{n_zero} sample(s).")
    return CalibratorResult(
        name=name, label=fitted.label, fitted=fitted, metrics=MappingProxyType(metrics), bins=binned["table"],
        bin_acc_lo=_frozen(binned["lo"]), bin_acc_hi=_frozen(binned["hi"]), stats=common["curve_stats"],
        per_class_ece=_frozen(binned["per_class_ece"]), per_class_accuracy=_frozen(common["per_class_accuracy"]),
        per_class_count=_frozen(common["per_class_count"]), smece_sigma=common["sigma"],
        argmax_changed=sc.argmax_changed, warnings=tuple(warnings), curve_band=band,
        loss="top-label Brier" if is_toplabel(job.run_info) else "Brier",
        tests=MappingProxyType({k: v for k, v in skce.items() if k != "p_skce"}))


def _frozen(a: np.ndarray) -> np.ndarray:
    """The cached array itself, made read-only (results are immutable and share the cache's arrays)."""
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a
