"""The display unit convention (calibview.core.reports.units): one per metric, fixed precision, no misleading zeros."""

import math

from calibview.core.reports import units
from calibview.core.stats.metrics import METRIC_NAMES


def test_every_metric_has_a_unit_and_a_header():
    for m in METRIC_NAMES:
        assert m in units.UNITS, m
        assert units.header(m).startswith(units.short_name(m))


def test_headers_state_the_unit():
    assert units.header("ece") == "ECE %"
    assert units.header("cal") == "CAL ×100"
    assert units.header("tot") == "TOT ×100"
    assert units.header("nll") == "NLL"


def test_precision_is_fixed_per_metric_whatever_the_other_values():
    # the same number reads the same whether or not a calibrator with tiny or huge values sits next to it
    assert units.fmt("ece", 0.07878) == "7.88"
    assert units.fmt("cal", 0.00111) == "0.11"
    assert units.fmt("tot", 0.0879) == "8.79"
    assert units.fmt("nll", 0.91234) == "0.912"
    assert units.fmt("ece", 0.4) == "40.00"


def test_intervals_have_their_estimates_precision():
    assert units.fmt_interval("ece", 0.07481, 0.08551) == "[7.48, 8.55]"
    assert units.fmt_interval("ece", 0.07481, 0.08551, sep="–", brackets=False) == "7.48–8.55"
    assert units.fmt_interval("ece", float("nan"), 0.1) == ""
    assert units.fmt_estimate("cal", 0.00111, 0.0009, 0.0013) == "0.11 [0.09, 0.13]"


def test_no_misleading_zero():
    assert units.fmt("debiased_ece", 0.0) == "≈0"
    assert units.fmt("debiased_ece", 1e-6) == "<0.01"
    assert units.fmt("sharpness_gap", -1e-6) == ">-0.01"
    assert "0.0" not in units.fmt("debiased_ece", 0.0)


def test_non_finite():
    assert units.fmt("nll", math.inf) == "∞"
    assert units.fmt("ece", math.nan) == "—"
    assert units.fmt("ece", None) == "—"


def test_captions_name_the_unit():
    assert units.caption("ece", 0.07878) == "ECE 7.88 %"
    assert units.caption("cal", 0.00111) == "CAL×100 0.11"
    assert units.caption("nll", 0.5) == "NLL 0.500"
    assert units.caption("ece", 0.07878, 0.07481, 0.08551) == "ECE 7.88 % [7.48, 8.55]"


def test_a_p_value_at_its_resolution_floor_reads_as_a_bound():
    # (1 + 0) / (999 + 1) over 999 redraws: below the resolution, not an estimate of 0.001
    assert units.fmt("p_ece", 1 / 1000, n_boot=999) == "<1/1000"
    assert units.fmt("p_skce", 1 / 201, n_boot=200) == "<1/201"
    assert units.fmt("p_ece", 2 / 1000, n_boot=999) == "0.002"          # one redraw reached it: a number
    assert units.fmt("p_ece", 1 / 1000) == "0.001"                      # resamples unknown: the plain number
    assert units.fmt("ece", 1 / 1000, n_boot=999) == "0.10"             # only p-values have a floor
    assert units.fmt_estimate("p_ece", 1 / 31, n_boot=30) == "<1/31"
