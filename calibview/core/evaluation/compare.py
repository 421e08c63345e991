"""Compare models: several runs evaluated on the same samples (one dataset's evaluation split, identical label
vectors), every metric with its paired bootstrap difference to a reference run.

Pairing: the engine's resamples of an evaluation split depend on (N, K, n_boot, seed) only
(:meth:`calibview.core.evaluation.engine.Engine.resamples`), so runs with the same N, K and label vector (the same
test set in the same order) are resampled by the same draws: resample r of run A and resample r of the reference
hold the same samples. The interval of a difference is the percentile interval of ``metric(A on r) - metric(reference on
r)`` over the resamples (:func:`calibview.core.stats.deltas.paired_difference`, as a slice against its whole split),
computed from the distributions the engine keeps for every interval (:meth:`Engine.distributions`: nothing is
resampled twice). A difference whose interval excludes 0 is *significant* (marked). Calibrator ``c`` of a run is
set against calibrator ``c`` of the reference.

Runs whose samples cannot be the same (another dataset or eval split, another N or K, another label vector) are
refused with one sentence before any work.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

import numpy as np

from calibview.core.io import discovery
from calibview.core.io import logits as lg
from calibview.core.io import schema
from calibview.core.io import shards
from calibview.core.stats.deltas import delta_columns, paired_difference, reference_columns
from calibview.core.errors import CalibviewError, report
from calibview.core.evaluation.records import metrics_rows
from calibview.core.evaluation.request import EvalRequest, check_request, default_splits
from calibview.core.evaluation.results import Evaluation
from calibview.core.evaluation.toplabel.absent import absent_between, absent_metrics, blank

REFUSAL = "paired differences need the same samples"
#: the settings every compared request must share (the resamples and what each interval means)
SHARED = ("eval_split", "n_boot", "seed", "level", "bins", "bandwidth", "kernel")


@dataclass(frozen=True)
class CompareRequest:
    """A comparison to run: the requests of the runs (one setting) and the index of the reference."""

    requests: tuple[EvalRequest, ...]
    reference: int = 0


@dataclass(frozen=True)
class Comparison:
    """The evaluations of the compared runs (in the order given) and the flat records of compare.csv (per run,
    per calibrator)."""

    evaluations: tuple[Evaluation, ...]
    reference: int                       # index of the reference run in ``evaluations``
    rows: tuple[dict, ...]

    @property
    def reference_run(self) -> str:
        """The name of the reference run."""
        return self.evaluations[self.reference].run.name

    def row(self, run: str, calibrator: str, file: Optional[str] = None) -> dict:
        """The record of ``run`` (in ``file``: runs of the same name in two files) and ``calibrator``."""
        return next(r for r in self.rows if r["run"] == run and r["calibrator"] == calibrator
                    and file in (None, r["file"]))


def read_labels(file: str, run: schema.RunInfo, split: str) -> np.ndarray:
    """The (N,) label vector of a split (of every shard of a pattern, in order): labels only, no scores."""
    files = shards.expand(file) if shards.is_pattern(file) else [file]
    parts = []
    for f in files:
        with schema.open_file(schema.abspath(f)) as h5:
            ds = h5[run.split(split).labels_path] if len(files) == 1 else \
                h5[discovery.find_run(discovery.list_runs(f), run.name).split(split).labels_path]
            out = np.empty(ds.shape[0], np.int64)
            lg.read_labels(ds, out, 0, ds.shape[0], f)
            parts.append(out)
    return np.concatenate(parts)


def check_comparable(requests: Sequence[EvalRequest]) -> list[schema.RunInfo]:
    """The runs of ``requests`` when they can be compared; else a CalibviewError of one sentence. Reads the label
    vectors only."""
    if len(requests) < 2:
        raise CalibviewError("A comparison needs at least two runs; give them as MODEL/DATASET,MODEL/DATASET.")
    for req in requests:
        check_request(req)
    first = requests[0]
    for req in requests[1:]:
        for field in SHARED:
            if getattr(req, field) != getattr(first, field):
                raise CalibviewError(f"Runs {first.run} and {req.run} are evaluated with different {field} "
                                     f"({getattr(first, field)!r}, {getattr(req, field)!r}); compared runs share "
                                     f"one setting.")
    runs = [discovery.find_run((shards if shards.is_pattern(r.file) else discovery).list_runs(r.file), r.run)
            for r in requests]
    keys = [(r.file, run.name) for r, run in zip(requests, runs)]
    if len(set(keys)) < len(keys):
        twice = next(k[1] for i, k in enumerate(keys) if k in keys[:i])
        raise CalibviewError(f"Run {twice} is given twice; compare different runs.")
    split = first.eval_split
    ref_labels = read_labels(first.file, runs[0], split)
    for req, run in zip(requests[1:], runs[1:]):
        why = refusal(runs[0], run, split)
        if why is None:
            labels = read_labels(req.file, run, split)
            differ = np.flatnonzero(labels != ref_labels)
            if differ.size:
                why = (f"Cannot compare {run.name} with {runs[0].name}: the labels of their {split} splits differ at "
                       f"{differ.size:,} of {labels.size:,} rows (first at row {int(differ[0])}), and {REFUSAL}.")
        if why is not None:
            raise CalibviewError(why)
    return runs


def refusal(ref: schema.RunInfo, run: schema.RunInfo, split: str) -> Optional[str]:
    """Why ``run`` cannot be compared with ``ref`` on eval split ``split`` from their metadata alone (dataset,
    split, N, K), as one sentence; None when the metadata allows it (the labels are checked by
    :func:`check_comparable`)."""
    pair = f"Cannot compare {run.name} with {ref.name}"
    if run.dataset != ref.dataset:
        return f"{pair}: they are on different datasets ({run.dataset or '-'}, {ref.dataset or '-'}), and {REFUSAL}."
    if split not in run.split_names:
        return f"{pair}: {run.name} has no {split} split, and {REFUSAL}."
    info, ref_info = run.split(split), ref.split(split)
    if info.n != ref_info.n:
        return f"{pair}: their {split} splits have {info.n:,} and {ref_info.n:,} samples, and {REFUSAL}."
    if info.k != ref_info.k and info.k and ref_info.k:        # K 0: unknown (a top-label run); the labels decide
        return f"{pair}: they have K = {info.k} and K = {ref_info.k} classes, and {REFUSAL}."
    return None


def compare(engine, requests: Sequence[EvalRequest], reference: int = 0, *, progress=None,
            cancel: Optional[threading.Event] = None,
            on_partial: Optional[Callable[[tuple], None]] = None) -> Comparison:
    """Evaluate every request (after :func:`check_comparable`) with ``engine`` and their paired differences to
    ``requests[reference]``. ``on_partial(evaluations)``: the runs done so far and the one being scored (its
    intervals pending), as the engine's partial results arrive."""
    requests = list(requests)
    if not 0 <= reference < len(requests):
        raise CalibviewError(f"The reference must be one of the {len(requests)} compared runs.")
    check_comparable(requests)
    evaluations, dists = [], []
    for i, req in enumerate(requests):
        lo, hi = i / len(requests), (i + 1) / len(requests)
        sub = None if progress is None else (lambda f, msg, lo=lo, hi=hi, req=req:
                                             progress(lo + (hi - lo) * f, f"{req.run}: {msg}"))
        partial = None if on_partial is None else (lambda ev: on_partial(tuple(evaluations) + (ev,)))
        evaluations.append(engine.evaluate(req, progress=sub, cancel=cancel, on_partial=partial))
        dists.append(engine.distributions(req, cancel=cancel) if req.n_boot else {})   # cached: no new work
    report(progress, 1.0, "done")
    return Comparison(evaluations=tuple(evaluations), reference=reference,
                      rows=tuple(compare_rows(evaluations, dists, reference)))


def compare_rows(evaluations: Sequence[Evaluation], distributions: Sequence[dict], reference: int = 0
                 ) -> list[dict]:
    """One record per run x calibrator: metrics.csv's row, ``run``, ``reference``, ``file`` and ``is_reference``
    (these two not in compare.csv) and the paired delta columns
    (:func:`calibview.core.stats.deltas.delta_columns`); ``distributions[i]`` is calibrator -> metric -> (n_boot,) of
    evaluation i (:meth:`Engine.distributions`). The reference's own rows have delta 0 and no interval."""
    ref = evaluations[reference]
    rows = []
    for i, ev in enumerate(evaluations):
        for row in metrics_rows([ev]):
            name = row["calibrator"]
            row["run"], row["reference"] = ev.run.name, ref.run.name
            row["file"], row["is_reference"] = ev.run.file, i == reference      # not in compare.csv
            try:
                r_ref = ref.result(name)
            except KeyError:
                r_ref = None
            if i == reference:
                row.update(reference_columns(marks=True))
                blank(row, absent_metrics(ev.run), deltas_only=True)
            else:
                level = ev.request.level
                values = {m: e.value for m, e in ev.result(name).metrics.items()}
                ref_values = {m: e.value for m, e in r_ref.metrics.items()} if r_ref is not None else {}
                row.update(delta_columns(values, ref_values, distributions[i].get(name, {}),
                                         distributions[reference].get(name, {}) if r_ref is not None else {},
                                         lambda d, r: paired_difference(d, r, level), marks=True))
                blank(row, absent_between(ev.run, ref.run), deltas_only=True)   # a difference of unlike things
            rows.append(row)
    return rows


def requests_for(base: EvalRequest, runs: Sequence[str]) -> list[EvalRequest]:
    """The request of each run (by name, in ``base``'s file): ``base`` with another run."""
    return [replace(base, run=r) for r in runs]


def requests_with(base: EvalRequest, runs: Sequence[schema.RunInfo]) -> tuple[EvalRequest, ...]:
    """``base`` (the reference) and one request per run (any open file): the same settings, each run fitted on
    ``base``'s fit split when it has one of that name, else on its own default (uncalibrated without one)."""
    out = [base]
    for run in runs:
        fit = base.fit_split if base.fit_split in run.split_names else \
            (default_splits(run, base.eval_split)[0] if base.fit_split else None)
        out.append(replace(base, file=run.file, run=run.name, fit_split=fit,
                           calibrators=base.calibrators if fit else ("none",)))
    return tuple(out)


def candidates(runs: Sequence[schema.RunInfo], ref: schema.RunInfo, split: str
               ) -> list[tuple[schema.RunInfo, Optional[str]]]:
    """Every run of ``runs`` but ``ref``, with :func:`refusal`'s reason not to compare it (None: it may be)."""
    return [(r, refusal(ref, r, split)) for r in runs if (r.file, r.name) != (ref.file, ref.name)]
