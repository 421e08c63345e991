"""The positive-class diagram of a binary run: P(y = 1) against the predicted probability of class 1 over [0, 1];
and its one-vs-rest generalisation to any class c of a run (:func:`class_diagram`): P(y = c) against p_c.

The top-label diagram of a binary run lives on [0.5, 1] and folds both classes together; this one keeps them
apart (an over-confident positive class and an under-confident negative class do not cancel). Same kernel
machinery (``smoothing.bin_stats``): the "confidence" is p(y = 1), the "correct" indicator is 1[y = 1], and the
loss is the full-vector Brier score, which for two classes is 2 (p1 - y)^2 whichever class is called positive.
Pure numpy (no Qt).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from calibview.core.stats import smoothing

__all__ = ["PositiveClass", "binary_forecast", "positive_class", "class_diagram"]


@dataclass(frozen=True)
class PositiveClass:
    """Drawable like a ``CalibratorResult`` (name, label, metrics, stats) by gui.figure; ``legend_text``, when
    set, is the legend's numbers in place of the metrics' ECE."""

    name: str
    label: str
    stats: smoothing.BinnedStats
    metrics: Mapping = field(default_factory=dict)
    legend_text: str = ""


def binary_forecast(sample_stats, cls: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """((N,), (N,)) float64: the predicted probability of class ``cls`` (0 or 1) of a binary run, in [0, 1], and
    the 0/1 outcome 1[y = cls], from its top-label per-sample vectors (``conf``, ``pred``, ``labels`` of a
    core.stats.metrics.SampleStats). With two classes p_cls is the confidence where the arg-max is ``cls`` and
    its complement elsewhere, so no class probabilities need to be kept."""
    conf = np.asarray(sample_stats.conf, dtype=np.float64)
    p = np.where(np.asarray(sample_stats.pred) == cls, conf, 1.0 - conf)
    return np.clip(p, 0.0, 1.0), (np.asarray(sample_stats.labels) == cls).astype(np.float64)


def positive_class(name: str, label: str, sample_stats, metrics: Mapping = None) -> PositiveClass:
    """From a calibrator's per-sample vectors on a binary evaluation split (``Engine.scored(...)[name].stats``)."""
    if int(sample_stats.k) != 2:
        raise ValueError(f"the positive-class diagram needs a binary run, this one has K = {sample_stats.k}")
    p1, y1 = binary_forecast(sample_stats, 1)
    stats = smoothing.bin_stats(p1, y1, np.asarray(sample_stats.brier, dtype=np.float64))
    return PositiveClass(name=name, label=label, stats=stats, metrics=dict(metrics or {}))


def class_diagram(name: str, label: str, forecast: np.ndarray, outcome: np.ndarray,
                  metrics: Mapping = None) -> PositiveClass:
    """The one-vs-rest diagram of one class: (N,) forecasts p_c in [0, 1] against (N,) 0/1 outcomes 1[y = c],
    the loss the Brier score of the two-class problem c against the rest, 2 (p_c - 1[y = c])^2 per sample (for
    class 1 of a binary run: the positive-class diagram's, whose loss is the full-vector Brier score)."""
    f = np.clip(np.asarray(forecast, dtype=np.float64), 0.0, 1.0)
    a = np.asarray(outcome, dtype=np.float64)
    return PositiveClass(name=name, label=label, stats=smoothing.bin_stats(f, a, 2.0 * (f - a) ** 2),
                         metrics=dict(metrics or {}))
