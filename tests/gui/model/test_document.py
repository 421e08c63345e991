"""The window's document (open files, selection) and the settings of its next request, without Qt."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from calibview.core.errors import CalibviewError
from calibview.core.evaluation.compare import CompareRequest
from calibview.core.evaluation.request import EvalRequest
from calibview.core.io.discovery import list_runs
from calibview.gui.model.document import REQUEST_DEFAULTS, Document, Settings


def _open(doc, path, run=None):
    path = str(path.resolve())
    doc.files[path] = list_runs(path)
    doc.select(doc.find(path, run or doc.files[path][0].name))
    return path


def test_settings_start_from_the_request_defaults():
    s = Settings()
    # the library's defaults, typed once here by hand ...
    assert (s.calibrators, s.bins, s.n_boot, s.bandwidth, s.kernel, s.device, s.options) == (
        ("none", "ts"), 15, 1000, 0.05, "gaussian", "auto", ())
    # ... and the same as a request's that names only its file and run
    req = EvalRequest(file="f.h5", run="m/d")
    for f in dataclasses.fields(Settings):
        assert getattr(s, f.name) == getattr(req, f.name) == REQUEST_DEFAULTS[f.name], f.name


def test_calibrators_keep_the_baseline_first_and_refuse_unknown_names():
    s = Settings()
    s.set_calibrators(["ts", "hb", "ts"])
    assert s.calibrators == ("none", "ts", "hb")
    s.set_calibrators(["hb", "none"])
    assert s.calibrators == ("none", "hb")
    with pytest.raises(CalibviewError):
        s.set_calibrators(["ts", "no-such-method"])
    assert s.calibrators == ("none", "hb")            # unchanged


def test_selecting_a_run_takes_its_default_splits(domains_file):
    doc = Document()
    assert doc.request(Settings()) is None and doc.eval_splits == ()
    path = _open(doc, domains_file)
    assert doc.run.name == "net/toy" and doc.run.file == path
    assert (doc.fit_split, doc.eval_split, doc.compare_splits, doc.compare_runs) == ("val", "test", (), ())
    assert doc.eval_splits == ("test",)


def test_splits_deduplicate_and_leave_out_the_evaluation_split(domains_file):
    doc = Document()
    _open(doc, domains_file)
    assert doc.set_splits("val", "test", ["deploy", "test", "deploy"]) is True
    assert doc.compare_splits == ("deploy",) and doc.eval_splits == ("test", "deploy")
    assert doc.set_splits("val", "test", ["deploy"]) is False          # nothing changed
    assert doc.set_splits("val", "test") is False                     # None: the same further splits
    assert doc.set_splits("val", "deploy") is True                    # the eval split moves; test stays out
    assert doc.eval_splits == ("deploy",)


def test_compared_runs_go_when_domains_come_or_the_eval_split_moves(runs_file):
    doc = Document()
    path = _open(doc, runs_file)
    doc.compare_runs = ((path, "b/toy"),)
    assert doc.set_splits(None, "test") is True                       # only the fit split changed: kept
    assert doc.compare_runs == ((path, "b/toy"),)
    assert doc.set_splits("val", "val") is True
    assert doc.compare_runs == ()


def test_the_request_follows_the_selection_and_the_settings(domains_file):
    doc = Document()
    path = _open(doc, domains_file)
    s = Settings(calibrators=("none", "ts", "hb"), bins="auto", n_boot=7, bandwidth=0.1, kernel="epanechnikov",
                 device="cpu", options=(("hb", (("bins", 20),)), ("vs", (("x", 1),))))
    req = doc.request(s)
    assert req == EvalRequest(file=path, run="net/toy", eval_split="test", fit_split="val",
                              calibrators=("none", "ts", "hb"), bins="auto", n_boot=7, bandwidth=0.1,
                              kernel="epanechnikov", device="cpu", options=(("hb", (("bins", 20),)),))
    doc.set_splits(None, "test")                                      # nothing to fit on: the baseline only
    assert doc.request(s).calibrators == ("none",) and doc.request(s).options == ()


def test_binary_only_calibrators_are_left_out_of_a_multiclass_request(domains_file, tmp_path):
    from calibview.core.io.writer import write_run

    s = Settings(calibrators=("none", "ts", "platt"))
    doc = Document()
    _open(doc, domains_file)                                          # K = 5
    assert doc.request(s).calibrators == ("none", "ts")
    binary = tmp_path / "binary.h5"
    rng = np.random.default_rng(0)
    for split in ("val", "test"):
        write_run(binary, "m", "two", split, logits=rng.normal(size=(50, 2)).astype(np.float32),
                  labels=rng.integers(0, 2, 50))
    _open(doc, binary)
    assert doc.request(s).calibrators == ("none", "ts", "platt")


def test_the_next_request_is_one_a_tuple_or_a_comparison(domains_file, runs_file):
    s = Settings()
    doc = Document()
    assert doc.next_request(s) is None
    _open(doc, domains_file)
    one = doc.next_request(s)
    assert isinstance(one, EvalRequest) and one.eval_split == "test"
    doc.set_splits("val", "test", ["deploy"])
    several = doc.next_request(s)
    assert isinstance(several, tuple) and [r.eval_split for r in several] == ["test", "deploy"]
    assert several[1] == dataclasses.replace(several[0], eval_split="deploy")    # the same fits
    path = _open(doc, runs_file, "a/toy")
    doc.compare_runs = ((path, "b/toy"),)
    cmp = doc.next_request(s)
    assert isinstance(cmp, CompareRequest) and cmp.reference == 0
    assert [(r.run, r.eval_split) for r in cmp.requests] == [("a/toy", "test"), ("b/toy", "test")]


def test_runs_on_other_labels_or_datasets_cannot_be_compared(runs_file):
    doc = Document()
    path = _open(doc, runs_file, "a/toy")
    why = {run.name: reason for run, reason in doc.compare_candidates()}
    assert set(why) == {"b/toy", "c/toy", "d/more"}                     # every other open run
    assert why["b/toy"] is None and "different datasets" in why["d/more"]
    doc.check_comparable(Settings(), [(path, "b/toy")])
    with pytest.raises(CalibviewError, match="differ at 5 of 500 rows"):
        doc.check_comparable(Settings(), [(path, "c/toy")])


def _shown(run, eval_split, fit_split="val"):
    return SimpleNamespace(run=run, request=SimpleNamespace(eval_split=eval_split, fit_split=fit_split))


def test_restore_goes_back_to_what_the_shown_evaluations_were_for(domains_file, runs_file):
    doc = Document()
    _open(doc, domains_file)
    net = doc.run
    shown = (_shown(net, "test"), _shown(net, "deploy"))              # domains: test and deploy
    assert doc.restore(shown) is True
    assert (doc.run, doc.eval_split, doc.compare_splits, doc.compare_runs) == (net, "test", ("deploy",), ())
    assert doc.restore(shown) is False                                # that is the selection already
    path = _open(doc, runs_file, "a/toy")
    a, b = doc.run, doc.find(path, "b/toy")
    doc.select(net)
    assert doc.restore((_shown(a, "test"), _shown(b, "test"))) is True  # compared runs, not domains
    assert (doc.run, doc.compare_splits, doc.compare_runs) == (a, (), ((path, "b/toy"),))
    del doc.files[path]
    assert doc.restore((_shown(a, "test"),)) is False                 # its file was closed
    assert doc.restore(()) is False
