"""The window's whole state in plain Python: the document, the next request's settings, the latest result of
each kind, and one "latest request wins" channel per kind of background request.

:class:`WindowModel` never touches Qt. It tells what changed by calling ``notify(event, *args)`` with one of
:data:`EVENTS` (the Session adaptor emits the Qt signal of that name), and sends work to the worker through four
callables, ``ask_evaluation(generation, request, cancel)``, ``ask_decisions(generation, request, cancel)``,
``ask_slices(generation, request, column, cancel)`` and ``ask_terciles(generation, request, run, cancel)``; the
worker's answers come back through the ``evaluation_*``, ``decisions_answered``, ``slices_answered`` and
``terciles_answered`` methods, tagged with the generation they were asked with.

Channels: evaluations (one run on one or more eval splits, or runs compared on the same samples: each replaces
what the diagram shows), the Decisions view's data (asked only while that view is shown), the slices of the
evaluation split by a column and the diagram's curves split by epistemic tercile (a run with members, while
asked for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from calibview.core.errors import CalibviewError
from calibview.core.evaluation.compare import CompareRequest
from calibview.core.evaluation.members.terciles import tercile_key
from calibview.core.evaluation.request import EvalRequest
from calibview.core.evaluation.results import Evaluation
from calibview.core.io.discovery import list_runs
from calibview.core.io.regression.discovery import list_regression_runs
from calibview.core.regression.evaluate import RegEvaluation
from calibview.gui.model.channel import Channel
from calibview.gui.model.document import Document, Settings

#: what ``notify`` may be called with, and its arguments
EVENTS = {
    "files_changed": "()",
    "selection_changed": "(): the run or its splits",
    "evaluation_started": "(generation)",
    "progress_changed": "(fraction, message)",
    "evaluation_changed": "(Evaluation or None)",
    "busy_changed": "(busy)",
    "error_occurred": "(title, one-sentence message)",
    "bandwidth_changed": "(bandwidth, kernel): the curves only, never the worker",
    "visible_changed": "(frozenset of the shown calibrators' names)",
    "decisions_changed": "(model.decisions.Decisions or None)",
    "slices_changed": "(model.slices.SliceResult or None)",
    "comparison_changed": "(core.evaluation.compare.Comparison or None)",
    "terciles_changed": "(core.evaluation.members.terciles.TercileSplit of the shown evaluation, or None)",
    "regression_changed": "(core.regression.evaluate.RegEvaluation or None)",
}


def _ignore(*_args) -> None:
    return None


class WindowModel:
    """The open files, the selection, the settings of the next request and the latest results, Qt-free.

    Results of each kind: ``evaluation`` (the reference) and ``evaluations`` (one per eval split or compared run,
    ``evaluations[0]`` is ``evaluation``), ``comparison`` (the paired differences while runs are compared),
    ``decisions`` and ``slices``; ``regression``, a regression run's RegEvaluation, in their place."""

    def __init__(self, notify: Callable[..., None] = _ignore, *, ask_evaluation: Callable = _ignore,
                 ask_decisions: Callable = _ignore, ask_slices: Callable = _ignore,
                 ask_terciles: Callable = _ignore) -> None:
        self.notify = notify
        self._ask_evaluation, self._ask_decisions, self._ask_slices = ask_evaluation, ask_decisions, ask_slices
        self._ask_terciles = ask_terciles
        self.document = Document()
        self.settings = Settings()
        self.evaluation_channel = Channel()
        self.decisions_channel = Channel()
        self.slices_channel = Channel()
        self.terciles_channel = Channel()
        self._asked = None                     # the latest request sent on the evaluation channel
        self.evaluation: Optional[Evaluation] = None
        self.evaluations: tuple[Evaluation, ...] = ()
        self.comparison = None
        #: the shown regression run's evaluation; ``evaluation`` is None while it is shown (the classification
        #: views have nothing to show then)
        self.regression: Optional[RegEvaluation] = None
        self.visible: frozenset[str] = frozenset()
        self._hidden: set[str] = set()         # calibrators the user hid (kept across evaluations)
        self.busy = False
        # the Decisions view's data: asked for only while that view is shown, for one eval split
        self.decisions = None
        self.decisions_split: Optional[str] = None      # None: the evaluation split
        self._decisions_wanted = False
        # slices of the evaluation split by a metadata column (or "class")
        self.slice_by: Optional[str] = None
        self.slices = None
        # the diagram's curves split by epistemic tercile: the latest split computed, kept while switched off
        self.terciles_on = False
        self.terciles = None

    @property
    def generation(self) -> int:
        """The generation number of the latest evaluation request (0 before the first)."""
        return self.evaluation_channel.generation

    # --- files and selection ---------------------------------------------------------------------------------

    def open_file(self, path, *, select: bool = True) -> bool:
        """Read a file's metadata (never its arrays) and select its first run (unless ``select`` is False);
        a file that cannot be read is an error_occurred and False."""
        path = str(Path(path).expanduser().resolve())
        try:
            runs = list_runs(path) + list_regression_runs(path)
        except CalibviewError as e:
            self.notify("error_occurred", "Cannot open file", str(e))
            return False
        self.document.files[path] = runs
        self.notify("files_changed")
        if select:
            self.select_run(path, runs[0].name)
        return True

    def close_file(self, path: str) -> None:
        """Close an open file: its run, when selected, gives way to the first run of another open file (not
        evaluated); runs of it that were compared leave the comparison (the others are evaluated again)."""
        doc = self.document
        if doc.files.pop(path, None) is None:
            return
        if doc.run is not None and doc.run.file == path:
            self.cancel()
            doc.run = None
            self._show(())
            remaining = next(iter(doc.files.items()), None)
            if remaining:
                self.select_run(remaining[0], remaining[1][0].name, evaluate=False)
        kept = tuple(c for c in doc.compare_runs if c[0] != path)
        if kept != doc.compare_runs:
            doc.compare_runs = kept
            self.evaluate()
        self.notify("files_changed")
        self.notify("selection_changed")

    def select_run(self, path: str, run_name: str, *, evaluate: bool = True) -> None:
        """Select a run of an open file with its default splits, and evaluate it (unless ``evaluate`` is False)."""
        self.document.select(self.document.find(path, run_name))
        self.slice_by = None                     # columns belong to a split of this run
        self._clear_slices()
        self.notify("selection_changed")
        if evaluate:
            self.evaluate()

    def set_splits(self, fit_split: Optional[str], eval_split: str, compare=None) -> None:
        """The fit split, the evaluation split and (optionally) the further eval splits to compare with; a change
        is evaluated."""
        doc = self.document
        if not doc.set_splits(fit_split, eval_split, compare):
            return
        if self.slice_by not in (None, "class") and self.slice_by not in doc.run.split(eval_split).meta:
            self.slice_by = None                 # that split has no such column
            self._clear_slices()
        self.notify("selection_changed")
        self.evaluate()

    def set_compare_splits(self, names) -> None:
        """Evaluate the same fitted calibrators on these splits too (domains), shown side by side."""
        doc = self.document
        if doc.eval_split is not None:
            self.set_splits(doc.fit_split, doc.eval_split, tuple(names))

    def set_compare_runs(self, runs) -> bool:
        """Compare the selected run (the reference) with these (file, run name) pairs on its eval split: one
        diagram per run and a table of paired differences. Runs on other samples are refused with one sentence
        (error_occurred) and nothing changes; returns whether the comparison was taken."""
        doc = self.document
        runs = tuple(dict.fromkeys((str(f), str(n)) for f, n in runs))
        if runs == doc.compare_runs or doc.run is None:
            return runs == doc.compare_runs
        if runs:
            try:
                doc.check_comparable(self.settings, runs)
            except CalibviewError as e:
                self.notify("error_occurred", "Cannot compare", str(e))
                self.notify("selection_changed")          # the pickers go back to what is compared
                return False
        doc.compare_runs, doc.compare_splits = runs, ()
        self.notify("selection_changed")
        self.evaluate()
        return True

    # --- settings --------------------------------------------------------------------------------------------

    def set_calibrators(self, names) -> None:
        """The calibrators of the next fit ("none" always first); an unknown name raises CalibviewError."""
        self.settings.set_calibrators(names)

    def set_bins(self, bins: int | str) -> None:
        """The equal-width bins of the next evaluation: a count, or "auto"."""
        self.settings.bins = bins

    def set_bandwidth(self, bandwidth: float, kernel: Optional[str] = None) -> None:
        """Curves follow at once (O(grid) in the views); the metrics that depend on it are refreshed by the
        next evaluation, which the window requests when the slider is released."""
        self.settings.bandwidth = float(bandwidth)
        if kernel is not None:
            self.settings.kernel = kernel
        self.notify("bandwidth_changed", self.settings.bandwidth, self.settings.kernel)

    def set_reg_bandwidth(self, bandwidth: Optional[float]) -> None:
        """A regression run's bandwidth of cal in its target's units (None: Silverman's rule), evaluated at once
        (the diagram's slider redraws the curve alone; this refreshes cal and the sharpness gap)."""
        if self.document.run is not None and bandwidth != self.document.reg_bandwidth:
            self.document.reg_bandwidth = None if bandwidth is None else float(bandwidth)
            self.evaluate()

    def set_visible(self, names) -> None:
        """Show these calibrators (by name) and hide the other shown ones; a hidden one stays hidden in later
        evaluations until it is shown again."""
        self.visible = frozenset(names)
        shown = {r.name for r in self.evaluation.results} if self.evaluation is not None else set()
        self._hidden = (self._hidden - shown) | (shown - self.visible)
        self.notify("visible_changed", self.visible)

    # --- evaluation ------------------------------------------------------------------------------------------

    def build_request(self) -> Optional[EvalRequest]:
        """The request of the selected run on its evaluation split, with the settings (None: nothing selected)."""
        return self.document.request(self.settings)

    def build_requests(self) -> tuple[EvalRequest, ...]:
        """One request per eval split (domains), the same fits; () when there is nothing to evaluate."""
        return self.document.requests(self.settings)

    def evaluate(self, request=None) -> int:
        """Start an evaluation (a newer one supersedes a running one); returns its generation (0: nothing to do).
        ``request``: an EvalRequest, a tuple of them (domains), a CompareRequest, or None for the window's own."""
        if request is None:
            request = self.document.next_request(self.settings)
        if request is None:
            return 0
        ticket = self.evaluation_channel.start()
        self.slices_channel.forget()       # the slices of the old evaluation: asked again when it is done
        self._asked = request
        self._set_busy(True)
        self.notify("evaluation_started", ticket.generation)
        self._ask_evaluation(ticket.generation, request, ticket.cancel)
        return ticket.generation

    def cancel(self) -> None:
        """Ask the running evaluation to stop (it answers "cancelled", and the pickers go back to what is shown)."""
        self.evaluation_channel.cancel()

    def cancel_all(self) -> None:
        """Ask every running request to stop (the window is closing)."""
        for channel in (self.evaluation_channel, self.decisions_channel, self.slices_channel, self.terciles_channel):
            channel.cancel()

    def evaluation_progressed(self, generation: int, fraction: float, message: str) -> None:
        """The worker's progress (fraction 0..1 and a message) on an evaluation request."""
        if self.evaluation_channel.is_current(generation):
            self.notify("progress_changed", fraction, message)

    def evaluation_partial(self, generation: int, evaluation) -> None:
        """Point estimates and curves as each calibrator is scored (intervals pending); the request runs on.
        ``evaluation``: an Evaluation, or a tuple of them (those done so far)."""
        channel = self.evaluation_channel
        if channel.is_current(generation) and not channel.cancelled:
            self._show(_as_tuple(evaluation))

    def evaluation_finished(self, generation: int, result) -> None:
        """The answer to an evaluation request: an Evaluation, a tuple of them (domains) or, for a
        CompareRequest, a Comparison. An answer to a superseded request is dropped."""
        if not self.evaluation_channel.settle(generation):
            return
        self._set_busy(False)
        if isinstance(result, RegEvaluation):
            self._show((), regression=result)
        elif isinstance(self._asked, CompareRequest):
            self._show(tuple(result.evaluations), comparison=result)
        else:
            self._show(_as_tuple(result))
        self._request_decisions()
        self._request_slices()
        self._request_terciles()

    def evaluation_failed(self, generation: int, message: str) -> None:
        """An evaluation request failed with a one-sentence message."""
        if not self.evaluation_channel.settle(generation):
            return
        self._set_busy(False)
        self.notify("error_occurred", "Evaluation failed", message)

    def evaluation_cancelled(self, generation: int) -> None:
        """An evaluation request stopped at a cancel: the pickers go back to what the diagram still shows."""
        if not self.evaluation_channel.settle(generation):
            return
        self._set_busy(False)
        if self.document.restore(self.evaluations or ((self.regression,) if self.regression else ())):
            self.notify("selection_changed")
        self.notify("progress_changed", 0.0, "cancelled")

    # --- slices ----------------------------------------------------------------------------------------------

    def set_slice_by(self, column: Optional[str]) -> None:
        """Slice the evaluation split by a metadata column, or "class" (None: no slices)."""
        self.slice_by = column
        if column is None:
            self._clear_slices()
        else:
            self._request_slices()

    def slices_answered(self, generation: int, result) -> None:
        """The worker's slices (a SliceResult), or the sentence saying why they failed."""
        if not self.slices_channel.settle(generation):
            return
        if isinstance(result, str):
            self.slices_channel.forget()
            self.notify("error_occurred", "Slices failed", result)
            return
        self.slices = result
        self.notify("slices_changed", result)

    def _clear_slices(self) -> None:
        self.slices_channel.forget()
        self._set_slices(None)

    def _set_slices(self, result) -> None:
        if self.slices is not None or result is not None:
            self.slices = result
            self.notify("slices_changed", result)

    def _request_slices(self) -> None:
        ev = self.evaluation
        if self.slice_by is None or ev is None or ev.pending:
            return
        key = (ev.request, self.slice_by)
        if self.slices_channel.asked(key):
            return
        ticket = self.slices_channel.start(key)
        self._set_slices(None)
        self._ask_slices(ticket.generation, ev.request, self.slice_by, ticket.cancel)

    # --- the diagram split by epistemic tercile ---------------------------------------------------------------

    def set_terciles(self, on: bool) -> None:
        """Split the diagram's curve by epistemic tercile (a run with members) or stop: terciles_changed follows
        with ``shown_terciles()``; a split once computed is kept for the same request while switched off."""
        self.terciles_on = bool(on)
        self._request_terciles()
        self.notify("terciles_changed", self.shown_terciles())

    def shown_terciles(self):
        """The TercileSplit of the shown evaluation while the split is on (None: off, a run without members, not
        computed yet, or computed for another request)."""
        ev, split = self.evaluation, self.terciles
        if not self.terciles_on or ev is None or split is None or split.request != tercile_key(ev.request):
            return None
        return split

    def terciles_answered(self, generation: int, result) -> None:
        """The worker's TercileSplit, or the sentence saying why it failed."""
        if not self.terciles_channel.settle(generation):
            return
        if isinstance(result, str):
            self.terciles_channel.forget()
            self.notify("error_occurred", "Epistemic terciles failed", result)
            return
        self.terciles = result
        self.notify("terciles_changed", self.shown_terciles())

    def _request_terciles(self) -> None:
        ev = self.evaluation
        if not self.terciles_on or ev is None or ev.pending or not ev.run.split(ev.request.eval_split).members:
            return
        key = tercile_key(ev.request)        # a bandwidth, kernel or level change splits the same curves
        if (self.terciles is not None and self.terciles.request == key) or self.terciles_channel.asked(key):
            return
        ticket = self.terciles_channel.start(key)
        self._ask_terciles(ticket.generation, ev.request, ev.run, ticket.cancel)

    # --- decisions (risk-coverage, threshold audit) ----------------------------------------------------------

    def want_decisions(self, on: bool) -> None:
        """The Decisions view is shown (on) or hidden: its data is computed only while someone looks."""
        self._decisions_wanted = bool(on)
        if on:
            self._request_decisions()

    def set_decisions_split(self, name: Optional[str]) -> None:
        """Which evaluated split the Decisions view audits (None: the evaluation split)."""
        self.decisions_split = name
        self._request_decisions()

    def decisions_answered(self, generation: int, data) -> None:
        """The worker's decision data (model.decisions.Decisions), or the sentence saying why it failed."""
        if not self.decisions_channel.settle(generation):
            return
        if isinstance(data, str):
            self.decisions_channel.forget()
            self.notify("error_occurred", "Decisions failed", data)
            return
        self.decisions = data
        self.notify("decisions_changed", data)

    def _decisions_request(self) -> Optional[EvalRequest]:
        if self.evaluation is None or self.evaluation.pending:
            return None
        evs = {e.request.eval_split: e for e in self.evaluations}
        ev = evs.get(self.decisions_split) or self.evaluation
        return None if ev.pending else ev.request

    def _request_decisions(self) -> None:
        req = self._decisions_request() if self._decisions_wanted else None
        if req is None:
            return
        # the per-sample vectors depend on the fits and the split, not on bins, bandwidth, kernel or level
        key = (req.file, req.run, req.fit_split, req.eval_split, req.calibrators, req.options, req.level)
        if self.decisions_channel.asked(key):
            return
        ticket = self.decisions_channel.start(key)
        self._ask_decisions(ticket.generation, req, ticket.cancel)

    # --- what is shown ---------------------------------------------------------------------------------------

    def _set_busy(self, busy: bool) -> None:
        if busy != self.busy:
            self.busy = busy
            self.notify("busy_changed", busy)

    def _show(self, evaluations: tuple, comparison=None, regression: Optional[RegEvaluation] = None) -> None:
        """Show these evaluations (the first the reference; () clears) and, while runs are compared, their
        comparison; or (``regression``) a regression run's evaluation, which clears the classification ones."""
        if regression is not None or self.regression is not None:
            self.regression = regression
            self.notify("regression_changed", regression)
        if comparison is not None or self.comparison is not None:
            self.comparison = comparison
            self.notify("comparison_changed", comparison)
        self.evaluations = evaluations
        self.evaluation = evaluation = evaluations[0] if evaluations else None
        if evaluation is not None:
            # The user's hidden calibrators stay hidden by name (partial results bring calibrators one at a time,
            # so "what the previous result showed" is not enough); new names are shown.
            self.visible = frozenset(r.name for r in evaluation.results if r.name not in self._hidden)
        else:
            self.visible = frozenset()
        self.notify("evaluation_changed", evaluation)
        self.notify("visible_changed", self.visible)
        if evaluation is None and self.decisions is not None:
            self.decisions = None
            self.decisions_channel.key = None
            self.notify("decisions_changed", None)


def _as_tuple(evaluation) -> tuple:
    """The worker answers one Evaluation for one eval split and a tuple of them for several."""
    if isinstance(evaluation, tuple):
        return evaluation
    return (evaluation,) if evaluation is not None else ()
