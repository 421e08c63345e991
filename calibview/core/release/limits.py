"""The limits a release is held to, as plain data: the acceptance checklist's :class:`Limits` (``calibview check``,
:mod:`calibview.core.release.acceptance`) and the ECE increase that counts as drift (:data:`MAX_ECE_INCREASE`,
:mod:`calibview.core.release.drift`).

This module imports no numpy or torch, so the command line can show these defaults in ``--help`` without loading
them."""

from __future__ import annotations

from dataclasses import dataclass

from calibview.core.evaluation.defaults import MIN_SLICE

#: the increase of the ECE (a fraction, 0.02 = 2 points) over the archived value past which a release has drifted
MAX_ECE_INCREASE = 0.02


@dataclass(frozen=True)
class Limits:
    """The limits of the checklist: overall ECE, worst per-class ECE, the high-confidence gap at confidence
    ``high_conf``, whether the point estimate or the interval's upper bound is compared, and the smallest class
    slice counted."""

    max_ece: float = 0.03
    max_class_ece: float = 0.10
    max_high_conf_gap: float = 0.05
    high_conf: float = 0.95
    use_bound: str = "point"          # or "upper": compare the interval's upper bound with the limit
    min_slice: int = MIN_SLICE
