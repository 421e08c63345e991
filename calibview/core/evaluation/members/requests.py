"""The requests of a run's member rows: the ensemble (the run's prediction), the deterministic scores where a
split has them beside its members, then each member, every one evaluated like a run of its own (its calibrators
fitted on its own fit split; the ensemble's on the ensemble's probabilities)."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.members import format as mf
from calibview.core.io.schema import RunInfo


def member_requests(req: EvalRequest, run: RunInfo, selection: Optional[str] = None) -> list[EvalRequest]:
    """``req`` (the ensemble) followed by the requests of its member rows for ``selection`` ("all", "ensemble",
    "none"; None: "all" when the evaluation split has members). The deterministic row is there only when both
    the evaluation split and (with a calibrator to fit) the fit split hold scores beside their members."""
    selection = selection or "all"
    labels = mf.member_labels(run.split(req.eval_split), selection)
    fits = any(c != "none" for c in req.calibrators) and req.fit_split
    fit_info = run.split(req.fit_split) if fits else None
    out = [req]
    for label in labels[1:]:
        if label == mf.DETERMINISTIC and fit_info is not None and fit_info.kind == mf.MEMBERS:
            continue
        if fit_info is not None and not fit_info.members:
            continue              # a fit split without members has no member to fit on
        out.append(replace(req, member=label))
    return out
