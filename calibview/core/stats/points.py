"""Point estimates of the metrics, per part: ``("common",)`` (no setting), ``("corp",)`` (the bandwidth-free CORP
decomposition and refinement split, :mod:`calibview.core.stats.corp.parts`), ``("binned", B)`` (a bin count) and
``("kernel", h, kernel)`` (a bandwidth and kernel), each a function of one calibrator's per-sample vectors
(:class:`calibview.core.stats.metrics.SampleStats`) and its class-wise bin sums.

The engine caches each part per (calibrator, evaluation split, setting); slices call the same functions on a
subset of the samples, so a slice's numbers are by construction the numbers of that subset evaluated on its own.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from calibview.core.stats import smooth_ece, smoothing
from calibview.core.stats.corp import parts as corp
from calibview.core.stats.selective import selective_metrics
from calibview.core.stats.metrics import (SampleStats, binned_metrics, equal_width_table, per_class_accuracy,
                                          wilson_interval)


def compute_part(stats: SampleStats, classwise_sums: Mapping[int, np.ndarray], part: tuple, *,
                 refinement=None) -> dict:
    """``{"values": {metric: float}, ...}`` plus the part's extras (curve statistics, per-class arrays, the bin
    table with Wilson intervals). ``classwise_sums[B]`` is the (K, B) class-wise bin sums of these samples.

    Every metric but ``auroc``, which needs the class probabilities rather than these per-sample vectors: the
    engine counts it while scoring (:mod:`calibview.core.stats.auroc`; :func:`calibview.core.stats.auroc.auroc` for an
    in-memory subset). ``refinement``: the score stage's
    :class:`~calibview.core.stats.corp.refinement.RefinementResult` of these samples, or None (no logits: the
    refinement metrics are NaN)."""
    s = stats
    if part[0] == "common":
        smece, sigma = smooth_ece.smece(s.conf, s.correct)
        acc, count = per_class_accuracy(s)
        return {"values": {"accuracy": float(s.correct.mean()), "nll": float(s.nll.mean()),
                           "brier": float(s.brier.mean()),
                           "brier_top": float(((s.conf - s.correct) ** 2).mean()), "smece": float(smece),
                           **selective_metrics(s.conf, s.correct, s.conf_order)},
                "sigma": float(sigma), "curve_stats": smoothing.bin_stats(s.conf, s.correct, s.brier),
                "per_class_accuracy": acc, "per_class_count": count}
    if part[0] == "corp":
        return {"values": corp.point_values(s.conf, s.correct, s.k, float(s.nll.mean()), float(s.brier.mean()),
                                            refinement, s.conf_order)}
    if part[0] == "binned":
        b = part[1]
        values = binned_metrics(s.conf, s.correct, b, s.conf_order)
        per_class = np.abs(classwise_sums[b]).sum(axis=1) / s.n
        values["classwise_ece"] = float(per_class.mean())
        table = equal_width_table(s.conf, s.correct, b)
        lo, hi = wilson_interval(table.sum_correct, table.count)
        return {"values": values, "per_class_ece": per_class, "table": table, "lo": lo, "hi": hi}
    if part[0] == "kernel":
        cal, tot = smoothing.cal_tot(s.conf, s.correct, s.brier, part[1], part[2])
        return {"values": {"cal": cal, "tot": tot, "sharpness_gap": tot - cal}}
    raise ValueError(f"unknown metric part {part!r}")


def resample_part(boot, block, part: tuple, *, smooth: bool = True) -> dict:
    """The (R_b,) bootstrap values of one part's metrics for one block of resamples
    (:class:`calibview.core.stats.bootstrap.SampleBootstrap`, :class:`calibview.core.stats.resampling.ResampleBlock`);
    ``smooth=False`` skips the grid-based SmoothECE of the common part and the kernel part's resampled curves
    (what slices ask for, see calibview.core.evaluation.slices)."""
    if part[0] == "common":
        return boot.common(block, smooth=smooth)
    if part[0] == "binned":
        return boot.binned(block, part[1])
    if part[0] == "corp":
        return corp.resample(boot, block, boot.stats.k, boot.refinement)
    return boot.kernel(block, part[1], part[2], curve=smooth)
