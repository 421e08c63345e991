"""The window model without Qt or a worker: what it asks, which answers it keeps, and what it tells the views.

The worker is played by hand: the asks are recorded, and answers are fed back with the generation they carry.
Evaluations are stand-ins holding what the model reads (run, request, results' names, pending)."""

from types import SimpleNamespace

import pytest

from calibview.core.evaluation.compare import CompareRequest, Comparison
from calibview.core.evaluation.request import EvalRequest
from calibview.gui.model.window import EVENTS, WindowModel


class Recorder:
    """The model's notify and its three asks, recorded in order."""

    def __init__(self):
        self.events, self.evaluations, self.decisions, self.slices = [], [], [], []

    def model(self) -> WindowModel:
        return WindowModel(lambda event, *args: self.events.append((event, *args)),
                           ask_evaluation=lambda *a: self.evaluations.append(a),
                           ask_decisions=lambda *a: self.decisions.append(a),
                           ask_slices=lambda *a: self.slices.append(a))

    def names(self):
        return [e[0] for e in self.events]

    def take(self):
        out, self.events = self.events, []
        return out


def evaluation(request: EvalRequest, run, names=None, pending=False):
    names = names or request.calibrators
    return SimpleNamespace(request=request, run=run, pending=pending,
                           results=tuple(SimpleNamespace(name=n) for n in names))


@pytest.fixture
def rec():
    return Recorder()


@pytest.fixture
def opened(rec, domains_file):
    """A model with the domains file open and its first evaluation asked (not answered)."""
    m = rec.model()
    assert m.open_file(domains_file) is True
    return m


def _answer(m, rec, i=-1, **kw):
    """Finish the i-th asked evaluation with a stand-in; returns it."""
    gen, request, _ = rec.evaluations[i]
    ev = evaluation(request, m.document.run, **kw)
    m.evaluation_finished(gen, ev)
    return ev


def test_every_event_is_a_known_one(rec, opened):
    assert set(rec.names()) <= set(EVENTS)


def test_opening_a_file_selects_its_first_run_and_asks_for_its_evaluation(rec, opened, domains_file):
    assert rec.names() == ["files_changed", "selection_changed", "busy_changed", "evaluation_started"]
    assert rec.events[2] == ("busy_changed", True) and rec.events[3] == ("evaluation_started", 1)
    (gen, request, cancel), = rec.evaluations
    assert gen == 1 and opened.generation == 1 and opened.busy and not cancel.is_set()
    assert request == EvalRequest(file=str(domains_file.resolve()), run="net/toy", eval_split="test",
                                  fit_split="val", calibrators=("none", "ts"))


def test_a_file_that_cannot_be_read_is_one_error(rec, tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    m = rec.model()
    assert m.open_file(bad) is False
    (event, title, message), = rec.events
    assert (event, title) == ("error_occurred", "Cannot open file") and "HDF5" in message
    assert m.document.files == {} and rec.evaluations == []


def test_the_latest_request_wins(rec, opened):
    first = rec.evaluations[0]
    opened.set_bandwidth(0.1)
    assert opened.evaluate() == 2
    second = rec.evaluations[1]
    assert first[2].is_set() and not second[2].is_set()         # the older one is cancelled
    assert second[1].bandwidth == 0.1
    rec.take()
    opened.evaluation_finished(1, evaluation(first[1], opened.document.run))      # completed after all: dropped
    opened.evaluation_progressed(1, 0.5, "old")
    assert rec.events == [] and opened.evaluation is None and opened.busy
    ev = _answer(opened, rec)
    assert opened.evaluation is ev and opened.evaluations == (ev,) and not opened.busy
    assert rec.names() == ["busy_changed", "evaluation_changed", "visible_changed"]
    opened.evaluation_failed(1, "late")                          # a late failure of the old one: dropped
    assert "error_occurred" not in rec.names()


def test_partial_results_are_shown_until_the_request_is_cancelled(rec, opened):
    gen, request, _ = rec.evaluations[0]
    part = evaluation(request, opened.document.run, names=("none",), pending=True)
    opened.evaluation_partial(gen, part)
    assert opened.evaluation is part and opened.busy             # the request runs on
    opened.cancel()
    opened.evaluation_partial(gen, evaluation(request, opened.document.run, pending=True))
    assert opened.evaluation is part                             # asked to stop: no more partials
    rec.take()
    opened.evaluation_cancelled(gen)
    assert rec.events == [("busy_changed", False), ("progress_changed", 0.0, "cancelled")]


def test_a_cancelled_request_puts_the_selection_back_to_what_is_shown(rec, opened):
    _answer(opened, rec)
    opened.set_splits("val", "deploy")
    assert opened.document.eval_split == "deploy" and opened.generation == 2
    opened.cancel()
    rec.take()
    opened.evaluation_cancelled(2)
    assert opened.document.eval_split == "test"
    assert rec.names() == ["busy_changed", "selection_changed", "progress_changed"]


def test_hidden_calibrators_stay_hidden_and_new_ones_are_shown(rec, opened):
    _answer(opened, rec, names=("none", "ts"))
    assert opened.visible == {"none", "ts"}
    opened.set_visible({"none"})                                 # hide ts
    opened.evaluate()
    _answer(opened, rec, names=("none", "ts", "hb"))
    assert opened.visible == {"none", "hb"}
    opened.set_visible({"none", "ts", "hb"})                     # shown again
    opened.evaluate()
    _answer(opened, rec, names=("none", "ts"))
    assert opened.visible == {"none", "ts"}


def test_a_comparison_keeps_its_evaluations_and_its_differences(rec, opened, runs_file):
    _answer(opened, rec)
    path = str(runs_file.resolve())
    opened.open_file(runs_file, select=False)
    opened.select_run(path, "a/toy")
    assert opened.set_compare_runs([(path, "b/toy")]) is True
    gen, request, _ = rec.evaluations[-1]
    assert isinstance(request, CompareRequest) and [r.run for r in request.requests] == ["a/toy", "b/toy"]
    a, b = (evaluation(r, SimpleNamespace(file=path, name=r.run)) for r in request.requests)
    opened.evaluation_partial(gen, (a,))                         # partials: the runs done so far
    assert opened.evaluations == (a,) and opened.comparison is None
    comparison = Comparison(evaluations=(a, b), reference=0, rows=())
    rec.take()
    opened.evaluation_finished(gen, comparison)
    assert opened.comparison is comparison and opened.evaluations == (a, b) and opened.evaluation is a
    assert rec.events[1] == ("comparison_changed", comparison)
    opened.set_compare_runs([])                                  # back to one run: the comparison goes
    rec.take()
    _answer(opened, rec)
    assert opened.comparison is None and rec.events[1] == ("comparison_changed", None)


def test_decisions_are_asked_once_per_key_and_only_while_wanted(rec, opened):
    opened.want_decisions(True)
    assert rec.decisions == []                                   # nothing evaluated yet
    ev = _answer(opened, rec)
    (gen, request, cancel), = rec.decisions
    assert gen == 1 and request is ev.request
    opened.want_decisions(False)
    opened.want_decisions(True)                                  # the same fits and split: not asked again
    opened.set_bandwidth(0.2)
    opened.evaluate()
    _answer(opened, rec)                                         # bandwidth only: the same key
    assert len(rec.decisions) == 1
    data = object()
    opened.decisions_answered(gen, data)
    assert opened.decisions is data and rec.events[-1] == ("decisions_changed", data)
    opened.set_decisions_split("deploy")                         # not evaluated: the evaluation split's
    assert len(rec.decisions) == 1


def test_failed_decisions_are_said_once_and_asked_again(rec, opened):
    opened.want_decisions(True)
    _answer(opened, rec)
    opened.decisions_answered(1, "Out of memory.")
    assert rec.events[-1] == ("error_occurred", "Decisions failed", "Out of memory.")
    assert opened.decisions is None
    opened.want_decisions(True)
    assert [g for g, *_ in rec.decisions] == [1, 2]              # the same request, a new generation
    opened.decisions_answered(1, object())                       # the failed one's late answer: dropped
    assert opened.decisions is None


def test_slices_follow_the_evaluation(rec, opened):
    opened.set_slice_by("class")
    assert rec.slices == []                                      # asked once there is an evaluation
    ev = _answer(opened, rec)
    (gen, request, column, cancel), = rec.slices
    assert (gen, request, column) == (1, ev.request, "class")
    opened.evaluate()                                            # a new evaluation drops them ...
    assert cancel.is_set()
    _answer(opened, rec)
    assert [(g, c) for g, _, c, _ in rec.slices] == [(1, "class"), (2, "class")]   # ... and asks again
    result = object()
    opened.slices_answered(1, result)                            # superseded
    assert opened.slices is None
    opened.slices_answered(2, result)
    assert opened.slices is result and rec.events[-1] == ("slices_changed", result)
    opened.set_slice_by(None)
    assert opened.slices is None and rec.events[-1] == ("slices_changed", None)


def test_closing_the_selected_file_clears_what_is_shown(rec, opened, domains_file):
    _answer(opened, rec)
    rec.take()
    opened.close_file(str(domains_file.resolve()))
    assert opened.document.run is None and opened.evaluation is None and opened.visible == frozenset()
    assert rec.names() == ["evaluation_changed", "visible_changed", "files_changed", "selection_changed"]


def test_the_bandwidth_moves_the_curves_without_asking_the_worker(rec, opened):
    rec.take()
    opened.set_bandwidth(0.125, "epanechnikov")
    assert rec.events == [("bandwidth_changed", 0.125, "epanechnikov")] and len(rec.evaluations) == 1
    assert opened.build_request().bandwidth == 0.125 and opened.build_request().kernel == "epanechnikov"
