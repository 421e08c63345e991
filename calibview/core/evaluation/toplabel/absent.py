"""What a top-label run lacks: the metrics that need every class probability, absent from its records (null in
JSON, an empty cell in CSV), and the calibrators that need logits, left out with a note. Imports no torch, so the
command line can sort a request's calibrators before any work."""

from __future__ import annotations

from typing import Iterable

from calibview.core.io.toplabel.format import is_toplabel

#: the metrics computed from the whole probability vector: NLL, the full Brier score, class-wise ECE and the
#: macro one-vs-rest AUROC
FULL_VECTOR_METRICS = ("nll", "brier", "classwise_ece", "auroc")
#: what the window shows for them
ABSENT_TEXT = "n/a (top-label run)"
#: the calibrators a top-label run takes (calibview.core.calibrators.toplabel.USABLE, kept equal by a test)
USABLE_CALIBRATORS = ("none", "hb", "ir", "platt", "beta")
#: why the others cannot run on it
DISABLED_REASON = ("it needs logits or the probabilities of every class, and a top-label run stores only the "
                   "confidence of the predicted class")


def absent_metrics(run) -> frozenset:
    """The metric names whose values ``run`` (a RunInfo) cannot have: :data:`FULL_VECTOR_METRICS` for a top-label
    run, none otherwise."""
    return frozenset(FULL_VECTOR_METRICS) if is_toplabel(run) else frozenset()


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
