"""What the Slices tab and the canvas's per-slice overlay show, built on the worker thread (Qt-free).

The rows are :func:`calibview.core.evaluation.slices.evaluate_slices`' records; the overlay needs each slice's
binned statistics per calibrator, from which the canvas redraws the slice's kernel curve at any bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from calibview.core.evaluation.request import EvalRequest
from calibview.core.evaluation.slices import evaluate_slices
from calibview.core.stats import smoothing


@dataclass(frozen=True)
class SliceResult:
    """The slices of one request's evaluation split by one column (or "class")."""

    evaluation: object              # core.evaluation.slices.SliceEvaluation: the rows of the Slices tab
    curves: Mapping[str, tuple]     # calibrator -> ((slice name, n, smoothing.BinnedStats), ...), empty slices left out
    labels: Mapping[str, str]       # calibrator -> label


def slice_result(engine, request: EvalRequest, by: str, cancel) -> SliceResult:
    """The slices of ``request``'s evaluation split by column ``by`` (or "class"), with ``engine``'s cached scores
    and fits (a cache hit after the evaluation); ``cancel`` (a threading.Event) is checked between steps."""
    ev = evaluate_slices(engine, request, by, cancel=cancel)
    scored = engine.scored(request, cancel=cancel)
    fitted = engine.fitted(request, cancel=cancel)
    curves = {}
    for name, sc in scored.items():
        st = sc.stats
        curves[name] = tuple((s.name, s.n, smoothing.bin_stats(st.conf[s.rows], st.correct[s.rows],
                                                                st.brier[s.rows])) for s in ev.slices if s.n)
    return SliceResult(ev, MappingProxyType(curves), MappingProxyType({n: f.label for n, f in fitted.items()}))
