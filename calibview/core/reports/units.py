"""The one unit convention for every number a person reads: table, legend, hover, panel titles, HTML report.

Each metric has a display unit and a fixed precision, independent of the data shown next to it (adding MRR to a
table must not change how ECE reads):

- ``%``: accuracies, coverages and the ECE family (ECE, RMSCE, MCE, ACE, CW-ECE, dECE, smECE): value × 100;
- ``×100``: squared-error scores and risk areas (Brier, Brier (top), CAL, TOT, sharpness gap, AURC, E-AURC):
  value × 100, stated in the header as "CAL ×100" so it is never mistaken for a percentage;
- plain: NLL (nats) and AUROC (0 to 1).

Every unit shows a fixed number of decimals (2 for ``%`` and ``×100``, 3 for plain), which gives three significant
digits at these metrics' usual magnitudes; an interval is shown with its estimate's decimals. A non-zero value
below the last decimal reads "<0.01", never "0.00"; an estimate clipped at 0 (the debiased ECE) reads "≈0".

CSV and JSON are untouched by this module: they keep plain fractions at full precision and their column names.
Pure Python (no Qt): the GUI and the HTML report share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

__all__ = ["Unit", "UNITS", "unit", "short_name", "header", "fmt", "fmt_interval", "fmt_estimate", "caption",
           "describe"]


@dataclass(frozen=True)
class Unit:
    """How a metric is displayed: multiplied by ``scale``, with ``suffix`` and ``decimals`` digits."""

    scale: float          # displayed = value * scale
    suffix: str           # "%", "×100" or ""
    decimals: int


PERCENT = Unit(100.0, "%", 2)
TIMES100 = Unit(100.0, "×100", 2)
PLAIN = Unit(1.0, "", 3)

_SHORT = {
    "accuracy": "Acc", "nll": "NLL", "brier": "Brier", "brier_top": "Brier (top)", "ece": "ECE", "rmsce": "RMSCE",
    "mce": "MCE", "ace": "ACE", "classwise_ece": "CW-ECE", "debiased_ece": "dECE", "smece": "smECE", "cal": "CAL",
    "tot": "TOT", "sharpness_gap": "Sharp. gap", "aurc": "AURC", "e_aurc": "E-AURC", "acc_at_cov80": "Acc@80",
    "acc_at_cov90": "Acc@90", "acc_at_cov95": "Acc@95", "cov_at_acc95": "Cov@95", "cov_at_acc99": "Cov@99",
    "auroc": "AUROC", "auroc_correct": "AUROC (correct)",
    "corp_mcb": "MCB", "corp_dsc": "DSC", "corp_unc": "UNC", "corp_mcb_log": "MCB (log)", "corp_dsc_log": "DSC (log)",
    "corp_unc_log": "UNC (log)", "p_ece": "p (ECE)", "p_skce": "p (SKCE)", "nll_refinement": "NLL refinement",
    "nll_calibration": "NLL calibration", "brier_refinement": "Brier refinement",
    "brier_calibration": "Brier calibration",
}
UNITS: dict[str, Unit] = {m: PERCENT for m in (
    "accuracy", "ece", "rmsce", "mce", "ace", "classwise_ece", "debiased_ece", "smece",
    "acc_at_cov80", "acc_at_cov90", "acc_at_cov95", "cov_at_acc95", "cov_at_acc99")}
UNITS.update({m: TIMES100 for m in ("brier", "brier_top", "cal", "tot", "sharpness_gap", "aurc", "e_aurc")})
UNITS.update({m: PLAIN for m in ("nll", "auroc", "auroc_correct")})
UNITS.update({m: TIMES100 for m in ("corp_mcb", "corp_dsc", "corp_unc", "brier_refinement", "brier_calibration")})
UNITS.update({m: PLAIN for m in ("corp_mcb_log", "corp_dsc_log", "corp_unc_log", "p_ece", "p_skce",
                                 "nll_refinement", "nll_calibration")})
#: Quantities of the other views that are not metrics: the decisions table's coverage and mean confidence.
UNITS.update({"coverage": PERCENT, "confidence": PERCENT})
_SHORT.update({"coverage": "Coverage", "confidence": "Mean conf."})
#: Estimators clipped at 0: an exact 0 means "not distinguishable from 0", shown as "≈0".
CLIPPED_AT_ZERO = frozenset({"debiased_ece"})
#: Monte-Carlo p-values, (1 + #{T* >= T}) / (n + 1) over n resamples: their smallest value is 1 / (n + 1), which
#: says "below the resolution", so it is shown as "<1/1001" rather than as a number that reads as an estimate.
P_VALUES = frozenset({"p_ece", "p_skce"})


def unit(metric: str) -> Unit:
    """The display unit of ``metric`` (plain for a name it does not know)."""
    return UNITS.get(metric, PLAIN)


def short_name(metric: str) -> str:
    """"ECE", "CAL", "Acc@80": the name without its unit."""
    return _SHORT.get(metric, metric)


def header(metric: str) -> str:
    """The column header with its unit: "ECE %", "CAL ×100", "NLL"."""
    u = unit(metric)
    return f"{short_name(metric)} {u.suffix}" if u.suffix else short_name(metric)


def fmt(metric: str, value: Optional[float], n_boot: Optional[int] = None) -> str:
    """The displayed number of ``metric`` (a plain fraction in), without its unit: "7.88", "<0.01", "∞", "—".
    ``n_boot``: the resamples behind a p-value (:data:`P_VALUES`); at its floor 1 / (n_boot + 1) it reads
    "<1/1001"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    value = float(value)
    if metric in P_VALUES and n_boot and math.isclose(value, 1.0 / (n_boot + 1), rel_tol=1e-9):
        return f"<1/{n_boot + 1}"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    u = unit(metric)
    if value == 0.0:
        return "≈0" if metric in CLIPPED_AT_ZERO else f"{0:.{u.decimals}f}"
    x = value * u.scale
    step = 10.0 ** -u.decimals
    if abs(x) < step / 2:            # would round to 0.00: say it is small, not zero
        return f"<{step:.{u.decimals}f}" if x > 0 else f">-{step:.{u.decimals}f}"
    return f"{x:.{u.decimals}f}"


def fmt_interval(metric: str, lo: Optional[float], hi: Optional[float], sep: str = ", ",
                 brackets: bool = True) -> str:
    """The interval with its estimate's precision: "[7.48, 8.55]" (``sep="–", brackets=False``: "7.48–8.55");
    "" when either end is missing."""
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return ""
    text = f"{fmt(metric, lo)}{sep}{fmt(metric, hi)}"
    return f"[{text}]" if brackets else text


def fmt_estimate(metric: str, value, lo=None, hi=None, n_boot: Optional[int] = None) -> str:
    """"7.88 [7.48, 8.55]", or the value alone without an interval (``n_boot``: as for :func:`fmt`)."""
    iv = fmt_interval(metric, lo, hi)
    return f"{fmt(metric, value, n_boot)} {iv}" if iv else fmt(metric, value, n_boot)


def caption(metric: str, value, lo=None, hi=None, n_boot: Optional[int] = None) -> str:
    """The number with its name and unit, for legends, hover text and panel titles: "ECE 7.88 %",
    "CAL×100 0.11", "NLL 0.912", "ECE 7.88 % [7.48, 8.55]" (``n_boot``: as for :func:`fmt`)."""
    u = unit(metric)
    iv = fmt_interval(metric, lo, hi)
    iv = f" {iv}" if iv else ""
    if u.suffix == "%":
        return f"{short_name(metric)} {fmt(metric, value, n_boot)} %{iv}"
    if u.suffix:
        return f"{short_name(metric)}{u.suffix} {fmt(metric, value, n_boot)}{iv}"
    return f"{short_name(metric)} {fmt(metric, value, n_boot)}{iv}"


def describe(metric: str) -> str:
    """One sentence on how ``metric`` is shown, for tooltips."""
    u = unit(metric)
    base = {"%": "Shown in percent (value × 100)", "×100": "Shown × 100 (not a percentage)",
            "": "In nats" if metric == "nll" else "Shown as is"}[u.suffix]
    extra = "; ≈0 means the estimate was clipped at 0" if metric in CLIPPED_AT_ZERO else ""
    return f"{base}, {u.decimals} decimals{extra}; the CSV and JSON hold plain fractions."
