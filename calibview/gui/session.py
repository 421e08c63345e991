"""Session: the window's model (:class:`calibview.gui.model.window.WindowModel`) as a QObject, and the owner of
the evaluation worker and its thread.

The state and every decision live in the Qt-free model; the Session forwards calls to it, emits the model's
events as the Qt signals of the same names, and carries requests to the worker and its answers back, each on a
queued connection (the worker runs on its own thread; the model is only ever touched on the GUI thread).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from PySide6 import QtCore

from calibview.gui.model.corp import CorpModel
from calibview.gui.model.document import Document, Settings
from calibview.gui.model.window import EVENTS, WindowModel
from calibview.gui.worker import EvaluationWorker

DEFAULT_CALIBRATORS = Settings.calibrators
_log = logging.getLogger(__name__)

#: partial results (each calibrator's point estimates as it is scored) are drawn at most this often, and take at
#: most PARTIAL_SHARE of the GUI thread: while the GUI thread draws, it takes one of the cores the worker computes
#: on and holds the interpreter lock the worker scores under. The first is drawn at once; one that arrives too soon
#: waits, and a later one replaces it. Measured on the seven-calibrator demo evaluation (2 cores, 4 interleaved
#: runs): a 0.25 s gap and a 25 % share drew 6-7 partials, 1.27 s of GUI-thread CPU, 9.5 s to the final result; a
#: 0.5 s gap and a 10 % share drew 3-4, 0.70 s, 8.5 s.
PARTIAL_GAP_S = 0.5
PARTIAL_SHARE = 0.1


def _attribute(name: str, part: Optional[str] = None, writable: bool = False) -> property:
    """A property reading ``model.<name>`` (or ``model.<part>.<name>``); settable when ``writable``."""
    def owner(self):
        return getattr(self.model, part) if part else self.model

    def get(self):
        return getattr(owner(self), name)

    def set_(self, value):
        setattr(owner(self), name, value)
    return property(get, set_ if writable else None, doc=f"The model's {part + '.' if part else ''}{name}.")


class Session(QtCore.QObject):
    """Open files, the selected run and splits, the settings of the next evaluation and its latest result.

    Views call its methods and react to its signals; they never talk to each other or to the worker."""

    files_changed = QtCore.Signal()
    selection_changed = QtCore.Signal()                 # run or splits changed
    evaluation_started = QtCore.Signal(int)             # generation
    progress_changed = QtCore.Signal(float, str)
    evaluation_changed = QtCore.Signal(object)          # Evaluation or None
    busy_changed = QtCore.Signal(bool)
    error_occurred = QtCore.Signal(str, str)            # title, one-sentence message
    bandwidth_changed = QtCore.Signal(float, str)       # bandwidth, kernel: curves only, never the worker
    visible_changed = QtCore.Signal(object)             # frozenset of shown calibrator names
    decisions_changed = QtCore.Signal(object)           # gui.model.decisions.Decisions or None
    slices_changed = QtCore.Signal(object)              # gui.model.slices.SliceResult or None
    comparison_changed = QtCore.Signal(object)          # core.evaluation.compare.Comparison or None
    terciles_changed = QtCore.Signal(object)            # core.evaluation.members.terciles.TercileSplit or None
    regression_changed = QtCore.Signal(object)          # core.regression.evaluate.RegEvaluation or None
    corp_changed = QtCore.Signal()                      # the CORP curves (``corp``: gui.model.corp.CorpModel)
    #: the one-vs-rest CORP of a class asked by ask_class_corp: ((ClassForecasts, CorpSet) or a sentence, final)
    class_corp_changed = QtCore.Signal(object, bool)

    _request = QtCore.Signal(int, object, object)       # to the worker thread (queued)
    _decide = QtCore.Signal(int, object, object)        # to the worker thread (queued)
    _slice = QtCore.Signal(int, object, object, object)  # to the worker thread (queued)
    _split = QtCore.Signal(int, object, object, object)  # to the worker thread (queued)
    _corp = QtCore.Signal(int, object, bool, object)    # to the worker thread (queued)
    _class_corp = QtCore.Signal(int, object, int, object)  # to the worker thread (queued)

    def __init__(self, parent: Optional[QtCore.QObject] = None) -> None:
        super().__init__(parent)
        self.model = WindowModel(self._relay, ask_evaluation=self._request.emit, ask_decisions=self._decide.emit,
                                 ask_slices=self._slice.emit, ask_terciles=self._split.emit)
        self._thread = QtCore.QThread()
        self._thread.setObjectName("calibview-evaluation")
        self._worker = EvaluationWorker()
        self._worker.moveToThread(self._thread)
        queued = QtCore.Qt.QueuedConnection
        self._request.connect(self._worker.run, queued)
        self._decide.connect(self._worker.decide, queued)
        self._slice.connect(self._worker.slice, queued)
        self._split.connect(self._worker.split_terciles, queued)
        #: the CORP curves and their decomposition, asked for while the toggle or the MCB-DSC tab is on
        self.corp = CorpModel(self.corp_changed.emit, self._corp.emit)
        self._corp.connect(self._worker.corp, queued)
        self._worker.corped.connect(self._on_worker_corped, queued)     # a Session slot: on the GUI thread
        self._class_corp.connect(self._worker.class_corp, queued)
        self._worker.class_corped.connect(self._on_worker_class_corped, queued)
        self._class_ask: tuple[int, Optional[threading.Event]] = (0, None)
        # a new evaluation stops the class read of the old one (the tab asks again for the new one)
        self.evaluation_started.connect(lambda _g: self._class_ask[1] is not None and self._class_ask[1].set())
        self.evaluation_started.connect(lambda _g: self.corp.cancel())
        self.evaluation_changed.connect(lambda _ev: self.corp.evaluations_changed(self.model.evaluations))
        self._worker.progressed.connect(self._on_worker_progressed, queued)
        self._partial: Optional[tuple] = None               # a partial result waiting for its turn
        self._partial_due = 0.0                             # time.monotonic() the next may be drawn
        self._partial_timer = QtCore.QTimer(self)
        self._partial_timer.setSingleShot(True)
        self._partial_timer.timeout.connect(self._show_partial)
        self.evaluation_started.connect(self._drop_partial)
        self._worker.partial.connect(self._on_worker_partial, queued)
        self._worker.finished.connect(self._on_worker_finished, queued)
        self._worker.failed.connect(self._on_worker_failed, queued)
        self._worker.cancelled.connect(self._on_worker_cancelled, queued)
        self._worker.sliced.connect(self._on_worker_sliced, queued)
        self._worker.decided.connect(self._on_worker_decided, queued)
        self._worker.split.connect(self._on_worker_split, queued)
        self._thread.start()

    def _relay(self, event: str, *args) -> None:
        """A model event becomes the signal of the same name."""
        if event not in EVENTS:
            raise ValueError(f"unknown model event {event!r}")
        getattr(self, event).emit(*args)

    @property
    def document(self) -> Document:
        """The model's open files and selection."""
        return self.model.document

    @property
    def settings(self) -> Settings:
        """The model's settings of the next request."""
        return self.model.settings

    # --- the model's state -----------------------------------------------------------------------------------

    files = _attribute("files", "document")
    run = _attribute("run", "document")
    fit_split = _attribute("fit_split", "document")
    eval_split = _attribute("eval_split", "document")
    compare_splits = _attribute("compare_splits", "document")
    compare_runs = _attribute("compare_runs", "document")
    eval_splits = _attribute("eval_splits", "document")
    calibrators = _attribute("calibrators", "settings", writable=True)
    bins = _attribute("bins", "settings", writable=True)
    n_boot = _attribute("n_boot", "settings", writable=True)
    bandwidth = _attribute("bandwidth", "settings", writable=True)
    kernel = _attribute("kernel", "settings", writable=True)
    device = _attribute("device", "settings", writable=True)
    options = _attribute("options", "settings", writable=True)
    evaluation = _attribute("evaluation")
    evaluations = _attribute("evaluations")
    comparison = _attribute("comparison")
    regression = _attribute("regression")
    visible = _attribute("visible")
    generation = _attribute("generation")
    decisions = _attribute("decisions")
    decisions_split = _attribute("decisions_split")
    slice_by = _attribute("slice_by")
    slices = _attribute("slices")
    terciles_on = _attribute("terciles_on")
    busy = _attribute("busy")

    # --- what the views ask: each forwarded to the model (WindowModel's method of the same name) ---------------

    def open_file(self, path, *, select: bool = True) -> bool:
        """Read a file's metadata (never its arrays) and select its first run (unless ``select`` is False);
        errors become error_occurred: a file that h5py, the recursion limit or memory fail on gets a dialog too,
        never a traceback."""
        try:
            return self.model.open_file(path, select=select)
        except (OSError, RuntimeError, KeyError, ValueError, RecursionError, MemoryError) as e:
            text = " ".join(str(e).split()).rstrip(".") or type(e).__name__
            self.model.notify("error_occurred", "Cannot open file", f"{path}: could not be read ({text}).")
            return False

    def close_file(self, path: str) -> None:
        """Close an open file (its selected run gives way to another file's first run, not evaluated)."""
        self.model.close_file(path)

    def select_run(self, path: str, run_name: str, *, evaluate: bool = True) -> None:
        """Select a run of an open file with its default splits, and evaluate it (unless ``evaluate`` is False)."""
        self.model.select_run(path, run_name, evaluate=evaluate)

    def set_splits(self, fit_split: Optional[str], eval_split: str, compare=None) -> None:
        """The fit split, the evaluation split and (optionally) the further eval splits to compare with."""
        self.model.set_splits(fit_split, eval_split, compare)

    def set_compare_splits(self, names) -> None:
        """Evaluate the same fitted calibrators on these splits too (domains), shown side by side."""
        self.model.set_compare_splits(names)

    def set_compare_runs(self, runs) -> bool:
        """Compare the selected run with these (file, run name) pairs; False (and error_occurred) when refused."""
        return self.model.set_compare_runs(runs)

    def set_calibrators(self, names) -> None:
        """The calibrators of the next fit ("none" always first); an unknown name raises CalibviewError."""
        self.model.set_calibrators(names)

    def set_bins(self, bins: int | str) -> None:
        """The equal-width bins of the next evaluation: a count, or "auto"."""
        self.model.set_bins(bins)

    def set_bandwidth(self, bandwidth: float, kernel: Optional[str] = None) -> None:
        """Curves follow at once (bandwidth_changed); the metrics follow with the next evaluation."""
        self.model.set_bandwidth(bandwidth, kernel)

    def set_reg_bandwidth(self, bandwidth: Optional[float]) -> None:
        """Evaluate the selected regression run's cal at this bandwidth in its target's units (None: Silverman)."""
        self.model.set_reg_bandwidth(bandwidth)

    def set_visible(self, names) -> None:
        """Show these calibrators (by name) and hide the other shown ones."""
        self.model.set_visible(names)

    def build_request(self):
        """The EvalRequest of the selected run on its evaluation split (None: nothing selected)."""
        return self.model.build_request()

    def build_requests(self) -> tuple:
        """One request per eval split (domains), the same fits; () when there is nothing to evaluate."""
        return self.model.build_requests()

    def evaluate(self, request=None) -> int:
        """Start an evaluation (a newer one supersedes a running one); returns its generation (0: nothing to do).
        ``request``: an EvalRequest, a tuple of them (domains), a CompareRequest, or None for the session's own."""
        return self.model.evaluate(request)

    def cancel(self) -> None:
        """Ask the running evaluation to stop."""
        self.model.cancel()

    def set_slice_by(self, column: Optional[str]) -> None:
        """Slice the evaluation split by a metadata column, or "class" (None: no slices)."""
        self.model.set_slice_by(column)

    def set_terciles(self, on: bool) -> None:
        """Split the diagram's curve by epistemic tercile (a run with members) or stop (terciles_changed)."""
        self.model.set_terciles(on)

    def shown_terciles(self):
        """The TercileSplit of the shown evaluation while the split is on, else None."""
        return self.model.shown_terciles()

    def want_decisions(self, on: bool) -> None:
        """The Decisions view is shown (on) or hidden: its data is computed only while someone looks."""
        self.model.want_decisions(on)

    def set_decisions_split(self, name: Optional[str]) -> None:
        """Which evaluated split the Decisions view audits (None: the evaluation split)."""
        self.model.set_decisions_split(name)

    def ask_class_corp(self, evaluation, cls: int) -> int:
        """Compute the one-vs-rest CORP of class ``cls`` of ``evaluation`` on the worker; the answers come as
        class_corp_changed (the latest ask wins: an earlier one is cancelled). Returns the ask's generation."""
        generation, cancel = self._class_ask
        if cancel is not None:
            cancel.set()
        self._class_ask = (generation + 1, threading.Event())
        self._class_corp.emit(self._class_ask[0], evaluation, int(cls), self._class_ask[1])
        return self._class_ask[0]

    def compare_candidates(self):
        """Every other open run and why it cannot be compared with the selected one (None: it may be)."""
        return self.model.document.compare_candidates()

    def shutdown(self, timeout_ms: int = 5000) -> None:
        """Cancel any work and join the worker thread (no QThread outlives the window).

        The worker checks the cancel event between chunks, so it returns; if a step takes longer than
        ``timeout_ms`` the join goes on (said once in the log): Qt aborts the process when a QThread is
        destroyed while its thread still runs, which is worse than a late close."""
        self.model.cancel_all()
        if self._class_ask[1] is not None:
            self._class_ask[1].set()
        self._thread.quit()
        if self._thread.wait(timeout_ms):
            return
        _log.warning("waiting for the running evaluation to stop before closing.")
        while not self._thread.wait(max(4 * timeout_ms, 1000)):
            pass

    # --- worker answers (queued: on the GUI thread) ----------------------------------------------------------

    def _on_worker_progressed(self, generation: int, fraction: float, message: str) -> None:
        self.model.evaluation_progressed(generation, fraction, message)

    def _on_worker_partial(self, generation: int, evaluation) -> None:
        self._partial = (generation, evaluation)
        if self._partial_timer.isActive():
            return                                  # the waiting one is replaced; the timer draws this one
        wait = self._partial_due - time.monotonic()
        if wait <= 0:
            self._show_partial()
        else:
            self._partial_timer.start(max(1, round(wait * 1000)))

    def _show_partial(self) -> None:
        """Draw the waiting partial result, and set when the next may be drawn (see PARTIAL_SHARE)."""
        if self._partial is None:
            return
        (generation, evaluation), self._partial = self._partial, None
        t0 = time.monotonic()
        self.model.evaluation_partial(generation, evaluation)
        took = time.monotonic() - t0
        self._partial_due = time.monotonic() + max(PARTIAL_GAP_S, took * (1.0 - PARTIAL_SHARE) / PARTIAL_SHARE)

    def _drop_partial(self, _generation: int = 0) -> None:
        """A new request started: forget a waiting partial result of an older one, and draw the next at once."""
        self._partial_timer.stop()
        self._partial, self._partial_due = None, 0.0

    def _ended(self, generation: int) -> None:
        """Request ``generation`` ended: its waiting partial result, if any, is not drawn after its answer."""
        if self._partial is not None and self._partial[0] == generation:
            self._partial_timer.stop()
            self._partial = None

    def _on_worker_finished(self, generation: int, result) -> None:
        self._ended(generation)
        self.model.evaluation_finished(generation, result)

    def _on_worker_failed(self, generation: int, message: str) -> None:
        self._ended(generation)
        self.model.evaluation_failed(generation, message)

    def _on_worker_cancelled(self, generation: int) -> None:
        self._ended(generation)
        self.model.evaluation_cancelled(generation)

    def _on_worker_sliced(self, generation: int, result) -> None:
        self.model.slices_answered(generation, result)

    def _on_worker_decided(self, generation: int, data) -> None:
        self.model.decisions_answered(generation, data)

    def _on_worker_corped(self, generation: int, result, final: bool) -> None:
        self.corp.answered(generation, result, final)

    def _on_worker_class_corped(self, generation: int, result, final: bool) -> None:
        if generation == self._class_ask[0]:
            self.class_corp_changed.emit(result, final)

    def _on_worker_split(self, generation: int, result) -> None:
        self.model.terciles_answered(generation, result)
