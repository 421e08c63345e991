"""The three outcomes of a criterion (pass, fail, inconclusive) decided by its interval, against hand-worked cases,
and how the release report shows them."""

import re

import numpy as np
import pytest

from _verdict_data import N_DEPLOY, RUN, write_small
from calibview.core.release.acceptance import Criterion, _worst_class, decide, outcome_of, summary, verdict
from calibview.core.release.build import build_release
from calibview.core.release.limits import Limits
from calibview.core.evaluation.engine import Engine
from calibview.core.reports.html import render

NAN = float("nan")


@pytest.mark.parametrize("value, lo, hi, rule, expected", [
    (0.02, 0.01, 0.025, "interval", ("pass", "interval")),          # whole interval within
    (0.02, 0.01, 0.03, "interval", ("pass", "interval")),           # the upper end on the limit is within
    (0.04, 0.031, 0.05, "interval", ("fail", "interval")),          # whole interval beyond
    (0.04, 0.03, 0.05, "interval", ("inconclusive", "interval")),   # the lower end on the limit is not beyond
    (0.028, 0.024, 0.062, "interval", ("inconclusive", "interval")),
    (0.029, 0.031, 0.05, "interval", ("inconclusive", "interval")),  # an interval that excludes its estimate
    (0.031, 0.01, 0.029, "interval", ("inconclusive", "interval")),  # ... on either side
    (0.02, NAN, NAN, "interval", ("pass", "point")),                # no interval: the point decides
    (0.04, None, None, "interval", ("fail", "point")),
    (0.028, 0.024, 0.062, "point", ("pass", "point")),
    (0.028, 0.024, 0.062, "upper", ("fail", "upper")),
    (0.028, NAN, NAN, "upper", ("pass", "point")),
    (NAN, 0.01, 0.02, "interval", ("fail", "point")),               # no value: fails, as before
])
def test_decide_by_hand(value, lo, hi, rule, expected):
    assert decide(value, lo, hi, 0.03, rule) == expected


def _slice(name, ece, lo, hi, n=100, below=False):
    return {"slice": name, "n": n, "ece": ece, "ece_lo": lo, "ece_hi": hi, "below_min": below}


def test_worst_class_shows_the_class_with_the_worst_outcome():
    slices = [_slice("a", 0.09, 0.05, 0.15), _slice("b", 0.08, 0.02, 0.09), _slice("c", 0.095, 0.06, 0.13),
              _slice("tiny", 0.5, NAN, NAN, n=5, below=True)]
    row = _worst_class(slices, Limits(), "interval", "no interval")
    assert (row.outcome, row.value, row.decided_on) == ("inconclusive", 0.095, "interval")
    assert "class c" in row.criterion and "2 of 3 classes inconclusive" in row.note and "1 class(es) below" in row.note
    row = _worst_class(slices, Limits(decide_on="point"), "point", "no interval")
    assert (row.outcome, row.value) == ("pass", 0.095)   # as before: the largest point estimate, under 0.10
    row = _worst_class(slices, Limits(use_bound="upper"), "upper", "no interval")
    assert (row.outcome, row.value) == ("fail", 0.09)    # as before: the largest upper bound (0.15)
    slices.append(_slice("d", 0.104, 0.101, 0.11))         # whole interval beyond 0.10: the class fails
    row = _worst_class(slices, Limits(), "interval", "no interval")
    assert (row.outcome, row.value) == ("fail", 0.104) and "class d" in row.criterion
    assert "1 of 4 classes fail, 2 of 4 classes inconclusive" in row.note
    row = _worst_class([_slice("a", 0.05, NAN, NAN)], Limits(), "interval", "n_boot 0")
    assert (row.outcome, row.decided_on) == ("pass", "point") and row.note == "n_boot 0: decided on the point estimate"


def test_outcome_summary_and_bool_outcomes():
    rows = [Criterion("x", 0.1, 0.0, 0.2, 0.15, "inconclusive"), Criterion("y", "match", None, None, "match", True)]
    assert rows[1].outcome == "pass" and rows[0].passed is False
    assert outcome_of(rows) == "inconclusive" and outcome_of(rows[1:]) == "pass"
    assert summary(rows, 300).startswith("INCONCLUSIVE: 1 of 2 criteria inconclusive (N=300 too small to decide")
    rows.append(Criterion("z", "other", None, None, "match", False))
    assert outcome_of(rows) == "fail"
    assert summary(rows, 300).startswith("FAIL: 1 of 3 criteria fail: z. 1 of 3 criteria inconclusive")
    with pytest.raises(ValueError):
        Criterion("w", 1.0, None, None, 1.0, "maybe")


def test_verdict_shows_the_interval_and_the_readings_it_spans():
    assert verdict(0.0284, 0.0238, 0.0617).startswith(
        "ECE 2.84% [2.38%, 6.17%]: acceptable, its interval from acceptable to watch (")
    assert verdict(0.03, 0.02, 0.04).startswith("ECE 3.00% [2.00%, 4.00%]: acceptable (")
    assert verdict(0.03).startswith("ECE 3.00%: acceptable (") and verdict(0.03, NAN, NAN) == verdict(0.03)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_small(tmp_path_factory.mktemp("small") / "small.h5")


def _banner(html):
    return re.search(r'<div class="verdict ([a-z]+)">(.*?)</div>', html, re.S)


def test_report_banner_is_amber_when_n_is_too_small_to_decide(small):
    r = build_release(Engine(), small, RUN, "ts", "val", "deploy", n_boot=200, device="cpu")
    assert r.decide_on == "interval" and outcome_of(r.checklist) == "inconclusive"
    html = render(r, None)
    m = _banner(html)
    assert m.group(1) == "unsure"
    text = re.sub(r"\s+", " ", m.group(2))
    assert '<span class="inconclusive">inconclusive: N too small to decide</span>' in text
    assert f"(N = {N_DEPLOY}: the intervals of ECE on deploy (15 bins); worst per-class ECE" in text
    assert "straddle their limits)" in text
    # amber: the banner's border and the word share the --warn colour
    assert "--warn: #b45309" in html and ".verdict.unsure { border-color: var(--warn)" in html
    assert ".inconclusive { color: var(--warn)" in html
    assert '<td class="inconclusive">inconclusive</td>' in html
    assert "is inconclusive otherwise" in html
    point = build_release(Engine(), small, RUN, "ts", "val", "deploy", n_boot=200, device="cpu",
                          limits=Limits(decide_on="point"))
    m = _banner(render(point, None))
    assert m.group(1) == "ok" and '<span class="pass">all criteria pass</span>' in m.group(2)


def test_report_banner_fails_red_and_names_the_inconclusive_too(small):
    r = build_release(Engine(), small, RUN, "ts", "val", "deploy", n_boot=200, device="cpu",
                      limits=Limits(max_ece=0.01, max_class_ece=0.01))
    # N = 300: the ECE interval reaches 0 (the basic interval undoes the plug-in's bias), so the overall ECE is
    # undecided while the worst class is above 1 % over its whole interval
    assert [c.outcome for c in r.checklist[:2]] == ["inconclusive", "fail"]
    m = _banner(render(r, None))
    assert m.group(1) == "bad"
    text = re.sub(r"\s+", " ", m.group(2))
    assert '<span class="fail">some criteria fail</span>; <span class="inconclusive">inconclusive: N too small' in text
    assert "the interval of ECE on deploy (15 bins)" in text and "straddles its limit)" in text


def test_without_resamples_the_report_marks_the_point_decisions(small):
    r = build_release(Engine(), small, RUN, "ts", "val", "deploy", n_boot=0, device="cpu")
    assert r.checklist[0].decided_on == "point" and "n_boot 0" in r.checklist[0].note
    html = render(r, None)
    assert '<td class="pass">pass (point)</td>' in html and "n_boot 0: decided on the point estimate" in html
    assert np.isnan(r.evaluation.result("ts").metrics["ece"].lo)
