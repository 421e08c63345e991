"""Session: the document, the only mutable state of the window, and the owner of the evaluation worker."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Optional

from PySide6 import QtCore

from calibview.core import calibrators as calib
from calibview.core.io import logits as lg
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.request import EvalRequest, Evaluation, default_splits
from calibview.gui.worker import EvaluationWorker

DEFAULT_CALIBRATORS = ("none", "ts")
_log = logging.getLogger(__name__)


class Session(QtCore.QObject):
    """Open files, the selected run and splits, the settings of the next evaluation and its latest result.

    Views call its methods and react to its signals; they never talk to each other or to the worker.
    """

    files_changed = QtCore.Signal()
    selection_changed = QtCore.Signal()                 # run or splits changed
    evaluation_started = QtCore.Signal(int)             # generation
    progress_changed = QtCore.Signal(float, str)
    evaluation_changed = QtCore.Signal(object)          # Evaluation or None
    busy_changed = QtCore.Signal(bool)
    error_occurred = QtCore.Signal(str, str)            # title, one-sentence message
    bandwidth_changed = QtCore.Signal(float, str)       # bandwidth, kernel: curves only, never the worker
    visible_changed = QtCore.Signal(object)             # frozenset of shown calibrator names
    decisions_changed = QtCore.Signal(object)           # gui.decision_data.Decisions or None
    slices_changed = QtCore.Signal(object)              # gui.worker.SliceResult or None
    comparison_changed = QtCore.Signal(object)          # core.compare.Comparison or None

    _request = QtCore.Signal(int, object, object)       # to the worker thread (queued)
    _decide = QtCore.Signal(int, object, object)        # to the worker thread (queued)
    _slice = QtCore.Signal(int, object, object, object)  # to the worker thread (queued)

    def __init__(self, parent: Optional[QtCore.QObject] = None) -> None:
        super().__init__(parent)
        self.files: dict[str, list[lg.RunInfo]] = {}
        self.run: Optional[lg.RunInfo] = None
        self.fit_split: Optional[str] = None
        self.eval_split: Optional[str] = None
        self.compare_splits: tuple[str, ...] = ()    # further eval splits (domains), after eval_split
        self.compare_runs: tuple[tuple[str, str], ...] = ()   # (file, run) compared with run (the reference)
        self.comparison = None                       # core.compare.Comparison of the shown evaluations
        self.calibrators: tuple[str, ...] = DEFAULT_CALIBRATORS
        self.bins: int | str = 15
        self.n_boot = 1000
        self.bandwidth = 0.05
        self.kernel = "gaussian"
        self.device = "auto"
        self.options: tuple = ()                      # per-calibrator options, as EvalRequest.options
        self.evaluation: Optional[Evaluation] = None
        self.evaluations: tuple[Evaluation, ...] = ()   # one per eval split; evaluations[0] is evaluation
        self.visible: frozenset[str] = frozenset()
        self._hidden: set[str] = set()              # calibrators the user hid (kept across evaluations)
        self.generation = 0
        # The Decisions view's data: asked for only while that view is shown, for one eval split
        self.decisions = None
        self.decisions_split: Optional[str] = None      # None: the evaluation split
        self._decisions_wanted = False
        self._decisions_gen = 0
        self._decisions_key: Optional[tuple] = None
        self._decisions_cancel: Optional[threading.Event] = None
        # Slices of the evaluation split by a metadata column (or "class"), for the Slices tab and the overlay
        self.slice_by: Optional[str] = None
        self.slices = None
        self._slices_gen = 0
        self._slices_key: Optional[tuple] = None
        self._slices_cancel: Optional[threading.Event] = None
        self._cancel: Optional[threading.Event] = None
        self._busy = False
        self._thread = QtCore.QThread()
        self._thread.setObjectName("calibview-evaluation")
        self._worker = EvaluationWorker()
        self._worker.moveToThread(self._thread)
        self._request.connect(self._worker.run, QtCore.Qt.QueuedConnection)
        self._worker.progressed.connect(self._on_worker_progressed, QtCore.Qt.QueuedConnection)
        self._worker.partial.connect(self._on_worker_partial, QtCore.Qt.QueuedConnection)
        self._worker.finished.connect(self._on_worker_finished, QtCore.Qt.QueuedConnection)
        self._worker.failed.connect(self._on_worker_failed, QtCore.Qt.QueuedConnection)
        self._worker.cancelled.connect(self._on_worker_cancelled, QtCore.Qt.QueuedConnection)
        self._decide.connect(self._worker.decide, QtCore.Qt.QueuedConnection)
        self._slice.connect(self._worker.slice, QtCore.Qt.QueuedConnection)
        self._worker.sliced.connect(self._on_worker_sliced, QtCore.Qt.QueuedConnection)
        self._worker.decided.connect(self._on_worker_decided, QtCore.Qt.QueuedConnection)
        self._thread.start()

    # --- files and selection ---------------------------------------------------------------------------------

    def open_file(self, path: str | Path, *, select: bool = True) -> bool:
        """Read a file's metadata (never its arrays) and select its first run (unless ``select`` is False);
        errors become error_occurred."""
        path = str(Path(path).expanduser().resolve())
        try:
            runs = lg.list_runs(path)
        except CalibviewError as e:
            self.error_occurred.emit("Cannot open file", str(e))
            return False
        self.files[path] = runs
        self.files_changed.emit()
        if select:
            self.select_run(path, runs[0].name)
        return True

    def close_file(self, path: str) -> None:
        if self.files.pop(path, None) is None:
            return
        if self.run is not None and self.run.file == path:
            self.cancel()
            self.run = None
            self._set_evaluation(None)
            remaining = next(iter(self.files.items()), None)
            if remaining:
                self.select_run(remaining[0], remaining[1][0].name, evaluate=False)
        kept = tuple(c for c in self.compare_runs if c[0] != path)
        if kept != self.compare_runs:                # a compared run went with the file: compare the others
            self.compare_runs = kept
            self.evaluate()
        self.files_changed.emit()
        self.selection_changed.emit()

    def select_run(self, path: str, run_name: str, *, evaluate: bool = True) -> None:
        run = lg.find_run(self.files[path], run_name)
        self.run = run
        self.fit_split, self.eval_split = default_splits(run)
        self.compare_splits = ()
        self.compare_runs = ()
        self.slice_by = None                     # columns belong to a split of this run
        self._clear_slices()
        self.selection_changed.emit()
        if evaluate:
            self.evaluate()

    def set_splits(self, fit_split: Optional[str], eval_split: str, compare=None) -> None:
        """The fit split, the evaluation split and (optionally) the further eval splits to compare with."""
        compare = self.compare_splits if compare is None else tuple(dict.fromkeys(compare))
        compare = tuple(c for c in compare if c != eval_split)
        if (fit_split, eval_split, compare) == (self.fit_split, self.eval_split, self.compare_splits):
            return
        if compare or eval_split != self.eval_split:
            self.compare_runs = ()              # runs are compared on one split, without domains
        self.fit_split, self.eval_split, self.compare_splits = fit_split, eval_split, compare
        if self.slice_by not in (None, "class") and self.slice_by not in self.run.split(eval_split).meta:
            self.slice_by = None                 # that split has no such column
            self._clear_slices()
        self.selection_changed.emit()
        self.evaluate()

    def set_compare_splits(self, names) -> None:
        """Evaluate the same fitted calibrators on these splits too (domains), shown side by side."""
        if self.eval_split is not None:
            self.set_splits(self.fit_split, self.eval_split, tuple(names))

    def compare_candidates(self) -> list[tuple[lg.RunInfo, Optional[str]]]:
        """Every other open run and why it cannot be compared with the selected one (None: it may be)."""
        from calibview.core.evaluation.compare import candidates

        if self.run is None or self.eval_split is None:
            return []
        return candidates([r for runs in self.files.values() for r in runs], self.run, self.eval_split)

    def set_compare_runs(self, runs) -> bool:
        """Compare the selected run (the reference) with these (file, run name) pairs on its eval split: one
        diagram per run and a table of paired differences. Runs on other samples are refused with one sentence
        (error_occurred) and nothing changes; returns whether the comparison was taken."""
        from calibview.core.evaluation.compare import check_comparable

        runs = tuple(dict.fromkeys((str(f), str(n)) for f, n in runs))
        if runs == self.compare_runs or self.run is None:
            return runs == self.compare_runs
        if runs:
            try:
                check_comparable(self._compare_requests(runs))
            except CalibviewError as e:
                self.error_occurred.emit("Cannot compare", str(e))
                self.selection_changed.emit()         # the pickers go back to what is compared
                return False
        self.compare_runs, self.compare_splits = runs, ()
        self.selection_changed.emit()
        self.evaluate()
        return True

    def _compare_requests(self, runs) -> tuple[EvalRequest, ...]:
        from calibview.core.evaluation.compare import requests_with

        return requests_with(self.build_request(), [lg.find_run(self.files[f], n) for f, n in runs])

    @property
    def eval_splits(self) -> tuple[str, ...]:
        return ((self.eval_split,) if self.eval_split else ()) + self.compare_splits

    # --- settings --------------------------------------------------------------------------------------------

    def set_calibrators(self, names) -> None:
        names = tuple(dict.fromkeys(["none", *names]))        # the baseline is always shown
        for n in names:
            calib.get(n)
        self.calibrators = names

    def set_bins(self, bins: int | str) -> None:
        self.bins = bins

    def set_bandwidth(self, bandwidth: float, kernel: Optional[str] = None) -> None:
        """Curves follow at once (O(grid) in the views); the metrics that depend on it are refreshed by the
        next evaluation, which the window requests when the slider is released."""
        self.bandwidth = float(bandwidth)
        if kernel is not None:
            self.kernel = kernel
        self.bandwidth_changed.emit(self.bandwidth, self.kernel)

    def set_visible(self, names) -> None:
        self.visible = frozenset(names)
        shown = {r.name for r in self.evaluation.results} if self.evaluation is not None else set()
        self._hidden = (self._hidden - shown) | (shown - self.visible)
        self.visible_changed.emit(self.visible)

    # --- evaluation ------------------------------------------------------------------------------------------

    def build_request(self) -> Optional[EvalRequest]:
        if self.run is None or self.eval_split is None:
            return None
        names = self.calibrators if self.fit_split else ("none",)
        k = self.run.k
        names = tuple(n for n in names if not (calib.get(n).binary_only and k != 2))
        return EvalRequest(file=self.run.file, run=self.run.name, eval_split=self.eval_split,
                           fit_split=self.fit_split, calibrators=names, bins=self.bins, n_boot=self.n_boot,
                           bandwidth=self.bandwidth, kernel=self.kernel, device=self.device,
                           options=tuple(o for o in self.options if o[0] in names))

    def build_requests(self) -> tuple[EvalRequest, ...]:
        """One request per eval split (domains), the same fits; () when there is nothing to evaluate."""
        first = self.build_request()
        if first is None:
            return ()
        return (first,) + tuple(replace(first, eval_split=s) for s in self.compare_splits)

    def evaluate(self, request=None) -> int:
        """Start an evaluation (a newer one supersedes a running one); returns its generation (0: nothing to do).
        ``request``: an EvalRequest, a tuple of them (domains), or None for the session's own."""
        if request is None and self.compare_runs and self.build_request() is not None:
            from calibview.core.evaluation.compare import CompareRequest
            request = CompareRequest(self._compare_requests(self.compare_runs))
        if request is None:
            requests = self.build_requests()
            request = requests[0] if len(requests) == 1 else (requests or None)
        if request is None:
            return 0
        if self._cancel is not None:
            self._cancel.set()                    # the running one stops at its next check
        if self._slices_cancel is not None:       # the slices of the old evaluation: asked again when it is done
            self._slices_cancel.set()
            self._slices_cancel, self._slices_key = None, None
        self.generation += 1
        self._cancel = threading.Event()
        self._set_busy(True)
        self.evaluation_started.emit(self.generation)
        self._request.emit(self.generation, request, self._cancel)
        return self.generation

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    # --- slices ---------------------------------------------------------------------------------------------------

    def set_slice_by(self, column: Optional[str]) -> None:
        """Slice the evaluation split by a metadata column, or "class" (None: no slices)."""
        self.slice_by = column
        if column is None:
            self._clear_slices()
        else:
            self._request_slices()

    def _clear_slices(self) -> None:
        if self._slices_cancel is not None:
            self._slices_cancel.set()
        self._slices_key = None
        if self.slices is not None:
            self.slices = None
            self.slices_changed.emit(None)

    def _request_slices(self) -> None:
        ev = self.evaluation
        if self.slice_by is None or ev is None or ev.pending:
            return
        req = ev.request
        key = (req, self.slice_by)
        if key == self._slices_key:
            return
        self._slices_key = key
        if self._slices_cancel is not None:
            self._slices_cancel.set()
        self._slices_gen += 1
        self._slices_cancel = threading.Event()
        if self.slices is not None:
            self.slices = None
            self.slices_changed.emit(None)
        self._slice.emit(self._slices_gen, req, self.slice_by, self._slices_cancel)

    def _on_worker_sliced(self, generation: int, result) -> None:
        if generation != self._slices_gen:
            return
        self._slices_cancel = None
        if isinstance(result, str):
            self._slices_key = None
            self.error_occurred.emit("Slices failed", result)
            return
        self.slices = result
        self.slices_changed.emit(result)

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
        if key == self._decisions_key:
            return
        self._decisions_key = key
        if self._decisions_cancel is not None:
            self._decisions_cancel.set()
        self._decisions_gen += 1
        self._decisions_cancel = threading.Event()
        self._decide.emit(self._decisions_gen, req, self._decisions_cancel)

    def _on_worker_decided(self, generation: int, data) -> None:
        if generation != self._decisions_gen:
            return
        self._decisions_cancel = None
        if isinstance(data, str):
            self._decisions_key = None
            self.error_occurred.emit("Decisions failed", data)
            return
        self.decisions = data
        self.decisions_changed.emit(data)

    @property
    def busy(self) -> bool:
        return self._busy

    def shutdown(self, timeout_ms: int = 5000) -> None:
        """Cancel any work and join the worker thread (no QThread outlives the window).

        The worker checks the cancel event between chunks, so it returns; if a step takes longer than
        ``timeout_ms`` the join goes on (said once in the log): Qt aborts the process when a QThread is
        destroyed while its thread still runs, which is worse than a late close."""
        self.cancel()
        for event in (self._decisions_cancel, self._slices_cancel):
            if event is not None:
                event.set()
        self._thread.quit()
        if self._thread.wait(timeout_ms):
            return
        _log.warning("waiting for the running evaluation to stop before closing.")
        while not self._thread.wait(max(4 * timeout_ms, 1000)):
            pass

    # --- worker callbacks (GUI thread) -----------------------------------------------------------------------

    def _on_worker_progressed(self, generation: int, fraction: float, message: str) -> None:
        if generation == self.generation:
            self.progress_changed.emit(fraction, message)

    def _on_worker_partial(self, generation: int, evaluation) -> None:
        """Point estimates and curves as each calibrator is scored (intervals pending); the request runs on."""
        if generation == self.generation and not (self._cancel is not None and self._cancel.is_set()):
            self._set_evaluation(evaluation)

    def _on_worker_finished(self, generation: int, evaluation) -> None:
        if generation != self.generation:
            return                                # stale: a newer request superseded it
        self._cancel = None
        self._set_busy(False)
        self._set_evaluation(evaluation)
        self._request_decisions()
        self._request_slices()

    def _on_worker_failed(self, generation: int, message: str) -> None:
        if generation != self.generation:
            return
        self._cancel = None
        self._set_busy(False)
        self.error_occurred.emit("Evaluation failed", message)

    def _on_worker_cancelled(self, generation: int) -> None:
        if generation == self.generation:
            self._cancel = None
            self._set_busy(False)
            self._restore_shown_selection()
            self.progress_changed.emit(0.0, "cancelled")

    def _restore_shown_selection(self) -> None:
        """After a cancel, the pickers go back to what the diagram and table still show."""
        ev = self.evaluation
        if ev is None or ev.run.file not in self.files:
            return
        req = ev.request
        others = [e for e in self.evaluations[1:] if e.run != ev.run]          # compared runs
        compare = () if others else tuple(e.request.eval_split for e in self.evaluations[1:])
        runs = tuple((e.run.file, e.run.name) for e in others)
        if (self.run, self.fit_split, self.eval_split, self.compare_splits, self.compare_runs) != (
                ev.run, req.fit_split, req.eval_split, compare, runs):
            self.run, self.fit_split, self.eval_split = ev.run, req.fit_split, req.eval_split
            self.compare_splits, self.compare_runs = compare, runs
            self.selection_changed.emit()

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)

    def _set_evaluation(self, evaluation) -> None:
        """An Evaluation, a tuple of them (one per eval split or compared run, the first the reference), a
        core.compare.Comparison or None."""
        comparison = None
        if hasattr(evaluation, "rows"):           # a Comparison: its evaluations, the reference first
            comparison, evaluation = evaluation, evaluation.evaluations
        if comparison is not None or self.comparison is not None:
            self.comparison = comparison
            self.comparison_changed.emit(comparison)
        if isinstance(evaluation, tuple):
            self.evaluations = evaluation
            evaluation = evaluation[0] if evaluation else None
        else:
            self.evaluations = (evaluation,) if evaluation is not None else ()
        self.evaluation = evaluation
        if evaluation is not None:
            # Keep the user's show/hide choices for calibrators that are still there; show new ones.
            names = [r.name for r in evaluation.results]
            # The user's hidden calibrators stay hidden by name (partial results bring calibrators one at a time,
            # so "what the previous result showed" is not enough); new names are shown.
            self.visible = frozenset(n for n in names if n not in self._hidden)
        else:
            self.visible = frozenset()
        self.evaluation_changed.emit(evaluation)
        self.visible_changed.emit(self.visible)
        if evaluation is None and self.decisions is not None:
            self.decisions, self._decisions_key = None, None
            self.decisions_changed.emit(None)
