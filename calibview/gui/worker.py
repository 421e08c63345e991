"""Runs the core's :class:`~calibview.core.evaluation.engine.Engine` on a QThread. The only module that knows both Qt
and the core's callbacks. The engine lives here, on the worker thread, so its cache is only ever touched by one
thread.

Each request carries a generation number and its own cancel event (gui.model.channel); results travel back through
queued signals tagged with that number, so the session can drop what a newer request has superseded (a late
answer must never replace a newer one), and the worker never touches a widget (widgets belong to the GUI thread).
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from types import SimpleNamespace

from PySide6 import QtCore

from calibview.core.evaluation.compare import CompareRequest, compare
from calibview.core.evaluation.engine import Engine
from calibview.core.errors import Cancelled, CalibviewError
from calibview.core.evaluation.request import EvalRequest
from calibview.core.regression.evaluate import RegRequest, evaluate_regression
from calibview.gui.model.decisions import build_decisions
from calibview.gui.model.slice_results import SliceResult, slice_result  # noqa: F401 (SliceResult: its old home)


class EvaluationWorker(QtCore.QObject):
    """Lives on a worker thread; ``run`` is invoked through a queued signal from the session."""

    progressed = QtCore.Signal(int, float, str)      # generation, fraction, message
    # A request is one EvalRequest, a RegRequest (a regression run: a RegEvaluation, no partial results), or a
    # tuple of EvalRequests (domains: one per eval split, sharing the fits), or a
    # CompareRequest (runs on the same samples); its results are an Evaluation, or a tuple of Evaluations in the
    # same order (a partial one: those done so far, the last with intervals pending), or a Comparison.
    partial = QtCore.Signal(int, object)             # generation, Evaluation(s) with intervals pending
    finished = QtCore.Signal(int, object)            # generation, Evaluation(s)
    failed = QtCore.Signal(int, str)                 # generation, one-sentence message
    cancelled = QtCore.Signal(int)                   # generation
    #: the Decisions view's data (gui.model.decisions.Decisions), or a one-sentence message when it failed
    decided = QtCore.Signal(int, object)             # decisions generation, Decisions or str
    #: per-slice rows and curves (SliceResult), or a one-sentence message when they failed
    sliced = QtCore.Signal(int, object)              # slices generation, SliceResult or str
    #: the diagram's curves split by epistemic tercile (core.evaluation.members.terciles.TercileSplit), or a
    #: one-sentence message when they failed
    split = QtCore.Signal(int, object)               # terciles generation, TercileSplit or str
    #: the CORP curves of the shown evaluations ((run file, run name, eval split) -> core.reports.corp.CorpSet),
    #: first without bands (final False), then with them (final True); or a one-sentence message
    corped = QtCore.Signal(int, object, bool)        # corp generation, dict or str, final
    #: the one-vs-rest CORP of a chosen class ((ClassForecasts, CorpSet) of core.reports.corp_class), first
    #: without bands (final False), then with them (final True); or a one-sentence message
    class_corped = QtCore.Signal(int, object, bool)  # class generation, tuple or str, final

    #: Progress is forwarded at most this often (seconds): the GUI needs ~20 updates a second, not thousands.
    progress_interval = 0.05

    def __init__(self, engine: Engine | None = None) -> None:
        super().__init__()
        self.engine = engine or Engine()
        self._reg_data: tuple = (None, {})      # (key, split name -> RegSplitData) of the latest regression run

    @QtCore.Slot(int, object, object)
    def run(self, generation: int, request, cancel: threading.Event) -> None:
        """Evaluate ``request`` (see the signals above for its kinds), answering with partial results, then
        exactly one of finished, failed or cancelled, all tagged with ``generation``."""
        if cancel.is_set():
            self.cancelled.emit(generation)
            return
        last = [0.0]

        def progress(fraction: float, message: str) -> None:
            now = time.monotonic()
            if now - last[0] >= self.progress_interval or fraction >= 1.0:
                last[0] = now
                self.progressed.emit(generation, fraction, message)

        try:
            if isinstance(request, EvalRequest):
                result = self.engine.evaluate(request, progress=progress, cancel=cancel,
                                              on_partial=lambda ev: self.partial.emit(generation, ev))
            elif isinstance(request, RegRequest):
                result = evaluate_regression(request, self._regression_data(request.run), progress=progress,
                                             cancel=cancel)
            elif isinstance(request, CompareRequest):       # result: a core.evaluation.compare.Comparison
                result = compare(self.engine, request.requests, request.reference, progress=progress,
                                 cancel=cancel, on_partial=lambda evs: self.partial.emit(generation, evs))
            else:
                result = self._domains(generation, tuple(request), progress, cancel)
        except Cancelled:
            self.cancelled.emit(generation)
        except CalibviewError as e:
            self.failed.emit(generation, str(e))
        except MemoryError:
            self.failed.emit(generation, "Out of memory while evaluating this run; try fewer calibrators or "
                                         "bootstrap resamples.")
        except Exception as e:  # a bug, not a user error: keep the window alive and say what happened
            traceback.print_exc()
            self.failed.emit(generation, f"Unexpected error ({type(e).__name__}: {e}); please report it.")
        else:
            self.finished.emit(generation, result)

    def _regression_data(self, run) -> dict:
        """The split arrays already read of regression run ``run`` (filled by evaluate_regression), kept while
        the same run of an unchanged file is evaluated again (another split, another bandwidth)."""
        try:
            st = os.stat(run.file)
            key = (run, st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        if key is None or key != self._reg_data[0]:
            self._reg_data = (key, {})
        return self._reg_data[1]

    @QtCore.Slot(int, object, object)
    def decide(self, generation: int, request: EvalRequest, cancel: threading.Event) -> None:
        """Per-sample vectors of the request's eval split (Engine.scored: a cache hit after its evaluation), sorted
        once per calibrator for the threshold slider."""
        def work():
            scored = self.engine.scored(request, cancel=cancel)
            fitted = self.engine.fitted(request, cancel=cancel)
            return build_decisions(request, scored, {n: f.label for n, f in fitted.items()})

        self._answer(self.decided, generation, cancel, work)

    @QtCore.Slot(int, object, object, object)
    def slice(self, generation: int, request: EvalRequest, by: str, cancel: threading.Event) -> None:
        """core.evaluation.slices.evaluate_slices of the request by column ``by``, and each slice's binned
        statistics per calibrator (the canvas overlay redraws their curves at any bandwidth)."""
        self._answer(self.sliced, generation, cancel, lambda: slice_result(self.engine, request, by, cancel))

    @QtCore.Slot(int, object, object, object)
    def split_terciles(self, generation: int, request: EvalRequest, run, cancel: threading.Event) -> None:
        """Each calibrator's curve of the request split by epistemic tercile: the scores are the engine's cached
        per-sample vectors (Engine.scored), the terciles the mutual information of the split's members."""
        from calibview.core.evaluation.members.terciles import tercile_split

        self._answer(self.split, generation, cancel, lambda: tercile_split(self.engine, request, run, cancel))

    @QtCore.Slot(int, object, bool, object)
    def corp(self, generation: int, evaluations, bands: bool, cancel: threading.Event) -> None:
        """The CORP curves of ``evaluations`` from the engine's cached per-sample vectors: at once without
        bands (milliseconds), then, with ``bands``, with them (resamples: the requests' n_boot)."""
        from calibview.core.reports.corp import corp_set

        def sets(with_bands: bool) -> dict:
            return {(e.run.file, e.run.name, e.request.eval_split): corp_set(self.engine, e, bands=with_bands,
                                                                               cancel=cancel) for e in evaluations}

        if bands:
            self._answer(SimpleNamespace(emit=lambda g, r: self.corped.emit(g, r, False)), generation, cancel,
                         lambda: sets(False))
        self._answer(SimpleNamespace(emit=lambda g, r: self.corped.emit(g, r, True)), generation, cancel,
                     lambda: sets(bands))

    @QtCore.Slot(int, object, int, object)
    def class_corp(self, generation: int, evaluation, cls: int, cancel: threading.Event) -> None:
        """The one-vs-rest CORP curves of class ``cls`` of ``evaluation``: its probabilities (one read of the
        evaluation split above two classes, cached), the curves at once, then with their bands."""
        from calibview.core.reports.corp_class import class_corp_set, class_forecasts

        held: dict = {}

        def curves(bands: bool) -> tuple:
            if "fc" not in held:
                held["fc"] = class_forecasts(self.engine, evaluation, cls, cancel=cancel)
            fc = held["fc"]
            return fc, class_corp_set(self.engine, evaluation, cls, bands=bands, cancel=cancel, forecasts=fc)

        for final in (False, True):
            self._answer(SimpleNamespace(emit=lambda g, r, f=final: self.class_corped.emit(g, r, f)), generation,
                         cancel, lambda f=final: curves(f))

    def _answer(self, signal, generation: int, cancel: threading.Event, work) -> None:
        """``signal.emit(generation, work())``, or the error's sentence in its place; nothing when cancelled."""
        if cancel.is_set():
            return
        try:
            result = work()
        except Cancelled:
            return
        except CalibviewError as e:
            signal.emit(generation, str(e))
        except Exception as e:  # a bug: keep the window alive and say what happened
            traceback.print_exc()
            signal.emit(generation, f"Unexpected error ({type(e).__name__}: {e}); please report it.")
        else:
            signal.emit(generation, result)

    def _domains(self, generation: int, requests: tuple, progress, cancel) -> tuple:
        """One evaluation per eval split, in order; the engine's cache fits once for all of them."""
        done: list = []
        for i, req in enumerate(requests):
            def part(fraction: float, message: str, i=i, split=req.eval_split) -> None:
                progress((i + fraction) / len(requests), f"{split}: {message}")

            done.append(self.engine.evaluate(
                req, progress=part, cancel=cancel,
                on_partial=lambda ev: self.partial.emit(generation, tuple(done) + (ev,))))
        return tuple(done)


class TaskThread(QtCore.QThread):
    """A view's own computation off the GUI thread (the Conformal and Members tabs): ``fn(cancel, progress)`` runs
    on the thread; ``done`` carries its result, ``failed`` one sentence (``what`` names the work, "the conformal
    sets"; ``hint`` ends the out-of-memory sentence), ``progressed`` (fraction, message) its progress. ``stop``
    cancels and waits, so a closing view never leaves the thread running."""

    done = QtCore.Signal(object)
    failed = QtCore.Signal(str)
    progressed = QtCore.Signal(float, str)

    def __init__(self, fn, what: str, hint: str = "", parent=None) -> None:
        super().__init__(parent)
        self.fn, self.what, self.hint = fn, what, hint
        self.cancel = threading.Event()

    def run(self) -> None:  # noqa: N802 (QThread override)
        """Call ``fn`` and emit ``done`` or ``failed`` (never raises: a dead thread would say nothing)."""
        from calibview.core.io.schema import oneline

        try:
            out = self.fn(self.cancel, lambda f, m: self.progressed.emit(f, m))
        except CalibviewError as e:
            self.failed.emit(str(e))
        except MemoryError:
            self.failed.emit(f"Not enough memory for {self.what} of this run{self.hint}.")
        except Exception as e:          # never a dead thread without a word
            self.failed.emit(f"{self.what[0].upper()}{self.what[1:]} could not be computed ({oneline(e)}).")
        else:
            self.done.emit(out)

    def stop(self) -> None:
        """Cancel and wait for the thread to end."""
        self.cancel.set()
        self.wait()
