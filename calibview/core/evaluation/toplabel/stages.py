"""The fit and score stages of a top-label run, with the interface of :mod:`calibview.core.evaluation.stages`
(whose resample stage and assembly they reuse unchanged):

```
fit_stage(job)     fit split (confidence, predictions, labels) -> job.fitted[name]: a binary fit on
                   ([log(1 - c), log c], 1[prediction = label])           (calibview.core.calibrators.toplabel)
score_stage(job)   eval split                                  -> job.scored[name]: Scored whose SampleStats hold
                   the calibrated confidence, the prediction, the correctness and, as the loss, the top-label
                   Brier term (c - correct)^2
```

The later stages read only those vectors, so every top-label metric (accuracy, top-label Brier, the binned
errors, SmoothECE, the selective metrics, CAL, TOT and the sharpness gap, now on the top-label Brier) and its
interval come out as for a full run with the same confidences. What needs every class probability has nothing to
be computed from: NLL is NaN in the vectors, the class-wise sums are NaN, the AUROC is NaN, and
:func:`assemble` drops the warning NaN would raise; the records leave those metrics empty
(:mod:`calibview.core.evaluation.toplabel.absent`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from types import MappingProxyType

import numpy as np
import torch

from calibview.core import calibrators as calib
from calibview.core.calibrators import toplabel as tc
from calibview.core.errors import CalibviewError, check_cancel, report
from calibview.core.io.toplabel.read import read_toplabel
from calibview.core.stats.metrics import SampleStats
from calibview.core.evaluation import stages
from calibview.core.evaluation.job import Job
from calibview.core.evaluation.results import Evaluation, Scored
from calibview.core.evaluation.toplabel.absent import usable_calibrators

resample_stage = stages.resample_stage


def check_names(job: Job) -> None:
    """CalibviewError naming the first calibrator of the request that a top-label run cannot take."""
    _, bad = usable_calibrators(job.run_info, job.names)
    for name in bad:
        if name not in job.given:
            raise CalibviewError(f"Run {job.run_info.name} is a top-label run, so {calib.get(name).label} ({name}) "
                                 f"cannot run on it: {tc.disabled_reason(name)}; use hb, ir, platt or beta.")


def _read(job: Job, split: str, span: tuple[float, float]):
    report(job.progress, span[0], f"reading {split}")
    return read_toplabel(job.req.file, job.run_info, split, chunk_rows=job.req.chunk_rows,
                         progress=job.sub_progress(*span), cancel=job.cancel)


def fit_stage(job: Job) -> None:
    """Fill ``job.fitted`` as :func:`calibview.core.evaluation.stages.fit_stage` does, fitting each calibrator on
    the binary problem of the fit split (:mod:`calibview.core.calibrators.toplabel`)."""
    check_names(job)
    todo = []
    for name in job.names:
        hit = job.cache.get(job.fit_key(name))
        if name in job.given and name != "none":
            job.fitted[name] = job.given[name]
        elif name == "none":
            job.fitted[name] = hit or job.cache.put(job.fit_key(name), calib.Fitted(method="none", k=2, params={}))
        elif hit is not None:
            job.fitted[name] = hit
            job.counters["reused"].append(name)
        else:
            todo.append(name)
    if not todo:
        return
    t1 = time.perf_counter()
    data = _read(job, job.req.fit_split, (0.0, 0.05))
    with torch.inference_mode():
        scores = tc.binary_scores(torch.from_numpy(np.array(data.confidence)))
        y = tc.correctness(torch.from_numpy(np.array(data.predictions)), torch.from_numpy(np.array(data.labels)))
        for i, name in enumerate(todo):
            check_cancel(job.cancel)
            lo, hi = 0.05 + 0.25 * i / len(todo), 0.05 + 0.25 * (i + 1) / len(todo)
            report(job.progress, lo, f"fitting {calib.get(name).label} ({i + 1} of {len(todo)})")
            t2 = time.perf_counter()
            fitted = calib.fit(name, scores, y, options=job.req.options_for(name),
                               progress=job.sub_progress(lo, hi), cancel=job.cancel,
                               fit_info={"file": str(job.req.file), "run": job.run_info.name,
                                         "split": job.req.fit_split, "n": int(data.info.n), "form": tc.FORM})
            fitted = tc.top_label_warnings(fitted, data.confidence)
            job.timings[f"fit:{name}"] = time.perf_counter() - t2
            job.fitted[name] = job.cache.put(job.fit_key(name), fitted)
            job.counters["fitted"].append(name)
    job.timings["fit"] = time.perf_counter() - t1


def score_stage(job: Job) -> None:
    """Fill ``job.scored`` (needs ``job.fitted``): each calibrator from the cache when it holds every bin count,
    else scored on the evaluation split (read once); a partial result after each."""
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
    t1 = time.perf_counter()
    data = _read(job, job.req.eval_split, (0.3, 0.35))
    pred, labels = np.array(data.predictions), np.array(data.labels)
    correct = (pred == labels).astype(np.float64)
    k = job.k or int(max(pred.max(), labels.max())) + 1      # K unknown: the classes seen
    conf0 = torch.from_numpy(np.array(data.confidence))
    for i, (name, old) in enumerate(todo):
        check_cancel(job.cancel)
        report(job.progress, 0.35 + 0.25 * i / len(todo), f"scoring {calib.get(name).label}")
        with torch.inference_mode():
            conf = tc.calibrated_confidence(job.fitted[name], conf0).cpu().numpy().astype(np.float64, copy=True)
        bins = tuple(sorted(set(job.all_bins) | set(old)))
        sums = {b: np.full((k, b), np.nan) for b in bins}
        stats = SampleStats(conf=conf, pred=pred, correct=correct, nll=np.full(conf.shape[0], np.nan),
                            brier=(conf - correct) ** 2, labels=labels, k=k, classwise_sums=sums[bins[0]],
                            classwise_bins=bins[0])
        scored = Scored(stats=stats, bins=bins, classwise_sums=MappingProxyType(sums),
                        classwise_dist=MappingProxyType({b: None for b in bins}), argmax_changed=0.0)
        job.scored[name] = job.cache.put(job.score_key(name), scored)
        job.counters["scored"].append((name, job.req.eval_split))
        emit_partial(job)
    job.timings["score"] = time.perf_counter() - t1


def emit_partial(job: Job) -> None:
    """Hand ``job.on_partial`` the results so far (intervals pending), when the caller asked for them."""
    if job.on_partial is not None:
        job.on_partial(assemble(job, pending=True))


def assemble(job: Job, pending: bool) -> list[Evaluation]:
    """:func:`calibview.core.evaluation.stages.assemble`, less the warning about an infinite NLL (a top-label run
    has no NLL; its records leave it empty)."""
    out = []
    for ev in stages.assemble(job, pending):
        results = tuple(replace(r, warnings=tuple(w for w in r.warnings if not w.startswith("NLL is infinite")))
                        for r in ev.results)
        out.append(replace(ev, results=results))
    return out


def run(job: Job) -> list[Evaluation]:
    """Every stage in turn, as :func:`calibview.core.evaluation.stages.run`: one Evaluation per setting."""
    from calibview.core.evaluation import cost

    if job.req.n_boot:
        cost.check_bootstrap(cost.bootstrap_cost(job.n, job.k, job.req.n_boot, len(job.names)),
                             cost.budget(job.req.max_memory), job.req.n_boot)
    fit_stage(job)
    score_stage(job)
    if job.req.n_boot:
        resample_stage(job)
    report(job.progress, 1.0, "done")
    return assemble(job, pending=False)
