"""The window's document and the settings of its next request, in plain Python.

:class:`Document`: the open files (each file's runs, metadata only), the selected run, its fit and evaluation
splits, the further evaluation splits shown beside it (domains) and the runs compared with it. :class:`Settings`:
what the next request asks for beyond the selection (calibrators, bins, resamples, bandwidth, kernel, device,
calibrator options), starting from :class:`~calibview.core.evaluation.request.EvalRequest`'s defaults. Together
they build the next request (:meth:`Document.request`): an EvalRequest, or a RegRequest for a regression run
(:func:`is_regression`), which the window evaluates with every recalibrator that applies to its form.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields, replace
from typing import Any, Optional, Sequence

from calibview.core import calibrators as calib
from calibview.core.evaluation.compare import CompareRequest, candidates, check_comparable, requests_with
from calibview.core.evaluation.request import EvalRequest, default_splits
from calibview.core.io.discovery import find_run
from calibview.core.io.schema import RunInfo
from calibview.core.evaluation import defaults
from calibview.core.evaluation.toplabel.absent import usable_calibrators
from calibview.core.io.regression.schema import RegRunInfo
from calibview.core.io.toplabel.format import is_toplabel
from calibview.core.regression import recalibrators as recal
from calibview.core.regression.evaluate import RegRequest

#: EvalRequest's default of each field that has one: the window starts from the same settings as the library
REQUEST_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(EvalRequest) if f.default is not MISSING}


@dataclass
class Settings:
    """The settings of the next request, EvalRequest's defaults until the user changes them.

    ``bandwidth`` (a width on the confidence axis, 0..1) and ``kernel`` set the drawn curves at once; every
    setting reaches the numbers with the next evaluation. ``options``: per-calibrator constructor options, as
    EvalRequest.options."""

    calibrators: tuple[str, ...] = REQUEST_DEFAULTS["calibrators"]
    bins: int | str = REQUEST_DEFAULTS["bins"]
    n_boot: int = REQUEST_DEFAULTS["n_boot"]
    bandwidth: float = REQUEST_DEFAULTS["bandwidth"]
    kernel: str = REQUEST_DEFAULTS["kernel"]
    device: str = REQUEST_DEFAULTS["device"]
    options: tuple = REQUEST_DEFAULTS["options"]

    def set_calibrators(self, names: Sequence[str]) -> None:
        """The calibrators to fit, "none" (the baseline, always shown) first; an unknown name raises
        CalibviewError and changes nothing."""
        names = tuple(dict.fromkeys(["none", *names]))
        for n in names:
            calib.get(n)
        self.calibrators = names


def is_regression(run) -> bool:
    """Whether ``run`` is a regression run (a RegRunInfo) rather than a classification run (a RunInfo)."""
    return isinstance(run, RegRunInfo)


class Document:
    """The open files and what is selected in them. Paths are absolute; runs are metadata (RunInfo, or
    RegRunInfo for a regression run, listed after the file's classification runs)."""

    def __init__(self) -> None:
        self.files: dict[str, list[RunInfo]] = {}
        #: a regression run's kernel bandwidth of cal in its target's units (None: Silverman's rule)
        self.reg_bandwidth: Optional[float] = None
        self.run: Optional[RunInfo] = None
        self.fit_split: Optional[str] = None
        self.eval_split: Optional[str] = None
        #: further eval splits (domains), after eval_split
        self.compare_splits: tuple[str, ...] = ()
        #: (file, run name) of each run compared with ``run`` (the reference)
        self.compare_runs: tuple[tuple[str, str], ...] = ()

    @property
    def eval_splits(self) -> tuple[str, ...]:
        """The evaluation split, then the further ones (domains); () with nothing selected."""
        return ((self.eval_split,) if self.eval_split else ()) + self.compare_splits

    def find(self, path: str, run_name: str) -> RunInfo:
        """The run ``run_name`` of the open file ``path`` (as find_run: CalibviewError when there is none)."""
        return find_run(self.files[path], run_name)

    def select(self, run: RunInfo) -> None:
        """Select ``run`` with its default fit and evaluation splits, no domains and no compared runs."""
        self.run = run
        self.fit_split, self.eval_split = default_splits(run)
        self.compare_splits = ()
        self.compare_runs = ()
        self.reg_bandwidth = None

    def set_splits(self, fit_split: Optional[str], eval_split: str, compare: Optional[Sequence[str]] = None) -> bool:
        """Fit on ``fit_split``, evaluate on ``eval_split`` and on ``compare`` too (None: the same further splits
        as now, less the evaluation split); False when nothing changed. Runs are compared on one split without
        domains, so the compared runs are dropped when domains are asked for or the evaluation split moves."""
        compare = self.compare_splits if compare is None else tuple(dict.fromkeys(compare))
        compare = tuple(c for c in compare if c != eval_split)
        if (fit_split, eval_split, compare) == (self.fit_split, self.eval_split, self.compare_splits):
            return False
        if compare or eval_split != self.eval_split:
            self.compare_runs = ()
        self.fit_split, self.eval_split, self.compare_splits = fit_split, eval_split, compare
        return True

    def compare_candidates(self) -> list[tuple[RunInfo, Optional[str]]]:
        """Every other open run and why it cannot be compared with the selected one (None: it may be)."""
        if self.run is None or self.eval_split is None or is_regression(self.run):
            return []
        return candidates([r for runs in self.files.values() for r in runs if not is_regression(r)], self.run,
                          self.eval_split)

    # --- the next request ------------------------------------------------------------------------------------

    def request(self, settings: Settings) -> Optional[EvalRequest]:
        """The request of the selected run on its evaluation split (None when nothing is selected): without a
        fit split only "none", never a binary-only calibrator on a run with K != 2, and on a top-label run only the
        calibrators of its confidence (histogram binning, isotonic, Platt, beta)."""
        if self.run is None or self.eval_split is None:
            return None
        if is_regression(self.run):
            return self.regression_request(settings)
        names = settings.calibrators if self.fit_split else ("none",)
        k = self.run.k
        if is_toplabel(self.run):
            names = usable_calibrators(self.run, names)[0] or ("none",)
        else:
            names = tuple(n for n in names if not (calib.get(n).binary_only and k != 2))
        return EvalRequest(file=self.run.file, run=self.run.name, eval_split=self.eval_split,
                           fit_split=self.fit_split, calibrators=names, bins=settings.bins, n_boot=settings.n_boot,
                           bandwidth=settings.bandwidth, kernel=settings.kernel, device=settings.device,
                           options=tuple(o for o in settings.options if o[0] in names))

    def regression_request(self, settings: Settings) -> RegRequest:
        """The RegRequest of the selected regression run: every recalibrator that applies to its form fitted on
        the fit split (without one only "none"), the window's bins and resamples, :attr:`reg_bandwidth`."""
        names = tuple(n for n in recal.REG_CALIBRATORS if not recal.applies(n, self.run.form)) \
            if self.fit_split and self.fit_split != self.eval_split else ("none",)
        bins = defaults.BINS if settings.bins == "auto" else int(settings.bins)
        return RegRequest(run=self.run, eval_split=self.eval_split, fit_split=self.fit_split, calibrators=names,
                          bins=bins, bandwidth=self.reg_bandwidth, n_boot=settings.n_boot)

    def requests(self, settings: Settings) -> tuple[EvalRequest, ...]:
        """One request per eval split (domains), the same fits; () when there is nothing to evaluate. A
        regression run is evaluated on its one evaluation split."""
        first = self.request(settings)
        if first is None:
            return ()
        if isinstance(first, RegRequest):
            return (first,)
        return (first,) + tuple(replace(first, eval_split=s) for s in self.compare_splits)

    def compare_requests(self, settings: Settings, runs: Sequence[tuple[str, str]]) -> tuple[EvalRequest, ...]:
        """The selected run's request, then one per (file, run name) of ``runs`` with the same settings."""
        return requests_with(self.request(settings), [self.find(f, n) for f, n in runs])

    def check_comparable(self, settings: Settings, runs: Sequence[tuple[str, str]]) -> None:
        """CalibviewError (one sentence) when ``runs`` cannot be compared with the selected run."""
        check_comparable(self.compare_requests(settings, runs))

    def next_request(self, settings: Settings):
        """What the window evaluates next: a CompareRequest while runs are compared, the one EvalRequest of a
        single eval split, a tuple of them for several (domains), or None when nothing is selected."""
        if self.compare_runs and self.request(settings) is not None and not is_regression(self.run):
            return CompareRequest(self.compare_requests(settings, self.compare_runs))
        requests = self.requests(settings)
        return requests[0] if len(requests) == 1 else (requests or None)

    # --- after a cancel ----------------------------------------------------------------------------------------

    def restore(self, evaluations: Sequence) -> bool:
        """Go back to the selection that ``evaluations`` (the shown ones, the first the reference) were computed
        for; False when it is the selection already, or the shown run's file is no longer open."""
        if not evaluations or evaluations[0].run.file not in self.files:
            return False
        ev, rest = evaluations[0], tuple(evaluations[1:])
        req = ev.request
        others = [e for e in rest if e.run != ev.run]                 # compared runs
        compare = () if others else tuple(e.request.eval_split for e in rest)
        runs = tuple((e.run.file, e.run.name) for e in others)
        shown = (ev.run, req.fit_split, req.eval_split, compare, runs)
        if (self.run, self.fit_split, self.eval_split, self.compare_splits, self.compare_runs) == shown:
            return False
        self.run, self.fit_split, self.eval_split, self.compare_splits, self.compare_runs = shown
        return True
