"""The limits a release is held to, as plain data: the acceptance checklist's :class:`Limits` (``calibview check``,
:mod:`calibview.core.release.acceptance`) and the ECE increase that counts as drift (:data:`MAX_ECE_INCREASE`,
:mod:`calibview.core.release.drift`).

This module imports no numpy or torch, so the command line can show these defaults in ``--help`` without loading
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from calibview.core.evaluation.defaults import MIN_SLICE

#: what ``--decide-on`` accepts: the whole interval against the limit (three outcomes) or the point estimate
DECIDE_ON = ("interval", "point")

#: the increase of the ECE (a fraction, 0.02 = 2 points) over the archived value past which a release has drifted
MAX_ECE_INCREASE = 0.02


@dataclass(frozen=True)
class Limits:
    """The limits of the checklist: overall ECE, worst per-class ECE, the high-confidence gap at confidence
    ``high_conf``, what a statistical criterion is decided on, and the smallest class slice counted.

    ``decide_on="interval"`` (the default): a criterion passes when its whole interval is within the limit, fails
    when the whole interval is beyond it, and is inconclusive otherwise; ``"point"`` compares the point estimate
    (pass or fail). ``use_bound="upper"`` compares the interval's upper bound alone (pass or fail), whatever
    ``decide_on`` says; :attr:`rule` is the rule that applies.

    ``min_p_ece`` / ``min_p_skce`` (None: not checked): the release fails when the calibration test's p-value
    (``p_ece``, ``p_skce``) is below the limit, the test rejecting calibration at that level. A p-value has no
    interval, so these pass or fail, never inconclusive; without resamples (``n_boot`` 0) there is no p-value and
    they fail, saying so."""

    max_ece: float = 0.03
    max_class_ece: float = 0.10
    max_high_conf_gap: float = 0.05
    high_conf: float = 0.95
    use_bound: str = "point"          # or "upper": compare the interval's upper bound with the limit
    min_slice: int = MIN_SLICE
    decide_on: str = "interval"       # or "point": compare the point estimate, as before intervals decided
    min_p_ece: Optional[float] = None
    min_p_skce: Optional[float] = None

    @property
    def rule(self) -> str:
        """The rule a statistical criterion is decided by: ``"interval"``, ``"point"`` or ``"upper"``."""
        return "upper" if self.use_bound == "upper" else self.decide_on
