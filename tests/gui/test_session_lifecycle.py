"""The worker's life: closing the window joins it, and a stale *completed* result is dropped."""

import logging
import threading
import time

import pytest

from calibview.core.errors import Cancelled
from calibview.core.evaluation.engine import evaluate
from calibview.core.evaluation.request import EvalRequest
from calibview.gui import worker as worker_module


def test_closing_the_window_joins_a_worker_stuck_in_a_long_step(make_window, big_file, monkeypatch, capfd, caplog):
    """A step that does not look at the cancel event for longer than shutdown's first wait (5 s): before, the
    window closed with the thread still running and Qt aborted with "Destroyed while thread is still running"."""
    path = big_file(n=200_000, k=50)
    started = threading.Event()

    real = worker_module.Engine.evaluate

    def slow_then_real(self, request, progress=None, cancel=None, on_partial=None):
        started.set()
        time.sleep(6.0)                              # e.g. one long HDF5 read or solver call
        return real(self, request, progress=progress, cancel=cancel, on_partial=on_partial)

    monkeypatch.setattr(worker_module.Engine, "evaluate", slow_then_real)
    w = make_window(n_boot=1000)
    w.open_files([path])
    assert started.wait(10)
    thread = w.session._thread
    with caplog.at_level(logging.WARNING, logger="calibview.gui.session"):
        w.close()
    finished = thread.isFinished()
    thread.wait()                                    # so that a failure here does not abort the test process
    assert finished
    assert [r.getMessage() for r in caplog.records].count(
        "waiting for the running evaluation to stop before closing.") == 1
    assert "Destroyed while thread" not in capfd.readouterr().err


def test_closing_the_window_right_after_starting_joins_the_worker(make_window, big_file, capfd):
    path = big_file(n=200_000, k=50)
    w = make_window(n_boot=1000)
    w.open_files([path])
    assert w.session.busy
    w.close()
    assert w.session._thread.isFinished()
    assert "Destroyed while thread" not in capfd.readouterr().err


@pytest.fixture
def held_session(session):
    """A Session whose worker holds every request until released, then reports it cancelled."""
    gate = threading.Event()

    class Held:
        def evaluate(self, request, progress=None, cancel=None, on_partial=None):
            gate.wait(30)
            raise Cancelled()

    session._worker.engine = Held()
    yield session
    gate.set()


def test_a_completed_result_of_an_older_request_is_dropped(qtbot, held_session, demo_file):
    session = held_session
    request = EvalRequest(file=str(demo_file), run="resnet110-flsd53/cifar10", calibrators=("none",), n_boot=0)
    old_result = evaluate(request)
    new_result = evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar10", calibrators=("none",),
                                      n_boot=0))
    emitted = []
    session.evaluation_changed.connect(emitted.append)
    old = session.evaluate(request)
    new = session.evaluate(request)                  # supersedes it
    assert new > old and session.busy
    session._on_worker_finished(old, old_result)     # the older one completed after all: dropped
    assert session.evaluation is None and emitted == [] and session.busy
    session._on_worker_finished(new, new_result)     # the current one is accepted
    assert session.evaluation is new_result and emitted == [new_result] and not session.busy
    session._on_worker_finished(old, old_result)     # and a late stale one does not replace it
    assert session.evaluation is new_result and emitted == [new_result]


def test_hidden_calibrators_stay_hidden_through_partial_results(qtbot, session, demo_file):
    """Partial results bring calibrators one at a time; one the user hid must not reappear."""
    session.open_file(demo_file, select=False)
    path = next(iter(session.files))
    session.set_calibrators(["ts", "mrr"])
    session.n_boot = 0
    with qtbot.waitSignal(session.busy_changed, timeout=60000, check_params_cb=lambda busy: not busy):
        session.select_run(path, "resnet110-brier/cifar10")
    session.set_visible({"none", "ts"})                         # hide mrr
    seen = []
    session.visible_changed.connect(lambda v: seen.append(set(v)))
    with qtbot.waitSignal(session.busy_changed, timeout=60000, check_params_cb=lambda busy: not busy):
        session.select_run(path, "resnet110-flsd53/cifar10")    # scored anew: partials arrive
    assert seen and all("mrr" not in v for v in seen)
    assert session.visible == {"none", "ts"}


def test_the_session_is_the_models_qt_face(session):
    """Every model event is a signal of the same name; settings written on the session are the model's."""
    from PySide6 import QtCore

    from calibview.gui.model.window import EVENTS

    assert all(isinstance(getattr(type(session), e), QtCore.Signal) for e in EVENTS)
    seen = []
    session.bandwidth_changed.connect(lambda h, k: seen.append((h, k)))
    session.set_bandwidth(0.2, "epanechnikov")
    assert seen == [(0.2, "epanechnikov")]
    session.n_boot = 7
    assert session.model.settings.n_boot == 7 and session.n_boot == 7
    assert session.evaluate() == 0 and session.generation == 0 and not session.busy     # nothing open


def test_partial_results_are_drawn_at_most_once_per_gap_the_latest_one_winning(qtbot, session, monkeypatch):
    """The first partial result is drawn at once; those that arrive before the gap has passed wait, and only the
    latest of them is drawn when it has; a request's answer drops its waiting partial result."""
    from calibview.gui import session as session_module

    drawn, answered = [], []

    def draw(generation, evaluation):
        time.sleep(0.05)                                      # a redraw's cost sets the gap too (PARTIAL_SHARE)
        drawn.append(evaluation)

    monkeypatch.setattr(session.model, "evaluation_partial", draw)
    monkeypatch.setattr(session.model, "evaluation_finished", lambda g, r: answered.append(r))
    monkeypatch.setattr(session_module, "PARTIAL_GAP_S", 0.3)
    for i in range(5):
        session._on_worker_partial(7, f"partial {i}")
    assert drawn == ["partial 0"]
    qtbot.waitUntil(lambda: len(drawn) == 2, timeout=2000)
    assert drawn == ["partial 0", "partial 4"]
    session._on_worker_partial(7, "partial 5")               # within the gap: waits ...
    session._on_worker_finished(7, "final")                  # ... and the answer drops it
    qtbot.wait(500)
    assert drawn == ["partial 0", "partial 4"] and answered == ["final"]
    session._drop_partial(8)                                  # a new request: its first partial is drawn at once
    session._on_worker_partial(8, "next")
    assert drawn[-1] == "next"
