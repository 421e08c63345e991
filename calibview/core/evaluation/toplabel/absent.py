"""What a top-label run lacks: the metrics that need every class probability, absent from its records (null in
JSON, an empty cell in CSV), and the calibrators that need logits, left out with a note. Imports no torch, so the
command line can sort a request's calibrators before any work."""

from __future__ import annotations

from typing import Iterable

from calibview.core.io.toplabel.format import is_toplabel

#: the metrics computed from the whole probability vector: NLL, the full Brier score, class-wise ECE and the
#: macro one-vs-rest AUROC
FULL_VECTOR_METRICS = ("nll", "brier", "classwise_ece", "auroc")
#: the metrics that rescale the logits (a temperature fitted on the evaluation split): none without them
LOGIT_METRICS = ("nll_refinement", "nll_calibration", "brier_refinement", "brier_calibration")
#: the metrics of binary runs only (K = 2): the CORP decomposition of the log score, which is the NLL there
BINARY_METRICS = ("corp_mcb_log", "corp_dsc_log", "corp_unc_log")
#: what the window shows for them
ABSENT_TEXT = "n/a (top-label run)"
#: and for the binary-only metrics of a run with more classes
BINARY_TEXT = "n/a (K > 2)"
#: the calibrators a top-label run takes (calibview.core.calibrators.toplabel.USABLE, kept equal by a test)
USABLE_CALIBRATORS = ("none", "hb", "ir", "platt", "beta")
#: why the others cannot run on it
DISABLED_REASON = ("it needs logits or the probabilities of every class, and a top-label run stores only the "
                   "confidence of the predicted class")


def absent_metrics(run) -> frozenset:
    """The metric names whose values ``run`` (a RunInfo) cannot have: :data:`FULL_VECTOR_METRICS` and
    :data:`LOGIT_METRICS` for a top-label run, :data:`BINARY_METRICS` unless it has K = 2 classes."""
    out = frozenset(FULL_VECTOR_METRICS + LOGIT_METRICS) if is_toplabel(run) else frozenset()
    return out if int(getattr(run, "k", 0) or 0) == 2 else out | frozenset(BINARY_METRICS)


def usable_calibrators(run, names: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the calibrators of ``names`` that ``run`` can take, those it cannot), each in the given order; every name
    is usable on a run that is not top-label."""
    names = tuple(names)
    if not is_toplabel(run):
        return names, ()
    return (tuple(n for n in names if n in USABLE_CALIBRATORS), tuple(n for n in names if n not in USABLE_CALIBRATORS))


def skipped_note(run, skipped: Iterable[str]) -> str:
    """The one line said on stderr when calibrators are left out of a top-label run."""
    skipped = tuple(skipped)
    return (f"note: run {run.name} is a top-label run: skipping {', '.join(skipped)} ({DISABLED_REASON}); "
            f"hb, ir, platt and beta calibrate its confidence.")


#: the metrics a top-label run computes from the top-label Brier term (c - correct)^2 where a full run uses the
#: full Brier score: comparable within a form, not between a top-label run and a full one
FORM_DEPENDENT_METRICS = ("tot", "sharpness_gap")
#: why a top-label run has no conformal sets (and no other per-class probability)
NO_CONFORMAL_REASON = ("conformal prediction sets need every class's probability, and a top-label run stores only "
                       "the confidence of the predicted class")


def blank(row: dict, metrics: Iterable[str], *, deltas_only: bool = False) -> dict:
    """``row`` with every column of each of ``metrics`` that it holds set to None: the value, ``_lo``, ``_hi``
    (kept with ``deltas_only``), ``delta_<metric>`` with its ``_lo``/``_hi``, and ``significant_<metric>`` (null
    in JSON, empty in CSV)."""
    for m in metrics:
        own = () if deltas_only else (m, f"{m}_lo", f"{m}_hi")
        for key in own + (f"delta_{m}", f"delta_{m}_lo", f"delta_{m}_hi", f"significant_{m}"):
            if key in row:
                row[key] = None
    return row


def absent_between(run, other) -> frozenset:
    """The metrics whose difference between ``run`` and ``other`` (RunInfos compared on the same samples) means
    nothing: what either lacks, and, when one is top-label and the other not, :data:`FORM_DEPENDENT_METRICS`."""
    out = absent_metrics(run) | absent_metrics(other)
    if is_toplabel(run) != is_toplabel(other):
        out |= frozenset(FORM_DEPENDENT_METRICS)
    return out


def class_count(k: int, *seen: int) -> int:
    """K of a run: its own ``k``, or for a top-label run that does not say (``k`` 0) the most classes any of its
    scored splits or released configs show (``seen``: each a count 0 .. largest class index + 1)."""
    return int(k) or max((int(s) for s in seen), default=0)
